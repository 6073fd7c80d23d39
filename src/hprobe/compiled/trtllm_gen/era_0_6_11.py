"""trtllm-gen FMHA kernel selection for MLA decode, as flashinfer 0.6.11 – 0.6.11.post3 ship it.

The era before 0.6.12 (era_0_6_12), whose kernel package (1d876ee…) flashinfer-cubin
0.6.11.post3 carries. What 0.6.12 changed, undone here method by method:
- sparse MLA is a flag (`mSparseMla = sparse_mla_top_k > 0`), not a type: `hashID` packs
  it in one bit (55) with skipsSoftmax at 56 and no dynamic-page bit, and requires a
  power-of-two page size;
- no DeepSeek V4 launcher (`trtllm_paged_attention_decode_sparse_mla_dsv4` is absent), and
  `isMlaGenKernel` knows only head dims 576/512: rank-256 MLA (320/256) takes the GQA
  generation selector (0.6.12 – 0.6.13's, without the traits sync);
- the launcher hands generation kernels a causal mask and `selectKernel` keeps it (the
  table's MLA generation rows are exported causal), with no sliding-window refusal;
- no dynamic tokens per page: `selectKernel` sets 1 for sparse MLA and keeps the page size;
- the sparse selector's 2-CTA rule for 128 heads reads the batch alone (0.6.12 added
  `mMaxSeqLenQ > 1`).
"""

from __future__ import annotations

from hprobe.compiled.table import KernelMeta
from hprobe.compiled.trtllm_gen import era_0_6_12 as later
from hprobe.compiled.trtllm_gen.era_0_6_12 import (
    INT_MAX,
    KERNELS,
    LAUNCHER,
    RUNNER,
    FmhaCall,
    KernelType,
    Launch,
    MaskType,
    NotPorted,
    QkvLayout,
    Refusal,
    RunnerParams,
    SelectKernelParams,
    SparseMlaType,
    TileScheduler,
    check_head_dims,
    check_tiles,
    pack_to_2cta,
)

FINGERPRINT: dict[str, dict[str, tuple[str, ...]]] = {
    KERNELS: {
        **{
            name: digests
            for name, digests in later.FINGERPRINT[KERNELS].items()
            # Functions 0.6.12 added.
            if name not in ("isDynamicNumTokensPerPageKernel", "useDynamicNumTokensPerPage", "selectNumTokensPerPage")
        },
        "hashID": ("1ee17f71da098fcc",),
        "run": ("0573618f9c2e0bb2",),  # the LSE call after the launch differs; the selection loop as 0.6.12's
        "isMlaGenKernel": ("9e49cd685941445f",),
        "computeCtaAndClusterConfig": ("c911aa5631afa401",),  # mSparseMla for isSparseMla(mSparseMlaType)
        "selectSparseMlaGenerationKernel": ("52b984e41d2d55ae",),
        "selectMlaGenerationKernel": ("90b6f19b0527116b",),  # mSparseMla for isSparseMla(mSparseMlaType)
        "selectKernel": ("924425463089bedf",),
        "hashFromRunnerParams": ("b25923e3e4fb9f09",),
    },
    RUNNER: later.FINGERPRINT[RUNNER],
    LAUNCHER: {
        "trtllm_paged_attention_launcher": ("7b9cf561298c0678",),
        "trtllm_paged_attention_decode": ("74f8555dce68acdd",),
    },
}


def hash_id(
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
    reuse_smem_k_for_v: bool,
    uses_2cta_mma: bool,
    sparse_mla: bool,
    skips_softmax: bool,
) -> int:
    """TllmGenFmhaKernel::hashID, its checks in order."""
    check_head_dims(head_dim_per_cta_v, head_dim_qk, head_dim_v)
    if num_tokens_per_page & (num_tokens_per_page - 1):
        raise Refusal("hashID", "The numTokensPerPage must be power of 2.", KERNELS)
    check_tiles(tile_size_q, tile_size_kv)
    # log2(0) is no page size a paged MLA call or a paged kernel row has; as a shift it is 0 here.
    pages_log2 = max(num_tokens_per_page.bit_length() - 1, 0)
    key = pack_to_2cta(
        qkv_layout,
        mask_type,
        kernel_type,
        scheduler,
        multi_ctas_kv_mode,
        head_dim_per_cta_v,
        head_dim_qk,
        head_dim_v,
        tile_size_kv,
        pages_log2,
        tile_size_q,
        reuse_smem_k_for_v,
        uses_2cta_mma,
    )
    return key | int(sparse_mla) << 55 | int(skips_softmax) << 56


# The GQA/MHA selector and its cost model read as 0.6.12 - 0.6.13's (no traits sync);
# selectKernel around them is this era's (select_kernel below).
GQA_VARIANTS = (
    later.GqaVariant(
        "0.6.11 – 0.6.11.post3",
        {
            KERNELS: later.GQA_SELECTOR_UNSYNCED,
            LAUNCHER: {"trtllm_paged_attention_context": ("a207e1a6335e1c41",)},
        },
        syncs_traits=False,
    ),
)


