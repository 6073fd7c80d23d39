"""The port of trtllm-gen's GQA/MHA generation selection (compiled/trtllm_gen/era_0_6_12.py,
selectGqGenerationKernel and its cost model) over flashinfer-cubin 0.6.13's kernel table,
the one 0.6.12 – 0.6.17 name. Each case is worked by hand from the C++ the releases ship
(0.6.14 fmhaKernels.cuh ~713-894, trtllm_fmha_kernel_launcher.cu ~114), with the few
kernel traits a case rests on read from the table's rows; three are the failures public
threads report (flashinfer #3343, #3511, #4094). The MLA cases of this era are in
tests/compiled/test_depth.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from hprobe.compiled.trtllm_gen import Port, port_for
from hprobe.compiled.trtllm_gen.era_0_6_12 import (
    GQA_VARIANTS,
    Device,
    FmhaCall,
    KernelType,
    NotPorted,
    Refusal,
    Selection,
)
from hprobe.support import kernel_tables
from hprobe.support.kernel_package import package_of
from hprobe.support.trees import resolve

pytestmark = pytest.mark.slow

_SPEC = importlib.util.find_spec("flashinfer")
PACKAGE = Path(next(iter(_SPEC.submodule_search_locations)))  # type: ignore[union-attr]
B200 = Device(sm=100, multiprocessor_count=148, max_shared_memory_per_block_optin=227 * 1024)
BF16, E4M3 = "DATA_TYPE_BF16", "DATA_TYPE_E4M3"
SYNCS, UNSYNCED = GQA_VARIANTS  # 0.6.14 - 0.6.15.post1; 0.6.12 - 0.6.13


@pytest.fixture(scope="module")
def table(cubin_wheel):
    got = kernel_tables._from_wheel(cubin_wheel, package_of(PACKAGE), cubin_wheel.name)
    assert not isinstance(got, str) and got is not None
    return got


def gqa(
    heads_q: int,
    heads_kv: int = 1,
    head_dim: int = 128,
    q_len: int = 1,
    page: int = 32,
    batch: int = 1,
    kv_len: int = 1024,
    dtype_kv: str = BF16,
) -> FmhaCall:
    return FmhaCall(False, BF16, dtype_kv, BF16, heads_q, head_dim, head_dim, batch, q_len, kv_len, page, 0, heads_kv)


def test_releases_read_as_the_variant_their_cxx_is():
    """0.6.14 added syncGqaGenerationTraitsForKernelHash; 0.6.12 and 0.6.13 select
    without it; 0.6.8's era (no headDimV split in selectKernel) has no GQA port."""
    installed = port_for(PACKAGE)
    assert isinstance(installed, Port) and installed.gqa == SYNCS
    older = port_for(resolve("0.6.13").location / "flashinfer")
    assert isinstance(older, Port) and older.era == installed.era and older.gqa == UNSYNCED
    assert older.key != installed.key  # their answers are kept apart
    eighth = port_for(resolve("0.6.8").location / "flashinfer")
    assert isinstance(eighth, Port) and isinstance(eighth.gqa, str)
    assert "no port for the 0.6.8 – 0.6.9 era" in eighth.gqa


@pytest.mark.parametrize(
    ("group", "tile", "kind"),
    [
        (1, 8, KernelType.SWAPS_MMA_AB_FOR_GENERATION),
        (8, 8, KernelType.SWAPS_MMA_AB_FOR_GENERATION),
        (9, 16, KernelType.SWAPS_MMA_AB_FOR_GENERATION),
        (17, 32, KernelType.SWAPS_MMA_AB_FOR_GENERATION),
        (33, 64, KernelType.KEEPS_MMA_AB_FOR_GENERATION),
        (65, 128, KernelType.KEEPS_MMA_AB_FOR_GENERATION),
    ],
)
def test_one_token_takes_the_smallest_tile_that_holds_the_group(table, group, tile, kind):
    """selectGqGenerationKernel: numTokensHeadsQ = group x 1; <= 8, 16, 32 give
    SwapsMmaAb tiles 8/16/32, <= 64 KeepsMmaAb 64, else KeepsMmaAb 128. One query
    token skips the cost model."""
    launch = Selection(table, B200, SYNCS).launch(gqa(group))
    assert (launch.kernel.tile_size_q, launch.kernel.kernel_type) == (tile, kind)
    assert launch.kernel.head_dim_qk == 128 and launch.kernel.dtype_kv == BF16


