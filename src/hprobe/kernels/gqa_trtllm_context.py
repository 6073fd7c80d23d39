"""GQA/MHA prefill through `trtllm_batch_context_with_kv_cache` (trtllm-gen's
context kernels over a paged KV cache).

The entry's Python checks run for real; past them trtllm-gen's runner takes
SM10x only, and which context kernel serves the call is decided by the
release's kernel table: a context kernel is looked up by the dtypes (the
runner's sub-table), head dim, page size and mask, never by the group, so a
query dtype the table has no context kernel for is refused at every count
(SGLang #12347: a bf16 query over an FP8 cache). Evaluated where hprobe ports
the release's selection (compiled/trtllm_gen); elsewhere pending, never `ok`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hprobe.kernels import mla_inputs as mi
from hprobe.kernels.base import Axis, KernelProbe, PreparedCall, Value
from hprobe.kernels.gqa_trtllm_decode import HEAD_DIM, KV_HEADS, paged_call, paged_inputs
from hprobe.model.compiled import TrtllmGenCall
from hprobe.model.sm import SM

TRTLLM_GEN_UNCHECKED = "trtllm-gen selects a context cubin by head dim, dtypes and page size inside compiled code"
SAME = "same"


class GqaTrtllmContextProbe(KernelProbe):
    id = "gqa-trtllm-context"
    entry_point = "flashinfer.prefill.trtllm_batch_context_with_kv_cache"
    default_sms = (90, 100, 103, 120, 121)
    summary = "GQA/MHA prefill through trtllm_batch_context_with_kv_cache (trtllm-gen context kernels, SM10x)"
    # Engines' calls of this entry are not read yet: its count is not followed.
    engine_reading = False
    axes = (
        KV_HEADS,
        HEAD_DIM,
        Axis("dtype", "bf16", mi.DTYPES, help="query dtype (fp8: e4m3; the output is bf16)"),
        Axis("kv_dtype", SAME, (SAME, *mi.DTYPES), help="KV cache dtype (same: the query's)"),
        Axis("q_len", 256, help="prefill tokens per request"),
        Axis("page_size", 32, help="KV cache page size"),
    )
    compiled_launchers = ("get_trtllm_gen_fmha_module",)

    def families(self, config: dict[str, Value] | None = None) -> set[int]:
        return {10}

    def compiled_checks(self, entry: str) -> str | None:
        return TRTLLM_GEN_UNCHECKED if entry.startswith(self.compiled_launchers) else None

    @staticmethod
    def _kv_dtype(config: dict[str, Value]) -> str:
        kv = str(config["kv_dtype"])
        return str(config["dtype"]) if kv == SAME else kv

    def compiled_call(self, entry: str, config: dict[str, Value]) -> TrtllmGenCall | None:
        if not entry.startswith(self.compiled_launchers):
            return None
        return paged_call("trtllm_paged_attention_context", config, str(config["dtype"]), self._kv_dtype(config))

    def prepare(
        self, entry: Callable[..., Any], sm: SM, heads: int, config: dict[str, Value], alternative: int = 0
    ) -> PreparedCall:
        import torch

        dtype, head_dim, q_len = str(config["dtype"]), int(config["head_dim"]), int(config["q_len"])
        kv_len = max(q_len, mi.SEQ_LEN)
        kwargs = paged_inputs(heads, config, dtype, self._kv_dtype(config), kv_len)
        kwargs |= {
            "max_q_len": q_len,
            "max_kv_len": kv_len,
            "bmm1_scale": 1.0,
            "bmm2_scale": 1.0,
            "batch_size": 1,
            "cum_seq_lens_q": torch.tensor([0, q_len], dtype=torch.int32),
            "cum_seq_lens_kv": torch.tensor([0, kv_len], dtype=torch.int32),
            # What serving engines hand it: the model's dtype out, whatever the query's.
            "out": mi.zeros((q_len, heads, head_dim), "bf16"),
        }
        return PreparedCall(entry, kwargs)
