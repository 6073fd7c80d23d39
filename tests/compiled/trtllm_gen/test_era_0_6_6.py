"""The port of 0.6.6's trtllm-gen selection (compiled/trtllm_gen/era_0_6_6.py), over
0.6.6's own kernel table (flashinfer-cubin 0.6.6 on the index). Worked by hand from
the C++ 0.6.6 ships."""

from __future__ import annotations

import pytest

from hprobe.compiled.trtllm_gen import Port, port_for
from hprobe.compiled.trtllm_gen.era_0_6_12 import Device, FmhaCall, Refusal, Selection
from hprobe.support.kernel_tables import tables_for
from hprobe.support.trees import resolve

pytestmark = pytest.mark.slow
B200 = Device(sm=100, multiprocessor_count=148, max_shared_memory_per_block_optin=227 * 1024)
BF16 = "DATA_TYPE_BF16"


@pytest.fixture(scope="module")
def selection() -> Selection:
    package = resolve("0.6.6").location / "flashinfer"
    port = port_for(package)
    assert isinstance(port, Port) and port.era == "0.6.6", port
    tables = tables_for(package, "0.6.6")
    assert tables.table is not None, tables.missing
    return port.selection(tables.table, B200)


def sparse(heads: int, kv: int) -> FmhaCall:
    # DSv3.2-style top-k 2048 over one-token pages; the selector reads the KV length too.
    return FmhaCall(False, BF16, BF16, BF16, heads, 576, 512, 1, 1, kv, 1, 2048)


def test_sparse_mla_under_8_heads_takes_the_q8_swapsab_kernel(selection):
    """selectMlaGenerationKernel: 4 <= 32 -> SwapsMmaAb, tileSizeQ 8 (<= 8 heads); heads
    per CTA min(4, 8) = 4, one CTA for them: it launches (0.6.7 on halve the group instead,
    and find no Q4 kernel)."""
    launch = selection.launch(sparse(4, 2048))
    assert (launch.kernel.tile_size_q, launch.kernel.kernel_type, launch.kernel.sparse_mla) == (8, 2, True)


def test_sparse_mla_over_128_heads_launches_only_where_the_kv_split_is_short(selection):
    """144 heads: not <= 32, not sparse-and-under-128; useSwapsMmaAbMlaGenKernel decides.
    KV 1024: 9 CTAs of 16 heads, split min(4, 148 // 9) = 4, 256 per CTA <= 1024 ->
    SwapsMmaAb, tileSizeQ 16, 144 / 16 = 9: launches. KV 131072: 8192 per CTA -> KeepsMmaAb,
    and "The keepsMmaAbForGeneration sparseMla kernels only support numHeadsQPerKv = 128"."""
    assert selection.launch(sparse(144, 1024)).kernel.tile_size_q == 16
    with pytest.raises(Refusal) as caught:
        selection.launch(sparse(144, 131072))
    assert caught.value.function == "selectMlaGenerationKernel"
    assert caught.value.message.endswith("only support numHeadsQPerKv = 128, got 144")


def test_the_cga_fallback_goes_back_into_the_selection_loop(selection):
    """Batch 2, 16 heads, KV 4096, 64-token pages: SwapsMmaAb Q16, a split of 8 ->
    CgaSmemReduction (0.6.6 takes it for any SwapsMmaAb split outside the min-latency
    shape), headDimPerCtaV 128: grid (8, 4, 2), cluster 8. More than one wave: the loop
    runs again with GmemReduction forced and launches that kernel; so the call launches
    either way, the one-wave launch being the CGA one."""
    launch = selection.launch(FmhaCall(False, BF16, BF16, BF16, 16, 576, 512, 2, 1, 4096, 64, 0))
    assert (launch.kernel.multi_ctas_kv_mode, launch.ctas, launch.cluster_x) == (3, (8, 4, 2), 8)


