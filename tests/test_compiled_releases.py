"""Compiled depth on the releases it changes answers for, fetched at test time.

0.6.13's validators accept every h_q 1..256 on trtllm-gen's MLA decode; its own
kernel table and selection code say which of them launch. SM120 on 0.6.13 reaches
only trtllm-gen, whose runner refuses it. 0.6.16 changed the selection (padded
tiles); a release whose C++ no port reads stays at
the validators, and says so.
"""

from __future__ import annotations

import json

import pytest

from hprobe.compiled.trtllm_gen import Gate, Port, port_for, runner_gate
from hprobe.compiled.trtllm_gen.era_0_6_12 import Device, FmhaCall, Refusal
from hprobe.support import kernel_tables
from hprobe.support.kernel_package import package_of
from hprobe.support.trees import resolve

from .conftest import PRE_48047

pytestmark = pytest.mark.slow
B200 = Device(sm=100, multiprocessor_count=148, max_shared_memory_per_block_optin=227 * 1024)
BF16 = "DATA_TYPE_BF16"


@pytest.fixture(autouse=True)
def _table(cubin_wheel, monkeypatch):
    monkeypatch.setenv("HPROBE_KERNEL_TABLE", str(cubin_wheel))


def _result(doc: dict, key: str, sm: int) -> dict:
    return next(r for r in doc["results"] if r["key"] == key and r["sm"] == sm)


def test_0613_sparse_and_dense_mla_past_the_validators(cli_json):
    _, doc, _ = cli_json(
        "matrix",
        "-k",
        "trtllm-mla[backend=trtllm-gen]",
        "--topk",
        "0,2048",
        "--sm",
        "100",
        "--flashinfer",
        "0.6.13",
        "--json",
    )
    sparse = _result(doc, "trtllm-mla[backend=trtllm-gen,topk=2048]", 100)
    dense = _result(doc, "trtllm-mla[backend=trtllm-gen]", 100)
    assert sparse["depth"] == dense["depth"] == "compiled"
    validators = {
        h["heads"] for h in sparse["heads"] if h["outcome"] == "accepted" or h.get("error_type") == "compiled check"
    }
    assert validators == set(range(1, 257))  # every h_q passed the Python checks
    assert {8, 16, 32, 64, 128} <= set(sparse["accepted"])
    assert not set(sparse["accepted"]) & (set(range(1, 8)) | set(range(17, 32)))
    assert not set(dense["accepted"]) & set(range(17, 32))


def test_sm120_on_0613_is_not_ok_anywhere(cli_json, cli, tmp_path):
    _, doc, _ = cli_json("matrix", "-k", "dsv4-sparse-mla", "--sm", "120", "--flashinfer", "0.6.13", "--json")
    (result,) = doc["results"]
    assert result["status"] == "unsupported-arch" and result["accepted"] == []
    code, doc, err = cli_json("check", "--table", str(PRE_48047), "--flashinfer", "0.6.13", "--sm", "120")
    assert code == 1, err
    assert doc["findings"] and not [f for f in doc["findings"] if f["verdict"] == "ok"]
    assert any("Unsupported architecture" in (f["evidence"] or {}).get("message", "") for f in doc["findings"])
    code, out, _ = cli("check", "--table", str(PRE_48047), "--flashinfer", "0.6.13", "--sm", "120")
    assert " ok " not in out and "ok (" not in out
    code, _, _ = cli(
        "report",
        "--releases",
        "0.6.13",
        "-k",
        "dsv4-sparse-mla",
        "--sm",
        "120",
        "--table",
        str(PRE_48047),
        "-o",
        str(tmp_path / "page"),
    )
    assert code in (0, 1)
    page = json.loads((tmp_path / "page" / "matrix.json").read_text())
    assert page["results"] and all(r["accepted"] == [] and r["status"] == "unsupported-arch" for r in page["results"])
    assert "Unsupported architecture" in (tmp_path / "page" / "index.html").read_text()


