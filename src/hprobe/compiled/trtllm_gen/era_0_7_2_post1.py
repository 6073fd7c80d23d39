"""trtllm-gen FMHA kernel selection for MLA decode, as flashinfer 0.7.2.post1 ships it.

What changed since 0.7.2 (era_0_7_2): `computeCtaAndClusterConfig` clamps a KV split of
more than 16 CTAs to 16 where a SwapsMmaAb kernel can keep the CgaSmemReduction (one
query token or a head dim other than 256, headDimV < 512, outside DeepSeek's
min-latency mode, no forced GmemReduction, at most 4096 KV tokens per CTA, and a CGA
kernel selected or in the table).
"""

from __future__ import annotations

from hprobe.compiled.trtllm_gen import era_0_7_2 as previous
from hprobe.compiled.trtllm_gen.era_0_6_12 import (
    KERNELS,
    LAUNCHER,
    RUNNER,
    GqaVariant,
    KernelType,
    MultiCtasKvMode,
    RunnerParams,
    SelectKernelParams,
)
from hprobe.compiled.trtllm_gen.era_0_6_18 import GQA_SELECTOR

FINGERPRINT: dict[str, dict[str, tuple[str, ...]]] = {
    KERNELS: {**previous.FINGERPRINT[KERNELS], "computeCtaAndClusterConfig": ("9bcc3b7dddef637b",)},
    RUNNER: previous.FINGERPRINT[RUNNER],
    LAUNCHER: previous.FINGERPRINT[LAUNCHER],
}

MAX_CGA_CTAS_PER_SEQ_KV = 16  # kMaxCgaSmemReductionCtasPerSeqKv
MAX_KV_PER_CTA_FOR_CGA_CLAMP = 4096  # kMaxSeqLenKvPerCtaForCgaClamp


# The GQA/MHA selector as 0.6.18 reads it; the context launcher's new arguments
# (DSv4 epilogue, LSE scale) are off for it.
GQA_VARIANTS = (
    GqaVariant(
        "0.7.2.post1",
        {KERNELS: GQA_SELECTOR, LAUNCHER: {"trtllm_paged_attention_context": ("d73ec8c99c6e72a1",)}},
        syncs_traits=True,
    ),
)


class Selection(previous.Selection):
    def clamped_ctas_per_seq_kv(
        self,
        params: RunnerParams,
        select: SelectKernelParams,
        ctas_per_seq_kv: int,
        window: int,
        dsv3_min_latency: bool,
    ) -> int:
        if (
            ctas_per_seq_kv > MAX_CGA_CTAS_PER_SEQ_KV
            and (params.max_seq_len_q == 1 or params.head_dim_v != 256)
            and params.head_dim_v < 512
            and not dsv3_min_latency
            and not select.force_gmem_reduction
            and select.kernel_type is KernelType.SWAPS_MMA_AB_FOR_GENERATION
            and -(-window // MAX_CGA_CTAS_PER_SEQ_KV) <= MAX_KV_PER_CTA_FOR_CGA_CLAMP
            and (
                select.multi_ctas_kv_mode is MultiCtasKvMode.CGA_SMEM_REDUCTION
                or (
                    select.multi_ctas_kv_mode is MultiCtasKvMode.GMEM_REDUCTION
                    and self.has_cga_smem_reduction_kernel(params, select)
                )
            )
        ):
            return MAX_CGA_CTAS_PER_SEQ_KV
        return ctas_per_seq_kv
