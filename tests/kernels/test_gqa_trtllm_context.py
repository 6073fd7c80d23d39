"""kernels/gqa_trtllm_context: GQA/MHA prefill through
trtllm_batch_context_with_kv_cache on the installed release (0.6.14), with
trtllm-gen's context selection on flashinfer-cubin 0.6.13's kernel table (the
one 0.6.14 names); each answer checked against the release's own source."""

from __future__ import annotations

import pytest

from ..conftest import installed_flashinfer
from .test_gqa_trtllm_decode import _line


@pytest.mark.slow
def test_a_bf16_query_over_an_fp8_cache_finds_no_context_kernel_at_any_group(cli_json, cubin_wheel, monkeypatch):
    """SGLang #12347 (Llama 4, trtllm_mha, FP8 KV): "Missing TRTLLM-GEN kernel
    (context)". The entry's Python checks let the call through; the launcher's
    runner finds no BF16-query / E4M3-KV context kernel, whatever the group. An
    FP8 query over the FP8 cache, and BF16 over BF16, launch at every group;
    SM90 has no trtllm-gen runner."""
    monkeypatch.setenv("HPROBE_KERNEL_TABLE", str(cubin_wheel))
    code, doc, err = cli_json(
        "matrix",
        "-k",
        "gqa-trtllm-context",
        "--dtype",
        "bf16,fp8",
        "--kv-dtype",
        "same,fp8",
        "--sm",
        "90,100",
        "--heads",
        "1-8,16,32",
    )
    assert code == 0, err
    by = {(r["key"], r["sm"]): r for r in doc["results"]}
    launcher = installed_flashinfer() / "data/csrc/trtllm_fmha_kernel_launcher.cu"
    missing = f"flashinfer/data/csrc/trtllm_fmha_kernel_launcher.cu:{_line(launcher, 'Missing TRTLLM-GEN kernel')}"
    counts = [*range(1, 9), 16, 32]
    mixed = by[("gqa-trtllm-context[kv_dtype=fp8]", 100)]
    assert mixed["depth"] == "compiled" and mixed["accepted"] == []
    assert {h["heads"] for h in mixed["heads"] if h["outcome"] == "rejected"} == set(counts)
    assert all(h["message"].startswith("Missing TRTLLM-GEN kernel (context): ") for h in mixed["heads"])
    assert {h["location"] for h in mixed["heads"]} == {f"{missing} (trtllm_paged_attention_launcher)"}
    for key in ("gqa-trtllm-context", "gqa-trtllm-context[dtype=fp8]"):
        served = by[(key, 100)]
        assert served["depth"] == "compiled" and served["accepted"] == counts
        assert {h["entry"] for h in served["heads"]} == {"get_trtllm_gen_fmha_module.trtllm_paged_attention_context"}
        assert by[(key, 90)]["status"] == "unsupported-arch"
