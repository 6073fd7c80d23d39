"""trtllm-gen FMHA kernel selection for MLA decode, as flashinfer 0.6.8 – 0.6.9 ship it.

The era before 0.6.10 (era_0_6_10), whose kernel package (55bba55…) flashinfer-cubin
0.6.8 carries. What 0.6.10 changed, undone here:
- the table marks sparse MLA with a flag (`mSparseMla`), which `hashID` packs as is;
- `loadKernels` skips no kernel by name;
- `computeCtaAndClusterConfig` takes CgaSmemReduction for a SwapsMmaAb kernel outside
  MLA generation, or for MLA generation with tileSizeQ below 32 (0.6.10: headDimV < 512);
- `loadKernel` reads the entry it looks up before checking it was found: where it was
  not, the C++ reads past the map (undefined behaviour) before it can raise its
  message, so the refusal is a crash, said as such.
"""

from __future__ import annotations

from hprobe.compiled.table import KernelMeta
from hprobe.compiled.trtllm_gen import era_0_6_10 as later
from hprobe.compiled.trtllm_gen.era_0_6_12 import KERNELS, Refusal, RunnerParams, SelectKernelParams

FINGERPRINT: dict[str, dict[str, tuple[str, ...]]] = {
    **later.FINGERPRINT,
    KERNELS: {
        **later.FINGERPRINT[KERNELS],
        "loadKernels": ("d6e3c87eca797556",),
        "hashID": ("d278d2e954ee4f64",),
        "computeCtaAndClusterConfig": ("db45eada15f3d7a4",),
        "selectKernel": ("595218b4211cb746",),  # headDimPerCtaV for non-MLA kernels only; MLA as before
        "loadKernel": ("0c9afd753c792770",),
    },
}


class Selection(later.Selection):
    TABLE_FIELDS = ("mDataTypeKv", "mSparseMla")

    def _loads(self, row: KernelMeta, compatible: tuple[str, ...], q: str, k: str, v: str, o: str) -> bool:
        return row.sm in compatible and (row.dtype_q, row.dtype_kv, row.dtype_o) == (q, k, o)

    @staticmethod
    def row_sparse(row: KernelMeta) -> bool:
        return bool(row.sparse_mla)

    def uses_cga_smem_reduction(self, params: RunnerParams, select: SelectKernelParams, dsv3_min_latency: bool) -> bool:
        return not dsv3_min_latency and (not self.is_mla_gen_kernel(params) or select.tile_size_q < 32)

    def load_kernel(
        self, kernels: dict[int, KernelMeta], params: RunnerParams, select: SelectKernelParams
    ) -> KernelMeta:
        try:
            return super().load_kernel(kernels, params, select)
        except Refusal as refusal:
            raise Refusal(
                "loadKernel",
                f"{refusal.message} (this release dereferences the missing entry before it checks: "
                "undefined behaviour, most likely a crash without the message)",
                KERNELS,
                "Trtllm-gen kernels not found",
            ) from None
