"""kernels/gqa_trtllm_decode: GQA/MHA decode through
trtllm_batch_decode_with_kv_cache on the installed release (0.6.14), each
answer checked against that release's own source, read here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


def _installed() -> Path:
    spec = importlib.util.find_spec("flashinfer")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent


def _line(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if needle in line)


@pytest.mark.slow
def test_trtllm_gen_is_sm10x_only_auto_goes_to_xqa_and_sm10x_counts_stay_pending(cli_json):
    """0.6.14 decode.py: `auto` is trtllm-gen where the SM major is 10, else
    XQA; fmhaRunner.cuh's constructor refuses every other SM ("Unsupported
    architecture"). On SM100 the count reaches trtllm-gen's selection, which
    is not ported for GQA: accepted by the validators, pending, never `ok`."""
    code, doc, err = cli_json(
        "matrix", "-k", "gqa-trtllm-decode", "--backend", "auto,trtllm-gen", "--sm", "90,100,120", "--heads", "1-9"
    )
    assert code == 0, err
    by = {(r["key"], r["sm"]): r for r in doc["results"]}
    runner = _installed() / "data/include/flashinfer/trtllm/fmha/fmhaRunner.cuh"
    where = f"flashinfer/data/include/flashinfer/trtllm/fmha/fmhaRunner.cuh:{_line(runner, 'Unsupported architecture')}"
    for sm in (90, 120):
        forced = by[("gqa-trtllm-decode[backend=trtllm-gen]", sm)]
        assert forced["status"] == "unsupported-arch"
        assert {h["location"] for h in forced["heads"]} == {f"{where} (TllmGenFmhaRunner)"}
        auto = by[("gqa-trtllm-decode", sm)]
        assert auto["accepted"] == list(range(1, 10))
        assert {h["entry"] for h in auto["heads"]} == {"get_xqa_module.xqa_wrapper"}
    for key in ("gqa-trtllm-decode", "gqa-trtllm-decode[backend=trtllm-gen]"):
        blackwell = by[(key, 100)]
        assert {h["entry"] for h in blackwell["heads"]} == {"get_trtllm_gen_fmha_module.trtllm_paged_attention_decode"}
        assert all("GQA/MHA selection" in h["pending"] for h in blackwell["heads"])


@pytest.mark.slow
def test_xqa_refuses_head_dim_512_on_0_6_14_at_its_jit_check(cli_json):
    """flashinfer #4546 (Gemma 4 on SM12x): gen_xqa_module's head-dim check."""
    code, doc, err = cli_json(
        "matrix", "-k", "gqa-trtllm-decode[backend=auto,head_dim=512]", "--sm", "120", "--heads", "1,8"
    )
    assert code == 0, err
    [result] = doc["results"]
    source = _installed() / "jit/xqa.py"
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
def test_a_gqa_call_never_enters_the_mla_selection():
    from hprobe.compiled.depth import GQA_NOT_PORTED, existence
    from hprobe.compiled.trtllm_gen.era_0_6_12 import NotPorted
    from hprobe.kernels import PROBES

    call = PROBES["gqa-trtllm-decode"].compiled_call(
        "get_trtllm_gen_fmha_module.trtllm_paged_attention_decode", PROBES["gqa-trtllm-decode"].variant().values
    )
    assert call is not None and call.kv_heads == 1 and call.head_dim_q == 128
    with pytest.raises(NotPorted, match="GQA/MHA selection") as raised:
        existence(None, call, 8)  # type: ignore[arg-type]  # never reached: no selection is asked
    assert str(raised.value) == GQA_NOT_PORTED


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
