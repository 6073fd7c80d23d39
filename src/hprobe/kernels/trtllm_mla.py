"""MLA decode through `trtllm_batch_decode_with_kv_cache_mla`: dense (DeepSeek V3,
Kimi K2) and sparse top-k (DeepSeek V3.2), for every backend the release offers.

`backend="auto"` routes by SM (SM10x: trtllm-gen/cute-dsl, SM12x: XQA for dense,
the packed sparse path for top-k), so each backend is probed on its own as well.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hprobe.kernels import mla_inputs as mi
from hprobe.kernels.base import Axis, KernelProbe, Metadata, PreparedCall, Value
from hprobe.kernels.offers import missing_parameter
from hprobe.model.compiled import TRTLLM_GEN_DTYPES, TrtllmGenCall
from hprobe.model.sm import SM

TRTLLM_GEN_UNCHECKED = (
    "trtllm-gen selects a cubin by h_q inside compiled code "
    '("Missing TRTLLM-GEN kernel", "The numHeadsQ/numHeadsKv is not supported")'
)
CUTE_DSL_UNCHECKED = "cute-dsl compiles the kernel for the shape; compile-time limits are not seen on a CPU"
SPARSE_UNCHECKED = "the SM12x sparse binding dispatches by (h_q, top-k, tokens) in compiled code"


def unchecked_for(entry: str) -> str | None:
    if entry.startswith("get_trtllm_gen_fmha_module"):
        return TRTLLM_GEN_UNCHECKED
    if "cute" in entry:
        return CUTE_DSL_UNCHECKED
    if "sparse_mla_sm120" in entry:
        return SPARSE_UNCHECKED
    return None


class TrtllmMLAProbe(KernelProbe):
    id = "trtllm-mla"
    entry_point = "flashinfer.mla.trtllm_batch_decode_with_kv_cache_mla"
    query_argument = ("query", 0)
    default_sms = (100, 103, 120, 121)
    summary = "MLA decode, dense or sparse top-k (trtllm-gen, cute-dsl, XQA, SM12x sparse)"
    axes = (
        Axis(
            "backend",
            "auto",
            ("auto", "trtllm-gen", "cute-dsl", "xqa", "sparse", "cake"),
            sweep=True,
            help="flashinfer backend",
        ),
        Axis("dtype", "bf16", mi.DTYPES, help="query and KV cache dtype"),
        Axis("topk", 0, help="sparse_mla_top_k; 0 = dense MLA"),
        Axis("q_len", 1, help="query tokens per request (MTP)", witnesses=(1,)),
        Axis("page_size", 64, help="KV cache page size"),
        Axis(
            "kv_lora_rank", mi.KV_LORA_RANK, mi.KV_LORA_RANKS, help="latent width (256: models with the smaller latent)"
        ),
        # A NoPE model (GLM-5.3-Flash) hands the query and cache without a
        # rope part, and its own qk_nope_head_dim: releases that serve it route
        # it by those arguments (0.7.x `nope_mla_dimensions`).
        Axis(
            "qk_nope_head_dim",
            mi.QK_NOPE_HEAD_DIM,
            mi.QK_NOPE_HEAD_DIMS,
            help="qk_nope_head_dim passed (256: NoPE MLA with qk_rope_head_dim 0)",
        ),
        Axis(
            "qk_rope_head_dim",
            mi.QK_ROPE_HEAD_DIM,
            (mi.QK_ROPE_HEAD_DIM, 0),
            help="the query's and cache's rope part (0: NoPE MLA)",
        ),
        # Engines pass the per-token top-k lengths where the NoPE path needs
        # them (0.7.x refuses them elsewhere, and their absence there).
        Axis("topk_lens", 0, (0, 1), help="1 = pass sparse_mla_top_k_lens, as engines do for a NoPE model"),
        # Releases that take the buffer accept it only where a trtllm-gen
        # runner is selected: `auto` that falls to cute-dsl raises, so an
        # engine passing it crashes on counts the plain call serves.
        Axis("kv_counter", 0, (0, 1), help="1 = pass multi_ctas_kv_counter_buffer, as engines that keep one do"),
    )

    dispatch_keywords = {
        "backend": "backend",
        "sparse_mla_top_k": "topk",
        "multi_ctas_kv_counter_buffer": "kv_counter",
        "sparse_mla_top_k_lens": "topk_lens",
    }

    def compiled_checks(self, entry: str) -> str | None:
        return unchecked_for(entry)

    compiled_launchers = ("get_trtllm_gen_fmha_module",)

    def compiled_call(self, entry: str, config: dict[str, Value]) -> TrtllmGenCall | None:
        # trtllm_batch_decode_with_kv_cache_mla hands trtllm-gen the query as
        # [tokens, h_q, rank + rope] (rope 0 for a NoPE model), the cache of the same dtype, a BF16 output
        # of rank wide, and sparse_mla_top_k as given.
        if not entry.startswith(self.compiled_launchers):
            return None
        dtype = TRTLLM_GEN_DTYPES[str(config["dtype"])]
        rank = int(config["kv_lora_rank"])
        return TrtllmGenCall(
            "trtllm_paged_attention_decode",
            dtype,
            dtype,
            TRTLLM_GEN_DTYPES["bf16"],
            rank + int(config["qk_rope_head_dim"]),
            rank,
            int(config["q_len"]),
            int(config["page_size"]),
            int(config["topk"]),
        )

    def metadata(
        self, session: Any, entry: Callable[..., Any], sm: SM, config: dict[str, Value], heads: list[int]
    ) -> Metadata | None:
        """`supported_mla_layer_dimensions` where the release publishes it: the
        head counts it lists for this latent width, beside the SM claim."""
        claim = super().metadata(session, entry, sm, config, heads)
        # The list describes the dense trtllm-gen (SM10x) MLA layers.
        if sm.major != 10 or config["backend"] not in ("auto", "trtllm-gen") or int(config["topk"]):
            return claim
        layers = session.resolve("flashinfer.mla.supported_mla_layer_dimensions") or session.resolve(
            "flashinfer.mla._core.supported_mla_layer_dimensions"
        )
        if not isinstance(layers, (list, tuple)):
            return claim
        rank, rope = int(config["kv_lora_rank"]), int(config["qk_rope_head_dim"])
        listed = sorted(
            {
                layer.num_heads
                for layer in layers
                if getattr(layer.head_dimensions, "kv_lora_rank", None) == rank
                and getattr(layer.head_dimensions, "qk_rope_head_dim", rope) == rope
            }
        )
        return Metadata(
            "supported_mla_layer_dimensions", claim.sm_supported if claim else None, [h for h in heads if h in listed]
        )

    def families(self, config: dict[str, Value] | None = None) -> set[int]:
        # trtllm-gen and cute-dsl are Blackwell (SM10x) kernels; XQA MLA and the
        # packed sparse path are SM12x kernels.
        by_backend = {"trtllm-gen": {10}, "cute-dsl": {10}, "xqa": {12}, "sparse": {12}}
        return by_backend.get(str((config or {}).get("backend")), super().families())

    def input_alternatives(self, entry: Callable[..., Any], config: dict[str, Value]) -> int:
        return len(mi.WORKSPACE_DTYPES)

    def offered(self, entry: Callable[..., Any], config: dict[str, Value]) -> str | None:
        if int(config["kv_counter"]) and (reason := missing_parameter(entry, "multi_ctas_kv_counter_buffer")):
            return reason
        if int(config["topk_lens"]) and (reason := missing_parameter(entry, "sparse_mla_top_k_lens")):
            return reason
        return None

    def swept_needlessly(self, config: dict[str, Value]) -> bool:
        return config["backend"] == "sparse" and int(config["topk"]) == 0

    def prepare(
        self, entry: Callable[..., Any], sm: SM, heads: int, config: dict[str, Value], alternative: int = 0
    ) -> PreparedCall:
        backend, dtype = str(config["backend"]), str(config["dtype"])
        topk, q_len, page, rank, rope = (
            int(config["topk"]),
            int(config["q_len"]),
            int(config["page_size"]),
            int(config["kv_lora_rank"]),
            int(config["qk_rope_head_dim"]),
        )
        # The SM12x sparse path reads a packed uint8 pool; every other path a dense one.
        packed = topk > 0 and sm.major == 12 and backend in ("auto", "sparse")
        kwargs: dict[str, Any] = {
            "query": mi.query(heads, dtype, q_len, rank + rope),
            "kv_cache": mi.paged_kv(dtype, page, mi.SM120_V32_PACKED_BYTES if packed else 0, rank, rope),
            "workspace_buffer": mi.workspace(mi.WORKSPACE_DTYPES[alternative]),
            "qk_nope_head_dim": int(config["qk_nope_head_dim"]),
            "kv_lora_rank": rank,
            "qk_rope_head_dim": rope,
            "block_tables": mi.block_tables(q_len, topk, page),
            "seq_lens": mi.seq_lens((1, q_len), topk) if packed else mi.seq_lens(),
            "max_seq_len": mi.SEQ_LEN,
        }
        if topk:
            kwargs["sparse_mla_top_k"] = topk
        if int(config["kv_counter"]):
            kwargs["multi_ctas_kv_counter_buffer"] = mi.kv_counter()
        if int(config["topk_lens"]):
            # One length per query token, as engines hand it ([batch * q_len]).
            kwargs["sparse_mla_top_k_lens"] = mi.seq_lens((q_len,), topk or mi.SEQ_LEN)
        if backend != "auto":
            kwargs["backend"] = backend
        return PreparedCall(entry, kwargs)
