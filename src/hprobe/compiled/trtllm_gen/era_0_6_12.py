"""trtllm-gen FMHA kernel selection, as flashinfer 0.6.12 – 0.6.15.post1 ship it.

A port of the C++ each wheel carries (`include/flashinfer/trtllm/fmha/fmhaKernels.cuh`,
`fmhaRunner.cuh`, `csrc/trtllm_fmha_kernel_launcher.cu`): what the launcher makes of
its arguments, the runner's architecture check, and `TllmGenFmhaKernel`'s selection,
hash and lookup, up to the launch: MLA decode, and GQA/MHA decode
(`selectGqGenerationKernel`) and context where an era's `GQA_VARIANTS` says its
releases read as ported (elsewhere those end in `NotPorted`). Each method names
the C++ function it follows; the order of checks is the C++'s, so the first
refusal is the one the GPU would raise.

`FINGERPRINT` holds the digest of every C++ function ported here (cxx.SourceFile.digest):
a release is evaluated with this port only where all of them read the same.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, replace
from enum import IntEnum

from hprobe.compiled.files import KERNELS, LAUNCHER, RUNNER
from hprobe.compiled.table import LATER_FIELDS, KernelMeta, KernelTable, TableError

# The functions this port follows, per file, with their digests as these releases ship them.
FINGERPRINT: dict[str, dict[str, tuple[str, ...]]] = {
    KERNELS: {
        "isFamilySpecificSMPair": ("806120d671b35583",),
        "isSMCompatible": ("0915412cb7b6eba0",),
        "TllmGenFmhaKernel": ("9a87e362d7f11faf",),
        "loadKernels": ("5651695304c993f1",),
        "hashID": ("e10a0c79fee385b0",),
        "isDynamicNumTokensPerPageKernel": ("951d5d0c258fe0e8",),
        "checkIfKernelExist": ("23755edf39733cfb",),
        "run": ("8a9921dd22588015",),
        "isMlaGenKernel": ("9be88bcb1b801f17",),
        "useDynamicNumTokensPerPage": ("744b5d1235fee551",),
        "selectNumTokensPerPage": ("4ab8d642cb523093",),
        "computeCtaAndClusterConfig": ("397786be249a8662",),
        "useSwapsMmaAbMlaGenKernel": ("5f0804d21fcb0725",),
        "selectSparseMlaGenerationKernel": ("2aa7687a1bae1dcc",),
        "selectMlaGenerationKernel": ("5616746c5fd10087",),
        "selectKernel": ("912a495391e49a74",),
        "hashFromRunnerParams": ("3e6c39bc13e89b52",),
        "loadKernel": ("008a777e6d4f971c",),
    },
    RUNNER: {"TllmGenFmhaRunner": ("426fda3329ae8737",)},
    LAUNCHER: {
        # 0.6.15 passes the multi-CTA counter as its own buffer (and checks its
        # size); what the selection reads is assigned as before.
        "trtllm_paged_attention_launcher": ("18533066c79967d6", "fd928e3c71c9fa01"),
        "trtllm_paged_attention_decode": ("986506487c73968a", "665cfeb0dc094879"),
        "trtllm_paged_attention_decode_sparse_mla_dsv4": ("8c62d6d675845078", "96d7ef1758a68326"),
    },
}


@dataclass(frozen=True)
class GqaVariant:
    """The GQA/MHA selection as a set of releases reads it (generation's selector,
    and the context launcher, whose kernels selectKernel takes as they come): a
    release's GQA/MHA calls are evaluated where its functions have these digests."""

    releases: str
    fingerprint: dict[str, dict[str, tuple[str, ...]]]
    # 0.6.14 keeps headDimPerCtaV and the multi-CTA mode in step with each tile
    # candidate (syncGqaGenerationTraitsForKernelHash); 0.6.12 - 0.6.13 hash the
    # candidate with whatever the previous one left (flashinfer #3343's missing
    # headDimQk=512 kernel).
    syncs_traits: bool


# The GQA/MHA selector as two sets of releases read it (later eras name these too).
GQA_SELECTOR_SYNCED: dict[str, tuple[str, ...]] = {  # 0.6.14 – 0.6.17
    "selectGqGenerationKernel": ("05702bd9ce88dd0d",),
    "syncGqaGenerationTraitsForKernelHash": ("3a7535c957a7a1c9",),
    "selectTileSizeQForGqaGeneration": ("a88242e074dbaf2c",),
}
GQA_SELECTOR_UNSYNCED: dict[str, tuple[str, ...]] = {  # 0.6.11 – 0.6.13
    "selectGqGenerationKernel": ("9611c28bc35d5ef8",),
    "selectTileSizeQForGqaGeneration": ("638e484dc46bb525",),
}

GQA_VARIANTS: tuple[GqaVariant, ...] = (
    GqaVariant(
        "0.6.14 – 0.6.15.post1",
        {
            KERNELS: GQA_SELECTOR_SYNCED,
            # 0.6.15 hands the multi-CTA counter over as its own buffer; what the selection reads is as before.
            LAUNCHER: {"trtllm_paged_attention_context": ("b99b13ddb7853cd0", "080c180f2d70b665")},
        },
        syncs_traits=True,
    ),
    GqaVariant(
        "0.6.12 – 0.6.13",
        {
            KERNELS: GQA_SELECTOR_UNSYNCED,
            LAUNCHER: {"trtllm_paged_attention_context": ("b99b13ddb7853cd0",)},
        },
        syncs_traits=False,
    ),
)


class QkvLayout(IntEnum):  # fmhaRunnerParams.h
    SEPARATE_QKV = 0
    PACKED_QKV = 1
    PAGED_KV = 2
    CONTIGUOUS_KV = 3


class MaskType(IntEnum):  # TrtllmGenAttentionMaskType
    DENSE = 0
    CAUSAL = 1
    SLIDING_OR_CHUNKED_CAUSAL = 2
    CUSTOM = 3


class KernelType(IntEnum):  # FmhaKernelType
    CONTEXT = 0
    GENERATION = 1
    SWAPS_MMA_AB_FOR_GENERATION = 2
    KEEPS_MMA_AB_FOR_GENERATION = 3
    SPEC_DECODING_GENERATION = 4


class TileScheduler(IntEnum):
    STATIC = 0
    PERSISTENT = 1


class MultiCtasKvMode(IntEnum):
    DISABLED = 0
    GMEM_REDUCTION = 1
    GMEM_REDUCTION_WITH_SEPARATE_KERNEL = 2
    CGA_SMEM_REDUCTION = 3


class SparseMlaType(IntEnum):  # TrtllmGenSparseMlaType
    NONE = 0
    STATIC_TOKEN_SPARSE = 1
    DYNAMIC_TOKEN_SPARSE = 2


INT_MAX = 2**31 - 1


