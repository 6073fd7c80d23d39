"""MLA decode through `xqa_batch_decode_with_kv_cache_mla` (SM120/121 XQA kernel)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hprobe.kernels import mla_inputs as mi
from hprobe.kernels.base import Axis, KernelProbe, PreparedCall, Value
from hprobe.model.sm import SM


class XqaMLAProbe(KernelProbe):
    id = "xqa-mla"
    entry_point = "flashinfer.mla.xqa_batch_decode_with_kv_cache_mla"
    query_argument = ("query", 0)
    default_sms = (120, 121)
    summary = "MLA decode on the SM12x XQA kernel (dense, q_len 1)"
    axes = (
        Axis("dtype", "bf16", mi.DTYPES, help="query and KV cache dtype"),
        Axis("page_size", 64, help="KV cache page size"),
    )

    def prepare(
        self, entry: Callable[..., Any], sm: SM, heads: int, config: dict[str, Value], alternative: int = 0
    ) -> PreparedCall:
        dtype, page = str(config["dtype"]), int(config["page_size"])
        return PreparedCall(
            entry,
            {
                "query": mi.query(heads, dtype),
                "kv_cache": mi.paged_kv(dtype, page),
                "workspace_buffer": mi.workspace(),
                "qk_nope_head_dim": mi.QK_NOPE_HEAD_DIM,
                "kv_lora_rank": mi.KV_LORA_RANK,
                "qk_rope_head_dim": mi.QK_ROPE_HEAD_DIM,
                "block_tables": mi.block_tables(1, 0, page),
                "seq_lens": mi.seq_lens(),
                "max_seq_len": mi.SEQ_LEN,
            },
        )
