"""trtllm-gen FMHA kernel selection for MLA decode, as flashinfer 0.6.18 – 0.6.18.post1 ship it.

What changed since 0.6.16 – 0.6.17 (era_0_6_16), each a method overridden here:
- `hashID` packs its enum fields to their widths (a new layout, with range checks) and
  hashes five more traits: groupsTokensHeadsQ, the BF16-query/FP8-KV transform mode,
  the 2Qx1KV sliding-window kernel, FP16 softmax and spcompress. A row's come from
  four fields the kernel table gained (TABLE_FIELDS); a table without them is refused;
- MLA generation with 2..16 query tokens, 8/16/32 heads, 32-token pages and batch <= 16
  takes a grouped kernel (`usesGroupedMlaGenerationKernel`, `selectGroupedMlaGenerationKernel`);
- `computeCtaAndClusterConfig` caps the KV split of BF16-query/FP8-KV SeparateKv kernels,
  and splits headDimV only for kernels that do not group tokens and heads;
- the launcher takes a transform mode, FP16 softmax and spcompress: MLA decode calls pass
  mode Full (`0`), and FP16 softmax only when the caller asks (the probes' calls do not),
  and never spcompress, which the port follows.
"""

from __future__ import annotations

from typing import Any

from hprobe.compiled.table import KernelMeta
from hprobe.compiled.trtllm_gen import era_0_6_16 as previous
from hprobe.compiled.trtllm_gen.era_0_6_12 import (
    KERNELS,
    LAUNCHER,
    RUNNER,
    GqaVariant,
    KernelType,
    MaskType,
    MultiCtasKvMode,
    Refusal,
    RunnerParams,
    SelectKernelParams,
    SparseMlaType,
    TileScheduler,
    check_key_fields,
    hash_info_head,
)

FINGERPRINT: dict[str, dict[str, tuple[str, ...]]] = {
    KERNELS: {
        **previous.FINGERPRINT[KERNELS],
        "hashID": ("8d08b7ce19a3d5da",),
        "run": ("683d7fed9c43e456",),  # the LSE call after the launch is checked; the selection loop as before
        "computeCtaAndClusterConfig": ("ae7a313b3c68b6b0",),
        "selectMlaGenerationKernel": ("abe9108da6c1e2ec",),
        "hashFromRunnerParams": ("62eef4e443eb29df",),
        "queryMaxDeviceSmemSize": ("1ce60abe23fb10c7",),  # SM107's oversized query needs CUDA 13.4 now
        "getBf16QFp8KvTransformMode": ("1e49f620d3df80f4",),
        "isBf16QFp8KvGeneration": ("9021eb07890a5dda",),
        "is2QSlidingWindowKernel": ("997320c796b6b10a",),
        "usesGroupedMlaGenerationKernel": ("50b0ad6f744630d1",),
        "selectGroupedMlaGenerationKernel": ("ad312fb3f43b571e",),
    },
    RUNNER: previous.FINGERPRINT[RUNNER],
    LAUNCHER: {
        # The transform mode (checked only when not Full), FP16 softmax and spcompress
        # flags; what the selection reads is assigned as before.
        "trtllm_paged_attention_launcher": ("3b71711bd2ce83ba",),
        "trtllm_paged_attention_decode": ("8033637db9004605",),
        "trtllm_paged_attention_decode_sparse_mla_dsv4": ("0e6b9f8adfc1b645",),
    },
}

FULL, K_ONLY, SEPARATE_KV = 0, 1, 2  # Bf16QFp8KvTransformMode


def _check(ok: bool, message: str, needle: str | None = None) -> None:
    if not ok:
        raise Refusal("hashID", message, KERNELS, needle)


def _pages_log2(num_tokens_per_page: int) -> int:
    return 0 if num_tokens_per_page == 0 else num_tokens_per_page.bit_length() - 1


def early_checks(
    head_dim_per_cta_v: int,
    head_dim_qk: int,
    head_dim_v: int,
    tile_size_q: int,
    tile_size_kv: int,
    num_tokens_per_page: int,
    sparse_mla_type: int,
    bf16q_fp8kv_transform_mode: int,
) -> None:
    """hashID's checks up to the transform mode's, in order."""
    check_key_fields(
        head_dim_per_cta_v, head_dim_qk, head_dim_v, tile_size_q, tile_size_kv, num_tokens_per_page, sparse_mla_type
    )
    _check(0 <= bf16q_fp8kv_transform_mode <= 2, "The BF16Q FP8KV transform mode must fit in 2 bits.")


