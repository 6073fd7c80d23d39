"""The port of 0.6.10's trtllm-gen selection (compiled/trtllm_gen/era_0_6_10.py): 0.6.11's
selection over 0.6.10's own kernel table (flashinfer-cubin 0.6.10 on the index), whose
rows carry one K/V dtype. Worked by hand from the C++ 0.6.10 ships."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hprobe.compiled.table import KernelTable, TableError
from hprobe.compiled.trtllm_gen import Port, era_0_6_11, port_for
from hprobe.compiled.trtllm_gen.era_0_6_12 import Device, FmhaCall, Refusal
from hprobe.support.kernel_tables import tables_for
from hprobe.support.trees import resolve

pytestmark = pytest.mark.slow
B200 = Device(sm=100, multiprocessor_count=148, max_shared_memory_per_block_optin=227 * 1024)
BF16 = "DATA_TYPE_BF16"


@pytest.fixture(scope="module")
def release():
    package = resolve("0.6.10").location / "flashinfer"
    port = port_for(package)
    assert isinstance(port, Port) and port.era == "0.6.10 – 0.6.10.post1", port
    tables = tables_for(package, "0.6.10")
    assert tables.table is not None, tables.missing
    return port, tables.table


def dense(heads: int, kv: int = 1024) -> FmhaCall:
    return FmhaCall(False, BF16, BF16, BF16, heads, 576, 512, 1, 1, kv, 64, 0)


def test_the_table_has_one_kv_dtype_which_only_this_eras_port_reads(release):
    port, table = release
    assert {r.dtype_kv for r in table.rows} >= {BF16} and {r.dtype_k for r in table.rows} == {None}
    with pytest.raises(TableError, match="the struct has no mDataTypeK, mDataTypeV"):
        era_0_6_11.Selection(table, B200)
    port.selection(table, B200)  # reads it


def test_dense_96_heads_launch_at_short_kv_and_not_at_long(release):
    """As 0.6.11 (its selection is the same): batch 1, KV 1024 -> SwapsMmaAb, tileSizeQ 16,
    6 head CTAs; KV 32768 -> KeepsMmaAb, tileSizeQ 64, and 96 / 64 leaves 32 heads:
    "The numHeadsQ/numHeadsKv is not supported."; rows matched on mDataTypeKv."""
    port, table = release
    selection = port.selection(table, B200)
    launch = selection.launch(dense(96))
    assert (launch.kernel.tile_size_q, launch.kernel.dtype_kv) == (16, BF16)
    with pytest.raises(Refusal, match="numHeadsQ/numHeadsKv is not supported"):
        selection.launch(dense(96, kv=32768))


def test_kernels_named_sage_are_never_loaded(release):
    """loadKernels skips every kernel whose name holds "Sage" (SageAttention shares its
    hash with the plain kernel). A fixture: 0.6.10's table with the BF16 576/512 Q16
    P64 generation kernels renamed so; the same call then finds no kernel."""
    port, table = release
    wanted = ("QkvBfloat16OBfloat16HQk576HV512", "P64MultiCtasKv", "Q16Kv128StaticSwapsAbForGen")
    rows = tuple(replace(r, name=r.name + "Sage") if all(part in r.name for part in wanted) else r for r in table.rows)
    assert rows != table.rows
    selection = port.selection(KernelTable(rows, "fixture", "0.6.10's table, Q16 P64 kernels named Sage"), B200)
    with pytest.raises(Refusal, match=r"Missing TRTLLM-GEN kernel \(decode\)"):
        selection.launch(dense(96))


def test_gqa_decode_selects_as_0_6_11_does_head_dim_512_draft_tokens_included(release):
    """selectGqGenerationKernel reads one KV dtype here (mDtypeQ != mDtypeKv), the
    same test for a paged cache as 0.6.11's. Gemma-4-31B's global layers (32 q /
    4 kv heads, head dim 512): one token, numTokensHeadsQ 8 -> SwapsMmaAb tile 8,
    launched; 5 draft tokens, 40 -> KeepsMmaAb tile 64, loaded at headDimPerCtaV
    512 by the cost model, a kernel the table lacks (flashinfer #3343's message)."""
    port, table = release
    assert not isinstance(port.gqa, str) and port.gqa.releases == "0.6.10 – 0.6.10.post1"
    selection = port.selection_on(table, B200)
    one = FmhaCall(False, BF16, BF16, BF16, 32, 512, 512, 1, 1, 1024, 32, 0, 4)
    assert selection.launch(one).kernel.tile_size_q == 8
    with pytest.raises(Refusal, match=r"Trtllm-gen kernels not found: .*kernelType=3, .*tileSizeQ=64,"):
        selection.launch(replace(one, max_q_len=5))