class Refusal(Exception):
    """A check in the compiled code that refuses the call: `FLASHINFER_CHECK`,
    `TVM_FFI_ICHECK`, `FLASHINFER_ERROR`. `file` and `needle` locate it in the
    release's source (the line holding `needle`, at or after `function`)."""

    def __init__(self, function: str, message: str, file: str, needle: str | None = None):
        super().__init__(message)
        self.function, self.message, self.file, self.needle = function, message, file, needle or message

    def __reduce__(self) -> tuple[type[Refusal], tuple[str, str, str, str]]:
        # Answers worked out in a child cross a pipe pickled; Exception's own
        # reduce would call this class with the message alone.
        return (type(self), (self.function, self.message, self.file, self.needle))


class NotPorted(Exception):
    """The selection took a path this port does not follow."""


class Undetermined(Exception):
    """The selection depends on a runtime answer a CPU cannot give (an occupancy query)."""


@dataclass(frozen=True)
class Device:
    """What the selection asks of the GPU."""

    sm: int  # major * 10 + minor, as getSMVersion() returns it
    multiprocessor_count: int
    max_shared_memory_per_block_optin: int


@dataclass
class RunnerParams:
    """The TllmGenFmhaRunnerParams fields the selection reads."""

    qkv_layout: QkvLayout
    mask_type: MaskType
    kernel_type: KernelType
    tile_scheduler: TileScheduler
    multi_ctas_kv_mode: bool
    head_dim_qk: int
    head_dim_v: int
    num_heads_q: int
    num_heads_kv: int
    num_heads_q_per_kv: int
    batch_size: int
    max_seq_len_q: int
    max_seq_len_kv: int
    num_tokens_per_page: int
    multi_processor_count: int
    sparse_mla_type: SparseMlaType
    sparse_mla_top_k: int
    attention_window_size: int
    chunked_attention_size: int
    skips_softmax: bool
    # Read by later eras only. The runner's dtypes (TllmGenFmhaKernel's mDtypeQ, K = V, Out).
    dtype_q: str = ""
    dtype_kv: str = ""
    dtype_o: str = ""
    bf16q_fp8kv_transform_mode: int = 0  # Bf16QFp8KvTransformMode: 0 Full, 1 KOnly, 2 SeparateKv
    use_fp16_softmax: bool = False
    uses_spcompress: bool = False
    fuses_dsv4_inv_rope_fp8_quant: bool = False
    # 0.7.4's window (mLeftSlidingWindow, mRightSlidingWindow; -1: none), beside the
    # attention window size earlier releases derive from the same window_left.
    left_sliding_window: int = -1
    right_sliding_window: int = -1


@dataclass
class SelectKernelParams:
    """TllmGenSelectKernelParams, with its constructor's defaults."""

    kernel_type: KernelType
    head_dim_per_cta_v: int
    multi_ctas_kv_mode: MultiCtasKvMode
    force_gmem_reduction: bool
    mask_type: MaskType
    num_tokens_per_page: int
    dynamic_num_tokens_per_page: bool
    reuse_smem_k_for_v: bool
    select_new_kernel: bool
    skips_softmax: bool
    tile_scheduler: TileScheduler
    tile_size_q: int
    tile_size_kv: int
    uses_2cta_mma: bool
    # Read by later eras only.
    groups_tokens_heads_q: bool = False
    bf16q_fp8kv_transform_mode: int = 0
    use_fp16_softmax: bool = False
    uses_spcompress: bool = False
    fuses_dsv4_inv_rope_fp8_quant: bool = False

    @classmethod
    def of(cls, params: RunnerParams) -> SelectKernelParams:
        return cls(
            kernel_type=params.kernel_type,
            head_dim_per_cta_v=params.head_dim_v,
            multi_ctas_kv_mode=MultiCtasKvMode.GMEM_REDUCTION
            if params.multi_ctas_kv_mode
            else MultiCtasKvMode.DISABLED,
            force_gmem_reduction=False,
            mask_type=params.mask_type,
            num_tokens_per_page=params.num_tokens_per_page,
            dynamic_num_tokens_per_page=False,
            reuse_smem_k_for_v=False,
            select_new_kernel=False,
            skips_softmax=params.skips_softmax,
            tile_scheduler=params.tile_scheduler,
            tile_size_q=128,
            tile_size_kv=128,
            uses_2cta_mma=False,
            bf16q_fp8kv_transform_mode=params.bf16q_fp8kv_transform_mode,
            use_fp16_softmax=params.use_fp16_softmax,
            uses_spcompress=params.uses_spcompress,
            fuses_dsv4_inv_rope_fp8_quant=params.fuses_dsv4_inv_rope_fp8_quant,
        )


@dataclass(frozen=True)
class Launch:
    """What reaches the GPU: the kernel row and the grid it is launched with."""

    kernel: KernelMeta
    ctas: tuple[int, int, int]
    cluster_x: int


@dataclass(frozen=True)
class FmhaCall:
    """The arguments of a call into trtllm-gen's FMHA launcher that the selection
    depends on (the rest are pointers and strides). `dtype_*` are Data_type names
    (DATA_TYPE_BF16)."""

    dsv4: bool  # trtllm_paged_attention_decode_sparse_mla_dsv4, else trtllm_paged_attention_decode
    dtype_q: str
    dtype_kv: str
    dtype_o: str
    num_qo_heads: int
    head_dim_q: int  # query.size(-1)
    head_dim_o: int  # out.size(-1)
    batch_size: int
    max_q_len: int
    max_kv_len: int  # trtllm_paged_attention_decode's max_kv_len; the DSv4 launcher takes top-k
    page_size: int  # kv_cache.size(-2)
    sparse_mla_top_k: int  # 0: dense; for DSv4 the index rows' width
    num_kv_heads: int = 1  # kv_cache.size(-3): one latent head for MLA; GQA/MHA's KV heads
    context: bool = False  # trtllm_paged_attention_context (prefill, causal), else a decode launcher


