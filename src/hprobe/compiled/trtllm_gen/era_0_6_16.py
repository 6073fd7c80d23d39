"""trtllm-gen FMHA kernel selection for decode, as flashinfer 0.6.16 – 0.6.17 ship it.

What changed since 0.6.12 – 0.6.15 (era_0_6_12), each a method overridden here:
- MLA head groups that are no power of two get one padded tile (`getPaddedMlaTileSizeQ`):
  8/16/32/64, and a refusal above 64 (dense and sparse selectors alike);
- the dynamic-page kernels serve a group of one too (`useDynamicNumTokensPerPage`);
- `loadKernels` skips cubins whose shared memory exceeds the device's opt-in limit
  (`queryMaxDeviceSmemSize`, a device query answered from the faked GPU);
- the runner and `isSMCompatible` take SM107 (kSM_107) beside SM100/SM103;
- 0.6.17's decode launcher can pass a top-k length per token (single-pool dynamic
  sparse MLA); the probes' calls pass none, which the port follows.
"""

from __future__ import annotations

from hprobe.compiled.table import KernelMeta
from hprobe.compiled.trtllm_gen import era_0_6_12 as previous
from hprobe.compiled.trtllm_gen.era_0_6_12 import KERNELS, LAUNCHER, RUNNER, Refusal, RunnerParams, SelectKernelParams

FINGERPRINT: dict[str, dict[str, tuple[str, ...]]] = {
    KERNELS: {
        **previous.FINGERPRINT[KERNELS],
        "isFamilySpecificSMPair": ("3fce2e580650d358",),
        "isSMCompatible": ("19784c483a15010c",),
        "TllmGenFmhaKernel": ("c797975fbd7b1f84",),
        "queryMaxDeviceSmemSize": ("d83ce03b07f908b5",),
        "loadKernels": ("ab60e9a5e7282108",),
        "run": ("95e2722629fd6637",),  # a fourth launch attribute; the selection loop as before
        "useDynamicNumTokensPerPage": ("5bf978cc984dd4dd",),
        "getPaddedMlaTileSizeQ": ("fe8a84cd0a2eb2fb",),
        "selectSparseMlaGenerationKernel": ("75a7336b96699d2f",),
        "selectMlaGenerationKernel": ("d69b2bec7df54f56",),
        "loadKernel": ("8bdaaddbc73f4bd7",),  # shared-memory attributes set per SM; the lookup as before
    },
    RUNNER: {"TllmGenFmhaRunner": ("3ad615d96f27a434",)},
    LAUNCHER: {
        "trtllm_paged_attention_launcher": ("1af9a37f4dfd4adc",),
        # 0.6.17: sparse_mla_top_k_lens (optional, single-pool dynamic sparse MLA)
        "trtllm_paged_attention_decode": ("258ab0fd4a14f193", "72f79eb1bd2bccd3"),
        "trtllm_paged_attention_decode_sparse_mla_dsv4": ("34529e0f41851271",),
    },
}

# selectGqGenerationKernel and its cost model read as 0.6.14's (the launcher's
# block-sparse flag is off unless asked for); what this era changed under them,
# the dynamic page rule and the shared-memory filter, are the methods below.
GQA_VARIANTS = (
    previous.GqaVariant(
        "0.6.16 – 0.6.17",
        {
            KERNELS: previous.GQA_SELECTOR_SYNCED,
            # Hands the launcher block-sparse attention off: the context call as before.
            LAUNCHER: {"trtllm_paged_attention_context": ("b5d103b100455f97",)},
        },
        syncs_traits=True,
    ),
)

STATIC_SMEM_RESERVE = 1024  # kStaticSmemReserve


class Selection(previous.Selection):
    RUNNER_SMS = (100, 103, 107)
    COMPATIBLE = {**previous.Selection.COMPATIBLE, 107: ("kSM_100f", "kSM_107")}
    FAMILY_SPECIFIC = ("kSM_100", "kSM_103", "kSM_107")

    def _loads(self, row: KernelMeta, compatible: tuple[str, ...], q: str, k: str, v: str, o: str) -> bool:
        if row.shared_mem_bytes + STATIC_SMEM_RESERVE > self.device.max_shared_memory_per_block_optin:
            return False
        return super()._loads(row, compatible, q, k, v, o)

    def use_dynamic_num_tokens_per_page(self, params: RunnerParams) -> bool:
        return (
            params.qkv_layout is previous.QkvLayout.PAGED_KV
            and params.sparse_mla_type is previous.SparseMlaType.NONE
            and params.head_dim_qk == params.head_dim_v
            and params.num_tokens_per_page >= self.DYNAMIC_PAGE_THRESHOLD
        )

    @staticmethod
    def keeps_heuristic_tile(heads_per_kv: int) -> bool:
        """getPaddedMlaTileSizeQ's groups that keep the heuristic's tile (no padding)."""
        return heads_per_kv >= 128 or heads_per_kv & (heads_per_kv - 1) == 0

    @classmethod
    def padded_mla_tile_size_q(cls, heads_per_kv: int) -> int:
        """getPaddedMlaTileSizeQ: 0 to keep the heuristic, else the one tile that holds the group."""
        if heads_per_kv <= 0:
            raise Refusal(
                "getPaddedMlaTileSizeQ",
                f"The numHeadsQPerKv must be positive, got {heads_per_kv}.",
                KERNELS,
                "The numHeadsQPerKv must be positive",
            )
        if cls.keeps_heuristic_tile(heads_per_kv):
            return 0
        if heads_per_kv > 64:
            raise Refusal(
                "getPaddedMlaTileSizeQ",
                f"Non-power-of-two MLA numHeadsQPerKv must be <= 64, got {heads_per_kv}.",
                KERNELS,
                "Non-power-of-two MLA numHeadsQPerKv must be",
            )
        return max(8, 1 << (heads_per_kv - 1).bit_length())

    def select_sparse_mla_generation_kernel(self, params: RunnerParams, select: SelectKernelParams) -> None:
        super().select_sparse_mla_generation_kernel(params, select)
        padded = self.padded_mla_tile_size_q(params.num_heads_q_per_kv)
        if padded != 0:
            select.tile_size_q = padded

    def select_mla_generation_kernel(self, params: RunnerParams, select: SelectKernelParams) -> None:
        if params.sparse_mla_type is not previous.SparseMlaType.NONE:
            self.select_sparse_mla_generation_kernel(params, select)
            return
        padded = self.padded_mla_tile_size_q(params.num_heads_q_per_kv)
        swaps = (
            padded <= 32
            if padded != 0
            else params.num_heads_q_per_kv <= 32 or self.use_swaps_mma_ab_mla_gen_kernel(params)
        )
        if swaps:
            select.kernel_type = previous.KernelType.SWAPS_MMA_AB_FOR_GENERATION
            select.tile_size_q = padded if padded != 0 else (8 if params.num_heads_q_per_kv <= 8 else 16)
        else:
            select.kernel_type = previous.KernelType.KEEPS_MMA_AB_FOR_GENERATION
            select.tile_size_q = 64
            if select.multi_ctas_kv_mode is not previous.MultiCtasKvMode.DISABLED:
                select.multi_ctas_kv_mode = previous.MultiCtasKvMode.GMEM_REDUCTION_WITH_SEPARATE_KERNEL
            if params.num_heads_q_per_kv == 128:
                select.uses_2cta_mma = True
                select.head_dim_per_cta_v = 256