def test_the_0616_era_pads_mla_tiles(cubin_wheel):
    """0.6.16 – 0.6.17: getPaddedMlaTileSizeQ. Dense 96 heads: no power of two and
    above 64 -> "Non-power-of-two MLA numHeadsQPerKv must be <= 64, got 96." (0.6.13
    ran it at short KV). Static top-k, 20 heads: padded to one 32-head tile, which the
    table has (0.6.13 asked for a 10- or 20-head tile and refused)."""
    package = resolve("0.6.16.post4").tree / "flashinfer"
    port = port_for(package)
    assert isinstance(port, Port) and port.era == "0.6.16 – 0.6.17", port
    table = kernel_tables._from_wheel(cubin_wheel, package_of(package), cubin_wheel.name)  # type: ignore[arg-type]
    selection = port.selection(table, B200)  # type: ignore[arg-type]
    with pytest.raises(Refusal, match="Non-power-of-two MLA numHeadsQPerKv must be <= 64, got 96"):
        selection.launch(FmhaCall(False, BF16, BF16, BF16, 96, 576, 512, 1, 1, 1024, 64, 0))
    launch = selection.launch(FmhaCall(False, BF16, BF16, BF16, 20, 576, 512, 1, 1, 1024, 64, 2048))
    assert launch.kernel.tile_size_q == 32 and launch.kernel.sparse_attn == 1
    gate = runner_gate(package)
    assert isinstance(gate, Gate) and gate.sms == (100, 103, 107)


def test_the_0616_era_serves_a_group_of_one_at_page_128(cubin_wheel):
    """0.6.16 – 0.6.17: useDynamicNumTokensPerPage no longer asks numHeadsQPerKv > 1,
    so an MHA call (a group of one) at page 128 takes the dynamic-page kernel that
    0.6.14 misses (flashinfer #4094). Its GQA/MHA reading is 0.6.14's selector and a
    context launcher that hands block-sparse attention off."""
    package = resolve("0.6.16.post4").tree / "flashinfer"
    port = port_for(package)
    assert isinstance(port, Port) and not isinstance(port.gqa, str), port
    assert port.gqa.releases == "0.6.16 – 0.6.17" and port.gqa.syncs_traits
    table = kernel_tables._from_wheel(cubin_wheel, package_of(package), cubin_wheel.name)  # type: ignore[arg-type]
    selection = port.selection_on(table, B200)  # type: ignore[arg-type]
    mha = FmhaCall(False, BF16, BF16, BF16, 8, 128, 128, 1, 1, 1024, 128, 0, 8)
    assert selection.is_dynamic_pages_kernel(selection.launch(mha).kernel)
    assert selection.launch(FmhaCall(False, BF16, BF16, BF16, 8, 128, 128, 1, 256, 1024, 32, 0, 8, context=True))


def test_a_release_without_a_port_stays_at_the_validators_and_names_what_changed(cli_json, monkeypatch, tmp_path):
    """Every published release from 0.6.0 has a port; the next may not. A fixture:
    0.7.4's files as compiled depth reads them, one function of its selection edited
    (as a release that changed it would ship it). Its answers stay at the validators,
    the note names the function, and its kernel table is never fetched nor parsed."""
    import shutil

    from hprobe.compiled.depth import deepen
    from hprobe.compiled.files import KERNELS, data_dir
    from hprobe.compiled.trtllm_gen import read_files
    from hprobe.model.outcome import KernelSMResult

    real = resolve("0.7.4").tree / "flashinfer"
    package = tmp_path / "flashinfer"
    for relative in read_files():
        (data_dir(package) / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data_dir(real) / relative, data_dir(package) / relative)
    shutil.copyfile(real / "artifacts.py", package / "artifacts.py")
    kernels = data_dir(package) / KERNELS
    text = kernels.read_text()
    assert "numCtasPerSeqKv > 1 && numCtasPerSeqKv <= 16" in text
    kernels.write_text(
        text.replace("numCtasPerSeqKv > 1 && numCtasPerSeqKv <= 16", "numCtasPerSeqKv > 2 && numCtasPerSeqKv <= 16")
    )
    why = port_for(package)
    assert isinstance(why, str) and "no port" in why and "fmhaKernels.cuh computeCtaAndClusterConfig" in why
    gate = runner_gate(package)
    assert isinstance(gate, Gate) and 120 not in gate.sms  # the runner's check still holds
    monkeypatch.setenv("HPROBE_KERNEL_TABLE", "off")  # the probe's answer, at the validators
    _, doc, _ = cli_json(
        "matrix",
        "-k",
        "trtllm-mla[backend=trtllm-gen]",
        "--sm",
        "100",
        "--heads",
        "64",
        "--flashinfer",
        "0.7.4",
        "--json",
    )
    monkeypatch.delenv("HPROBE_KERNEL_TABLE")
    # Its kernel table would never be read: it is not fetched (nor parsed) at all.
    asked: list[str] = []
    monkeypatch.setattr(kernel_tables, "tables_for", lambda *args, **_kw: asked.append(str(args[0])))
    assert kernel_tables.tables_if_ported(package, "0.7.4").table is None and asked == []
    (probed,) = doc["results"]
    result = KernelSMResult.from_dict(probed)
    deepen(result, package, lambda: kernel_tables.tables_if_ported(package, "0.7.4"))
    assert result.depth.value != "compiled"
    assert any(
        "compiled depth: not evaluated" in n and "no port" in n and "computeCtaAndClusterConfig" in n
        for n in result.notes
    )
    assert asked == []