def test_a_bf16_query_over_an_fp8_cache_never_groups_beyond_16(table):
    """Mixed precision (Q != K): tileSizeQ 8 for a group <= 8, else 16, SwapsMmaAb,
    whatever the group; a group of 32 is two CTAs of 16 heads (min(group, stepQ))."""
    selection = Selection(table, B200, SYNCS)
    for group, tile in ((4, 8), (9, 16), (32, 16)):
        launch = selection.launch(gqa(group, dtype_kv=E4M3))
        assert (launch.kernel.tile_size_q, launch.kernel.dtype_kv) == (tile, E4M3)
        assert launch.kernel.kernel_type == KernelType.SWAPS_MMA_AB_FOR_GENERATION
    assert selection.launch(gqa(32, dtype_kv=E4M3)).ctas[1] == 2


def test_heads_no_multiple_of_the_kv_heads_are_refused_at_the_launcher(table):
    with pytest.raises(Refusal) as refused:
        Selection(table, B200, SYNCS).launch(gqa(12, heads_kv=8))
    assert refused.value.message == (
        "num_qo_heads must be a multiple of num_kv_heads, got num_kv_heads: 8 and num_qo_heads: 12"
    )
    assert refused.value.function == "trtllm_paged_attention_launcher"


def test_a_group_of_one_at_page_128_finds_no_kernel_flashinfer_4094(table):
    """useDynamicNumTokensPerPage needs numHeadsQPerKv > 1: a group of one at page
    128 hashes the static page-128 kernel, and every page-128 generation row of
    this table is a dynamic-page one ("Missing TRTLLM-GEN kernel (decode) ...
    numTokensPerPage=128, dynamicNumTokensPerPage=0", as #4094 reports for
    MiniMax-M3's 64/64 drafter). A group of two takes the dynamic kernel."""
    selection = Selection(table, B200, SYNCS)
    with pytest.raises(Refusal) as refused:
        selection.launch(gqa(1, page=128))
    assert refused.value.message.startswith("Missing TRTLLM-GEN kernel (decode): ")
    assert "numTokensPerPage=128, dynamicNumTokensPerPage=0" in refused.value.message
    assert selection.is_dynamic_pages_kernel(selection.launch(gqa(2, page=128)).kernel)


@pytest.mark.parametrize(("q_len", "tile"), [(5, 64), (16, 128)])
def test_head_dim_512_with_draft_tokens_before_and_after_the_traits_sync_flashinfer_3343(table, q_len, tile):
    """Gemma-4-31B's global layers: 32 q / 4 kv heads (group 8), head dim 512.
    With 5 draft tokens numTokensHeadsQ is 40 -> KeepsMmaAb tile 64 (#3343); with
    16, 128 -> tile 128 (#3511). The cost model first loads that default: 0.6.13
    hashes it with headDimPerCtaV 512, a kernel the table lacks ("Trtllm-gen kernels
    not found ... kernelType=3 ... tileSizeQ=64"); 0.6.14 syncs KeepsMmaAb H512 to
    headDimPerCtaV 256 (the registered split-V form) and the call launches."""
    call = gqa(32, heads_kv=4, head_dim=512, q_len=q_len)
    with pytest.raises(Refusal) as refused:
        Selection(table, B200, UNSYNCED).launch(call)
    assert refused.value.function == "loadKernel"
    assert "kernelType=3, tileScheduler=0, multiCtasKvMode=1, headDimPerCtaV=512, headDimQk=512" in (
        refused.value.message
    )
    assert f"tileSizeQ={tile}," in refused.value.message
    Selection(table, B200, SYNCS).launch(call)


