"""MLA attention through `BatchMLAPagedAttentionWrapper` (`plan` then `run`), per backend.

fa2/fa3 plan a schedule in compiled code and hand it, unread by Python, to the
compiled run: the plan call is let through so that `run`'s validators answer
too. The cutlass backend takes no plan; `run` alone validates its layout.
"""

from __future__ import annotations

from typing import Any, Callable

from ..sm import SM
from . import mla_inputs as mi
from .base import Axis, KernelProbe, PreparedCall, Value
from .offers import literal_choices


def _plan_and_run(wrapper_cls: Any, backend: str, heads: int, dtype: str, page_size: int) -> None:
    import torch

    ws = mi.workspace()
    kwargs = {} if backend == "auto" else {"backend": backend}
    wrapper = wrapper_cls(ws, **kwargs)
    q_dtype = mi.torch_dtype(dtype)
    kv = mi.paged_kv(dtype, page_size)[:, 0]  # [pages, page_size, 576]
    ckv, kpe = kv[..., : mi.KV_LORA_RANK], kv[..., mi.KV_LORA_RANK :]
    q_nope = mi.zeros((1, heads, mi.KV_LORA_RANK), dtype)
    q_pe = mi.zeros((1, heads, mi.QK_ROPE_HEAD_DIM), dtype)
    pages = mi.NUM_PAGES
    if backend == "cutlass":
        wrapper.run(q_nope, q_pe, ckv, kpe, kv_len=mi.seq_lens(), page_table=torch.zeros(1, pages, dtype=torch.int32))
        return
    wrapper.plan(
        torch.tensor([0, 1], dtype=torch.int32),
        torch.tensor([0, pages], dtype=torch.int32),
        torch.arange(pages, dtype=torch.int32),
        mi.seq_lens(),
        heads,
        mi.KV_LORA_RANK,
        mi.QK_ROPE_HEAD_DIM,
        page_size,
        False,
        1.0 / (mi.HEAD_DIM_QK**0.5),
        q_dtype,
        q_dtype,
    )
    scales = {"ckv_scale": 1.0, "kpe_scale": 1.0} if dtype == "fp8" else {}
    wrapper.run(q_nope, q_pe, ckv, kpe, **scales)


class BatchMLAProbe(KernelProbe):
    id = "batch-mla"
    entry_point = "flashinfer.mla.BatchMLAPagedAttentionWrapper"
    default_sms = (90, 100, 103, 120, 121)
    summary = "MLA attention via BatchMLAPagedAttentionWrapper plan/run (fa2, fa3, cutlass)"
    pass_through_calls = ("plan",)
    axes = (
        Axis("backend", "auto", ("auto", "fa2", "fa3", "cutlass"), sweep=True, help="wrapper backend"),
        Axis("dtype", "bf16", mi.DTYPES, help="query and KV cache dtype (fp8: fa3 only)"),
        Axis("page_size", 64, help="KV cache page size"),
    )

    def offered(self, entry: Callable[..., Any], config: dict[str, Value]) -> str | None:
        backend = config["backend"]
        if backend != "auto" and backend not in literal_choices(entry.__init__, "backend"):
            return f"this release's BatchMLAPagedAttentionWrapper has no backend {backend!r}"
        return None

    def families(self, config: dict[str, Value] | None = None) -> set[int]:
        # fa3 is a Hopper (SM90) kernel, cutlass the SM100 CUTLASS MLA kernel.
        by_backend = {"fa3": {9}, "cutlass": {10}}
        return by_backend.get(str((config or {}).get("backend")), super().families())

    def compiled_checks(self, entry: str) -> str | None:
        if entry.endswith(".run"):
            return "the planned schedule (computed by the compiled plan) is not executed on a CPU"
        return None

    def prepare(self, entry: Callable[..., Any], sm: SM, heads: int, config: dict[str, Value]) -> PreparedCall:
        return PreparedCall(
            _plan_and_run,
            {
                "wrapper_cls": entry,
                "backend": str(config["backend"]),
                "heads": heads,
                "dtype": str(config["dtype"]),
                "page_size": int(config["page_size"]),
            },
        )