def test_answers_shared_across_releases_are_the_ones_each_release_gets_alone():
    """Definitions found in C++ and launches evaluated are kept for the run by
    content (a file, a selection): a release read after others that ship the
    same files and table gets the answers it gets when read first."""
    from hprobe.compiled import cxx, depth
    from hprobe.support import gather
    from hprobe.support.results import probe_release

    needed = {"dsv4-sparse-mla": [100, 120], "trtllm-mla": [100, 120]}
    heads = list(range(1, 257))
    runs: dict[str, list[str]] = {}
    for alone in (False, True):
        for version in ("0.6.13", "0.6.12", "0.6.16"):
            if alone:
                depth._EXISTENCES.clear()
                cxx._DEFINITIONS.clear()
            release = resolve(version)
            results = {
                (r.key, r.sm): r for r in probe_release(release, list(needed), [100, 120], heads, use_cache=True)
            }
            gather._deepen(results, release.location / "flashinfer", release.version)
            runs.setdefault(version, []).append(json.dumps([r.to_dict() for r in results.values()], sort_keys=True))
    assert all('"depth": "compiled"' in shared for shared, _ in runs.values())
    assert {version: shared == alone for version, (shared, alone) in runs.items()} == {
        "0.6.13": True,
        "0.6.12": True,
        "0.6.16": True,
    }


def test_the_cga_fallback_is_followed_where_it_is_taken(cli_json):
    """0.6.13's dense MLA at rank 256 on SM100: at batch 1 / KV 1024 the selection
    picks a CgaSmemReduction kernel, and run() falls back to GmemReduction when an
    occupancy query says its clusters need more than one wave. The fallback's own
    selection finds a kernel too, so the count launches either way: 1..16 and 32
    launch at every shape; 160..256 (by 16) launch at some shapes (KeepsMmaAb has
    no rank-256 kernel), neither refused nor left open."""
    _, doc, _ = cli_json(
        "matrix",
        "-k",
        "trtllm-mla[backend=trtllm-gen,kv_lora_rank=256]",
        "--sm",
        "100",
        "--flashinfer",
        "0.6.13",
        "--json",
    )
    result = _result(doc, "trtllm-mla[backend=trtllm-gen,kv_lora_rank=256]", 100)
    heads = {h["heads"]: h for h in result["heads"]}
    assert {*range(1, 17), 32} <= set(result["accepted"])
    for h in range(160, 257, 16):
        assert heads[h]["outcome"] == "accepted" and "shapes tried" in heads[h]["shapes"], heads[h]
    assert not any(h["outcome"] == "inconclusive" for h in heads.values())
    # A count every shape refuses stays refused, with the check that refuses it.
    assert heads[17]["outcome"] == "rejected" and heads[17]["error_type"] == "compiled check"
