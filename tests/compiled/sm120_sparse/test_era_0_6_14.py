"""The 0.6.14 - 0.6.17 port of SparseMlaSm120PagedAttention, on cases read off
that era's C++ (csrc/sparse_mla_sm120.cu, csrc/sparse_mla_sm120_prefill.cu):
the entry's checks in order, and every case of its prefill dispatch switches."""

from __future__ import annotations

import pytest

from hprobe.compiled.sm120_sparse.era_0_6_14 import Call, Entry, ModelType, Refusal

pytestmark = pytest.mark.pure

ENTRY = Entry()


def call(heads: int, *, tokens: int = 128, topk: int = 128, d_qk: int = 512, page: int = 64, **extra: object) -> Call:
    """A call the way the release's Python makes it: packed pools
    [pages, page, bytes per token] (584 for DSv4, 656 for DSv3.2), top-k
    lengths given."""
    bpt = 584 if d_qk == 512 else 656
    base = dict(
        q=(tokens, heads, d_qk),
        kv_cache=(2, page, bpt),
        indices=(tokens, topk),
        output=(tokens, heads, 512),
        out_lse=(tokens, heads),
        model_type=-1,
        topk_length=(tokens,),
        attn_sink=None,
        extra_kv_cache=None,
        extra_indices=None,
        extra_topk_length=None,
    )
    base.update(extra)
    return Call(**base)  # type: ignore[arg-type]


def refusal(c: Call) -> str | None:
    try:
        ENTRY.check(c)
    except Refusal as exc:
        return exc.message
    return None


# dispatch_dsv4_single: DISPATCH_BY_NH_CM's cases 16/32/64/128, for top-k 128 (BF16), 512, 1024, 2048 (FP8).
@pytest.mark.parametrize("topk", [128, 512, 1024, 2048])
def test_dsv4_prefill_serves_16_32_64_128_heads_at_each_top_k_it_instantiates(topk):
    served = {h for h in range(1, 129) if refusal(call(h, topk=topk)) is None}
    assert served == {16, 32, 64, 128}


def test_dsv4_prefill_refuses_other_top_k_and_names_the_configuration():
    assert refusal(call(16, topk=256)) == (
        "Unsupported sparse-MLA prefill configuration: model=DSV4 num_heads=16 topk=256 page_block_size=64 "
        "topk_extra=0 extra_page_block_size=0"
    )
    assert refusal(call(8)) is not None and "num_heads=8" in (refusal(call(8)) or "")


def test_dsv32_prefill_takes_top_k_2048_only_at_8_16_32_64_128_heads():
    # dispatch_v32: topk != 2048 -> false; <= HPB: 8 (SG) or 16; else 32/64/128 (MG).
    served = {h for h in range(1, 129) if refusal(call(h, topk=2048, d_qk=576)) is None}
    assert served == {8, 16, 32, 64, 128}
    assert refusal(call(64, topk=1024, d_qk=576)) is not None
    # GLM_NSA (model_type 2) shares the DSv3.2 dispatch.
    assert refusal(call(16, topk=2048, d_qk=576, model_type=int(ModelType.GLM_NSA))) is None


def test_decode_sized_calls_are_refused_before_the_dispatch():
    # TVM_FFI_ICHECK_GT(num_tokens, 64): decode must go through the standalone kernels.
    message = refusal(call(16, tokens=64))
    assert message == (
        "Decode (num_tokens <= 64) must go through sparse_mla_sm120_decode_dsv3_2 or sparse_mla_sm120_decode_dsv4; "
        "got num_tokens=64"
    )
    assert refusal(call(16, tokens=65)) is None


def test_the_entry_checks_run_in_its_order():
    # num_heads <= 128 comes before the decode check, d_qk before both.
    assert refusal(call(256, tokens=1)) == "Check failed: num_heads <= 128 (num_heads=256)"
    assert refusal(call(16, tokens=1, d_qk=600)) == "Unsupported d_qk=600; expected 576 (DSV3_2/GLM_NSA) or 512 (DSV4)"
    assert refusal(call(16, model_type=0)) == "d_qk=512 supports only model_type auto or DSV4; got 0"


def test_the_page_block_size_is_read_from_every_pool_form():
    assert ENTRY.page_block_size((2, 64 * 584), 584, "kv") == 64  # 2D: bytes per page
    assert ENTRY.page_block_size((2, 1, 32, 584), 584, "kv") == 32  # HND
    assert ENTRY.page_block_size((2, 32, 1, 584), 584, "kv") == 32  # NHD
    with pytest.raises(Refusal, match="is not divisible by bytes_per_token=584"):
        ENTRY.page_block_size((2, 1000), 584, "kv")


def test_dsv4_dual_cache_prefill():
    dual = dict(extra_kv_cache=(2, 64, 584), extra_indices=(128, 64))
    # Full tile (top-k 128, no lengths, extra top-k a multiple of BI=64, extra pages of 64 or 2).
    assert {h for h in range(1, 129) if refusal(call(h, topk_length=None, **dual)) is None} == {16, 32, 64, 128}
    # The general dual kernel: top-k 128 only, extra pages of 64 or 2.
    assert {h for h in range(1, 129) if refusal(call(h, **dual)) is None} == {16, 32, 64, 128}
    assert refusal(call(16, topk=512, **dual)) is not None
    assert refusal(call(16, extra_kv_cache=(2, 32, 584), extra_indices=(128, 64))) is not None
    assert refusal(call(16, extra_indices=(128, 64))) == "extra_indices requires extra_kv_cache"