def test_the_cost_model_picks_the_cheapest_tile_for_draft_tokens(table):
    """Group 8, 4 query tokens: the default tile is 32 (numTokensHeadsQ 32). The
    rows' stepKv is 256 (read below). Batch 1, KV 1024: the default's grid is 2
    CTAs (one Q CTA, ceil(1024 + 511) / 512 = 2 KV CTAs), 2 x 2 <= 148 SMs, so
    tiles 32, 16, 8 are costed at seqLenPerCtaKv 512 and 2 KV CTAs:
    32: 1.48 x 512 + 1.08 x 128 x 2 = 1034.24; 16: 1.2 x 512 + 1.03 x 256 = 878.08;
    8: 512 + 256 = 768 -> tile 8, launched on 4 Q CTAs x 2 KV CTAs.
    Batch 64, KV 32768: the default's grid is 2 x 1 x 64 = 128 CTAs, and
    128 x 2 > 148: the model is skipped and tile 32 stays."""
    selection = Selection(table, B200, SYNCS)
    steps = {
        r.tile_size_q: r.step_kv
        for r in table.rows
        if r.name.startswith("fmhaSm100fKernel_QkvBfloat16OBfloat16H128PagedKvCausalP32MultiCtasKvCgaVarSeqQ")
        and r.name.endswith("Kv128StaticSwapsAbForGen")
    }
    assert steps == {8: 256, 16: 256, 32: 256}
    small = selection.launch(gqa(8, q_len=4))
    assert (small.kernel.tile_size_q, small.ctas) == (8, (8, 1, 1))
    large = selection.launch(gqa(8, q_len=4, batch=64, kv_len=32768))
    assert large.kernel.tile_size_q == 32


def test_a_selection_without_a_gqa_port_refuses_to_guess(table):
    """An era whose GQA selection is not ported (gqa None) ends a GQA call in
    NotPorted: pending, never a kernel picked by another release's rule."""
    with pytest.raises(NotPorted, match="GQA/MHA generation selection"):
        Selection(table, B200, None).launch(gqa(8))


def test_a_context_call_takes_the_kernel_its_dtypes_have_and_none_for_a_bf16_query_over_fp8(table):
    """trtllm_paged_attention_context: mode Context (causal mask, persistent
    scheduler, no KV split), and selectKernel takes the parameters as they come:
    tile 128 x 128, whatever the group. The runner's sub-table is (Q, K, V, O):
    the table has paged context rows for BF16/BF16 and E4M3/E4M3 and none for a
    BF16 query over E4M3 K/V (read below), so that call finds no kernel at any
    group: "Missing TRTLLM-GEN kernel (context)" (SGLang #12347)."""
    paged_context = {
        (r.dtype_q, r.dtype_k, r.dtype_v)
        for r in table.rows
        if r.kernel_type == KernelType.CONTEXT and r.qkv_layout == 2 and r.head_dim_qk == 128
    }
    assert {(BF16, BF16, BF16), (E4M3, E4M3, E4M3)} <= paged_context and (BF16, E4M3, E4M3) not in paged_context
    selection = Selection(table, B200, SYNCS)
    for group in (1, 4, 8):
        launch = selection.launch(context(group))
        kernel = launch.kernel
        assert (kernel.kernel_type, kernel.tile_size_q, kernel.tile_size_kv) == (KernelType.CONTEXT, 128, 128)
        assert (kernel.mask_type, kernel.tile_scheduler, kernel.multi_ctas_kv_mode) == (1, 1, 0)
        with pytest.raises(Refusal) as refused:
            selection.launch(context(group, dtype_kv=E4M3))
        assert refused.value.message.startswith("Missing TRTLLM-GEN kernel (context): qkvLayout=2, maskType=1, ")
        assert "kernelType=0" in refused.value.message
    fp8 = FmhaCall(False, E4M3, E4M3, BF16, 8, 128, 128, 1, 256, 1024, 32, 0, 1, context=True)
    assert selection.launch(fp8).kernel.dtype_q == E4M3


def context(heads_q: int, dtype_kv: str = BF16) -> FmhaCall:
    return FmhaCall(False, BF16, dtype_kv, BF16, heads_q, 128, 128, 1, 256, 1024, 32, 0, 1, context=True)