def range_check(
    qkv_layout: int,
    mask_type: int,
    kernel_type: int,
    scheduler: int,
    multi_ctas_kv_mode: int,
    bf16q_fp8kv_transform_mode: int,
    num_tokens_per_page: int,
) -> None:
    """hashID's last check: the enum fields fit the widths they are packed to."""
    pages_log2 = _pages_log2(num_tokens_per_page)
    _check(
        0 <= qkv_layout < 4
        and 0 <= mask_type < 8
        and 0 <= kernel_type < 8
        and 0 <= scheduler < 4
        and 0 <= multi_ctas_kv_mode < 4
        and pages_log2 < 16,
        f"Kernel attribute out of range for the hash key: qkvLayout={qkv_layout}, maskType={mask_type}, "
        f"kernelType={kernel_type}, tileScheduler={scheduler}, multiCtasKvMode={multi_ctas_kv_mode}, "
        f"bf16QFp8KvTransformMode={bf16q_fp8kv_transform_mode}, numTokensPerPage={num_tokens_per_page}",
        "Kernel attribute out of range for the hash key",
    )


def pack(
    qkv_layout: int,
    mask_type: int,
    kernel_type: int,
    scheduler: int,
    multi_ctas_kv_mode: int,
    head_dim_per_cta_v: int,
    head_dim_qk: int,
    head_dim_v: int,
    tile_size_q: int,
    tile_size_kv: int,
    num_tokens_per_page: int,
    dynamic_num_tokens_per_page: bool,
    reuse_smem_k_for_v: bool,
    uses_2cta_mma: bool,
    groups_tokens_heads_q: bool,
    sparse_mla_type: int,
    skips_softmax: bool,
    bf16q_fp8kv_transform_mode: int,
    uses_2q_sliding_window_kernel: bool,
    fp16_softmax: bool,
    uses_spcompress: bool,
) -> int:
    """The key's layout, bits 0 - 56."""
    pages_log2 = _pages_log2(num_tokens_per_page)
    return (
        qkv_layout
        | mask_type << 2
        | kernel_type << 5
        | scheduler << 8
        | multi_ctas_kv_mode << 10
        | (head_dim_per_cta_v >> 3) << 12
        | (head_dim_qk >> 3) << 20
        | (head_dim_v >> 3) << 28
        | (tile_size_kv >> 6) << 36
        | pages_log2 << 38
        | (tile_size_q.bit_length() - 1) << 42
        | int(reuse_smem_k_for_v) << 45
        | int(uses_2cta_mma) << 46
        | sparse_mla_type << 47
        | int(skips_softmax) << 49
        | int(dynamic_num_tokens_per_page) << 50
        | bf16q_fp8kv_transform_mode << 51
        | int(groups_tokens_heads_q) << 53
        | int(uses_2q_sliding_window_kernel) << 54
        | int(fp16_softmax) << 55
        | int(uses_spcompress) << 56
    )


KeyFields = tuple[
    int, int, int, int, int, int, int, int, int, int, int, bool, bool, bool, bool, int, bool, int, bool, bool, bool
]


def hash_id(*key: Any) -> int:
    """TllmGenFmhaKernel::hashID (the 21 fields of `pack`, in its order), its checks in order."""
    early_checks(key[5], key[6], key[7], key[8], key[9], key[10], key[15], key[17])
    range_check(key[0], key[1], key[2], key[3], key[4], key[17], key[10])
    return pack(*key)


# The GQA/MHA selector as 0.6.18 – 0.7.2.post1 read it: groupsTokensHeadsQ set
# (and hashed), BF16Q+FP8KV transform kernels grouped, a doubled mainloop cost for
# the SeparateKv transform; selectKernel around it as before.
GQA_SELECTOR: dict[str, tuple[str, ...]] = {
    "selectGqGenerationKernel": ("07472087320d86b8",),
    "syncGqaGenerationTraitsForKernelHash": ("d324be05b4a27e51",),
    "selectTileSizeQForGqaGeneration": ("74bb1e5ec89e61b7",),
    "supportsGqaGroupingTokensHeadsQ": ("7d3dd35253fba895",),
}
GQA_VARIANTS = (
    GqaVariant(
        "0.6.18 – 0.6.18.post1",
        # The context launcher passes transform mode Full, no FP16 softmax or spcompress unless asked.
        {KERNELS: GQA_SELECTOR, LAUNCHER: {"trtllm_paged_attention_context": ("778d49ed8ed14afa",)}},
        syncs_traits=True,
    ),
)


