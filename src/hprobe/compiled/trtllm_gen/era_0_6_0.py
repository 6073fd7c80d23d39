"""trtllm-gen FMHA kernel selection for MLA decode, as flashinfer 0.6.0 – 0.6.3 ship it.

0.6.4's (era_0_6_4) before skip-softmax kernels: `hashID` has no skipsSoftmax bit
(56), the launcher and decode entry pass no threshold, and the not-found message ends
at sparseMla. Their kernel package (75d477a…, in flashinfer-cubin 0.6.0 – 0.6.3) has
no skip-softmax kernel, so no two rows meet in the narrower key.
"""

from __future__ import annotations

from hprobe.compiled.table import KernelMeta
from hprobe.compiled.trtllm_gen import era_0_6_4 as later
from hprobe.compiled.trtllm_gen.era_0_6_11 import hash_id
from hprobe.compiled.trtllm_gen.era_0_6_12 import KERNELS, LAUNCHER, RunnerParams, SelectKernelParams, SparseMlaType

FINGERPRINT: dict[str, dict[str, tuple[str, ...]]] = {
    **later.FINGERPRINT,
    KERNELS: {
        **later.FINGERPRINT[KERNELS],
        "hashID": ("7e0f57f89914daa3",),
        "hashFromRunnerParams": ("0a698f22b9d501ac",),
    },
    LAUNCHER: {
        "trtllm_paged_attention_launcher": ("14498d73a9bf5eb5",),
        "trtllm_paged_attention_decode": ("3381cb83624864b8",),
    },
}

NO_SKIP = False  # the key has no skipsSoftmax bit: as if every kernel and call had it off


class Selection(later.Selection):
    def hash_of_row(self, row: KernelMeta) -> int:
        return hash_id(
            row.qkv_layout,
            row.mask_type,
            row.kernel_type,
            row.tile_scheduler,
            row.multi_ctas_kv_mode,
            row.head_dim_per_cta_v,
            row.head_dim_qk,
            row.head_dim_v,
            row.tile_size_q,
            row.tile_size_kv,
            row.num_tokens_per_page,
            row.reuse_smem_k_for_v,
            row.uses_2cta_mma,
            self.row_sparse(row),
            NO_SKIP,
        )

    def hash_from_runner_params(self, params: RunnerParams, select: SelectKernelParams) -> tuple[int, str]:
        sparse = params.sparse_mla_type is not SparseMlaType.NONE
        _, info = super().hash_from_runner_params(params, select)
        info = info.rsplit(", skipsSoftmax=", 1)[0]  # the message ends at sparseMla here
        key = hash_id(
            params.qkv_layout,
            select.mask_type,
            select.kernel_type,
            select.tile_scheduler,
            select.multi_ctas_kv_mode,
            select.head_dim_per_cta_v,
            params.head_dim_qk,
            params.head_dim_v,
            select.tile_size_q,
            select.tile_size_kv,
            select.num_tokens_per_page,
            select.reuse_smem_k_for_v,
            select.uses_2cta_mma,
            sparse,
            NO_SKIP,
        )
        return key, info
