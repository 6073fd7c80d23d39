"""The port of 0.7.0's trtllm-gen selection (compiled/trtllm_gen/era_0_7_0.py).

As for 0.6.18, the table is a fixture made from flashinfer-cubin 0.6.13's rows
with the fields 0.7.0's hash reads added (later_tables.py beside it); 0.7.0's own lives
only in the artifact store. Each case is worked by hand from the C++ 0.7.0 ships,
and where 0.7.0 changed an answer, 0.6.18's port is asked the same call.
"""

from __future__ import annotations

import pytest

from hprobe.compiled.table import TableError
from hprobe.compiled.trtllm_gen import Port, port_for
from hprobe.compiled.trtllm_gen.era_0_6_12 import Device, FmhaCall, Refusal, Selection
from hprobe.compiled.trtllm_gen.era_0_7_0 import hash_id
from hprobe.support.trees import resolve

from .later_tables import ADDED_0_6_18, ADDED_0_7_0, header_of, later_table

pytestmark = pytest.mark.slow
B200 = Device(sm=100, multiprocessor_count=148, max_shared_memory_per_block_optin=227 * 1024)
BF16 = "DATA_TYPE_BF16"


def _port(version: str, era: str) -> Port:
    port = port_for(resolve(version).location / "flashinfer")
    assert isinstance(port, Port) and port.era == era, port
    return port


@pytest.fixture(scope="module")
def header(cubin_wheel) -> str:
    return header_of(cubin_wheel, resolve("0.6.13").location / "flashinfer")


@pytest.fixture(scope="module")
def selections(header) -> tuple[Selection, Selection]:
    """0.7.0's and 0.6.18's selection, each on a table of its own shape."""
    new = _port("0.7.0", "0.7.0 – 0.7.0.post1").selection(later_table(header, ADDED_0_7_0), B200)
    old = _port("0.6.18", "0.6.18 – 0.6.18.post1").selection(later_table(header, ADDED_0_6_18), B200)
    return new, old


def test_the_hash_takes_the_dsv4_epilogue_traits_at_bits_57_and_58():
    """hashID: "Bit 57 - 57: fusesDsv4InvRopeFp8Quant. Bit 58 - 58: usesDsv4Ue8m0ScaleO.",
    and UE8M0 output scales without the fused epilogue are refused."""
    base = [2, 0, 2, 0, 1, 512, 576, 512, 16, 128, 64, False, False, False, False, 0, False, 0, False, False, False]
    plain = hash_id(*base, False, False)
    assert hash_id(*base, True, False) == plain | 1 << 57
    assert hash_id(*base, True, True) == plain | 1 << 57 | 1 << 58
    with pytest.raises(Refusal, match="DSv4 UE8M0 output scales require the fused inverse-RoPE FP8 epilogue."):
        hash_id(*base, False, True)


def test_a_table_without_the_dsv4_epilogue_fields_is_refused(header):
    port = _port("0.7.0", "0.7.0 – 0.7.0.post1")
    with pytest.raises(TableError, match="the struct has no mFusesDsv4InvRopeFp8Quant, mUsesDsv4Ue8m0ScaleO"):
        port.selection(later_table(header, ADDED_0_6_18), B200)


def test_one_token_deepseek_decode_on_32_token_pages_takes_the_cga_kernel(selections):
    """Batch 1, one token, 576/512 (isDsv3MinLatencyMode), 16 heads, 32-token pages.
    Pass 1: SwapsMmaAb, tileSizeQ 16, GmemReduction, headDimPerCtaV 512; useMlaH512Cga
    needs headDimPerCtaV 128, so no CGA; the grid is small -> headDimPerCtaV 128, select
    again. Pass 2: 4 CTAs over headDimV, KV split 2; now useMlaH512Cga holds (the table has
    the H576/V512 P32 Q16 CgaSmemReduction kernel) -> CgaSmemReduction, select again.
    Pass 3: that kernel, grid (2, 4, 1), cluster 2. run()'s fallback to GmemReduction
    finds the Gmem kernel too: it launches either way. 0.6.18 never takes CGA at
    headDimV 512: the Gmem kernel, cluster 1."""
    new, old = selections
    call = FmhaCall(False, BF16, BF16, BF16, 16, 576, 512, 1, 1, 1024, 32, 0)
    launch = new.launch(call)
    assert (launch.kernel.multi_ctas_kv_mode, launch.kernel.head_dim_per_cta_v) == (3, 128)
    assert (launch.ctas, launch.cluster_x) == ((2, 4, 1), 2)
    before = old.launch(call)
    assert (before.kernel.multi_ctas_kv_mode, before.cluster_x) == (1, 1)


def test_sparse_mla_halves_its_tile_only_for_short_queries(selections):
    """DSv3.2-style sparse MLA, 16 heads, batch 1, top-k 2048: 1 * 16 KV tiles <= 148 // 8,
    half 8 >= 8. 0.7.0 adds maxSeqLenQ <= 16: at 17 query tokens the full tile (16);
    0.6.18 halves it (8). At one token both halve."""
    new, old = selections
    long_query = FmhaCall(False, BF16, BF16, BF16, 16, 576, 512, 1, 17, 1024, 1, 2048)
    assert new.launch(long_query).kernel.tile_size_q == 16
    assert old.launch(long_query).kernel.tile_size_q == 8
    one_token = FmhaCall(False, BF16, BF16, BF16, 16, 576, 512, 1, 1, 1024, 1, 2048)
    assert new.launch(one_token).kernel.tile_size_q == old.launch(one_token).kernel.tile_size_q == 8


def test_dsv4_top_k_must_hold_the_sliding_window(selections):
    """trtllm_paged_attention_decode_sparse_mla_dsv4: "sparse topK must include 128
    sliding-window entries" before the multiple-of-4 check; 0.6.18 has only the latter."""
    new, old = selections
    call = FmhaCall(True, BF16, BF16, BF16, 64, 512, 512, 1, 1, 0, 64, 64)
    with pytest.raises(Refusal, match="sparse topK must include 128 sliding-window entries"):
        new.launch(call)
    assert old.launch(call).kernel.tile_size_q == 64
