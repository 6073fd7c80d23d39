"""A call into compiled code, described by what compiled selection reads of it."""

from __future__ import annotations

from dataclasses import dataclass

# What a count waits on where trtllm-gen's selection decides it and is not
# evaluated (HeadResult.pending): compiled depth and the probes say it alike.
PENDING_SELECTION = "trtllm-gen's selection (compiled) not evaluated"

# Data_type names as trtllm-gen's kernel table spells them, by the probes' dtype names.
TRTLLM_GEN_DTYPES = {"bf16": "DATA_TYPE_BF16", "fp16": "DATA_TYPE_FP16", "fp8": "DATA_TYPE_E4M3"}


@dataclass(frozen=True)
class TrtllmGenCall:
    """A call into trtllm-gen's FMHA launcher (decode or context) as a probe's inputs make it:
    everything the kernel selection reads except h_q, the batch size and the KV
    length (top-k for DSv4), which compiled depth varies."""

    # trtllm_paged_attention_decode, trtllm_paged_attention_decode_sparse_mla_dsv4, trtllm_paged_attention_context
    launcher: str
    dtype_q: str  # Data_type names: DATA_TYPE_BF16, DATA_TYPE_E4M3
    dtype_kv: str
    dtype_o: str
    head_dim_q: int  # query.size(-1): 576 for DeepSeek-style MLA, 512 for DSv4
    head_dim_o: int  # out.size(-1)
    q_len: int
    page_size: int  # kv_cache.size(-2); the sparse paths select with 1
    sparse_mla_top_k: int  # 0: dense
    # GQA/MHA: the KV heads the call hands over (h_q / kv_heads is the group);
    # 0: MLA, one latent KV head.
    kv_heads: int = 0

    @property
    def context(self) -> bool:
        return self.launcher == "trtllm_paged_attention_context"

    @property
    def dsv4(self) -> bool:
        return self.launcher == "trtllm_paged_attention_decode_sparse_mla_dsv4"