class Selection(later.Selection):
    def launch(self, call: FmhaCall) -> Launch:
        if call.dsv4:
            raise NotPorted("this release has no DeepSeek V4 sparse MLA launcher")
        return super().launch(call)

    def _launcher_params(
        self, call: FmhaCall, max_kv_len: int, page_size: int, window_left: int, dynamic_sparse: bool
    ) -> RunnerParams:
        # trtllm_paged_attention_launcher, mode ForGen: the sparse flag, its head-dim
        # check, and a causal mask for every generation kernel.
        head_dim_qk, head_dim_vo, top_k = call.head_dim_q, call.head_dim_o, call.sparse_mla_top_k
        if call.num_qo_heads % call.num_kv_heads != 0:
            raise Refusal(
                "trtllm_paged_attention_launcher",
                "num_qo_heads must be a multiple of num_kv_heads, got num_kv_heads: "
                f"{call.num_kv_heads} and num_qo_heads: {call.num_qo_heads}",
                LAUNCHER,
                "num_qo_heads must be a multiple of num_kv_heads",
            )
        if not (
            (head_dim_qk == 576 and head_dim_vo == 512) or (head_dim_qk == 320 and head_dim_vo == 256) or top_k <= 0
        ):
            raise Refusal("trtllm_paged_attention_launcher", "Only decode MLA supports sparse MLA", LAUNCHER)
        return RunnerParams(
            qkv_layout=QkvLayout.PAGED_KV,
            mask_type=MaskType.CAUSAL,
            kernel_type=KernelType.GENERATION,
            tile_scheduler=TileScheduler.STATIC,  # use_multi_block = true
            multi_ctas_kv_mode=True,
            head_dim_qk=head_dim_qk,
            head_dim_v=head_dim_vo,
            num_heads_q=call.num_qo_heads,
            num_heads_kv=call.num_kv_heads,
            num_heads_q_per_kv=call.num_qo_heads // call.num_kv_heads,
            batch_size=call.batch_size,
            max_seq_len_q=call.max_q_len,
            max_seq_len_kv=max_kv_len,
            num_tokens_per_page=page_size,
            multi_processor_count=self.device.multiprocessor_count,
            # mSparseMla, a flag: STATIC_TOKEN_SPARSE stands for "true" in the shared code.
            sparse_mla_type=SparseMlaType.STATIC_TOKEN_SPARSE if top_k > 0 else SparseMlaType.NONE,
            sparse_mla_top_k=top_k,
            attention_window_size=INT_MAX if window_left == -1 else window_left + 1,
            chunked_attention_size=INT_MAX,
            skips_softmax=False,
            dtype_q=call.dtype_q,
            dtype_kv=call.dtype_kv,
            dtype_o=call.dtype_o,
        )

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
            row.skips_softmax and self.HASHES_SKIPS_SOFTMAX,
        )

    # Whether hashID has a skipsSoftmax bit (56): from 0.6.4.
    HASHES_SKIPS_SOFTMAX = True

    @staticmethod
    def row_sparse(row: KernelMeta) -> bool:
        """The sparse flag hashID(KernelMeta) packs: mSparseAttn != 0."""
        return bool(row.sparse_attn)

    def is_mla_gen_kernel(self, params: RunnerParams) -> bool:
        return params.head_dim_qk == 576 and params.head_dim_v == 512

    @staticmethod
    def sparse_uses_2cta(params: RunnerParams) -> bool:
        return params.num_heads_q_per_kv == 128 and (
            params.batch_size * (params.num_heads_q_per_kv // 64) * 8 > params.multi_processor_count
        )

    def select_kernel(self, params: RunnerParams, select: SelectKernelParams) -> None:
        if params.kernel_type is KernelType.GENERATION and self.is_mla_gen_kernel(params):
            self.select_mla_generation_kernel(params, select)
        elif params.kernel_type is KernelType.GENERATION:
            # Rank-256 MLA (320/256) comes here too: this era's isMlaGenKernel knows 576/512 only.
            self.select_gq_generation_kernel(params, select)
        elif params.kernel_type is not KernelType.CONTEXT:
            raise NotPorted("only the generation and context selections are ported")
        elif self.gqa is None:
            raise NotPorted("trtllm-gen's context selection of this release has no port")
        if (
            params.head_dim_v > 256
            and not self.is_mla_gen_kernel(params)
            and select.kernel_type is not KernelType.SWAPS_MMA_AB_FOR_GENERATION
        ):
            select.head_dim_per_cta_v = 256
        if (select.mask_type is MaskType.CAUSAL or params.kernel_type is not KernelType.CONTEXT) and (
            params.max_seq_len_kv > params.attention_window_size or params.chunked_attention_size != INT_MAX
        ):
            if not (
                params.max_seq_len_kv <= params.attention_window_size
                or params.max_seq_len_kv <= params.chunked_attention_size
            ):
                raise Refusal(
                    "selectKernel",
                    "Sliding window attention and chunked attention should not be used together",
                    KERNELS,
                )
            select.mask_type = MaskType.SLIDING_OR_CHUNKED_CAUSAL
        if params.sparse_mla_type is not SparseMlaType.NONE:
            select.num_tokens_per_page = 1
        elif params.qkv_layout is not QkvLayout.PAGED_KV:
            select.num_tokens_per_page = 0

    def hash_from_runner_params(self, params: RunnerParams, select: SelectKernelParams) -> tuple[int, str]:
        sparse = params.sparse_mla_type is not SparseMlaType.NONE
        info = (
            later.hash_info_head(params, select)
            + f"reuseSmemKForV={int(select.reuse_smem_k_for_v)}, uses2CtaMma={int(select.uses_2cta_mma)}, "
            f"sparseMla={int(sparse)}"
        )
        if self.HASHES_SKIPS_SOFTMAX:
            info += f", skipsSoftmax={int(select.skips_softmax)}"
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
            select.skips_softmax and self.HASHES_SKIPS_SOFTMAX,
        )
        return key, info
