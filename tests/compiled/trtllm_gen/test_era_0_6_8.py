"""The port of 0.6.8's trtllm-gen selection (compiled/trtllm_gen/era_0_6_8.py), over
0.6.8's own kernel table (flashinfer-cubin 0.6.8 on the index), beside 0.6.10's port.
Worked by hand from the C++ 0.6.8 ships."""

from __future__ import annotations

import pytest

from hprobe.compiled.table import KernelTable, TableError
from hprobe.compiled.trtllm_gen import Port, era_0_6_10, port_for
from hprobe.compiled.trtllm_gen.era_0_6_12 import Device, FmhaCall, Refusal
from hprobe.support.kernel_tables import tables_for
from hprobe.support.trees import resolve

pytestmark = pytest.mark.slow
B200 = Device(sm=100, multiprocessor_count=148, max_shared_memory_per_block_optin=227 * 1024)
BF16 = "DATA_TYPE_BF16"
# Batch 2 (not DeepSeek's min-latency shape), 16 heads, KV 4096, 64-token pages.
CALL = FmhaCall(False, BF16, BF16, BF16, 16, 576, 512, 2, 1, 4096, 64, 0)


def _release(version: str, era: str) -> tuple[Port, KernelTable]:
    package = resolve(version).location / "flashinfer"
    port = port_for(package)
    assert isinstance(port, Port) and port.era == era, port
    tables = tables_for(package, version)
    assert tables.table is not None, tables.missing
    return port, tables.table


@pytest.fixture(scope="module")
def release():
    return _release("0.6.8", "0.6.8 – 0.6.9")


def test_the_table_marks_sparse_mla_with_a_flag_only_this_eras_port_reads(release):
    port, table = release
    assert {r.sparse_attn for r in table.rows} == {None} and {r.sparse_mla for r in table.rows} == {False, True}
    with pytest.raises(TableError, match="the struct has no mSparseAttn"):
        era_0_6_10.Selection(table, B200)
    port.selection(table, B200)


def test_mla_with_a_small_tile_takes_the_cga_reduction(release):
    """SwapsMmaAb, tileSizeQ 16; KV split min((4096 + 511) // 512, 148 // 2) = 8. 0.6.8
    takes CgaSmemReduction for MLA generation whenever tileSizeQ < 32 -> pass 2 the CGA
    kernel; the grid is small -> headDimPerCtaV 128, pass 3: grid (8, 4, 2), cluster 8.
    (run()'s fallback finds the GmemReduction kernel: it launches either way.) 0.6.10
    excludes headDimV 512 from CGA: the same grid, GmemReduction, cluster 1."""
    port, table = release
    launch = port.selection(table, B200).launch(CALL)
    assert (launch.kernel.multi_ctas_kv_mode, launch.ctas, launch.cluster_x) == (3, (8, 4, 2), 8)
    port_0610, table_0610 = _release("0.6.10", "0.6.10 – 0.6.10.post1")
    before = port_0610.selection(table_0610, B200).launch(CALL)
    assert (before.kernel.multi_ctas_kv_mode, before.ctas, before.cluster_x) == (1, (8, 4, 2), 1)


def test_a_kernel_missing_at_load_is_a_crash_said_as_such(release):
    """loadKernel in 0.6.8 reads the map entry before checking it was found. A fixture: the
    table less its CGA headDimPerCtaV-128 Q16 P64 kernel; the existence check (pass 1's
    GmemReduction kernel) passes, pass 3 asks for the removed kernel."""
    port, table = release
    rows = tuple(
        r
        for r in table.rows
        if not (
            r.dtype_q == BF16
            and "HQk576HV512HVPerCta128PagedKvDenseP64MultiCtasKvCgaVarSeqQ16Kv128StaticSwapsAbForGen" in r.name
        )
    )
    assert len(rows) < len(table.rows)
    selection = port.selection(KernelTable(rows, "fixture", "0.6.8's table less one CGA kernel"), B200)
    with pytest.raises(Refusal) as caught:
        selection.launch(CALL)
    assert caught.value.function == "loadKernel"
    assert "multiCtasKvMode=3, headDimPerCtaV=128" in caught.value.message
    assert "undefined behaviour, most likely a crash" in caught.value.message


def test_0_6_7_post3_divides_by_zero_where_0_6_8_takes_one_token(release):
    """computeCtaAndClusterConfig, a kernel that groups tokens and heads: 0.6.7.post3
    computes numTokensPerCtaQ = stepQ / numHeadsQPerKv, 16 / 32 = 0, then divides by it
    (SIGFPE); 0.6.8 takes max(1, 0) = 1."""
    from dataclasses import replace as with_

    port_0607, table_0607 = _release("0.6.7.post3", "0.6.7 – 0.6.7.post3")
    row = with_(next(r for r in table_0607.rows if r.step_q == 16), groups_tokens_heads_q=True)
    selection = port_0607.selection(table_0607, B200)
    params = selection._launcher_params(CALL, CALL.max_kv_len, CALL.page_size, -1, False)
    params.num_heads_q_per_kv = 32
    with pytest.raises(Refusal, match=r"integer division by zero: numTokensPerCtaQ = stepQ 16 / numHeadsQPerKv 32 = 0"):
        selection.tokens_per_cta_q(row, params)
    port, table = release
    assert port.selection(table, B200).tokens_per_cta_q(row, params) == 1
