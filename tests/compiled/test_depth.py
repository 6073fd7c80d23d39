"""Compiled depth: trtllm-gen's kernel table and the port of its selection code.

The cases come from reading the C++ the release ships (fmhaKernels.cuh,
trtllm_fmha_kernel_launcher.cu), worked by hand in each test's docstring; the
table is flashinfer-cubin 0.6.13's, downloaded with pip, and the release is the
installed flashinfer-python (0.6.14, whose kernel package is the same).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import zipfile
from pathlib import Path

import pytest

from hprobe.compiled.trtllm_gen import Port, port_for
from hprobe.compiled.trtllm_gen.era_0_6_12 import Device, FmhaCall, Refusal
from hprobe.support import kernel_package, kernel_tables
from hprobe.support.kernel_package import package_of
from hprobe.support.kernel_tables import tables_for

_SPEC = importlib.util.find_spec("flashinfer")
PACKAGE = Path(next(iter(_SPEC.submodule_search_locations)))  # type: ignore[union-attr]
B200 = Device(sm=100, multiprocessor_count=148, max_shared_memory_per_block_optin=227 * 1024)
BF16 = "DATA_TYPE_BF16"


# --- the release and its table ------------------------------------------------------


@pytest.fixture(scope="module")
def table(cubin_wheel):
    got = kernel_tables._from_wheel(
        cubin_wheel, package_of(PACKAGE), cubin_wheel.name
    )  # verified against the release's digests
    assert not isinstance(got, str) and got is not None
    return got


@pytest.fixture(scope="module")
def selection(table):
    port = port_for(PACKAGE)
    assert isinstance(port, Port), port
    return port.selection(table, B200)


def test_the_table_is_the_one_the_release_names(table):
    package = package_of(PACKAGE)
    assert not isinstance(package, str) and package.path.startswith("158f6fa")
    assert len(table) == 13452 and table.sha256.startswith("f6781dfd")


def test_a_table_that_is_not_the_named_one_is_refused(cubin_wheel, tmp_path):
    package = package_of(PACKAGE)
    prefix = f"flashinfer_cubin/cubins/{package.path}"  # type: ignore[union-attr]
    with zipfile.ZipFile(cubin_wheel) as archive:
        checksums, header = (
            archive.read(prefix + "checksums.txt"),
            archive.read(prefix + "include/flashInferMetaInfo.h"),
        )
    tampered = header.replace(b"Q16Kv128", b"Q16Kv12X", 1)
    with pytest.raises(ValueError, match="does not match its entry"):
        kernel_tables._verified(checksums, tampered, package, "tampered")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not the one flashinfer names"):
        kernel_tables._verified(checksums + b"\n", header, package, "tampered")  # type: ignore[arg-type]
    assert hashlib.sha256(checksums).hexdigest() == package.checksums_sha256  # type: ignore[union-attr]


def test_a_directory_laid_out_as_the_artifact_store_is_read(cubin_wheel, tmp_path, monkeypatch):
    package = package_of(PACKAGE)
    prefix = f"flashinfer_cubin/cubins/{package.path}"  # type: ignore[union-attr]
    with zipfile.ZipFile(cubin_wheel) as archive:
        for member in ("checksums.txt", "include/flashInferMetaInfo.h"):
            (tmp_path / "store" / Path(member).parent).mkdir(parents=True, exist_ok=True)
            (tmp_path / "store" / member).write_bytes(archive.read(prefix + member))
    monkeypatch.setenv("HPROBE_KERNEL_TABLE", str(tmp_path / "store"))
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    got = tables_for(PACKAGE, "0.6.14")
    assert got.table is not None and got.table.origin == str(tmp_path / "store")
    monkeypatch.setenv("HPROBE_KERNEL_TABLE", "off")
    off = tables_for(PACKAGE, "0.6.14")
    assert off.table is None and off.disabled


@pytest.fixture
def local_store(cubin_wheel, tmp_path, monkeypatch):
    """An artifact store on 127.0.0.1 holding 0.6.13's kernel package as NVIDIA's
    store lays it out (<package path>/checksums.txt, include/flashInferMetaInfo.h),
    and nothing else answering: no table named, an empty cache, no index."""
    import functools
    import http.server
    import threading

    package = package_of(PACKAGE)
    assert not isinstance(package, str)
    root = tmp_path / "store"
    with zipfile.ZipFile(cubin_wheel) as archive:
        for member in ("checksums.txt", "include/flashInferMetaInfo.h"):
            target = root / package.path / member
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(f"flashinfer_cubin/cubins/{package.path}{member}"))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *_args: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.delenv("HPROBE_KERNEL_TABLE", raising=False)
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "no-wheels"))
    monkeypatch.setenv("FLASHINFER_CUBINS_REPOSITORY", f"http://127.0.0.1:{server.server_address[1]}/")
    kernel_tables._parsed.cache_clear()
    imported = {name for name in sys.modules if name == "flashinfer" or name.startswith("flashinfer.")}
    yield root / package.path
    server.shutdown()
    server.server_close()
    # flashinfer reads FLASHINFER_CUBINS_REPOSITORY once, as it is imported: an
    # import made while this store's address was set would hand it to every
    # later test of this worker (their probes then fetched from a closed port).
    for name in [n for n in sys.modules if (n == "flashinfer" or n.startswith("flashinfer.")) and n not in imported]:
        del sys.modules[name]


def test_a_table_from_a_store_on_this_machine_is_fetched_and_verified(local_store):
    got = tables_for(PACKAGE, "0.6.14")
    assert got.table is not None and got.table.origin.startswith("http://127.0.0.1:"), got.missing
    assert len(got.table) == 13452


def test_a_check_answers_at_compiled_depth_on_a_table_only_the_store_holds(local_store, cli_json, tmp_path):
    _, doc, err = cli_json(
        "matrix", "-k", "trtllm-mla[backend=trtllm-gen]", "--sm", "100", "--heads", "64,96,17", "--no-cache", "--json"
    )
    # What crossed the network is counted by hprobe and said on stderr, never in the document.
    table_bytes = sum(p.stat().st_size for p in local_store.rglob("*") if p.is_file())
    assert f"fetched {table_bytes / 2**20:,.1f} MiB this run (kernel tables {table_bytes / 2**20:,.1f} MiB" in err
    assert "fetched" not in json.dumps(doc)
    (result,) = doc["results"]
    assert result["depth"] == "compiled"
    assert 64 in result["accepted"] and 17 not in result["accepted"]
    assert any("13,452 kernels" in n for n in result["notes"])
    # It came from the store: nothing else could answer, and the run kept what it fetched.
    package = package_of(PACKAGE)
    assert not isinstance(package, str)
    assert (tmp_path / "cache" / "kernel-tables" / package.checksums_sha256 / "flashInferMetaInfo.h").is_file()


def test_a_table_from_the_store_that_is_not_the_named_one_is_refused_with_the_reason(local_store):
    header = local_store / "include" / "flashInferMetaInfo.h"
    header.write_bytes(header.read_bytes().replace(b"kSM_100f", b"kSM_100a", 1))
    got = tables_for(PACKAGE, "0.6.14")
    assert got.table is None
    assert "flashInferMetaInfo.h does not match its entry in checksums.txt" in str(got.missing)
    # One line saying what would make the table reachable, with the store's own URLs.
    assert "to make it reachable: `curl -fL" in str(got.missing) and "HPROBE_KERNEL_TABLE=DIR" in str(got.missing)
    assert "\n" not in str(got.missing)


def test_a_search_that_found_nothing_is_the_answer_for_a_while_and_a_found_table_ends_it(
    local_store, tmp_path, monkeypatch
):
    """A machine that cannot reach a table pays for the search once, not on every
    warm run: the miss is remembered (MISS_TTL) and said in the same words; a table
    given or found later is read as before, and forgets the miss."""
    import http.server

    asked: list[str] = []
    original = http.server.SimpleHTTPRequestHandler.do_GET

    def counting(handler):  # type: ignore[no-untyped-def]
        asked.append(handler.path)
        return original(handler)

    monkeypatch.setattr(http.server.SimpleHTTPRequestHandler, "do_GET", counting)
    header = local_store / "include" / "flashInferMetaInfo.h"
    kept = header.read_bytes()
    header.unlink()  # the store holds checksums.txt only
    first = tables_for(PACKAGE, "0.6.14")
    assert first.table is None and asked, first.missing
    fetched = len(asked)
    second = tables_for(PACKAGE, "0.6.14")
    assert second.table is None and len(asked) == fetched  # nothing fetched again
    assert second.missing == first.missing  # a report reads the same, searched or remembered
    assert kernel_package.miss_settled(PACKAGE, "0.6.14")
    # A release sharing the package searches for its own cubin wheel: another
    # release's miss is neither its answer nor said in its note.
    assert not kernel_package.miss_settled(PACKAGE, "0.6.15.post1")
    other = tables_for(PACKAGE, "0.6.15.post1")
    assert len(asked) > fetched and "0.6.14" not in str(other.missing), other.missing
    fetched = len(asked)
    given = tmp_path / "given"
    (given / "include").mkdir(parents=True)
    (given / "checksums.txt").write_bytes((local_store / "checksums.txt").read_bytes())
    (given / "include" / "flashInferMetaInfo.h").write_bytes(kept)
    monkeypatch.setenv("HPROBE_KERNEL_TABLE", str(given))
    assert tables_for(PACKAGE, "0.6.14").table is not None
    monkeypatch.delenv("HPROBE_KERNEL_TABLE")
    # A table found settles every release of the package.
    assert not kernel_package.miss_settled(PACKAGE, "0.6.14")
    assert not kernel_package.miss_settled(PACKAGE, "0.6.15.post1")
    assert tables_for(PACKAGE, "0.6.14").table is not None  # from the cache now


def test_a_store_in_the_clear_across_a_network_is_not_fetched_from(tmp_path, monkeypatch):
    monkeypatch.delenv("HPROBE_KERNEL_TABLE", raising=False)
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    monkeypatch.setenv("FLASHINFER_CUBINS_REPOSITORY", "http://192.0.2.1/")
    got = tables_for(PACKAGE, "0.6.14")
    assert got.table is None and "neither an https URL nor http on this machine" in str(got.missing)


def test_a_checksums_file_no_package_has_is_refused_unread(tmp_path, monkeypatch):
    """A 4 GiB sparse checksums.txt in a given folder, a FIFO in its place, and a
    wheel whose checksums.txt inflates to 20 MiB are refused by their size or
    kind before a byte is read (each once filled memory or blocked the run)."""
    package = package_of(PACKAGE)
    assert not isinstance(package, str)
    store = tmp_path / "store"
    (store / "include").mkdir(parents=True)
    (store / "include" / "flashInferMetaInfo.h").write_bytes(b"")
    with (store / "checksums.txt").open("wb") as sparse:
        sparse.truncate(4 * 2**30)
    with pytest.raises(ValueError, match="4294967296 bytes, larger than such a file"):
        kernel_tables._given(str(store), package)
    (store / "checksums.txt").unlink()
    os.mkfifo(store / "checksums.txt")
    refused = kernel_tables._given(str(store), package)  # returns: a FIFO is never opened
    assert isinstance(refused, str) and "holds no checksums.txt" in refused

    bomb = tmp_path / "flashinfer_cubin-0.6.13-py3-none-any.whl"
    prefix = f"flashinfer_cubin/cubins/{package.path}"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(prefix + "checksums.txt", b"0" * (20 * 2**20))
        archive.writestr(prefix + "include/flashInferMetaInfo.h", b"")
    assert bomb.stat().st_size < 2**20
    with pytest.raises(ValueError, match="checksums.txt of 20971520 bytes"):
        kernel_tables._from_wheel(bomb, package, bomb.name)
    monkeypatch.setenv("HPROBE_KERNEL_TABLE", str(bomb))
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nowhere"))
    monkeypatch.setenv("FLASHINFER_CUBINS_REPOSITORY", "https://127.0.0.1:9/")
    found = tables_for(PACKAGE, "0.6.14")  # the run goes on without compiled depth, and says why
    assert found.table is None and "checksums.txt of 20971520 bytes" in (found.missing or "")


# --- the port against cases worked from the C++ ------------------------------------


def dsv4(heads: int, batch: int = 1, top_k: int = 2048) -> FmhaCall:
    # trtllm_paged_attention_decode_sparse_mla_dsv4: q/kv/o 512 wide, BF16 out, max_kv_len = top-k.
    return FmhaCall(True, BF16, BF16, BF16, heads, 512, 512, batch, 1, 0, 64, top_k)


def dense(heads: int, batch: int = 1, kv: int = 1024, top_k: int = 0) -> FmhaCall:
    # trtllm_paged_attention_decode: query 576 (512 latent + 64 rope), out 512, page 64.
    return FmhaCall(False, BF16, BF16, BF16, heads, 576, 512, batch, 1, kv, 64, top_k)


def test_dsv4_96_heads_meet_the_heads_per_cta_check(selection):
    """selectSparseMlaGenerationKernel: 96 > 32 -> KeepsMmaAb, tileSizeQ 64.
    computeCtaAndClusterConfig: heads per CTA = min(96, stepQ 64) = 64;
    96 / 64 = 1 CTA; 64 * 1 != 96 -> "The numHeadsQ/numHeadsKv is not supported."."""
    with pytest.raises(Refusal) as caught:
        selection.launch(dsv4(96))
    assert caught.value.function == "computeCtaAndClusterConfig"
    assert caught.value.message == "The numHeadsQ/numHeadsKv is not supported."


def test_dsv4_64_heads_launch_split_over_kv_and_head_dim(selection):
    """64 heads, batch 1, top-k 2048: KeepsMmaAb, tileSizeQ 64, GmemReductionWithSeparateKernel
    (no 2-CTA: 1 * 1 * 8 <= 148). Pass 1: KV split = min((2048 + 255) // 256, 148) = 8 CTAs;
    8 * 2 <= 148 with headDimPerCtaV 512 -> headDimPerCtaV 128 (8 * 4 <= 148), select again.
    Pass 2: 512 / 128 = 4 CTAs in y; KV split min(8, 148 // 4) = 8 -> grid (8, 4, 1)."""
    launch = selection.launch(dsv4(64))
    row = launch.kernel
    assert (row.tile_size_q, row.head_dim_per_cta_v, row.kernel_type, row.multi_ctas_kv_mode, row.sparse_attn) == (
        64,
        128,
        3,
        2,
        2,
    )
    assert launch.ctas == (8, 4, 1) and launch.cluster_x == 1


def test_dsv32_20_heads_get_a_tile_that_is_no_power_of_two(selection):
    """Static top-k sparse (head dim 576), 20 heads, top-k 2048: SwapsMmaAb, full tile 20, half 10;
    batch 1: 1 * ceil(1024 / 128) = 8 <= 148 // 8 -> half, tileSizeQ 10; batch 4: 32 > 18 -> 20.
    hashID: "The tileSizeQ and tileSizeKv must be power of 2." either way."""
    for batch in (1, 4):
        with pytest.raises(Refusal) as caught:
            selection.launch(dense(20, batch=batch, top_k=2048))
        assert caught.value.function == "hashID" and "must be power of 2" in caught.value.message


def test_dsv32_4_heads_find_no_cubin(selection):
    """4 heads: half 2 < 8 -> tileSizeQ 4, a power of two; the table has no Q4 sparse kernel:
    the launcher's existence check, "Missing TRTLLM-GEN kernel (decode): ...tileSizeQ=4..."."""
    with pytest.raises(Refusal) as caught:
        selection.launch(dense(4, top_k=2048))
    assert (
        caught.value.message.startswith("Missing TRTLLM-GEN kernel (decode)") and "tileSizeQ=4," in caught.value.message
    )


def test_dense_96_heads_run_at_short_kv_and_not_at_long(selection):
    """useSwapsMmaAbMlaGenKernel, batch 1: CTAs = ceil(96 / 16) = 6; KV 1024: per-CTA KV
    ceil(1024 / min(4, 148 // 6)) = 256 <= 1024 -> SwapsMmaAb, tileSizeQ 16, 96 / 16 = 6 CTAs: runs.
    KV 32768: min(128, 24) = 24 CTAs, ceil(32768 / 24) = 1366 > 1024 -> KeepsMmaAb, tileSizeQ 64:
    96 / 64 leaves 32 heads -> "The numHeadsQ/numHeadsKv is not supported."."""
    launch = selection.launch(dense(96, kv=1024))
    assert (launch.kernel.tile_size_q, launch.kernel.kernel_type) == (16, 2)
    with pytest.raises(Refusal, match="numHeadsQ/numHeadsKv is not supported"):
        selection.launch(dense(96, kv=32768))


def test_dense_128_heads_use_two_ctas_at_long_kv(selection):
    """128 heads, KV 32768: KeepsMmaAb, 2-CTA MMA, headDimPerCtaV 256 (legacy rule for 128);
    heads per CTA min(128, 64) = 64 -> 2 CTAs, 512 / 256 = 2 per head dim: the 2-CTA check holds."""
    launch = selection.launch(dense(128, kv=32768))
    assert launch.kernel.uses_2cta_mma and launch.kernel.head_dim_per_cta_v == 256 and launch.cluster_x == 2


def rank256(heads: int, batch: int = 1, kv: int = 1024) -> FmhaCall:
    # kv_lora_rank 256: query 320 (256 latent + 64 rope), out 256, page 64.
    return FmhaCall(False, BF16, BF16, BF16, heads, 320, 256, batch, 1, kv, 64, 0)


def test_a_cga_kernel_whose_gmem_fallback_launches_launches_either_way(selection):
    """Rank 256, 16 heads, batch 1, KV 1024: 16 <= 32 -> SwapsMmaAb, tileSizeQ 16.
    computeCtaAndClusterConfig (the Q16 kernel steps 256 over KV): KV split
    min((1024 + 511) // 512, 148) = 2, and 1 < 2 <= 16 with SwapsMmaAb, GmemReduction,
    headDimV 256 < 512 -> CgaSmemReduction, select again; the CGA kernel (also stepKv
    256): grid (2, 1, 1), cluster 1 * 2. run(): the occupancy query may force GmemReduction:
    selected again, that kernel exists and nothing asks for another selection. Either
    way a kernel launches; the one-wave launch is the CgaSmemReduction one."""
    launch = selection.launch(rank256(16))
    assert (launch.kernel.multi_ctas_kv_mode, launch.kernel.tile_size_q, launch.ctas, launch.cluster_x) == (
        3,
        16,
        (2, 1, 1),
        2,
    )


def test_a_cga_kernel_whose_fallback_is_refused_is_left_to_the_occupancy_answer(selection):
    """run()'s fallback on a kernel map without the GmemReduction kernel (a fixture: the
    launcher's existence check selects that very kernel first, so a real table that
    passes it always has it). One wave launches the CgaSmemReduction kernel, more
    than one falls back and finds nothing: neither a launch nor a refusal."""
    from hprobe.compiled.trtllm_gen.era_0_6_12 import MultiCtasKvMode, SelectKernelParams, Undetermined

    call = rank256(16)
    params = selection._launcher_params(call, call.max_kv_len, call.page_size, -1, False)
    kernels = dict(selection._runner(call))
    select = SelectKernelParams.of(params)
    selection.select_kernel(params, select)
    del kernels[selection.hash_from_runner_params(params, select)[0]]  # the GmemReduction kernel
    select.multi_ctas_kv_mode = MultiCtasKvMode.CGA_SMEM_REDUCTION
    with pytest.raises(Undetermined, match=r"fit one wave.*Trtllm-gen kernels not found.*multiCtasKvMode=1"):
        selection._gmem_fallback(kernels, params, select)


def test_the_runner_refuses_sm120(table):
    """TllmGenFmhaRunner: FLASHINFER_CHECK(mSM == kSM_100 || mSM == kSM_103, "Unsupported architecture")."""
    port = port_for(PACKAGE)
    sm120 = port.selection(table, Device(120, 188, 99 * 1024))  # type: ignore[union-attr]
    with pytest.raises(Refusal, match="Unsupported architecture"):
        sm120.launch(dsv4(64))


# --- what a user sees --------------------------------------------------------------


def test_matrix_on_the_installed_release_answers_at_compiled_depth(cli_json, cubin_wheel, monkeypatch):
    monkeypatch.setenv("HPROBE_KERNEL_TABLE", str(cubin_wheel))
    _, doc, _ = cli_json("matrix", "-k", "trtllm-mla[backend=trtllm-gen]", "--topk", "2048", "--sm", "100", "--json")
    (result,) = doc["results"]
    assert result["depth"] == "compiled"
    accepted = set(result["accepted"])
    assert {8, 16, 32, 64, 128} <= accepted and not accepted & (set(range(1, 8)) | set(range(17, 32)))
    refused = {r["heads"]: r for r in result["heads"] if r["outcome"] == "rejected"}
    assert refused[20]["error_type"] == "compiled check" and "fmhaKernels.cuh:" in refused[20]["location"]


def test_a_warm_run_reuses_what_compiled_depth_concluded(cli_json, cubin_wheel, monkeypatch, tmp_path):
    """Compiled depth's conclusions are kept with the answers: a warm run does
    not evaluate the selection again, and answers the same."""
    import hprobe.compiled.depth

    monkeypatch.setenv("HPROBE_KERNEL_TABLE", str(cubin_wheel))
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    args = ("matrix", "-k", "trtllm-mla[backend=trtllm-gen]", "--topk", "2048", "--sm", "100", "--heads", "16-24")
    code, cold, err = cli_json(*args)
    assert code == 0 and cold["results"][0]["depth"] == "compiled", err

    def evaluated(*_args, **_kwargs):
        raise AssertionError("compiled depth evaluated again on a warm run")

    with monkeypatch.context() as patch:
        patch.setattr(hprobe.compiled.depth, "deepen", evaluated)
        code, warm, err = cli_json(*args)
    assert code == 0 and warm["results"] == cold["results"], err


def test_what_compiled_depth_concluded_is_keyed_by_the_cxx_it_read(tmp_path):
    """An installed release's identity leaves its C++ out; the kept conclusions
    do not: an edit to a file the port reads is a new key."""
    import shutil

    from hprobe.compiled.trtllm_gen import RUNNER
    from hprobe.model.outcome import KernelSMResult
    from hprobe.support.gather import _deep_key

    package = tmp_path / "flashinfer"
    shutil.copytree(
        PACKAGE / "data" / "include" / "flashinfer" / "trtllm" / "fmha",
        package / "data" / "include" / "flashinfer" / "trtllm" / "fmha",
    )
    probed = [KernelSMResult("trtllm-mla", 100, "0.6.14")]
    key = _deep_key(probed, "installed:x", package)
    assert key == _deep_key(probed, "installed:x", package)
    runner = package / "data" / RUNNER
    runner.write_text(runner.read_text() + "\n// edited\n")
    assert _deep_key(probed, "installed:x", package) != key
    assert _deep_key(probed, "installed:y", package) != _deep_key(probed, "installed:x", package)


def test_an_sm_outside_the_runners_is_unsupported_arch_on_every_output(cli, cubin_wheel, monkeypatch):
    monkeypatch.setenv("HPROBE_KERNEL_TABLE", str(cubin_wheel))
    code, out, _ = cli("matrix", "-k", "trtllm-mla[backend=trtllm-gen]", "--sm", "120", "--heads", "64,128")
    assert code == 0
    assert "SM120 unsupported-arch" in out and "Unsupported architecture" in out and "fmhaRunner.cuh:37" in out
    assert "accepted" not in out.split("SM120", 1)[1].split("\n", 1)[0]
    # The runner's check answered: no note says only the validators did.
    assert "only the validators answered" not in out


def test_without_a_table_the_answer_stays_at_the_validators_and_says_why(cli_json, monkeypatch, tmp_path):
    monkeypatch.setenv("HPROBE_KERNEL_TABLE", str(tmp_path / "nothing-here"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # no index, and wheels only from an empty folder
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    monkeypatch.setenv("FLASHINFER_CUBINS_REPOSITORY", "https://127.0.0.1:9/")
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    _, doc, _ = cli_json("matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "64", "--json")
    (result,) = doc["results"]
    assert result["depth"] != "compiled" and result["accepted"] == [64]
    assert any("compiled depth: not evaluated: no kernel table" in n for n in result["notes"])
    # The count is accepted as far as the validators go, and says what is pending.
    [answer] = result["heads"]
    assert "trtllm-gen's selection (compiled) not evaluated: no kernel table here" in (answer["pending"])


def test_a_check_whose_counts_wait_on_a_selection_not_evaluated_is_undecided(cli, cli_json, monkeypatch):
    """No kernel table (HPROBE_KERNEL_TABLE=off) for a path into trtllm-gen:
    never `ok` (exit 3, each count inconclusive with the one-line reason);
    --trust-validators takes the validators' answer and says so on the gate's line."""
    from ..conftest import POST_48047

    monkeypatch.setenv("HPROBE_KERNEL_TABLE", "off")
    args = ("check", "--table", str(POST_48047), "--sm", "100", "--flashinfer", "0.6.14")
    code, doc, err = cli_json(*args)
    rows = [f for f in doc["findings"] if f["evidence"] and f["evidence"]["outcome"] == "accepted"]
    assert code == 3 and rows, err
    assert {f["verdict"] for f in rows} == {"inconclusive"}
    assert all("HPROBE_KERNEL_TABLE=off keeps every answer at the validators" in f["evidence"]["pending"] for f in rows)
    code, out, err = cli(*args, "--trust-validators")
    assert code == 0, out + err
    first = out.splitlines()[0]
    assert first.startswith("pass: ") and "on the validators' word alone" in first and "--trust-validators" in first


def test_a_url_given_for_the_kernel_table_is_said_as_written():
    """HPROBE_KERNEL_TABLE names a folder or wheel here; a URL there is said
    as written (a path would print `https:/…`), with where a store goes."""
    package = package_of(PACKAGE)
    assert not isinstance(package, str)
    said = kernel_tables._given("https://example.invalid/store/", package)
    assert said == (
        "HPROBE_KERNEL_TABLE=https://example.invalid/store/: a folder or wheel on this machine, not a URL (an "
        "artifact store's address goes in FLASHINFER_CUBINS_REPOSITORY)"
    )
