"""GQA/MHA decode on CUDA cores: `BatchDecodeWithPagedKVCacheWrapper` with
`use_tensor_cores=False` (its constructor's default), planned and run as an
engine does for one decode token per request.

The plan is compiled code (a JIT module built from the release's
`batch_decode.cu`): its checks over the head counts it is handed -- the group
size `num_qo_heads / num_kv_heads` its dispatch instantiates -- are read from
the release's C++ (compiled/gqa_decode.py). The probe lets the plan through
with its arguments kept, so that `run`'s Python checks run too; the boundary
is the launch in `run`.

h_q is the axis that varies; `kv_heads` is fixed per row, so a row over
`--kv-heads 1` reads as the group sizes the kernel takes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hprobe.kernels import mla_inputs as mi
from hprobe.kernels.base import Axis, KernelProbe, PreparedCall, Value
from hprobe.model.sm import SM

# dtype axis -> (query dtype, KV cache dtype): an fp8 cache beside a bf16 query.
DTYPES = {"bf16": ("bf16", "bf16"), "fp16": ("fp16", "fp16"), "fp8": ("bf16", "fp8")}
HEAD_DIMS = (64, 128, 256)
# The tensor-core path: the prefill module, whose compiled plan hprobe does not read.
TENSOR_CORE_MODULE = "get_batch_prefill_module."
TENSOR_CORE_PLAN_UNREAD = (
    "the tensor-core plan's own checks (the prefill template's compiled plan) and the kernel's compile-time limits are "
    "not read"
)


def _plan_and_run(
    wrapper_cls: Any, heads: int, kv_heads: int, head_dim: int, dtype: str, page_size: int, tensor_cores: bool
) -> None:
    import torch

    q_dtype, kv_dtype = DTYPES[dtype]
    wrapper = wrapper_cls(mi.workspace(), "NHD", use_tensor_cores=tensor_cores)
    pages = mi.pages_for(page_size)
    wrapper.plan(
        torch.tensor([0, pages], dtype=torch.int32),
        torch.arange(pages, dtype=torch.int32),
        torch.tensor([page_size], dtype=torch.int32),
        heads,
        kv_heads,
        head_dim,
        page_size,
        q_data_type=mi.torch_dtype(q_dtype),
        kv_data_type=mi.torch_dtype(kv_dtype),
    )
    wrapper.run(
        mi.zeros((1, heads, head_dim), q_dtype),
        mi.zeros((pages, 2, page_size, kv_heads, head_dim), kv_dtype),
    )


class GqaDecodeProbe(KernelProbe):
    id = "gqa-decode"
    entry_point = "flashinfer.decode.BatchDecodeWithPagedKVCacheWrapper"
    default_sms = (90, 100, 103, 120, 121)
    summary = (
        "GQA/MHA decode on CUDA cores (BatchDecodeWithPagedKVCacheWrapper, use_tensor_cores=False): the group sizes "
        "its compiled plan dispatches"
    )
    # The compiled plan's checks are read from the release's C++ (compiled/gqa_decode.py).
    recorded_calls = ("plan",)
    # Engines' calls of this wrapper are not read yet: its count is not followed.
    engine_reading = False
    axes = (
        Axis("kv_heads", 1, help="KV heads per rank (h_q / kv_heads is the group size; 1: the row reads as groups)"),
        Axis("head_dim", 128, HEAD_DIMS, help="head dim of Q, K and V"),
        Axis("dtype", "bf16", tuple(DTYPES), help="query and KV cache dtype (fp8: e4m3 KV beside a bf16 query)"),
        Axis("page_size", 16, help="KV cache page size"),
        # Engines turn tensor cores on for the groups the CUDA-core dispatch
        # lacks: the prefill template, planned by its own compiled plan.
        Axis("tensor_cores", 0, (0, 1), help="1 = use_tensor_cores=True: the prefill template (fa2/fa3) serves decode"),
    )

    def families(self, config: dict[str, Value] | None = None) -> set[int]:
        # CUDA-core decode is compiled for whatever GPU runs it.
        return {9, 10, 12}

    def compiled_checks(self, entry: str) -> str | None:
        if entry.startswith(TENSOR_CORE_MODULE):
            return TENSOR_CORE_PLAN_UNREAD
        if entry.endswith(".run"):
            return "the kernel's compile-time limits for the head dim and dtypes (its JIT template) are not read"
        return None

    def prepare(
        self, entry: Callable[..., Any], sm: SM, heads: int, config: dict[str, Value], alternative: int = 0
    ) -> PreparedCall:
        return PreparedCall(
            _plan_and_run,
            {
                "wrapper_cls": entry,
                "heads": heads,
                "kv_heads": int(config["kv_heads"]),
                "head_dim": int(config["head_dim"]),
                "dtype": str(config["dtype"]),
                "page_size": int(config["page_size"]),
                "tensor_cores": bool(int(config["tensor_cores"])),
            },
        )
