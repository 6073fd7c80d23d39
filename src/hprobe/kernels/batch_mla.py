"""MLA attention through `BatchMLAPagedAttentionWrapper` (`plan` then `run`), per backend.

fa2/fa3 plan a schedule in compiled code and hand it, unread by Python, to the
compiled run: the plan call is let through so that `run`'s validators answer
too. From 0.7.1 the wrapper also plans the packed backends (trtllm-gen, xqa,
cute-dsl) and takes packed query/KV tensors; releases differ in which layout
and which plan form a backend takes, so the probe tries the conventions in
turn (see `input_alternatives`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from hprobe.kernels import mla_inputs as mi
from hprobe.kernels.base import Axis, KernelProbe, PreparedCall, Value
from hprobe.model.compiled import PENDING_SELECTION
from hprobe.model.sm import SM

# Input conventions, tried in order: how the plan and run calls are spelled.
#   split-legacy: the 0.6.x form -- split q_nope/q_pe and ckv/kpe; cutlass runs without a plan
#   packed:       one [tokens, heads, rank+64] query and one KV cache, planned as packed (0.7.x)
#   split:        split tensors, planned (cutlass in 0.7.x)
_LAYOUTS = ("split-legacy", "packed", "split")


@lru_cache(maxsize=8)
def _run_parameters(wrapper_cls: Any) -> Any:
    """The parameters `run` takes: read once per release, not once per call."""
    return inspect.signature(wrapper_cls.run).parameters


@lru_cache(maxsize=16)
def _conventions(wrapper_cls: Any, dtype: str, layout: str = "auto") -> tuple[tuple[str, str], ...]:
    """(layout, query dtype) pairs to try. The packed and split layouts are
    spelled with plan(query_layout=...) (0.7.x): a plan() without it takes the
    0.6.x form only, and trying the others would fail on the keyword. Beside
    an fp8 KV cache the query is bf16 in some releases and fp8 in others.
    `layout` other than auto: that input form only, answered on its own."""
    layouts: tuple[str, ...] = (
        _LAYOUTS if "query_layout" in inspect.signature(wrapper_cls.plan).parameters else _LAYOUTS[:1]
    )
    if layout != "auto":
        layouts = tuple(name for name in layouts if name == layout)
    q_dtypes = ("bf16", "fp8") if dtype == "fp8" else (dtype,)
    return tuple((name, q) for q in q_dtypes for name in layouts)


# Inputs that do not depend on h_q are made once: a sweep makes ~10,000 calls.
@lru_cache(maxsize=16)
def _kv_views(dtype: str, page_size: int, rank: int, rope: int) -> tuple[Any, Any, Any]:
    """The paged KV cache [pages, page_size, rank + rope] and its ckv/kpe parts (kpe empty for NoPE)."""
    kv = mi.paged_kv(dtype, page_size, 0, rank, rope)[:, 0]
    return kv, kv[..., :rank], kv[..., rank:]


@lru_cache(maxsize=8)
def _plan_indices(pages: int) -> tuple[Any, Any, Any]:
    """qo_indptr, kv_indptr and kv_indices of one request over `pages` pages."""
    import torch

    return (
        torch.tensor([0, 1], dtype=torch.int32),
        torch.tensor([0, pages], dtype=torch.int32),
        torch.arange(pages, dtype=torch.int32),
    )


@lru_cache(maxsize=8)
def _page_table(pages: int) -> Any:
    import torch

    return torch.zeros(1, pages, dtype=torch.int32)


def _plan_and_run(
    wrapper_cls: Any,
    backend: str,
    heads: int,
    dtype: str,
    q_dtype: str,
    page_size: int,
    rank: int,
    layout: str,
    rope: int,
) -> None:
    ws = mi.workspace()
    kwargs = {} if backend == "auto" else {"backend": backend}
    wrapper = wrapper_cls(ws, **kwargs)
    kv, ckv, kpe = _kv_views(dtype, page_size, rank, rope)
    # Split query halves are their own contiguous tensors, as callers pass them
    # (a NoPE model hands a zero-width rope part).
    q_nope, q_pe = mi.zeros((1, heads, rank), q_dtype), mi.zeros((1, heads, rope), q_dtype)
    pages = mi.pages_for(page_size)
    # fp8 KV scales where run() takes them (0.7.x); 0.6.13's run() has none and
    # would fail on the keyword, not on heads.
    takes = _run_parameters(wrapper_cls)
    scales = {k: 1.0 for k in ("ckv_scale", "kpe_scale") if k in takes} if dtype == "fp8" else {}
    if layout == "split-legacy" and backend == "cutlass":
        wrapper.run(q_nope, q_pe, ckv, kpe, kv_len=mi.seq_lens(), page_table=_page_table(pages))
        return
    plan_args = (
        *_plan_indices(pages),
        mi.seq_lens(),
        heads,
        rank,
        rope,
        page_size,
        False,
        # DeepSeek's softmax scale, 1/sqrt(qk_nope + qk_rope) = 1/sqrt(192): what
        # callers pass, and what 0.7.4's cutlass plan contract requires (:189).
        1.0 / ((mi.QK_NOPE_HEAD_DIM + rope) ** 0.5),
        mi.torch_dtype(q_dtype),
        mi.torch_dtype(dtype),
    )
    if layout == "split-legacy":
        wrapper.plan(*plan_args)
        wrapper.run(q_nope, q_pe, ckv, kpe, **scales)
        return
    wrapper.plan(*plan_args, query_layout=layout, kv_cache_layout=layout)
    extra = {"kv_len": mi.seq_lens(), "page_table": _page_table(pages)} if backend == "cutlass" else {}
    if backend in ("xqa", "trtllm-gen") and "out" in takes:
        # 0.7.4's planned XQA run, and 0.7.x's trtllm-gen run, refuse to
        # allocate their output: callers pass it.
        extra["out"] = mi.zeros((1, heads, rank), "bf16")
    if layout == "packed":
        query = mi.zeros((1, heads, rank + rope), q_dtype)
        wrapper.run(query=query, kv_cache=kv, **scales, **extra)
    else:
        wrapper.run(query=(q_nope, q_pe), kv_cache=(ckv, kpe), **scales, **extra)


class BatchMLAProbe(KernelProbe):
    id = "batch-mla"
    entry_point = "flashinfer.mla.BatchMLAPagedAttentionWrapper"
    default_sms = (90, 100, 103, 120, 121)
    summary = (
        "MLA attention via BatchMLAPagedAttentionWrapper plan/run (fa2, fa3, cutlass; trtllm-gen, xqa, cute-dsl from "
        "0.7.1)"
    )
    pass_through_calls = ("plan",)

    def pending_selection(self, entry: str) -> str | None:
        # 0.7.x's trtllm-gen backend plans and launches through trtllm-gen's
        # FMHA, whose kernel selection decides the count: no port here follows
        # the wrapper's call into it.
        if entry.startswith("get_trtllm_gen_fmha_module"):
            return f"{PENDING_SELECTION}: hprobe follows no batch-mla call into it"
        return None

    axes = (
        Axis(
            "backend",
            "auto",
            ("auto", "fa2", "fa3", "cutlass", "trtllm-gen", "xqa", "cute-dsl"),
            sweep=True,
            help="wrapper backend",
        ),
        Axis("dtype", "bf16", mi.DTYPES, help="KV cache dtype (fp8: the query dtype the release requires beside it)"),
        Axis("page_size", 64, help="KV cache page size"),
        Axis(
            "kv_lora_rank", mi.KV_LORA_RANK, mi.KV_LORA_RANKS, help="latent width (256: models with the smaller latent)"
        ),
        Axis(
            "qk_rope_head_dim",
            mi.QK_ROPE_HEAD_DIM,
            (mi.QK_ROPE_HEAD_DIM, 0),
            help="the query's and cache's rope part (0: NoPE MLA, plan(head_dim_kpe=0))",
        ),
        # The input form a caller uses. auto: the first of them under which any
        # call reaches compiled code; a named form is answered on its own.
        Axis(
            "layout",
            "auto",
            ("auto", *_LAYOUTS),
            help=(
                "query/KV form: split-legacy (0.6.x), packed or split (plan(query_layout=...), 0.7.x); auto: the first "
                "that reaches compiled code"
            ),
        ),
    )

    def families(self, config: dict[str, Value] | None = None) -> set[int]:
        # fa3 is a Hopper (SM90) kernel, cutlass and trtllm-gen SM100 kernels, XQA an SM12x one.
        by_backend = {"fa3": {9}, "cutlass": {10}, "trtllm-gen": {10}, "xqa": {12}}
        return by_backend.get(str((config or {}).get("backend")), super().families())

    def compiled_checks(self, entry: str) -> str | None:
        if entry.endswith(".run"):
            return "the planned schedule (computed by the compiled plan) is not executed on a CPU"
        if "trtllm_gen" in entry:
            return "trtllm-gen selects a cubin by h_q inside compiled code"
        return None

    def input_alternatives(self, entry: Callable[..., Any], config: dict[str, Value]) -> int:
        return len(_conventions(entry, str(config["dtype"]), str(config["layout"])))

    def offered(self, entry: Callable[..., Any], config: dict[str, Value]) -> str | None:
        if config["layout"] != "auto" and not _conventions(entry, str(config["dtype"]), str(config["layout"])):
            return f"this release's plan() has no query_layout parameter: it takes the {_LAYOUTS[0]} form only"
        return None

    def prepare(
        self, entry: Callable[..., Any], sm: SM, heads: int, config: dict[str, Value], alternative: int = 0
    ) -> PreparedCall:
        dtype = str(config["dtype"])
        # A witness of another dtype is traced under the index of this one's convention.
        conventions = _conventions(entry, dtype, str(config.get("layout", "auto")))
        layout, q_dtype = conventions[alternative % len(conventions)]
        return PreparedCall(
            _plan_and_run,
            {
                "wrapper_cls": entry,
                "backend": str(config["backend"]),
                "heads": heads,
                "dtype": dtype,
                "q_dtype": q_dtype,
                "page_size": int(config["page_size"]),
                "rank": int(config["kv_lora_rank"]),
                "layout": layout,
                "rope": int(config["qk_rope_head_dim"]),
            },
        )