class Selection(previous.Selection):
    TABLE_FIELDS: tuple[str, ...] = (
        *previous.Selection.TABLE_FIELDS,
        "mEnablesBf16QFp8KvKOnlyTransform",
        "mSeparateTransformedKv",
        "mFp16Softmax",
        "mUsesSpcompress",
    )

    @staticmethod
    def bf16q_fp8kv_transform_mode(k_only: bool, separate: bool) -> int:
        """getBf16QFp8KvTransformMode."""
        if k_only and separate:
            raise Refusal(
                "getBf16QFp8KvTransformMode",
                "BF16Q FP8KV transform mode cannot be both K-only and separate K/V.",
                KERNELS,
            )
        return K_ONLY if k_only else SEPARATE_KV if separate else FULL

    @staticmethod
    def is_2q_sliding_window_kernel(row: KernelMeta) -> bool:
        return (
            row.kernel_type == KernelType.KEEPS_MMA_AB_FOR_GENERATION
            and row.groups_tokens_heads_q
            and row.step_q == 2 * row.tile_size_q
        )

    @staticmethod
    def is_bf16q_fp8kv_generation(params: RunnerParams) -> bool:
        return (params.dtype_q, params.dtype_kv, params.dtype_o) == (
            "DATA_TYPE_BF16",
            "DATA_TYPE_E4M3",
            "DATA_TYPE_BF16",
        )

    def row_key(self, row: KernelMeta) -> KeyFields:
        """hashID(KernelMeta)'s arguments."""
        return (
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
            self.is_dynamic_pages_kernel(row),
            row.reuse_smem_k_for_v,
            row.uses_2cta_mma,
            row.groups_tokens_heads_q,
            row.sparse_attn or 0,  # present: TABLE_FIELDS
            row.skips_softmax,
            self.bf16q_fp8kv_transform_mode(
                bool(row.enables_bf16q_fp8kv_k_only_transform), bool(row.separate_transformed_kv)
            ),
            self.is_2q_sliding_window_kernel(row),
            bool(row.fp16_softmax),
            bool(row.uses_spcompress),
        )

    def selection_key(self, params: RunnerParams, select: SelectKernelParams) -> KeyFields:
        """hashFromRunnerParams's arguments to hashID."""
        return (
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
            select.dynamic_num_tokens_per_page,
            select.reuse_smem_k_for_v,
            select.uses_2cta_mma,
            select.groups_tokens_heads_q,
            params.sparse_mla_type,
            select.skips_softmax,
            select.bf16q_fp8kv_transform_mode,
            False,  # uses2QSlidingWindowKernel: never asked for by a runtime selection
            select.use_fp16_softmax,
            select.uses_spcompress,
        )

    def hash_of_row(self, row: KernelMeta) -> int:
        return hash_id(*self.row_key(row))

    def hash_from_runner_params(self, params: RunnerParams, select: SelectKernelParams) -> tuple[int, str]:
        info = (
            hash_info_head(params, select) + f"dynamicNumTokensPerPage={int(select.dynamic_num_tokens_per_page)}, "
            f"reuseSmemKForV={int(select.reuse_smem_k_for_v)}, "
            f"uses2CtaMma={int(select.uses_2cta_mma)}, groupsTokensHeadsQ={int(select.groups_tokens_heads_q)}, "
            f"sparseMlaType={int(params.sparse_mla_type)}, skipsSoftmax={int(select.skips_softmax)}, "
            f"bf16QFp8KvTransformMode={select.bf16q_fp8kv_transform_mode}, fp16Softmax={int(select.use_fp16_softmax)}, "
            f"usesSpcompress={int(select.uses_spcompress)}"
        )
        return hash_id(*self.selection_key(params, select)), info

    def uses_grouped_mla_generation_kernel(self, params: RunnerParams) -> bool:
        dtypes = (params.dtype_q, params.dtype_kv, params.dtype_o)
        return (
            dtypes in (("DATA_TYPE_BF16",) * 3, ("DATA_TYPE_E4M3", "DATA_TYPE_E4M3", "DATA_TYPE_BF16"))
            and params.num_heads_q_per_kv in (8, 16, 32)
            and params.sparse_mla_type is SparseMlaType.NONE
            and params.max_seq_len_q > 1
            and 1 <= params.batch_size <= 16
            and params.num_tokens_per_page == 32
            and params.head_dim_qk == 576
            and params.head_dim_v == 512
        )

    def select_grouped_mla_generation_kernel(self, params: RunnerParams, select: SelectKernelParams) -> None:
        select.kernel_type = KernelType.KEEPS_MMA_AB_FOR_GENERATION
        select.tile_size_q = 64
        select.tile_size_kv = 128
        if select.multi_ctas_kv_mode is not MultiCtasKvMode.DISABLED:
            select.multi_ctas_kv_mode = MultiCtasKvMode.GMEM_REDUCTION_WITH_SEPARATE_KERNEL
            select.tile_scheduler = TileScheduler.STATIC
        select.force_gmem_reduction = True
        select.mask_type = MaskType.DENSE
        select.reuse_smem_k_for_v = False
        select.groups_tokens_heads_q = True
        select.uses_2cta_mma = False
        rows = params.max_seq_len_q * params.num_heads_q_per_kv
        base_ctas = params.batch_size * params.num_heads_kv * -(-rows // 64)
        per_cta = 128 if base_ctas <= 1 else 256 if base_ctas <= 4 else 512
        select.head_dim_per_cta_v = min(per_cta, params.head_dim_v)

    def select_mla_generation_kernel(self, params: RunnerParams, select: SelectKernelParams) -> None:
        if self.uses_grouped_mla_generation_kernel(params):
            self.select_grouped_mla_generation_kernel(params, select)
            return
        select.groups_tokens_heads_q = False
        super().select_mla_generation_kernel(params, select)

    def tuned_max_ctas_per_seq_kv(
        self,
        params: RunnerParams,
        select: SelectKernelParams,
        max_ctas_per_seq_kv: int,
        window: int,
        ctas_for_all_heads_q: int,
        ctas: tuple[int, int, int],
    ) -> int:
        """Cap BF16Q+FP8KV separate-transform splits so that the runtime key selects
        CGA reduction when the smaller split is expected."""
        if not (
            self.is_bf16q_fp8kv_generation(params)
            and select.bf16q_fp8kv_transform_mode == SEPARATE_KV
            and select.kernel_type is KernelType.SWAPS_MMA_AB_FOR_GENERATION
            and select.multi_ctas_kv_mode is not MultiCtasKvMode.GMEM_REDUCTION_WITH_SEPARATE_KERNEL
            and params.head_dim_v < 512
        ):
            return max_ctas_per_seq_kv
        cluster_x = 2 if select.uses_2cta_mma else 1
        max_splits = 16 // cluster_x
        if max_ctas_per_seq_kv > ctas_for_all_heads_q * max_splits:
            return max_ctas_per_seq_kv
        ctas_x, ctas_y, ctas_z = ctas
        launched = -(-ctas_x // cluster_x) * ctas_y * ctas_z
        budget = max(4, -(-(params.multi_processor_count * 13 // 20) // launched))
        target = min(max_ctas_per_seq_kv, max_splits, budget)
        if not 1 < target < max_ctas_per_seq_kv:
            return max_ctas_per_seq_kv
        per_cta = (
            -(-params.attention_window_size // (target - 1))
            if select.mask_type is MaskType.SLIDING_OR_CHUNKED_CAUSAL
            else -(-window // target)
        )
        return target if per_cta <= 1024 else max_ctas_per_seq_kv

    # --- GQA/MHA generation: grouping hashed, and BF16Q+FP8KV transform kernels ---

    def sync_gqa_generation_traits_for_kernel_hash(self, params: RunnerParams, select: SelectKernelParams) -> None:
        # Same-dtype GQA generation cubins export groupsTokensHeadsQ for every tile size.
        select.groups_tokens_heads_q = True
        super().sync_gqa_generation_traits_for_kernel_hash(params, select)

    def supports_gqa_grouping_tokens_heads_q(self, params: RunnerParams, select: SelectKernelParams) -> bool:
        # BF16Q+FP8KV transform paths present BF16 K to BMM1: they group, except in mode Full.
        return params.dtype_q == params.dtype_kv or (
            self.is_bf16q_fp8kv_generation(params) and select.bf16q_fp8kv_transform_mode != FULL
        )

    def gqa_mainloop_cost_factor(self, params: RunnerParams, select: SelectKernelParams) -> float:
        # Full-transform (SeparateKv) kernels convert in the KV mainloop.
        separate = self.is_bf16q_fp8kv_generation(params) and select.bf16q_fp8kv_transform_mode == SEPARATE_KV
        return 2.0 if separate else 1.0

    def splits_head_dim_v(self, params: RunnerParams, select: SelectKernelParams) -> bool:
        return not select.groups_tokens_heads_q and super().splits_head_dim_v(params, select)
