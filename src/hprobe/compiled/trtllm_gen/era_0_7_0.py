"""trtllm-gen FMHA kernel selection for MLA decode, as flashinfer 0.7.0 – 0.7.0.post1 ship it.

What changed since 0.6.18 (era_0_6_18), each a method overridden here:
- `hashID` hashes two DSv4 epilogue traits more (fused inverse-RoPE FP8 quantization,
  UE8M0 output scales; bits 57 and 58), from two fields the kernel table gained;
- `computeCtaAndClusterConfig` takes CgaSmemReduction for one-token DeepSeek MLA decode
  (batch 1, head dims 576/512) on 32-token pages once headDimV is split to 128 over
  Q16 tiles, where the table has that CGA kernel (`hasCgaSmemReductionKernel`);
- the sparse selector halves its tile only for up to 16 query tokens;
- the DSv4 launcher requires top-k to hold the 128 sliding-window entries.
The fused RopeQuant path (`selectMlaGenerationKernel` with mFusesDsv4InvRopeFp8Quant)
is taken only when the caller passes a cos/sin cache, which no probe does: not ported.
"""

from __future__ import annotations

from typing import Any

from hprobe.compiled.table import KernelMeta
from hprobe.compiled.trtllm_gen import era_0_6_18 as previous
from hprobe.compiled.trtllm_gen.era_0_6_12 import (
    KERNELS,
    LAUNCHER,
    RUNNER,
    FmhaCall,
    GqaVariant,
    MultiCtasKvMode,
    NotPorted,
    Refusal,
    RunnerParams,
    SelectKernelParams,
)
from hprobe.compiled.trtllm_gen.era_0_6_18 import GQA_SELECTOR, early_checks, pack, range_check

FINGERPRINT: dict[str, dict[str, tuple[str, ...]]] = {
    KERNELS: {
        **previous.FINGERPRINT[KERNELS],
        "hashID": ("ab012f891a639614",),
        "computeCtaAndClusterConfig": ("94e667a3e5bc2ed4",),
        "selectSparseMlaGenerationKernel": ("6fb4800ba8ba81a2",),
        "selectMlaGenerationKernel": ("06f0803e230e4b21",),  # the RopeQuant branch first; the rest as before
        "hashFromRunnerParams": ("169f8f208f9b6b9d",),
        "hasCgaSmemReductionKernel": ("32fd312287bfcffa",),
    },
    RUNNER: previous.FINGERPRINT[RUNNER],
    LAUNCHER: {
        "trtllm_paged_attention_launcher": ("90dc556ee0a76070",),  # DSv4 epilogue pointers; the rest as before
        "trtllm_paged_attention_decode": ("669486ad621fe4b1",),
        "trtllm_paged_attention_decode_sparse_mla_dsv4": ("a852fb355bb5017e",),
    },
}


def hash_id(*key: Any) -> int:
    """TllmGenFmhaKernel::hashID: 0.6.18's 21 fields, then fusesDsv4InvRopeFp8Quant and
    usesDsv4Ue8m0ScaleO; its checks in order."""
    early_checks(key[5], key[6], key[7], key[8], key[9], key[10], key[15], key[17])
    fuses, ue8m0 = bool(key[21]), bool(key[22])
    if ue8m0 and not fuses:
        raise Refusal("hashID", "DSv4 UE8M0 output scales require the fused inverse-RoPE FP8 epilogue.", KERNELS)
    range_check(key[0], key[1], key[2], key[3], key[4], key[17], key[10])
    return pack(*key[:21]) | int(fuses) << 57 | int(ue8m0) << 58


# The GQA/MHA selector as 0.6.18 reads it; the context launcher's new arguments
# (DSv4 epilogue, LSE scale) are off for it.
GQA_VARIANTS = (
    GqaVariant(
        "0.7.0 – 0.7.0.post1",
        {KERNELS: GQA_SELECTOR, LAUNCHER: {"trtllm_paged_attention_context": ("090622442b5c2db3",)}},
        syncs_traits=True,
    ),
)


class Selection(previous.Selection):
    TABLE_FIELDS = (*previous.Selection.TABLE_FIELDS, "mFusesDsv4InvRopeFp8Quant", "mUsesDsv4Ue8m0ScaleO")

    def _dsv4_top_k_checks(self, call: FmhaCall) -> None:
        if call.sparse_mla_top_k < 128:
            raise Refusal(
                "trtllm_paged_attention_decode_sparse_mla_dsv4",
                "sparse topK must include 128 sliding-window entries",
                LAUNCHER,
            )
        super()._dsv4_top_k_checks(call)

    def hash_of_row(self, row: KernelMeta) -> int:
        return hash_id(*self.row_key(row), bool(row.fuses_dsv4_inv_rope_fp8_quant), bool(row.uses_dsv4_ue8m0_scale_o))

    def hash_from_runner_params(self, params: RunnerParams, select: SelectKernelParams) -> tuple[int, str]:
        _, info = super().hash_from_runner_params(params, select)
        fuses = select.fuses_dsv4_inv_rope_fp8_quant
        # The C++ prints fusesDsv4InvRopeFp8Quant for both, and hashes it for both.
        info += f", fusesDsv4InvRopeFp8Quant={int(fuses)}, usesDsv4Ue8m0ScaleO={int(fuses)}"
        return hash_id(*self.selection_key(params, select), fuses, fuses), info

    def select_mla_generation_kernel(self, params: RunnerParams, select: SelectKernelParams) -> None:
        if params.fuses_dsv4_inv_rope_fp8_quant:
            raise NotPorted("DSv4 RopeQuant (a fused inverse-RoPE FP8 epilogue) is not ported")
        super().select_mla_generation_kernel(params, select)

    def has_cga_smem_reduction_kernel(self, params: RunnerParams, select: SelectKernelParams) -> bool:
        from dataclasses import replace

        asked = replace(select, multi_ctas_kv_mode=MultiCtasKvMode.CGA_SMEM_REDUCTION)
        kernels = self._maps[(params.dtype_q, params.dtype_kv, params.dtype_kv, params.dtype_o)]
        return self.hash_from_runner_params(params, asked)[0] in kernels

    def uses_cga_smem_reduction(self, params: RunnerParams, select: SelectKernelParams, dsv3_min_latency: bool) -> bool:
        mla_h512_cga = (
            dsv3_min_latency
            and params.max_seq_len_q == 1
            and select.num_tokens_per_page == 32
            and select.head_dim_per_cta_v == 128
            and select.tile_size_q == 16
            and self.has_cga_smem_reduction_kernel(params, select)
        )
        return (not dsv3_min_latency and params.head_dim_v < 512) or mla_h512_cga

    @staticmethod
    def sparse_uses_half_tile(params: RunnerParams, half: int, max_ctas_per_seq_kv: int) -> bool:
        return (
            previous.Selection.sparse_uses_half_tile(params, half, max_ctas_per_seq_kv) and params.max_seq_len_q <= 16
        )
