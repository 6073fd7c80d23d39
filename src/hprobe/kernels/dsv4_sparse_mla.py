"""DeepSeek V4 sparse-MLA decode: `trtllm_batch_decode_sparse_mla_dsv4`.

Up to 0.6.13 the entry point has one path (TRTLLM-GEN, no SM dispatch in
Python). From 0.6.14 it dispatches SM10x to TRTLLM-GEN and SM12x to a packed
sparse backend with its own arguments (`swa_topk_lens`, uint8 KV pools). The
inputs follow the loaded signature and the target SM.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import cached_property, lru_cache
from typing import Any

from hprobe.kernels import mla_inputs as mi
from hprobe.kernels.base import Axis, KernelProbe, Metadata, PreparedCall, Value
from hprobe.kernels.offers import missing_parameter, sm120_decode_claim
from hprobe.model.compiled import TRTLLM_GEN_DTYPES, TrtllmGenCall
from hprobe.model.sm import SM

HEAD_DIM = 512  # DSv4 query and KV head dim
# Bytes per token of the SM12x packed KV pools: FP8 (all releases with the
# path) and NVFP4 (0.7.x, `kv_cache_format="nvfp4"`).
SM120_PACKED_BYTES = {"fp8": 584, "nvfp4": 384}
SWA_TOPK = 128  # the fixed sliding-window entries at the front of every index row
PAGE_SIZE = 64
NUM_PAGES = 2


@lru_cache(maxsize=8)
def _parameters(entry: Callable[..., Any]) -> Any:
    return inspect.signature(entry).parameters


class DSv4SparseMLAProbe(KernelProbe):
    id = "dsv4-sparse-mla"
    entry_point = "flashinfer.mla._core.trtllm_batch_decode_sparse_mla_dsv4"
    query_argument = ("query", 0)
    default_sms = (100, 103, 120, 121)
    summary = "DeepSeek V4 sparse-MLA decode (SM10x TRTLLM-GEN, SM12x packed sparse path)"
    axes = (
        Axis(
            "backend",
            "auto",
            ("auto", "trtllm-gen", "cute-dsl", "sparse", "cake"),
            help="flashinfer backend (0.7.x; cake: 0.7.2+)",
        ),
        Axis("kv_format", "fp8", ("fp8", "nvfp4"), help="SM12x packed KV cache format (nvfp4: 0.7.x)"),
        # SM10x: the query and both KV pools share one dtype (0.7.4 mla/_core.py:1005, 1075).
        Axis("dtype", "bf16", mi.DTYPES, help="query dtype, and the SM10x KV pools' (fp8: FP8 E4M3 throughout)"),
        # Two input forms on SM12x, each answered on its own (never the first that
        # reaches compiled code): packed uint8 rows, or caches of the query's
        # dtype, 512 wide (0.7.4 mla/_core.py:1388-1401 reads both).
        Axis(
            "kv_pool",
            "packed",
            ("packed", "unpacked"),
            help="SM12x KV pools: packed uint8 rows, or unpacked caches of the query's dtype",
        ),
    )

    def offered(self, entry: Callable[..., Any], config: dict[str, Value]) -> str | None:
        # Only the signature decides whether the option exists at all; which
        # values a release takes is probed (see matrix: refused by name = absent).
        if config["backend"] != "auto" and (reason := missing_parameter(entry, "backend")):
            return reason
        if config["kv_format"] != "fp8" and (reason := missing_parameter(entry, "kv_cache_format")):
            return reason
        return None

    def metadata(
        self, session: Any, entry: Callable[..., Any], sm: SM, config: dict[str, Value], heads: list[int]
    ) -> Metadata | None:
        """On SM12x, where the release publishes it (0.7.x), the h_q its DSv4
        decode kernels are claimed for in this KV format (the cake NVFP4 list
        for backend=cake), beside the SM claim."""
        claim = super().metadata(session, entry, sm, config, heads)
        if sm.major == 12 and config["backend"] == "cake" and config["kv_format"] == "nvfp4":
            listed = session.resolve("flashinfer.mla.cake_sparse_mla_sm120_dsv4_nvfp4_supported_heads")
            if listed is None:
                return claim
            return Metadata(
                "cake_sparse_mla_sm120_dsv4_nvfp4_supported_heads()",
                claim.sm_supported if claim else None,
                [h for h in heads if h in set(listed())],
            )
        if sm.major != 12 or config["backend"] not in ("auto", "sparse"):
            return claim
        decode = sm120_decode_claim(session, "dsv4", str(config["kv_format"]), heads, SWA_TOPK, 1, PAGE_SIZE)
        if decode is None:
            return claim
        return Metadata(
            f"supported_sparse_mla_sm120_configs(kv_cache_format={config['kv_format']!r}) dsv4 decode kernels",
            claim.sm_supported if claim else None,
            decode,
        )

    def built_for(self, entry: str) -> set[int] | None:
        # trtllm-gen's FMHA cubins are the SM10x (Blackwell datacenter) kernels.
        return {10} if entry.startswith("get_trtllm_gen_fmha_module") else None

    compiled_launchers = ("get_trtllm_gen_fmha_module",)

    def compiled_call(self, entry: str, config: dict[str, Value]) -> TrtllmGenCall | None:
        # The SM10x trtllm-gen path: a query and pools of one dtype, 512 wide, a
        # BF16 output, and top-k the width of the index rows (SWA_TOPK here).
        if not entry.startswith(self.compiled_launchers) or config["kv_format"] != "fp8":
            return None
        dtype = TRTLLM_GEN_DTYPES[str(config["dtype"])]
        return TrtllmGenCall(
            "trtllm_paged_attention_decode_sparse_mla_dsv4",
            dtype,
            dtype,
            TRTLLM_GEN_DTYPES["bf16"],
            HEAD_DIM,
            HEAD_DIM,
            1,
            PAGE_SIZE,
            SWA_TOPK,
        )

    def compiled_checks(self, entry: str) -> str | None:
        if entry.startswith("get_trtllm_gen_fmha_module"):
            return 'trtllm-gen picks a cubin by head count inside compiled code ("Missing TRTLLM-GEN kernel")'
        if "sparse_mla_sm120" in entry:
            return "the SM12x binding dispatches decode vs paged kernels by (h_q, top-k, tokens) in compiled code"
        return None

    @cached_property
    def _torch(self) -> Any:
        import torch

        return torch

    @cached_property
    def _shared(self) -> dict[str, Any]:
        """Tensors that do not depend on h_q, made once."""
        torch = self._torch
        return {
            "kv": {
                name: torch.zeros(NUM_PAGES, 1, PAGE_SIZE, HEAD_DIM, dtype=mi.torch_dtype(name)) for name in mi.DTYPES
            },
            "kv_packed": {
                fmt: torch.zeros(NUM_PAGES, PAGE_SIZE, size, dtype=torch.uint8)
                for fmt, size in SM120_PACKED_BYTES.items()
            },
            "kv_nvfp4": torch.zeros(NUM_PAGES, 1, PAGE_SIZE, SM120_PACKED_BYTES["nvfp4"], dtype=torch.uint8),
            "indices": torch.zeros(1, SWA_TOPK, dtype=torch.int32),
            "block_table": torch.zeros(1, 1, dtype=torch.int32),  # one compressed page (HCA)
            "lens": torch.full((1,), SWA_TOPK, dtype=torch.int32),
            "seq_lens": torch.full((1,), SWA_TOPK, dtype=torch.int32),
            # Large enough for the split-K scratch of 256 heads, so the path
            # that carves scratch out of the workspace is the one exercised.
            "workspace": mi.aligned(4 * 2**20, "uint8", zero=True),
        }

    def _hca(self, heads: int, dtype: str) -> dict[str, Any]:
        """backend="cute-dsl" from 0.7.x decodes through HCA: explicit metadata in
        place of sparse_indices and seq_lens (0.7.4 mla/_core.py:2296-2309), a
        query with caches of the same dtype (cute_dsl/attention/wrappers/
        batch_hca.py:489). The dtype is the variant's: whether HCA takes a BF16
        query is the release's to say (0.7.4 asks for FP8 E4M3, batch_hca.py:438).
        One request, one window of 128 rows, one compressed page."""
        shared = self._shared
        return {
            "query": mi.zeros((1, 1, heads, HEAD_DIM), dtype),
            "swa_kv_cache": shared["kv"][dtype],
            "compressed_kv_cache": shared["kv"][dtype],
            "workspace_buffer": shared["workspace"],
            "sparse_topk_lens": shared["lens"],
            "swa_topk_lens": shared["lens"],
            "hca_swa_indices": shared["indices"],
            "hca_compressed_block_tables": shared["block_table"],
            "hca_seq_lens": shared["seq_lens"],
            "sinks": mi.zeros((heads,), "fp32"),
        }

    def prepare(
        self, entry: Callable[..., Any], sm: SM, heads: int, config: dict[str, Value], alternative: int = 0
    ) -> PreparedCall:
        shared = self._shared
        params = _parameters(entry)
        has_sm12x_path = "swa_topk_lens" in params
        dtype = str(config["dtype"])
        query = mi.zeros((1, 1, heads, HEAD_DIM), dtype)
        sinks = mi.zeros((heads,), "fp32")
        # SM12x paths (auto, sparse, and cake from 0.7.2) read the packed pools.
        packed = has_sm12x_path and sm.major == 12 and config["backend"] in ("auto", "sparse", "cake")
        if packed:
            pool = (
                shared["kv_packed"][str(config["kv_format"])]
                if config["kv_pool"] == "packed"
                else shared["kv"][dtype][:, 0]
            )
            kwargs = {
                "query": query,
                "swa_kv_cache": pool,
                "workspace_buffer": shared["workspace"],
                "sparse_indices": shared["indices"],
                "swa_topk_lens": shared["lens"],
                "sinks": sinks,
            }
        else:
            # SM10x pools hold the query's dtype; an NVFP4 cache (0.7.2+ CAKE) is
            # opaque uint8 pages of 384-byte token records (cake_dsv4.py, the
            # NVFP4 cache ABI), HND [pages, 1, page_size, 384].
            pool = shared["kv_nvfp4"] if config["kv_format"] == "nvfp4" else shared["kv"][dtype]
            kwargs = {
                "query": query,
                "swa_kv_cache": pool,
                "workspace_buffer": shared["workspace"],
                "sparse_indices": shared["indices"],
                "compressed_kv_cache": pool,
                "sparse_topk_lens": shared["lens"],
                "seq_lens": shared["seq_lens"],
                "sinks": sinks,
            }
        if config["backend"] == "cute-dsl" and "hca_swa_indices" in params:
            kwargs = self._hca(heads, dtype)
        kwargs = {k: v for k, v in kwargs.items() if k in params}
        if config["backend"] != "auto":
            kwargs["backend"] = config["backend"]
        if config["kv_format"] != "fp8":
            kwargs["kv_cache_format"] = config["kv_format"]
        return PreparedCall(entry, kwargs)
