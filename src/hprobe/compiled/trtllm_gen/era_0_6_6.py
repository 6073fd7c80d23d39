"""trtllm-gen FMHA kernel selection for MLA decode, as flashinfer 0.6.6 ships it.

The era before 0.6.7 (era_0_6_7). What 0.6.7 changed, undone here:
- `run()` selects in an open loop that refuses after 8 re-selections ("A deadlock is
  detected when selecting trtllm-gen kernels."), and its CgaSmemReduction fallback
  (taken when cuOccupancyMaxActiveClusters says the clusters need more than one wave)
  goes back into that loop with GmemReduction forced, rather than selecting once;
- one MLA selector for dense and sparse: SwapsMmaAb for up to 32 heads, for sparse MLA
  under 128 heads, or where the KV split is short; KeepsMmaAb otherwise, which for
  sparse MLA takes 128 heads only ("The keepsMmaAbForGeneration sparseMla kernels only
  support numHeadsQPerKv = 128"), and 2 CTAs at 128 heads;
- CgaSmemReduction for any SwapsMmaAb split outside DeepSeek's min-latency shape
  (0.6.7: for MLA only below tileSizeQ 32).
"""

from __future__ import annotations

from dataclasses import replace

from hprobe.compiled.table import KernelMeta
from hprobe.compiled.trtllm_gen import era_0_6_7 as later
from hprobe.compiled.trtllm_gen.era_0_6_12 import (
    KERNELS,
    LAUNCHER,
    RUNNER,
    KernelType,
    Launch,
    MultiCtasKvMode,
    Refusal,
    RunnerParams,
    SelectKernelParams,
    SparseMlaType,
    Undetermined,
)

FINGERPRINT: dict[str, dict[str, tuple[str, ...]]] = {
    KERNELS: {
        **{name: d for name, d in later.FINGERPRINT[KERNELS].items() if name != "selectSparseMlaGenerationKernel"},
        "run": ("8c04f4a727ae5e72",),
        # The same body as 0.6.7's; its digest takes in the `private:` before it.
        "isMlaGenKernel": ("8f2074e16146fd28",),
        "computeCtaAndClusterConfig": ("61ce94fe8a8be08b",),
        "selectMlaGenerationKernel": ("c576e4ed6635ee38",),
    },
    RUNNER: {"TllmGenFmhaRunner": ("c3fb98dc90a18c55",)},
    LAUNCHER: {
        # No NVFP4 block scales nor shared paged-KV index flag yet; nothing the selection reads.
        "trtllm_paged_attention_launcher": ("1e815a732e9cca6c",),
        "trtllm_paged_attention_decode": ("9c1f9c6982b37bae",),
    },
}

MAX_RESELECTIONS = 8  # run(): FLASHINFER_CHECK(selectKernelIter < 8, ...)


class Selection(later.Selection):
    def run(self, kernels: dict[int, KernelMeta], params: RunnerParams) -> Launch:
        return self._loop(kernels, params, SelectKernelParams.of(params), 0)

    def _loop(
        self, kernels: dict[int, KernelMeta], params: RunnerParams, select: SelectKernelParams, reselections: int
    ) -> Launch:
        while True:
            if not reselections < MAX_RESELECTIONS:
                raise Refusal(
                    "run",
                    "A deadlock is detected when selecting trtllm-gen kernels.",
                    KERNELS,
                    "A deadlock is detected",
                )
            self.select_kernel(params, select)
            row = self.load_kernel(kernels, params, select)
            ctas, cluster_x, _ctas_kv = self.compute_cta_and_cluster_config(params, row, select)
            if select.select_new_kernel:
                reselections += 1
                continue
            if select.multi_ctas_kv_mode is MultiCtasKvMode.CGA_SMEM_REDUCTION:
                # More than one wave: GmemReduction forced, and back into the loop.
                forced = replace(select, force_gmem_reduction=True, multi_ctas_kv_mode=MultiCtasKvMode.GMEM_REDUCTION)
                try:
                    self._loop(kernels, params, forced, reselections)
                except Refusal as refusal:
                    raise Undetermined(
                        "CgaSmemReduction: the kernel launches when cuOccupancyMaxActiveClusters says its clusters "
                        "fit one wave; otherwise run() selects again with GmemReduction forced, which is refused "
                        f'("{refusal.message}")'
                    ) from None
            return Launch(row, ctas, cluster_x)

    def uses_cga_smem_reduction(self, params: RunnerParams, select: SelectKernelParams, dsv3_min_latency: bool) -> bool:
        return not dsv3_min_latency

    def select_mla_generation_kernel(self, params: RunnerParams, select: SelectKernelParams) -> None:
        heads = params.num_heads_q_per_kv
        sparse = params.sparse_mla_type is not SparseMlaType.NONE
        if heads <= 32 or (sparse and heads < 128) or self.use_swaps_mma_ab_mla_gen_kernel(params):
            select.kernel_type = KernelType.SWAPS_MMA_AB_FOR_GENERATION
            select.tile_size_q = 8 if heads <= 8 else 16
            return
        select.kernel_type = KernelType.KEEPS_MMA_AB_FOR_GENERATION
        select.tile_size_q = 64
        if select.multi_ctas_kv_mode is not MultiCtasKvMode.DISABLED:
            select.multi_ctas_kv_mode = MultiCtasKvMode.GMEM_REDUCTION_WITH_SEPARATE_KERNEL
        if sparse and heads != 128:
            raise Refusal(
                "selectMlaGenerationKernel",
                f"The keepsMmaAbForGeneration sparseMla kernels only support numHeadsQPerKv = 128, got {heads}",
                KERNELS,
                "The keepsMmaAbForGeneration sparseMla kernels only support",
            )
        if heads == 128:
            select.uses_2cta_mma = True
            select.head_dim_per_cta_v = 256
