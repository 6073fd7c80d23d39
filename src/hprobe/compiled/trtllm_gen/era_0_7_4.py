"""trtllm-gen FMHA kernel selection for MLA decode, as flashinfer 0.7.4 ships it.

What changed since 0.7.2.post1 (era_0_7_2_post1), for the MLA decode calls ported:
- windows are a left and a right bound (`mLeftSlidingWindow`, `mRightSlidingWindow`)
  and chunked attention is 0 when off; `selectKernel` refuses dense MLA generation
  whose window does not cover the whole KV sequence, in new words, and no longer
  turns a binding window into a sliding-window mask (the launcher picks the mask);
- `isMlaGenKernel` asks RunnerParams::isMla() (fmhaRunnerParams.h), which reads as before.
The rest of what changed reaches no MLA call: `run()` tries a multi-wave KV split
first only where FLASHINFER_TRTLLM_GEN_MULTI_WAVE_KV_SPLIT is set and never for MLA
(`!isMlaGenKernel`), CGA for token-sparse MQA, NVFP4 K/V grouping in the GQA selector,
and the launcher's token-sparse MQA route.
"""

from __future__ import annotations

from hprobe.compiled.files import PARAMS
from hprobe.compiled.trtllm_gen import era_0_7_2_post1 as previous
from hprobe.compiled.trtllm_gen.era_0_6_12 import (
    KERNELS,
    LAUNCHER,
    RUNNER,
    Refusal,
    RunnerParams,
    SelectKernelParams,
    SparseMlaType,
)

FINGERPRINT: dict[str, dict[str, tuple[str, ...]]] = {
    KERNELS: {
        **previous.FINGERPRINT[KERNELS],
        "run": ("acef8d4ad9b18298",),  # tryRun, multi-wave first when opted in; else as before
        "tryRun": ("a3d05b1be99b55f4",),
        "fitsMultiCtasKvScratch": ("7febac9279747261",),
        "isMlaGenKernel": ("2f241058c0aead3b",),
        "computeCtaAndClusterConfig": ("373d8659571fcaff",),
        "selectKernel": ("3ed7a177d5d7216f",),
    },
    RUNNER: previous.FINGERPRINT[RUNNER],
    LAUNCHER: {
        "trtllm_paged_attention_launcher": ("9912d3d928713342",),
        "trtllm_paged_attention_decode": ("a6d1fecdb1f57e36",),
        "trtllm_paged_attention_decode_sparse_mla_dsv4": ("db377f4aef8c33b1",),
        "validateTrtllmGenWindowConfig": ("64c29c42e66bfcff",),
    },
    PARAMS: {"isMla": ("ed4cb20e5caaf5e2",), "isSparseMqa": ("f4a6a8056288107d",)},
}

CHUNKED_OFF = 0  # FlashInfer does not expose chunked attention; the launcher sets 0


class Selection(previous.Selection):
    def check_window(self, params: RunnerParams, select: SelectKernelParams) -> None:
        left, right = params.left_sliding_window, params.right_sliding_window
        if params.sparse_mla_type is SparseMlaType.NONE and not (
            (left == -1 or params.max_seq_len_kv <= left + 1) and right <= 0 and CHUNKED_OFF == 0
        ):
            raise Refusal(
                "selectKernel",
                "TRTLLM-GEN MLA generation requires a window that covers the whole KV sequence "
                f"(maxSeqLenKv={params.max_seq_len_kv}, leftSlidingWindow={left}, "
                f"rightSlidingWindow={right}, chunkedAttentionSize={CHUNKED_OFF}).",
                KERNELS,
                "TRTLLM-GEN MLA generation requires a window that covers",
            )
        # The caller supplies the final mask type: no sliding-window rewrite here.