class Selection:
    """The compiled path of one call on one GPU, from the launcher to the launch."""

    # The SMs TllmGenFmhaRunner's constructor takes (fmhaRunner.cuh).
    RUNNER_SMS: tuple[int, ...] = (100, 103)
    # isSMCompatible: which kernel SM a GPU SM runs (kSM_100f is the family build).
    COMPATIBLE: dict[int, tuple[str, ...]] = {103: ("kSM_100f", "kSM_103"), 100: ("kSM_100f", "kSM_100")}
    FAMILY_SPECIFIC: tuple[str, ...] = ("kSM_100", "kSM_103")

    # Kernel-table fields (C names) this era reads beyond those every table has.
    TABLE_FIELDS: tuple[str, ...] = ("mDataTypeK", "mDataTypeV", "mSparseAttn")

    def __init__(self, table: KernelTable, device: Device, gqa: GqaVariant | None = None):
        # gqa: how the release selects GQA/MHA generation kernels; None: not ported for it.
        self.gqa = gqa
        lacking = [name for name in self.TABLE_FIELDS if getattr(table.rows[0], LATER_FIELDS[name]) is None]
        if lacking:
            raise TableError(
                f"{table.origin}: the struct has no {', '.join(lacking)}, which this release's selection reads"
            )
        self.table, self.device = table, device
        self._maps: dict[tuple[str, str, str, str], dict[int, KernelMeta]] = {}
        # The runner's kernels (TllmGenFmhaKernel's map) for the call being selected:
        # the GQA cost model loads candidates while it selects, as the C++ object does.
        self._kernels: dict[int, KernelMeta] = {}

    # --- the launcher (trtllm_fmha_kernel_launcher.cu) ---

    def launch(self, call: FmhaCall) -> Launch:
        """The kernel the call launches, or the Refusal the compiled code raises."""
        if call.context:
            self._context_checks(call)
            params = self._launcher_params(
                call, max_kv_len=call.max_kv_len, page_size=call.page_size, window_left=-1, dynamic_sparse=False
            )
            # TllmPagedAttentionMode::Context (is_causal: the entry's default).
            params.mask_type, params.kernel_type = MaskType.CAUSAL, KernelType.CONTEXT
            params.tile_scheduler, params.multi_ctas_kv_mode = TileScheduler.PERSISTENT, False
        elif call.dsv4:
            self._dsv4_checks(call)
            params = self._launcher_params(
                call, max_kv_len=call.sparse_mla_top_k, page_size=1, window_left=127, dynamic_sparse=True
            )
        else:
            self._decode_checks(call)
            params = self._launcher_params(
                call, max_kv_len=call.max_kv_len, page_size=call.page_size, window_left=-1, dynamic_sparse=False
            )
        kernels = self._runner(call)
        found, info = self.check_if_kernel_exist(kernels, params)
        if not found:
            raise Refusal(
                "trtllm_paged_attention_launcher",
                f"Missing TRTLLM-GEN kernel ({'context' if call.context else 'decode'}): {info}",
                LAUNCHER,
                "Missing TRTLLM-GEN kernel",
            )
        return self.run(kernels, params)

    def _decode_checks(self, call: FmhaCall) -> None:
        # trtllm_paged_attention_decode: head dims of q/k and v/o (no 4-bit dtypes here).
        head_v = call.head_dim_q  # key_cache == value_cache for MLA: v's last dim is q's
        if not (
            (head_v == 576 and call.head_dim_o == 512)
            or (head_v == 320 and call.head_dim_o == 256)
            or head_v == call.head_dim_o
        ):
            raise Refusal(
                "trtllm_paged_attention_decode",
                "head_dim_v and head_dim_o must be the same for non-MLA attention, or equal to (576, 512) or (320, "
                "256) for MLA attention",
                LAUNCHER,
                "head_dim_v and head_dim_o must be the same",
            )

    def _context_checks(self, call: FmhaCall) -> None:
        # trtllm_paged_attention_context: K is the query's head dim (one cache); V the output's.
        if call.head_dim_q != call.head_dim_o:
            raise Refusal(
                "trtllm_paged_attention_context",
                f"head_dim_v and head_dim_o must be the same, got {call.head_dim_q} and {call.head_dim_o}",
                LAUNCHER,
                "head_dim_v and head_dim_o must be the same",
            )

    def _dsv4_checks(self, call: FmhaCall) -> None:
        # trtllm_paged_attention_decode_sparse_mla_dsv4, in its order.
        f = "trtllm_paged_attention_decode_sparse_mla_dsv4"
        if call.dtype_q not in ("DATA_TYPE_BF16", "DATA_TYPE_E4M3"):
            raise Refusal(f, "DeepSeek V4 sparse MLA only supports BF16 or FP8 E4M3 query", LAUNCHER)
        if call.dtype_kv != call.dtype_q:
            raise Refusal(f, "primary_kv_cache dtype must match query dtype", LAUNCHER)
        if call.dtype_o != "DATA_TYPE_BF16":
            raise Refusal(f, "DeepSeek V4 sparse MLA output must be BF16", LAUNCHER)
        if call.head_dim_q != 512 or call.head_dim_o != 512:
            raise Refusal(
                f,
                f"Check failed: head_dim_q == 512 ({call.head_dim_q} vs. 512)",
                LAUNCHER,
                "TVM_FFI_ICHECK_EQ(head_dim_q, 512)",
            )
        self._dsv4_top_k_checks(call)

    def _dsv4_top_k_checks(self, call: FmhaCall) -> None:
        if call.sparse_mla_top_k % 4:
            raise Refusal(
                "trtllm_paged_attention_decode_sparse_mla_dsv4", "sparse topK must be a multiple of 4", LAUNCHER
            )

    def _launcher_params(
        self, call: FmhaCall, max_kv_len: int, page_size: int, window_left: int, dynamic_sparse: bool
    ) -> RunnerParams:
        # trtllm_paged_attention_launcher, mode ForGen.
        num_kv_heads = call.num_kv_heads
        if call.num_qo_heads % num_kv_heads != 0:
            raise Refusal(
                "trtllm_paged_attention_launcher",
                "num_qo_heads must be a multiple of num_kv_heads, got num_kv_heads: "
                f"{num_kv_heads} and num_qo_heads: {call.num_qo_heads}",
                LAUNCHER,
                "num_qo_heads must be a multiple of num_kv_heads",
            )
        top_k = call.sparse_mla_top_k
        sparse = (
            SparseMlaType.NONE
            if top_k <= 0
            else SparseMlaType.DYNAMIC_TOKEN_SPARSE
            if dynamic_sparse
            else SparseMlaType.STATIC_TOKEN_SPARSE
        )
        head_dim_qk, head_dim_vo = call.head_dim_q, call.head_dim_o
        is_dsv4 = sparse is not SparseMlaType.NONE and head_dim_qk == 512 and head_dim_vo == 512
        is_mla_decode = (
            (head_dim_qk == 576 and head_dim_vo == 512) or (head_dim_qk == 320 and head_dim_vo == 256) or is_dsv4
        )
        if not (is_mla_decode or top_k <= 0):
            raise Refusal("trtllm_paged_attention_launcher", "Only decode MLA supports sparse MLA", LAUNCHER)
        return RunnerParams(
            qkv_layout=QkvLayout.PAGED_KV,
            mask_type=MaskType.DENSE if is_mla_decode else MaskType.CAUSAL,
            kernel_type=KernelType.GENERATION,
            tile_scheduler=TileScheduler.STATIC,  # use_multi_block = true
            multi_ctas_kv_mode=True,
            head_dim_qk=head_dim_qk,
            head_dim_v=head_dim_vo,
            num_heads_q=call.num_qo_heads,
            num_heads_kv=num_kv_heads,
            num_heads_q_per_kv=call.num_qo_heads // num_kv_heads,
            batch_size=call.batch_size,
            max_seq_len_q=call.max_q_len,
            max_seq_len_kv=max_kv_len,
            num_tokens_per_page=page_size,
            multi_processor_count=self.device.multiprocessor_count,
            sparse_mla_type=sparse,
            sparse_mla_top_k=top_k,
            attention_window_size=INT_MAX if window_left == -1 else window_left + 1,
            chunked_attention_size=INT_MAX,
            skips_softmax=False,
            dtype_q=call.dtype_q,
            dtype_kv=call.dtype_kv,
            dtype_o=call.dtype_o,
            left_sliding_window=window_left,
            right_sliding_window=0 if window_left >= 0 else -1,
        )

    # --- TllmGenFmhaRunner (fmhaRunner.cuh) and the factory (fmhaKernels.cuh) ---

    def _runner(self, call: FmhaCall) -> dict[int, KernelMeta]:
        if self.device.sm not in self.RUNNER_SMS:
            raise Refusal("TllmGenFmhaRunner", "Unsupported architecture", RUNNER)
        key = (call.dtype_q, call.dtype_kv, call.dtype_kv, call.dtype_o)
        if key not in self._maps:
            self._maps[key] = self.load_kernels(*key)
        return self._maps[key]

    def load_kernels(self, dtype_q: str, dtype_k: str, dtype_v: str, dtype_o: str) -> dict[int, KernelMeta]:
        """loadKernels: hash -> row for every row this GPU and these dtypes run."""
        out: dict[int, KernelMeta] = {}
        compatible = self.COMPATIBLE.get(self.device.sm, ())
        for row in self.table.rows:
            if not self._loads(row, compatible, dtype_q, dtype_k, dtype_v, dtype_o):
                continue
            key = self.hash_of_row(row)
            existing = out.get(key)
            if existing is None:
                out[key] = row
                continue
            if not self._family_specific_pair(existing.sm, row.sm):
                raise Refusal(
                    "loadKernels",
                    f"Hash conflicts exist between {existing.name} and {row.name}.",
                    KERNELS,
                    "Hash conflicts exist",
                )
            if existing.sm == "kSM_100f":
                out[key] = row  # the specific SM's build over the family's
        return out

    def _loads(self, row: KernelMeta, compatible: tuple[str, ...], q: str, k: str, v: str, o: str) -> bool:
        return (
            row.sm in compatible
            and (row.dtype_q, row.dtype_k, row.dtype_v, row.dtype_o) == (q, k, v, o)
            and row.sage_blocks == (0, 0, 0, 0)
        )

    def _family_specific_pair(self, a: str, b: str) -> bool:
        return (a == "kSM_100f" and b in self.FAMILY_SPECIFIC) or (b == "kSM_100f" and a in self.FAMILY_SPECIFIC)

    # --- TllmGenFmhaKernel (fmhaKernels.cuh) ---

    @staticmethod
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
        dynamic_num_tokens_per_page: bool,
        reuse_smem_k_for_v: bool,
        uses_2cta_mma: bool,
        sparse_mla_type: int,
        skips_softmax: bool,
    ) -> int:
        check_key_fields(
            head_dim_per_cta_v, head_dim_qk, head_dim_v, tile_size_q, tile_size_kv, num_tokens_per_page, sparse_mla_type
        )
        pages_log2 = 0 if num_tokens_per_page == 0 else num_tokens_per_page.bit_length() - 1
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
        return key | sparse_mla_type << 55 | int(skips_softmax) << 57 | int(dynamic_num_tokens_per_page) << 58

    DYNAMIC_PAGE_THRESHOLD = 128  # kDynamicNumTokensPerPageThreshold
    DYNAMIC_PAGE_KEY = 128  # kDynamicNumTokensPerPageKernelKey

    def is_dynamic_pages_kernel(self, row: KernelMeta) -> bool:
        return row.num_tokens_per_page == self.DYNAMIC_PAGE_KEY and "P128" not in row.name

    def hash_of_row(self, row: KernelMeta) -> int:
        return self.hash_id(
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
            row.sparse_attn or 0,  # present: TABLE_FIELDS
            row.skips_softmax,
        )

    def check_if_kernel_exist(self, kernels: dict[int, KernelMeta], params: RunnerParams) -> tuple[bool, str]:
        self._kernels = kernels
        select = SelectKernelParams.of(params)
        self.select_kernel(params, select)
        key, info = self.hash_from_runner_params(params, select)
        return key in kernels, info

    MAX_SELECTION_PASSES = 4  # kMaxKernelSelectionPasses

    def run(self, kernels: dict[int, KernelMeta], params: RunnerParams) -> Launch:
        """run(), up to the launch: the bounded re-selection loop."""
        self._kernels = kernels
        select = SelectKernelParams.of(params)
        launch: tuple[tuple[int, int, int], int, int] | None = None
        row: KernelMeta | None = None
        for selection_pass in range(self.MAX_SELECTION_PASSES):
            self.select_kernel(params, select)
            row = self.load_kernel(kernels, params, select)
            launch = self.compute_cta_and_cluster_config(params, row, select)
            if not select.select_new_kernel:
                break
            if not selection_pass + 1 < self.MAX_SELECTION_PASSES:
                raise Refusal(
                    "run",
                    f"trtllm-gen kernel selection did not converge in {self.MAX_SELECTION_PASSES} passes.",
                    KERNELS,
                    "did not converge in",
                )
        assert row is not None and launch is not None
        if select.multi_ctas_kv_mode is MultiCtasKvMode.CGA_SMEM_REDUCTION:
            self._gmem_fallback(kernels, params, select)
        return Launch(row, launch[0], launch[1])

    def _gmem_fallback(self, kernels: dict[int, KernelMeta], params: RunnerParams, select: SelectKernelParams) -> None:
        """run()'s CgaSmemReduction fallback. Whether it is taken is a run-time answer
        (cuOccupancyMaxActiveClusters: do the clusters fit one wave?); what it does
        once taken is not: select again with GmemReduction forced, load, and check the
        selection settled. Where that launches too, the call launches either way (the
        CgaSmemReduction kernel is the one-wave launch, returned by run); where it is
        refused, the launch hangs on the occupancy answer."""
        select.force_gmem_reduction = True
        select.multi_ctas_kv_mode = MultiCtasKvMode.GMEM_REDUCTION
        try:
            self.select_kernel(params, select)
            row = self.load_kernel(kernels, params, select)
            self.compute_cta_and_cluster_config(params, row, select)
            if select.select_new_kernel:
                raise Refusal(
                    "run",
                    "trtllm-gen kernel selection did not converge after CgaSmemReduction fallback to GmemReduction.",
                    KERNELS,
                    "did not converge after CgaSmemReduction",
                )
        except Refusal as refusal:
            raise Undetermined(
                "CgaSmemReduction: the kernel launches when cuOccupancyMaxActiveClusters says its clusters fit one "
                f'wave; otherwise run() falls back to GmemReduction, which is refused ("{refusal.message}")'
            ) from None

    def is_mla_gen_kernel(self, params: RunnerParams) -> bool:
        return (
            (params.head_dim_qk == 576 and params.head_dim_v == 512)
            or (params.head_dim_qk == 320 and params.head_dim_v == 256)
            or (
                params.sparse_mla_type is not SparseMlaType.NONE
                and params.head_dim_qk == 512
                and params.head_dim_v == 512
            )
        )

    def use_dynamic_num_tokens_per_page(self, params: RunnerParams) -> bool:
        return (
            params.qkv_layout is QkvLayout.PAGED_KV
            and params.sparse_mla_type is SparseMlaType.NONE
            and params.num_heads_q_per_kv > 1
            and params.head_dim_qk == params.head_dim_v
            and params.num_tokens_per_page >= self.DYNAMIC_PAGE_THRESHOLD
        )

    def select_num_tokens_per_page(self, params: RunnerParams, select: SelectKernelParams) -> None:
        select.dynamic_num_tokens_per_page = False
        if params.sparse_mla_type is not SparseMlaType.NONE:
            select.num_tokens_per_page = 1
        elif params.qkv_layout is not QkvLayout.PAGED_KV:
            select.num_tokens_per_page = 0
        elif self.use_dynamic_num_tokens_per_page(params):
            if not _power_of_two(params.num_tokens_per_page):
                raise Refusal(
                    "selectNumTokensPerPage",
                    f"Dynamic numTokensPerPage requires a power-of-2 page size, got {params.num_tokens_per_page}.",
                    KERNELS,
                    "Dynamic numTokensPerPage requires",
                )
            select.dynamic_num_tokens_per_page = True
            select.num_tokens_per_page = self.DYNAMIC_PAGE_KEY
        else:
            select.num_tokens_per_page = params.num_tokens_per_page

    def compute_cta_and_cluster_config(  # noqa: C901 - the C++ function's shape, branch for branch
        self, params: RunnerParams, row: KernelMeta, select: SelectKernelParams
    ) -> tuple[tuple[int, int, int], int, int]:
        """computeCtaAndClusterConfig: the grid, the cluster's x, the CTAs per KV
        sequence (mMaxNumCtasKv), and whether another kernel fits better."""
        f = "computeCtaAndClusterConfig"
        mp = params.multi_processor_count
        dsv3_min_latency = (
            params.batch_size == 1
            and 1 <= params.max_seq_len_q <= 16
            and params.head_dim_qk == 576
            and params.head_dim_v == 512
        )
        select.select_new_kernel = False
        ctas_per_seq_q = (params.max_seq_len_q + row.step_q - 1) // row.step_q
        if params.max_seq_len_q > 1 and params.kernel_type is not KernelType.CONTEXT:
            if not row.groups_tokens_heads_q:
                ctas_per_seq_q = params.max_seq_len_q
            else:
                tokens_per_cta_q = self.tokens_per_cta_q(row, params)
                ctas_per_seq_q = -(-params.max_seq_len_q // tokens_per_cta_q)
        heads_per_cta = min(params.num_heads_q_per_kv, row.step_q) if row.groups_heads_q else 1
        ctas_for_all_heads_q = params.num_heads_q // heads_per_cta
        if heads_per_cta * ctas_for_all_heads_q != params.num_heads_q:
            raise Refusal(f, "The numHeadsQ/numHeadsKv is not supported.", KERNELS)
        if row.head_dim_v % select.head_dim_per_cta_v != 0:
            raise Refusal(f, "The headDimPerCtaV is not supported.", KERNELS)
        ctas_per_head_dim = row.head_dim_v // select.head_dim_per_cta_v
        ctas_x = ctas_per_seq_q
        ctas_y = ctas_for_all_heads_q * ctas_per_head_dim
        ctas_z = params.batch_size
        if self.is_mla_gen_kernel(params) and select.uses_2cta_mma:
            if not (ctas_for_all_heads_q == 2 and ctas_per_head_dim == 2):
                raise Refusal(f, "Internal error: numCtasPerHeadDim should be 2.", KERNELS)
            ctas_x *= 2
            ctas_y //= ctas_for_all_heads_q * ctas_per_head_dim
        ctas_per_seq_kv = 1
        if select.multi_ctas_kv_mode is not MultiCtasKvMode.DISABLED:
            window = params.max_seq_len_kv
            if params.sparse_mla_type is not SparseMlaType.NONE:
                window = min(params.max_seq_len_kv, params.sparse_mla_top_k)
            if select.mask_type is MaskType.SLIDING_OR_CHUNKED_CAUSAL:
                if params.max_seq_len_kv > params.attention_window_size:
                    window = min(params.max_seq_len_kv, params.attention_window_size + row.step_kv - 1)
                else:
                    window = min(params.max_seq_len_kv, params.chunked_attention_size)
            max_ctas_per_seq_kv = (window + 2 * row.step_kv - 1) // (2 * row.step_kv)
            tuned = self.tuned_max_ctas_per_seq_kv(
                params, select, max_ctas_per_seq_kv, window, ctas_for_all_heads_q, (ctas_x, ctas_y, ctas_z)
            )
            ctas_per_seq_kv = min(tuned, max(1, mp // (ctas_x * ctas_y * ctas_z)))
            ctas_per_seq_kv = self.clamped_ctas_per_seq_kv(params, select, ctas_per_seq_kv, window, dsv3_min_latency)
            ctas_x *= ctas_per_seq_kv
            total = ctas_x * ctas_z * ctas_y
            if ctas_per_seq_kv <= 1:
                select.multi_ctas_kv_mode = MultiCtasKvMode.DISABLED
                select.tile_scheduler = TileScheduler.PERSISTENT
                select.select_new_kernel = True
            elif (
                total < mp
                and self.is_mla_gen_kernel(params)
                and params.sparse_mla_type is SparseMlaType.NONE
                and select.tile_size_kv == 128
                and self.env_tile_size_kv64
            ):
                select.tile_size_kv = 64
                select.select_new_kernel = True
            if (
                self.uses_cga_smem_reduction(params, select, dsv3_min_latency)
                and 1 < ctas_per_seq_kv <= 16
                and select.kernel_type is KernelType.SWAPS_MMA_AB_FOR_GENERATION
                and select.multi_ctas_kv_mode is MultiCtasKvMode.GMEM_REDUCTION
                and not select.force_gmem_reduction
            ):
                select.multi_ctas_kv_mode = MultiCtasKvMode.CGA_SMEM_REDUCTION
                select.select_new_kernel = True
        cluster_x = 2 if select.uses_2cta_mma else 1
        if select.multi_ctas_kv_mode is MultiCtasKvMode.CGA_SMEM_REDUCTION:
            cluster_x *= ctas_per_seq_kv
        total = ctas_x * ctas_z * ctas_y
        if self.splits_head_dim_v(params, select):
            corr = 1 if dsv3_min_latency else 2
            if select.head_dim_per_cta_v == 512 and total * corr <= mp:
                select.head_dim_per_cta_v = 128 if total * 2 * corr <= mp else 256
                select.select_new_kernel = True
        return (ctas_x, ctas_y, ctas_z), cluster_x, ctas_per_seq_kv

    # Where later eras' computeCtaAndClusterConfig differs; as these releases read it.

    def tuned_max_ctas_per_seq_kv(
        self,
        params: RunnerParams,
        select: SelectKernelParams,
        max_ctas_per_seq_kv: int,
        window: int,
        ctas_for_all_heads_q: int,
        ctas: tuple[int, int, int],
    ) -> int:
        """The cap on the KV split (maxNumCtasPerSeqKv, as is here)."""
        return max_ctas_per_seq_kv

    def tokens_per_cta_q(self, row: KernelMeta, params: RunnerParams) -> int:
        """numTokensPerCtaQ of a kernel that groups tokens and heads: at least one."""
        return max(1, row.step_q // params.num_heads_q_per_kv)

    def clamped_ctas_per_seq_kv(
        self,
        params: RunnerParams,
        select: SelectKernelParams,
        ctas_per_seq_kv: int,
        window: int,
        dsv3_min_latency: bool,
    ) -> int:
        """The KV split after any clamp (none here)."""
        return ctas_per_seq_kv

    def uses_cga_smem_reduction(self, params: RunnerParams, select: SelectKernelParams, dsv3_min_latency: bool) -> bool:
        """Whether a KV split may take CgaSmemReduction (besides the split and kernel-type tests)."""
        return not dsv3_min_latency and params.head_dim_v < 512

    def splits_head_dim_v(self, params: RunnerParams, select: SelectKernelParams) -> bool:
        """Whether headDimV may be split over CTAs to fill idle SMs."""
        return (
            self.is_mla_gen_kernel(params)
            and not select.reuse_smem_k_for_v
            and not select.select_new_kernel
            and not select.uses_2cta_mma
        )

    # TRTLLM_GEN_ENABLE_TILE_SIZE_KV64 (common.h getEnvUseTileSizeKv64ForTrtllmGen): off
    # unless the serving process sets it; the port answers for the default.
    env_tile_size_kv64 = False

    def use_swaps_mma_ab_mla_gen_kernel(self, params: RunnerParams) -> bool:
        max_ctas_per_seq_kv = -(-params.max_seq_len_kv // 256)
        ctas = params.batch_size * params.max_seq_len_q * -(-params.num_heads_q_per_kv // 16)
        ctas_per_seq_kv = min(max_ctas_per_seq_kv, max(1, params.multi_processor_count // ctas))
        seq_len_per_cta_kv = -(-params.max_seq_len_kv // ctas_per_seq_kv)
        return seq_len_per_cta_kv <= 1024 and ctas <= params.multi_processor_count

    def select_sparse_mla_generation_kernel(self, params: RunnerParams, select: SelectKernelParams) -> None:
        if params.num_heads_q_per_kv <= 32:
            select.kernel_type = KernelType.SWAPS_MMA_AB_FOR_GENERATION
            select.tile_size_kv = 128
            full = params.num_heads_q_per_kv
            half = full // 2
            effective_kv = min(params.max_seq_len_kv, params.sparse_mla_top_k)
            max_ctas_per_seq_kv = -(-effective_kv // select.tile_size_kv)
            select.tile_size_q = half if self.sparse_uses_half_tile(params, half, max_ctas_per_seq_kv) else full
        else:
            select.kernel_type = KernelType.KEEPS_MMA_AB_FOR_GENERATION
            select.tile_size_q = 64
            select.tile_size_kv = 128
            if select.multi_ctas_kv_mode is MultiCtasKvMode.GMEM_REDUCTION:
                select.multi_ctas_kv_mode = MultiCtasKvMode.GMEM_REDUCTION_WITH_SEPARATE_KERNEL
            if self.sparse_uses_2cta(params):
                select.uses_2cta_mma = True
                select.head_dim_per_cta_v = 256

    @staticmethod
    def sparse_uses_half_tile(params: RunnerParams, half: int, max_ctas_per_seq_kv: int) -> bool:
        """selectSparseMlaGenerationKernel's half tileSizeQ for small batches (useHalfTileSizeQ)."""
        return half >= 8 and params.batch_size * max_ctas_per_seq_kv <= params.multi_processor_count // 8

    @staticmethod
    def sparse_uses_2cta(params: RunnerParams) -> bool:
        """selectSparseMlaGenerationKernel's 2-CTA rule for 128 heads (use2Cta)."""
        ctas_per_token = params.num_heads_q_per_kv // 64
        return params.num_heads_q_per_kv == 128 and (
            params.max_seq_len_q > 1 or params.batch_size * ctas_per_token * 8 > params.multi_processor_count
        )

    def select_mla_generation_kernel(self, params: RunnerParams, select: SelectKernelParams) -> None:
        if params.sparse_mla_type is not SparseMlaType.NONE:
            self.select_sparse_mla_generation_kernel(params, select)
            return
        if params.num_heads_q_per_kv <= 32 or self.use_swaps_mma_ab_mla_gen_kernel(params):
            select.kernel_type = KernelType.SWAPS_MMA_AB_FOR_GENERATION
            select.tile_size_q = 8 if params.num_heads_q_per_kv <= 8 else 16
        else:
            select.kernel_type = KernelType.KEEPS_MMA_AB_FOR_GENERATION
            select.tile_size_q = 64
            if select.multi_ctas_kv_mode is not MultiCtasKvMode.DISABLED:
                select.multi_ctas_kv_mode = MultiCtasKvMode.GMEM_REDUCTION_WITH_SEPARATE_KERNEL
            if params.num_heads_q_per_kv == 128:
                select.uses_2cta_mma = True
                select.head_dim_per_cta_v = 256

    # --- GQA/MHA generation (selectGqGenerationKernel and its cost model) ---

    def sync_gqa_generation_traits_for_kernel_hash(self, params: RunnerParams, select: SelectKernelParams) -> None:
        """syncGqaGenerationTraitsForKernelHash (0.6.14 on; earlier releases have none)."""
        assert self.gqa is not None
        if not self.gqa.syncs_traits:
            return
        multi_ctas_kv = select.multi_ctas_kv_mode is not MultiCtasKvMode.DISABLED
        if select.kernel_type is KernelType.KEEPS_MMA_AB_FOR_GENERATION and params.head_dim_v > 256:
            select.head_dim_per_cta_v = 256
            if multi_ctas_kv:
                select.multi_ctas_kv_mode = MultiCtasKvMode.GMEM_REDUCTION_WITH_SEPARATE_KERNEL
        else:
            select.head_dim_per_cta_v = params.head_dim_v
            if multi_ctas_kv and select.multi_ctas_kv_mode is MultiCtasKvMode.GMEM_REDUCTION_WITH_SEPARATE_KERNEL:
                select.multi_ctas_kv_mode = MultiCtasKvMode.GMEM_REDUCTION

    # selectTileSizeQForGqaGeneration's cost factors per tileSizeQ (C++ floats).
    MAINLOOP_COST = {128: 2.2, 64: 1.68, 32: 1.48, 16: 1.2, 8: 1.0}
    REDUCTION_COST = {128: 1.32, 64: 1.2, 32: 1.08, 16: 1.03, 8: 1.0}
    REDUCTION_SEQ_LEN_FACTOR = 128.0

    def select_tile_size_q_for_gqa_generation(self, params: RunnerParams, select: SelectKernelParams) -> None:
        """selectTileSizeQForGqaGeneration: for more than one query token, the tile
        the cost model finds cheapest among those no larger than the default that
        hold a whole group. Each candidate is loaded (a missing one refuses the
        call, as loadKernel's check does) and its grid computed, on one copy of
        the selection that every candidate goes on mutating, as in the C++."""
        factor = _f32(self.gqa_mainloop_cost_factor(params, select))
        trial = replace(select)
        row = self.load_kernel(self._kernels, params, trial)
        ctas, _cluster, _ctas_kv = self.compute_cta_and_cluster_config(params, row, trial)
        if ctas[0] * ctas[1] * ctas[2] * 2 > params.multi_processor_count or trial.tile_size_q <= 8:
            return
        default_tile, chosen = trial.tile_size_q, trial.tile_size_q
        best = math.inf  # FLT_MAX: every finite cost is below it
        for tile in (128, 64, 32, 16, 8):
            if tile > default_tile or tile < params.num_heads_q_per_kv:
                continue
            trial.tile_size_q = tile
            trial.kernel_type = (
                KernelType.KEEPS_MMA_AB_FOR_GENERATION if tile >= 64 else KernelType.SWAPS_MMA_AB_FOR_GENERATION
            )
            self.sync_gqa_generation_traits_for_kernel_hash(params, trial)
            row = self.load_kernel(self._kernels, params, trial)
            ctas, _cluster, ctas_kv = self.compute_cta_and_cluster_config(params, row, trial)
            seq_len_per_cta_kv = _ceil_div(_ceil_div(params.max_seq_len_kv, row.step_kv), ctas_kv) * row.step_kv
            cost = _f32(
                _f32(_f32(factor * _f32(self.MAINLOOP_COST[tile])) * seq_len_per_cta_kv)
                + _f32(_f32(_f32(self.REDUCTION_COST[tile]) * self.REDUCTION_SEQ_LEN_FACTOR) * ctas_kv)
            )
            waves = _ceil_div(ctas[0] * ctas[1] * ctas[2], params.multi_processor_count)
            cost = _f32(cost * waves)
            if cost < best:
                best, chosen = cost, tile
        select.tile_size_q = chosen
        select.kernel_type = (
            KernelType.KEEPS_MMA_AB_FOR_GENERATION if chosen >= 64 else KernelType.SWAPS_MMA_AB_FOR_GENERATION
        )
        self.sync_gqa_generation_traits_for_kernel_hash(params, select)

    def gqa_mainloop_cost_factor(self, params: RunnerParams, select: SelectKernelParams) -> float:
        """The cost model's mainloop factor (0.6.18 doubles it for one transform mode)."""
        return 1.0

    def supports_gqa_grouping_tokens_heads_q(self, params: RunnerParams, select: SelectKernelParams) -> bool:
        """Whether the GQA selector may group tokens and heads: not for mixed precision."""
        return params.dtype_q == params.dtype_kv

    def select_gq_generation_kernel(self, params: RunnerParams, select: SelectKernelParams) -> None:
        """selectGqGenerationKernel: the tile from the group times the query length.
        (mGroupsTokensHeadsQ is set as 0.6.18 sets it; the eras before hash no such field.)"""
        if self.gqa is None:
            raise NotPorted("trtllm-gen's GQA/MHA generation selection of this release has no port")
        select.groups_tokens_heads_q = False
        if not self.supports_gqa_grouping_tokens_heads_q(params, select):
            select.tile_size_q = 8 if params.num_heads_q_per_kv <= 8 else 16
            select.kernel_type = KernelType.SWAPS_MMA_AB_FOR_GENERATION
            return
        select.groups_tokens_heads_q = True
        tokens_heads_q = params.num_heads_q_per_kv * params.max_seq_len_q
        # The C++'s if-chain: the first tile that holds numTokensHeadsQ, else 128 (a tile, not
        # an accepted count: whether a kernel exists for it is the table's answer).
        select.tile_size_q = next((t for t in (8, 16, 32, 64) if tokens_heads_q <= t), 128)
        select.kernel_type = (
            KernelType.SWAPS_MMA_AB_FOR_GENERATION
            if select.tile_size_q <= 32
            else KernelType.KEEPS_MMA_AB_FOR_GENERATION
        )
        self.sync_gqa_generation_traits_for_kernel_hash(params, select)
        if params.max_seq_len_q > 1:
            self.select_tile_size_q_for_gqa_generation(params, select)

    def select_kernel(self, params: RunnerParams, select: SelectKernelParams) -> None:
        self.select_num_tokens_per_page(params, select)
        if params.kernel_type is KernelType.CONTEXT:
            # Context kernels are taken as the parameters come (tile 128 x 128); only this
            # era's GQA/MHA reading says its releases select them so.
            if self.gqa is None:
                raise NotPorted("trtllm-gen's context selection of this release has no port")
        elif params.kernel_type is not KernelType.GENERATION:
            raise NotPorted("only the generation and context selections are ported")
        if params.kernel_type is KernelType.GENERATION and self.is_mla_gen_kernel(params):
            self.select_mla_generation_kernel(params, select)
            select.mask_type = MaskType.DENSE
            self.check_window(params, select)
            return
        if params.kernel_type is KernelType.GENERATION:
            self.select_gq_generation_kernel(params, select)
        # headDimV > 256 takes headDimPerCtaV 256 but in SwapsMmaAb kernels (MLA sets its own).
        if (
            params.head_dim_v > 256
            and not self.is_mla_gen_kernel(params)
            and select.kernel_type is not KernelType.SWAPS_MMA_AB_FOR_GENERATION
        ):
            select.head_dim_per_cta_v = 256
        self.sliding_window_mask(params, select)

    def check_window(self, params: RunnerParams, select: SelectKernelParams) -> None:
        """selectKernel after the MLA selector: the window dense MLA generation takes,
        and the sliding-window mask where a window binds."""
        if params.sparse_mla_type is SparseMlaType.NONE and not (
            params.max_seq_len_kv <= params.attention_window_size and params.chunked_attention_size == INT_MAX
        ):
            raise Refusal(
                "selectKernel",
                "TRTLLM-GEN MLA generation does not support sliding-window or chunked attention.",
                KERNELS,
                "does not support sliding-window or chunked attention",
            )
        self.sliding_window_mask(params, select)

    def sliding_window_mask(self, params: RunnerParams, select: SelectKernelParams) -> None:
        """selectKernel's last step: the sliding-window (or chunked) mask where a window binds."""
        if (
            params.sparse_mla_type is SparseMlaType.NONE
            and (select.mask_type is MaskType.CAUSAL or params.kernel_type is not KernelType.CONTEXT)
            and (params.max_seq_len_kv > params.attention_window_size or params.chunked_attention_size != INT_MAX)
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

    def hash_from_runner_params(self, params: RunnerParams, select: SelectKernelParams) -> tuple[int, str]:
        info = (
            hash_info_head(params, select) + f"dynamicNumTokensPerPage={int(select.dynamic_num_tokens_per_page)}, "
            f"reuseSmemKForV={int(select.reuse_smem_k_for_v)}, "
            f"uses2CtaMma={int(select.uses_2cta_mma)}, sparseMlaType={int(params.sparse_mla_type)}, "
            f"skipsSoftmax={int(select.skips_softmax)}"
        )
        key = self.hash_id(
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
            params.sparse_mla_type,
            select.skips_softmax,
        )
        return key, info

    def load_kernel(
        self, kernels: dict[int, KernelMeta], params: RunnerParams, select: SelectKernelParams
    ) -> KernelMeta:
        key, info = self.hash_from_runner_params(params, select)
        row = kernels.get(key)
        if row is None:
            raise Refusal(
                "loadKernel", f"Trtllm-gen kernels not found: {info}", KERNELS, "Trtllm-gen kernels not found"
            )
        return row


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _f32(x: float) -> float:
    """x rounded to a C++ float, as each step of the cost model is."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


def _power_of_two(n: int) -> bool:
    return n & (n - 1) == 0  # as the C++ tests it (0 passes)


# hashID's checks and bits that 0.6.8 - 0.7.x share (0.6.18 repacked the bits: its own).


def check_head_dims(head_dim_per_cta_v: int, head_dim_qk: int, head_dim_v: int) -> None:
    if not (32 <= head_dim_per_cta_v <= 1024 and 32 <= head_dim_qk <= 1024 and 32 <= head_dim_v <= 1024):
        raise Refusal(
            "hashID",
            f"Expect (32 <= headDim <= 1024), got headDimPerCtaV={head_dim_per_cta_v}, headDimQk={head_dim_qk}, "
            f"headDimV={head_dim_v}",
            KERNELS,
            "Expect (32 <= headDim <= 1024)",
        )


def check_tiles(tile_size_q: int, tile_size_kv: int) -> None:
    if not (tile_size_q <= 128 and tile_size_kv <= 128):
        raise Refusal("hashID", "The tileSizeQ and tileSizeKv must be <= 128.", KERNELS)
    if not (_power_of_two(tile_size_q) and _power_of_two(tile_size_kv)):
        raise Refusal("hashID", "The tileSizeQ and tileSizeKv must be power of 2.", KERNELS)
    if tile_size_kv not in (64, 128):
        raise Refusal("hashID", "The tileSizeKv must be 64 or 128.", KERNELS)


def check_key_fields(
    head_dim_per_cta_v: int,
    head_dim_qk: int,
    head_dim_v: int,
    tile_size_q: int,
    tile_size_kv: int,
    num_tokens_per_page: int,
    sparse_mla_type: int,
) -> None:
    """hashID's checks from 0.6.12 on, in order (0.6.18 adds the transform mode's after them)."""
    check_head_dims(head_dim_per_cta_v, head_dim_qk, head_dim_v)
    if not (num_tokens_per_page == 0 or _power_of_two(num_tokens_per_page)):
        raise Refusal("hashID", "The numTokensPerPage must be 0 or power of 2.", KERNELS)
    check_tiles(tile_size_q, tile_size_kv)
    if not 0 <= sparse_mla_type <= 3:
        raise Refusal("hashID", "The sparse MLA type must fit in 2 bits.", KERNELS)


def pack_to_2cta(
    qkv_layout: int,
    mask_type: int,
    kernel_type: int,
    scheduler: int,
    multi_ctas_kv_mode: int,
    head_dim_per_cta_v: int,
    head_dim_qk: int,
    head_dim_v: int,
    tile_size_kv: int,
    pages_log2: int,
    tile_size_q: int,
    reuse_smem_k_for_v: bool,
    uses_2cta_mma: bool,
) -> int:
    """Bits 0 - 54 of the key up to 0.6.17: layout to uses2CtaMma."""
    return (
        qkv_layout
        | mask_type << 4
        | kernel_type << 8
        | scheduler << 12
        | multi_ctas_kv_mode << 16
        | (head_dim_per_cta_v >> 3) << 18
        | (head_dim_qk >> 3) << 26
        | (head_dim_v >> 3) << 34
        | (tile_size_kv >> 6) << 42
        | pages_log2 << 44
        | (tile_size_q.bit_length() - 1) << 49
        | int(reuse_smem_k_for_v) << 53
        | int(uses_2cta_mma) << 54
    )


def hash_info_head(params: RunnerParams, select: SelectKernelParams) -> str:
    """The fields every era's "Missing TRTLLM-GEN kernel" message opens with,
    in the C++'s order, up to the tokens per page, where the eras part ways."""
    return (
        f"qkvLayout={int(params.qkv_layout)}, maskType={int(select.mask_type)}, "
        f"kernelType={int(select.kernel_type)}, "
        f"tileScheduler={int(select.tile_scheduler)}, multiCtasKvMode={int(select.multi_ctas_kv_mode)}, "
        f"headDimPerCtaV={select.head_dim_per_cta_v}, headDimQk={params.head_dim_qk}, "
        f"headDimV={params.head_dim_v}, "
        f"tileSizeQ={select.tile_size_q}, tileSizeKv={select.tile_size_kv}, "
        f"numTokensPerPage={select.num_tokens_per_page}, "
    )
