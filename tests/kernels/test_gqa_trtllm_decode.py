"""kernels/gqa_trtllm_decode: GQA/MHA decode through
trtllm_batch_decode_with_kv_cache on the installed release (0.6.14), each
answer checked against that release's own source, read here."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..conftest import installed_flashinfer


def _line(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if needle in line)


@pytest.mark.slow
def test_trtllm_gen_is_sm10x_only_auto_goes_to_xqa_and_sm10x_counts_reach_the_selection(
    cli_json, cubin_wheel, monkeypatch
):
    """0.6.14 decode.py: `auto` is trtllm-gen where the SM major is 10, else
    XQA; fmhaRunner.cuh's constructor refuses every other SM ("Unsupported
    architecture"). On SM100 the count reaches trtllm-gen's GQA selection,
    evaluated on the release's kernel table: a group of one at page 128 finds no
    kernel (useDynamicNumTokensPerPage needs a group above one; flashinfer #4094),
    every other group of 1..9 launches."""
    monkeypatch.setenv("HPROBE_KERNEL_TABLE", str(cubin_wheel))
    code, doc, err = cli_json(
        "matrix",
        "-k",
        "gqa-trtllm-decode",
        "--backend",
        "auto,trtllm-gen",
        "--sm",
        "90,100,120",
        "--heads",
        "1-9",
        "--page-size",
        "128",
    )
    assert code == 0, err
    by = {(r["key"], r["sm"]): r for r in doc["results"]}
    runner = installed_flashinfer() / "data/include/flashinfer/trtllm/fmha/fmhaRunner.cuh"
    where = f"flashinfer/data/include/flashinfer/trtllm/fmha/fmhaRunner.cuh:{_line(runner, 'Unsupported architecture')}"
    launcher = installed_flashinfer() / "data/csrc/trtllm_fmha_kernel_launcher.cu"
    missing = f"flashinfer/data/csrc/trtllm_fmha_kernel_launcher.cu:{_line(launcher, 'Missing TRTLLM-GEN kernel')}"
    for sm in (90, 120):
        forced = by[("gqa-trtllm-decode[backend=trtllm-gen,page_size=128]", sm)]
        assert forced["status"] == "unsupported-arch"
        assert {h["location"] for h in forced["heads"]} == {f"{where} (TllmGenFmhaRunner)"}
        auto = by[("gqa-trtllm-decode[page_size=128]", sm)]
        assert auto["accepted"] == list(range(1, 10))
        assert {h["entry"] for h in auto["heads"]} == {"get_xqa_module.xqa_wrapper"}
    for key in ("gqa-trtllm-decode[page_size=128]", "gqa-trtllm-decode[backend=trtllm-gen,page_size=128]"):
        blackwell = by[(key, 100)]
        assert blackwell["depth"] == "compiled"
        assert blackwell["accepted"] == list(range(2, 10))
        [one] = [h for h in blackwell["heads"] if h["heads"] == 1]
        assert one["message"].startswith("Missing TRTLLM-GEN kernel (decode): ")
        assert "numTokensPerPage=128, dynamicNumTokensPerPage=0" in one["message"]
        assert one["location"] == f"{missing} (trtllm_paged_attention_launcher)"
        assert not any(h.get("pending") for h in blackwell["heads"])


@pytest.mark.slow
def test_xqa_refuses_head_dim_512_on_0_6_14_at_its_jit_check(cli_json):
    """flashinfer #4546 (Gemma 4 on SM12x): gen_xqa_module's head-dim check."""
    code, doc, err = cli_json(
        "matrix", "-k", "gqa-trtllm-decode[backend=auto,head_dim=512]", "--sm", "120", "--heads", "1,8"
    )
    assert code == 0, err
    [result] = doc["results"]
    source = installed_flashinfer() / "jit/xqa.py"
    message = _line(source, "Invalid head_dim")
    # The place is the `raise` statement; its message is on the line after it.
    assert source.read_text().splitlines()[message - 2].strip() == "raise ValueError("
    line = message - 1
    assert result["status"] == "unsupported-config"
    assert {h["message"] for h in result["heads"]} == {
        "Invalid head_dim: 512, must be divisible by 16 and in range [16, 256]"
    }
    assert {h["location"] for h in result["heads"]} == {f"flashinfer/jit/xqa.py:{line} (gen_xqa_module)"}


@pytest.mark.pure
def test_a_gqa_call_of_a_release_without_a_gqa_port_is_never_selected():
    from hprobe.compiled.depth import _existence
    from hprobe.compiled.trtllm_gen import Port
    from hprobe.compiled.trtllm_gen.era_0_6_12 import Device, NotPorted, Selection
    from hprobe.kernels import PROBES

    call = PROBES["gqa-trtllm-decode"].compiled_call(
        "get_trtllm_gen_fmha_module.trtllm_paged_attention_decode", PROBES["gqa-trtllm-decode"].variant().values
    )
    assert call is not None and call.kv_heads == 1 and call.head_dim_q == 128
    port = Port("an era", Selection, "its GQA/MHA selection has no port")
    with pytest.raises(NotPorted) as raised:
        # never reached: no table is read, no selection made
        _existence(port, None, Device(100, 148, 0), call, 8)  # type: ignore[arg-type]
    assert str(raised.value) == "its GQA/MHA selection has no port"


@pytest.mark.slow
def test_sinks_are_handed_to_the_kernel_each_backend_takes_them_to(cli_json):
    """gpt-oss's learned sinks (one float32 per query head): on the installed
    0.6.14 `auto` takes them to XQA on SM120 and to trtllm-gen on SM100, whose
    Python checks pass them on; the answer is the same as without sinks."""
    code, doc, err = cli_json(
        "matrix", "-k", "gqa-trtllm-decode[backend=auto]", "--sinks", "0,1", "--sm", "100,120", "--heads", "8,64"
    )
    assert code == 0, err
    by = {(r["key"], r["sm"]): r for r in doc["results"]}
    for sm, entry in (
        (120, "get_xqa_module.xqa_wrapper"),
        (100, "get_trtllm_gen_fmha_module.trtllm_paged_attention_decode"),
    ):
        with_sinks, without = by[("gqa-trtllm-decode[sinks=1]", sm)], by[("gqa-trtllm-decode", sm)]
        assert {h["entry"] for h in with_sinks["heads"]} == {entry}
        assert with_sinks["accepted"] == without["accepted"] == [8, 64]