def test_0_6_4_refuses_rank_256_mla_at_its_decode_entry():
    """0.6.4 - 0.6.5: trtllm_paged_attention_decode takes (576, 512) or equal head dims, so a
    rank-256 call (320/256) is refused there, "head_dim_v and head_dim_o must be the same
    for non-MLA attention, got 320 and 256"; 0.6.6 lets it through to a selector hprobe
    does not port (the GQA one), and says nothing it cannot show."""
    from hprobe.compiled.trtllm_gen.era_0_6_12 import NotPorted

    package = resolve("0.6.4").location / "flashinfer"
    port = port_for(package)
    assert isinstance(port, Port) and port.era == "0.6.4 – 0.6.5", port
    tables = tables_for(package, "0.6.4")
    assert tables.table is not None, tables.missing
    call = FmhaCall(False, BF16, BF16, BF16, 16, 320, 256, 1, 1, 1024, 64, 0)
    with pytest.raises(Refusal, match="must be the same for non-MLA attention, got 320 and 256"):
        port.selection(tables.table, B200).launch(call)
    later = port_for(resolve("0.6.6").location / "flashinfer")
    assert isinstance(later, Port)
    later_tables = tables_for(resolve("0.6.6").location / "flashinfer", "0.6.6")
    assert later_tables.table is not None
    with pytest.raises(NotPorted):
        later.selection(later_tables.table, B200).launch(call)


def test_0_6_0_hashes_no_skip_softmax_bit_and_says_so_in_its_message():
    """0.6.0 - 0.6.3's hashID stops at sparseMla (bit 55); the launcher's existence
    check names the traits it looked for in those words. Dense MLA, 16 heads, on 8-token
    pages: SwapsMmaAb Q16, and the table (0.6.0's kernel package) has no P8 kernel."""
    from dataclasses import replace

    package = resolve("0.6.3").location / "flashinfer"
    port = port_for(package)
    assert isinstance(port, Port) and port.era == "0.6.0 – 0.6.3", port
    tables = tables_for(package, "0.6.3")
    assert tables.table is not None, tables.missing
    selection = port.selection(tables.table, B200)
    with pytest.raises(Refusal) as caught:
        selection.launch(FmhaCall(False, BF16, BF16, BF16, 16, 576, 512, 1, 1, 1024, 8, 0))
    assert caught.value.message.startswith("Missing TRTLLM-GEN kernel (decode)")
    assert caught.value.message.endswith("numTokensPerPage=8, reuseSmemKForV=0, uses2CtaMma=0, sparseMla=0")
    row = tables.table.rows[0]
    assert selection.hash_of_row(replace(row, skips_softmax=True)) == selection.hash_of_row(row)  # no such bit
    assert selection.launch(FmhaCall(False, BF16, BF16, BF16, 16, 576, 512, 1, 1, 1024, 64, 0)).kernel.tile_size_q == 16


def test_0_6_6s_runner_refuses_sm120_and_its_selection_answers_sm100(cli_json):
    """0.6.6's TllmGenFmhaRunner: FLASHINFER_CHECK(mSM == kSM_100 || mSM == kSM_103,
    "Unsupported architecture") (fmhaRunner.cuh:30): SM120 is refused at compiled depth,
    whatever h_q is; SM100 is answered by the 0.6.6 port on 0.6.6's table."""
    _, doc, _ = cli_json(
        "matrix", "-k", "trtllm-mla[backend=trtllm-gen]", "--sm", "100,120", "--flashinfer", "0.6.6", "--json"
    )
    by_sm = {r["sm"]: r for r in doc["results"] if r["key"] == "trtllm-mla[backend=trtllm-gen]"}
    sm120 = {h["outcome"] for h in by_sm[120]["heads"]}
    assert sm120 == {"unsupported-arch"} and by_sm[120]["depth"] == "compiled"
    assert "fmhaRunner.cuh:30" in by_sm[120]["heads"][0]["location"]
    assert by_sm[100]["depth"] == "compiled"
    assert any("(0.6.6 port)" in n for n in by_sm[100]["notes"])
