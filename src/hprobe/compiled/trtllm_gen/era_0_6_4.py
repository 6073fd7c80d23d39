"""trtllm-gen FMHA kernel selection for MLA decode, as flashinfer 0.6.4 – 0.6.5 ship it.

0.6.6's selection (era_0_6_6); its launcher knows one MLA shape, 576/512: the decode
entry refuses a 320/256 (rank-256) call as non-MLA attention with differing head dims,
and sparse MLA is refused for any other shape. 0.6.6 let 320/256 through both checks.
"""

from __future__ import annotations

from hprobe.compiled.trtllm_gen import era_0_6_6 as later
from hprobe.compiled.trtllm_gen.era_0_6_12 import LAUNCHER, FmhaCall, Refusal, RunnerParams

FINGERPRINT: dict[str, dict[str, tuple[str, ...]]] = {
    **later.FINGERPRINT,
    LAUNCHER: {
        "trtllm_paged_attention_launcher": ("6e59249e7ad1dc8c",),
        "trtllm_paged_attention_decode": ("e51355a5470e4fd0",),
    },
}


class Selection(later.Selection):
    def _decode_checks(self, call: FmhaCall) -> None:
        head_v = call.head_dim_q  # key_cache == value_cache for MLA: v's last dim is q's
        if not ((head_v == 576 and call.head_dim_o == 512) or head_v == call.head_dim_o):
            raise Refusal(
                "trtllm_paged_attention_decode",
                f"head_dim_v and head_dim_o must be the same for non-MLA attention, got {head_v} and {call.head_dim_o}",
                LAUNCHER,
                "head_dim_v and head_dim_o must be the same for non-MLA attention, got",
            )

    def _launcher_params(
        self, call: FmhaCall, max_kv_len: int, page_size: int, window_left: int, dynamic_sparse: bool
    ) -> RunnerParams:
        if not ((call.head_dim_q == 576 and call.head_dim_o == 512) or call.sparse_mla_top_k <= 0):
            raise Refusal("trtllm_paged_attention_launcher", "Only decode MLA supports sparse MLA", LAUNCHER)
        return super()._launcher_params(call, max_kv_len, page_size, window_left, dynamic_sparse)
