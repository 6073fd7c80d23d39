"""The SM12x sparse-MLA paged-attention entry, `SparseMlaSm120PagedAttention`,
as flashinfer 0.6.14 - 0.6.17 ship it (`csrc/sparse_mla_sm120.cu`, with the
prefill dispatch of `csrc/sparse_mla_sm120_prefill.cu`): the checks it makes
over the sizes it is handed, in its own order, and the dispatch switch whose
`false` it refuses with "Unsupported sparse-MLA prefill configuration".

Only sizes are read: the dtype and device checks before them hold for every
call a probe makes (bf16 query, uint8 pools, int32 indices) and depend on no
count. A refusal names the C++ check's words and where it stands."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

ENTRY = "csrc/sparse_mla_sm120.cu"
PREFILL = "csrc/sparse_mla_sm120_prefill.cu"

# Digests (cxx.SourceFile.digest) of every function this port follows, as the
# releases of this era ship them: a release whose functions read otherwise is
# not evaluated with it.
FINGERPRINT: dict[str, dict[str, frozenset[str]]] = {
    ENTRY: {
        "SparseMlaSm120PagedAttention": frozenset({"e7041b5d289333e9"}),
        "resolve_model_type": frozenset({"d4eef839301f6785"}),
        "bytes_per_token": frozenset({"e94986eca050e248"}),
        "parse_paged_kv_layout": frozenset({"7f243837b3ea236e"}),
        "check_dense_indices_2d_or_s_q_3d": frozenset({"59b45717912518d1"}),
    },
    PREFILL: {
        "sparse_mla_prefill_dispatch": frozenset({"86f889a4bd95769a"}),
        "dispatch_v32": frozenset({"f2dab2eaeb9b702b"}),
        "dispatch_dsv4_single": frozenset({"f9253371ec97ebc3"}),
        "dispatch_dsv4_dual": frozenset({"916df0ab12eec373"}),
    },
}

# include/flashinfer/attention/sparse_mla_sm120/model/kv_cache_traits.cuh
HPB = 16  # heads per block
BI = 64  # KV partition tile, in candidates
DECODE_MAX_TOKENS = 64


class ModelType(IntEnum):
    """model/model_type.h: `enum class ModelType { DSV3_2, DSV4, GLM_NSA }`."""

    DSV3_2 = 0
    DSV4 = 1
    GLM_NSA = 2


@dataclass(frozen=True)
class Refusal(Exception):
    """A check of the entry that fails: its words, and where it stands."""

    message: str
    file: str  # under the release's flashinfer/data
    function: str
    needle: str  # text on the check's line, to place it in the release


Shape = tuple[int, ...]


@dataclass(frozen=True)
class Call:
    """What the entry is handed, by size (device/boundary.launch_shape, in the
    order of its C++ parameters)."""

    q: Shape
    kv_cache: Shape
    indices: Shape
    output: Shape
    out_lse: Shape
    model_type: int
    topk_length: Shape | None
    attn_sink: Shape | None
    extra_kv_cache: Shape | None
    extra_indices: Shape | None
    extra_topk_length: Shape | None


def _check(ok: bool, message: str, function: str, needle: str, file: str = ENTRY) -> None:
    if not ok:
        raise Refusal(message, file, function, needle)


class Entry:
    """`SparseMlaSm120PagedAttention`, its helpers and the prefill dispatch."""

    # The NH switches of the DSV4 prefill dispatchers, and the top-k widths of
    # the single-cache one (dispatch_dsv4_single's DISPATCH_BY_NH_CM cases and
    # its topk chain; dispatch_dsv4_dual's two switches).
    DSV4_SINGLE_HEADS: frozenset[int] = frozenset({16, 32, 64, 128})
    DSV4_SINGLE_TOPK: frozenset[int] = frozenset({128, 512, 1024, 2048})
    DSV4_DUAL_HEADS: frozenset[int] = frozenset({16, 32, 64, 128})

    def check(self, call: Call) -> None:
        """Raise the Refusal of the first check the call fails, in the entry's order."""
        _check(
            len(call.q) == 3,
            "q must be 3D [num_tokens, num_heads, d_qk]",
            "SparseMlaSm120PagedAttention",
            "CHECK_DIM(3, q)",
        )
        num_tokens, num_heads, d_qk = call.q
        topk = self.indices_width(call.indices, "indices", num_tokens)
        mt = self.resolve_model_type(d_qk, call.model_type)
        page_block_size = self.page_block_size(call.kv_cache, self.bytes_per_token(mt), "kv_cache")
        entry = "SparseMlaSm120PagedAttention"
        _check(
            num_heads > 0,
            f"Check failed: num_heads > 0 (num_heads={num_heads})",
            entry,
            "TVM_FFI_ICHECK_GT(num_heads, 0)",
        )
        _check(
            num_heads <= 128,
            f"Check failed: num_heads <= 128 (num_heads={num_heads})",
            entry,
            "TVM_FFI_ICHECK_LE(num_heads, 128)",
        )
        _check(topk > 0, f"Check failed: topk > 0 (topk={topk})", entry, "TVM_FFI_ICHECK_GT(topk, 0)")
        _check(page_block_size > 0, "Check failed: page_block_size > 0", entry, "TVM_FFI_ICHECK_GT(page_block_size, 0)")
        output = call.output
        _check(len(output) == 3, "output must be [num_tokens, num_heads, 512]", entry, "output must be [num_tokens")
        _check(
            output[0] == num_tokens and output[1] == num_heads,
            "output must be [num_tokens, num_heads, 512]",
            entry,
            "TVM_FFI_ICHECK_EQ(output.size(1), num_heads)",
        )
        _check(output[2] == 512, "SM120 sparse-MLA requires d_v == 512", entry, "requires d_v == 512")
        _check(
            len(call.out_lse) == 2 and call.out_lse == (num_tokens, num_heads),
            "out_lse must be [num_tokens, num_heads]",
            entry,
            "out_lse must be [num_tokens, num_heads]",
        )
        if call.topk_length is not None:
            _check(
                call.topk_length == (num_tokens,),
                "topk_length must be [num_tokens]",
                entry,
                "topk_length must be [num_tokens]",
            )
        if call.attn_sink is not None:
            _check(
                call.attn_sink == (num_heads,), "attn_sink must be [num_heads]", entry, "attn_sink must be [num_heads]"
            )
        extra_topk, extra_page_block_size = self.extras(call, mt, num_tokens)
        _check(
            num_tokens > DECODE_MAX_TOKENS,
            "Decode (num_tokens <= 64) must go through sparse_mla_sm120_decode_dsv3_2 or "
            f"sparse_mla_sm120_decode_dsv4; got num_tokens={num_tokens}",
            entry,
            "TVM_FFI_ICHECK_GT(num_tokens, 64)",
        )
        ok = self.prefill_dispatch(
            mt,
            num_heads,
            topk,
            extra=call.extra_kv_cache is not None,
            topk_extra=extra_topk,
            extra_page_block_size=extra_page_block_size,
            topk_length=call.topk_length is not None,
            extra_topk_length=call.extra_topk_length is not None,
        )
        name = {ModelType.DSV3_2: "DSV3_2", ModelType.GLM_NSA: "GLM_NSA", ModelType.DSV4: "DSV4"}[mt]
        _check(
            ok,
            f"Unsupported sparse-MLA prefill configuration: model={name} num_heads={num_heads} topk={topk} "
            f"page_block_size={page_block_size} topk_extra={extra_topk} extra_page_block_size={extra_page_block_size}",
            entry,
            "Unsupported sparse-MLA prefill configuration",
        )

    def extras(self, call: Call, mt: ModelType, num_tokens: int) -> tuple[int, int]:
        entry = "SparseMlaSm120PagedAttention"
        has_kv, has_idx, has_len = (
            call.extra_kv_cache is not None,
            call.extra_indices is not None,
            call.extra_topk_length is not None,
        )
        _check(
            not has_idx or has_kv,
            "extra_indices requires extra_kv_cache",
            entry,
            "extra_indices requires extra_kv_cache",
        )
        _check(
            not has_len or has_kv,
            "extra_topk_length requires extra_kv_cache",
            entry,
            "extra_topk_length requires extra_kv_cache",
        )
        if not has_kv:
            return 0, 0
        _check(has_idx, "extra_kv_cache requires extra_indices", entry, "extra_kv_cache requires extra_indices")
        assert call.extra_kv_cache is not None and call.extra_indices is not None
        extra_page_block_size = self.page_block_size(call.extra_kv_cache, self.bytes_per_token(mt), "extra_kv_cache")
        extra_topk = self.indices_width(call.extra_indices, "extra_indices", num_tokens)
        _check(
            extra_page_block_size > 0,
            "Check failed: extra_page_block_size > 0",
            entry,
            "TVM_FFI_ICHECK_GT(extra_page_block_size, 0)",
        )
        _check(extra_topk > 0, "Check failed: extra_topk > 0", entry, "TVM_FFI_ICHECK_GT(extra_topk, 0)")
        if has_len:
            _check(
                call.extra_topk_length == (num_tokens,),
                "extra_topk_length must be [num_tokens]",
                entry,
                "extra_topk_length must be [num_tokens]",
            )
        return extra_topk, extra_page_block_size

    # -- helpers (the anonymous namespace of sparse_mla_sm120.cu) ------------------

    @staticmethod
    def resolve_model_type(d_qk: int, model_type: int) -> ModelType:
        auto = -1
        if d_qk == 576:
            if model_type == auto:
                return ModelType.DSV3_2
            _check(
                model_type in (ModelType.DSV3_2, ModelType.GLM_NSA),
                f"d_qk=576 supports model_type auto, DSV3_2, or GLM_NSA; got {model_type}",
                "resolve_model_type",
                "d_qk=576 supports model_type",
            )
            return ModelType(model_type)
        if d_qk == 512:
            mt = ModelType.DSV4 if model_type == auto else model_type
            _check(
                mt == ModelType.DSV4,
                f"d_qk=512 supports only model_type auto or DSV4; got {model_type}",
                "resolve_model_type",
                "d_qk=512 supports",
            )
            return ModelType.DSV4
        raise Refusal(
            f"Unsupported d_qk={d_qk}; expected 576 (DSV3_2/GLM_NSA) or 512 (DSV4)",
            ENTRY,
            "resolve_model_type",
            "Unsupported d_qk=",
        )

    @staticmethod
    def bytes_per_token(mt: ModelType) -> int:
        return 584 if mt == ModelType.DSV4 else 656

    @staticmethod
    def page_block_size(kv: Shape, bpt: int, name: str) -> int:
        """parse_paged_kv_layout on a uint8 pool (one byte an element)."""
        where = "parse_paged_kv_layout"
        if len(kv) == 2:
            _check(
                kv[1] % bpt == 0,
                f"{name} 2D block width {kv[1]} is not divisible by bytes_per_token={bpt}",
                where,
                "is not divisible by bytes_per_token",
            )
            return kv[1] // bpt
        if len(kv) == 3:
            _check(
                kv[-1] == bpt, f"{name} 3D form must be [num_pages, page_block_size, {bpt}]", where, "3D form must be"
            )
            return kv[1]
        _check(len(kv) == 4, f"{name} must be 2D, 3D, HND or NHD", where, "must be 2D [num_pages, page_bytes]")
        _check(
            kv[-1] == bpt,
            f"{name} last dim must be bytes_per_token={bpt}, got {kv[-1]}",
            where,
            "last dim must be bytes_per_token",
        )
        if kv[1] == 1:
            return kv[2]
        _check(
            kv[2] == 1,
            f"{name} 4D form must have singleton KV-head axis at dim 1 (HND) or dim 2 (NHD)",
            where,
            "4D form must have singleton KV-head axis",
        )
        return kv[1]

    @staticmethod
    def indices_width(idx: Shape, name: str, num_tokens: int) -> int:
        where = "check_dense_indices_2d_or_s_q_3d"
        _check(
            len(idx) in (2, 3),
            f"{name} must be [num_tokens, topk] or [num_tokens, 1, topk]; got ndim={len(idx)}",
            where,
            "must be [num_tokens, topk] or",
        )
        _check(
            idx[0] == num_tokens,
            f"{name} leading dimension must match num_tokens",
            where,
            "leading dimension must match num_tokens",
        )
        if len(idx) == 3:
            _check(
                idx[1] == 1, f"{name} middle dimension must be singleton", where, "middle dimension must be singleton"
            )
        return idx[-1]

    # -- sparse_mla_sm120_prefill.cu ------------------------------------------------

    def prefill_dispatch(
        self,
        mt: ModelType,
        num_heads: int,
        topk: int,
        *,
        extra: bool,
        topk_extra: int,
        extra_page_block_size: int,
        topk_length: bool,
        extra_topk_length: bool,
    ) -> bool:
        """sparse_mla_prefill_dispatch: whether a template instance serves the call."""
        if extra:
            if mt != ModelType.DSV4:
                return False
            return self.dispatch_dsv4_dual(
                num_heads, topk, topk_extra, extra_page_block_size, topk_length, extra_topk_length
            )
        if mt in (ModelType.DSV3_2, ModelType.GLM_NSA):
            return self.dispatch_v32(num_heads, topk)
        return self.dispatch_dsv4_single(num_heads, topk)

    @staticmethod
    def dispatch_v32(num_heads: int, topk: int) -> bool:
        if topk != 2048:
            return False
        if num_heads <= HPB:
            return num_heads in (8, 16)
        return num_heads in (32, 64, 128)

    def dispatch_dsv4_single(self, num_heads: int, topk: int) -> bool:
        return topk in self.DSV4_SINGLE_TOPK and num_heads in self.DSV4_SINGLE_HEADS

    def dispatch_dsv4_dual(
        self,
        num_heads: int,
        topk: int,
        topk_extra: int,
        extra_page_block_size: int,
        topk_length: bool,
        extra_topk_length: bool,
    ) -> bool:
        fulltile = (
            topk == 128
            and not topk_length
            and not extra_topk_length
            and topk_extra % BI == 0
            and extra_page_block_size in (64, 2)
        )
        if fulltile:
            return num_heads in self.DSV4_DUAL_HEADS
        if topk != 128:
            return False
        return extra_page_block_size in (64, 2) and num_heads in self.DSV4_DUAL_HEADS
