"""DeepSeek V4 sparse-MLA decode: `trtllm_batch_decode_sparse_mla_dsv4`.

Up to 0.6.13 the entry point has one path (TRTLLM-GEN, no SM dispatch in
Python). From 0.6.14 it dispatches SM10x to TRTLLM-GEN and SM12x to a packed
sparse backend with its own arguments (`swa_topk_lens`, uint8 KV pools). The
inputs follow the loaded signature and the target SM.
"""

from __future__ import annotations

import inspect
from functools import cached_property
from typing import Any, Callable

from ..sm import SM
from .base import KernelProbe, PreparedCall

HEAD_DIM = 512  # DSv4 query and KV head dim
SM120_PACKED_BYTES = 584  # bytes per token of the SM12x packed FP8 KV pool
SWA_TOPK = 128  # the fixed sliding-window entries at the front of every index row
PAGE_SIZE = 64
NUM_PAGES = 2


class DSv4SparseMLAProbe(KernelProbe):
    id = "dsv4-sparse-mla"
    entry_point = "flashinfer.mla._core.trtllm_batch_decode_sparse_mla_dsv4"
    default_sms = (100, 103, 120, 121)
    summary = "DeepSeek V4 sparse-MLA decode (SM10x TRTLLM-GEN, SM12x packed sparse path)"

    @cached_property
    def _torch(self) -> Any:
        import torch

        return torch

    @cached_property
    def _shared(self) -> dict[str, Any]:
        """Tensors that do not depend on h_q, made once."""
        torch = self._torch
        return {
            "kv_bf16": torch.zeros(NUM_PAGES, 1, PAGE_SIZE, HEAD_DIM, dtype=torch.bfloat16),
            "kv_packed": torch.zeros(NUM_PAGES, PAGE_SIZE, SM120_PACKED_BYTES, dtype=torch.uint8),
            "indices": torch.zeros(1, SWA_TOPK, dtype=torch.int32),
            "lens": torch.full((1,), SWA_TOPK, dtype=torch.int32),
            "seq_lens": torch.full((1,), SWA_TOPK, dtype=torch.int32),
            # Large enough for the split-K scratch of 256 heads, so the path
            # that carves scratch out of the workspace is the one exercised.
            "workspace": torch.zeros(4 * 2**20, dtype=torch.uint8),
        }

    def prepare(self, entry: Callable[..., Any], sm: SM, heads: int) -> PreparedCall:
        torch = self._torch
        shared = self._shared
        params = inspect.signature(entry).parameters
        has_sm12x_path = "swa_topk_lens" in params
        query = torch.zeros(1, 1, heads, HEAD_DIM, dtype=torch.bfloat16)
        sinks = torch.zeros(heads, dtype=torch.float32)
        if has_sm12x_path and sm.major == 12:
            kwargs = {
                "query": query,
                "swa_kv_cache": shared["kv_packed"],
                "workspace_buffer": shared["workspace"],
                "sparse_indices": shared["indices"],
                "swa_topk_lens": shared["lens"],
                "sinks": sinks,
            }
        else:
            kwargs = {
                "query": query,
                "swa_kv_cache": shared["kv_bf16"],
                "workspace_buffer": shared["workspace"],
                "sparse_indices": shared["indices"],
                "compressed_kv_cache": shared["kv_bf16"],
                "sparse_topk_lens": shared["lens"],
                "seq_lens": shared["seq_lens"],
                "sinks": sinks,
            }
        kwargs = {k: v for k, v in kwargs.items() if k in params}
        return PreparedCall(entry, kwargs)
