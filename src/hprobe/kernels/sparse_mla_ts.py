"""Sparse MLA decode through the prims_ts wrapper:
`flashinfer.attention.prims_ts.BatchSparseMLADecodePagedTSWrapper.plan`.

An experimental SM10x path: `plan(device, batch_size, num_qo_heads, ...)`
resolves the geometry in Python (`_resolve_sparse_mla_plan`: at most 128
heads, a dispatch profile by heads, rows and dtype) and compiles one CuTe DSL
kernel for it. The probe plans as an engine does at one decode token per row
(vLLM 0.34.0's Kimi K3 core: FP8 query, D576 with a 64-wide RoPE tail, packed
rows, `max_topk` the index width), then runs the plan: the plan compiles
the kernel, and the boundary is its launch.
`get_prims_ts_sparse_mla_decode_workspace_size`, which engines call first with
the same arguments, runs the same resolution and answers alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hprobe.kernels import mla_inputs as mi
from hprobe.kernels.base import Axis, KernelProbe, PreparedCall, Value
from hprobe.model.sm import SM

COMPILE_UNCHECKED = "cute-dsl compiles the planned kernel for the shape; compile-time limits are not seen on a CPU"
PAGE_SIZE = 64
PAGES = 2


def _plan_and_run(wrapper_cls: Callable[..., Any], heads: int, topk: int, plan: dict[str, Any]) -> None:
    """As an engine does: plan one packed row (the wrapper allocates the
    workspace the plan resolves), then run it with the inputs the plan takes.
    The plan compiles the kernel; the boundary is its launch in `run`."""
    import torch

    wrapper = wrapper_cls(None)
    wrapper.plan("cuda", 1, heads, **plan)
    q_dtype = plan["q_dtype"]
    dim = mi.KV_LORA_RANK + int(plan["qk_rope_head_dim"])
    state = wrapper._state
    # The pool's record as the plan sized it (the query's dtype and width for
    # a native cache, uint8 records for the packed formats).
    record = int(state["cache_dim"]) if isinstance(state, dict) else dim
    cache_dtype = state["cache_dtype"] if isinstance(state, dict) else q_dtype
    wrapper.run(
        torch.zeros((1, heads, dim), dtype=q_dtype),
        torch.zeros((PAGES, PAGE_SIZE, record), dtype=cache_dtype),
        torch.zeros((1, topk), dtype=torch.int32),
        torch.ones((1,), dtype=torch.int32),
        qo_indptr=torch.tensor([0, 1], dtype=torch.int32),
        softmax_scale=1.0,
        validate=False,
    )


class SparseMLATSProbe(KernelProbe):
    id = "sparse-mla-ts"
    entry_point = "flashinfer.attention.prims_ts.BatchSparseMLADecodePagedTSWrapper"
    also_called_as = ("get_prims_ts_sparse_mla_decode_workspace_size",)
    default_sms = (100, 103)
    summary = "SM10x sparse-MLA decode through the prims_ts BatchSparseMLADecodePagedTSWrapper (plan; experimental)"
    axes = (
        Axis("dtype", "fp8", mi.DTYPES, help="query dtype (q_dtype)"),
        Axis(
            "qk_rope_head_dim",
            mi.QK_ROPE_HEAD_DIM,
            (mi.QK_ROPE_HEAD_DIM, 0),
            help="the query's RoPE tail: 64 (D576) or 0 (D512)",
        ),
        Axis("topk", 2048, help="max_topk: the index width planned for"),
        Axis(
            "kv_format",
            "native",
            ("native", "fp8", "nvfp4", "nvfp4.fp8rope"),
            help="plan(kv_cache_format=...): the KV cache record (native: the query's dtype)",
        ),
    )

    def compiled_checks(self, entry: str) -> str | None:
        # The plan's kernel, loaded as a stand-in (jit:prims_ts_..._cute_dsl/...) or stopped at its compile.
        return COMPILE_UNCHECKED if "cute_dsl" in entry or entry.startswith("cute.compile") else None

    def prepare(
        self, entry: Callable[..., Any], sm: SM, heads: int, config: dict[str, Value], alternative: int = 0
    ) -> PreparedCall:
        plan = {
            "max_topk": int(config["topk"]),
            "max_q_len": 1,
            "packed_query": True,
            "q_dtype": mi.torch_dtype(str(config["dtype"])),
            "qk_rope_head_dim": int(config["qk_rope_head_dim"]),
            "kv_cache_format": str(config["kv_format"]),
        }
        return PreparedCall(
            _plan_and_run, {"wrapper_cls": entry, "heads": heads, "topk": int(config["topk"]), "plan": plan}
        )
