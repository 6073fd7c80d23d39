"""Prefill over a ragged KV cache: `BatchPrefillWithRaggedKVCacheWrapper`,
planned and run as an engine does for one request of `q_len` tokens. On
SM10x engines hand it `backend="cutlass"` for the head-dim pairs its kernel
is built for (SGLang's ragged prefill; MLA prefill's 192/128).

The cutlass module is JIT-built per dtype and head-dim pair; its run checks
the pair it is handed in compiled code (`DISPATCH_head_dim` in
`csrc/fmha_cutlass_sm100.cu`), read from the release's C++
(compiled/cutlass_prefill.py). The probe lets the plan through and stops at
the run, which carries the sizes it was handed.

h_q is the axis that varies; `kv_heads` is fixed per row (0: as many as the
query, an MHA prefill such as MLA's, whose K and V are decompressed)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hprobe.kernels import mla_inputs as mi
from hprobe.kernels.base import Axis, KernelProbe, PreparedCall, Value
from hprobe.model.sm import SM

# The run of the cutlass module: its compiled checks are read (compiled/cutlass_prefill.py).
CUTLASS_MODULE = "get_fmha_module"
CUTLASS_UNREAD = "the cutlass kernel's own can_implement (its tile and alignment checks) is not read"
FA2_UNREAD = "the fa2 prefill template's compiled plan and its compile-time limits for the head dims are not read"


def _plan_and_run(
    wrapper_cls: Any,
    heads: int,
    kv_heads: int,
    head_dim_qk: int,
    head_dim_vo: int,
    dtype: str,
    q_len: int,
    backend: str,
) -> None:
    import torch

    wrapper = wrapper_cls(mi.workspace(), "NHD", backend=backend)
    indptr = torch.tensor([0, q_len], dtype=torch.int32)
    wrapper.plan(
        indptr,
        indptr,
        heads,
        kv_heads,
        head_dim_qk,
        head_dim_vo,
        causal=True,
        q_data_type=mi.torch_dtype(dtype),
        kv_data_type=mi.torch_dtype(dtype),
    )
    wrapper.run(
        mi.zeros((q_len, heads, head_dim_qk), dtype),
        mi.zeros((q_len, kv_heads, head_dim_qk), dtype),
        mi.zeros((q_len, kv_heads, head_dim_vo), dtype),
    )


class RaggedPrefillProbe(KernelProbe):
    id = "ragged-prefill"
    entry_point = "flashinfer.prefill.BatchPrefillWithRaggedKVCacheWrapper"
    default_sms = (90, 100, 103, 120, 121)
    summary = (
        "prefill over a ragged KV cache (BatchPrefillWithRaggedKVCacheWrapper): the head-dim pairs the SM10x "
        "cutlass kernel takes, or fa2"
    )
    # The plan's result is handed on to the run; the run is the boundary, and
    # carries the sizes it was handed (compiled/cutlass_prefill.py reads them;
    # fa2's, so that a count no multiple of the KV heads is left pending there).
    pass_through_calls = ("plan",)
    recorded_launches = ("run", "ragged_run")
    # Engines' calls of this wrapper are not read yet: its count is not followed.
    engine_reading = False
    axes = (
        Axis("backend", "cutlass", ("cutlass", "fa2"), help="the wrapper's backend (cutlass: SM10x only)"),
        Axis("kv_heads", 0, help="KV heads (0: as many as the query heads, an MHA prefill)"),
        Axis("head_dim", 128, (64, 128, 192, 256), help="head dim of Q and K"),
        Axis("head_dim_vo", 0, (0, 64, 128, 256), help="head dim of V and the output (0: head_dim; MLA prefill: 128)"),
        Axis("dtype", "bf16", ("bf16", "fp16"), help="query and KV dtype"),
        Axis("q_len", 128, help="prefill tokens of the request"),
    )

    def families(self, config: dict[str, Value] | None = None) -> set[int]:
        if config is not None and config.get("backend") == "fa2":
            return {9, 10, 12}
        return {10}

    def compiled_checks(self, entry: str) -> str | None:
        if entry.startswith(CUTLASS_MODULE + "."):
            return CUTLASS_UNREAD
        return FA2_UNREAD

    def prepare(
        self, entry: Callable[..., Any], sm: SM, heads: int, config: dict[str, Value], alternative: int = 0
    ) -> PreparedCall:
        kv, qk, vo = int(config["kv_heads"]), int(config["head_dim"]), int(config["head_dim_vo"])
        return PreparedCall(
            _plan_and_run,
            {
                "wrapper_cls": entry,
                "heads": heads,
                "kv_heads": kv if kv > 0 else heads,
                "head_dim_qk": qk,
                "head_dim_vo": vo if vo > 0 else qk,
                "dtype": str(config["dtype"]),
                "q_len": int(config["q_len"]),
                "backend": str(config["backend"]),
            },
        )
