"""The port of 0.6.11's trtllm-gen selection (compiled/trtllm_gen/era_0_6_11.py).

The release is flashinfer 0.6.11.post3 and its table the one its kernel package
names (flashinfer-cubin 0.6.11.post3 on the index, read by hprobe's own route).
Each case is worked by hand from the C++ that release ships (fmhaKernels.cuh,
trtllm_fmha_kernel_launcher.cu), in its docstring: one count per outcome.
"""

from __future__ import annotations

import pytest

from hprobe.compiled.trtllm_gen import Port, port_for
from hprobe.compiled.trtllm_gen.era_0_6_11 import hash_id
from hprobe.compiled.trtllm_gen.era_0_6_12 import Device, FmhaCall, NotPorted, Refusal
from hprobe.support.kernel_tables import tables_for
from hprobe.support.trees import resolve

pytestmark = pytest.mark.slow
VERSION = "0.6.11.post3"
B200 = Device(sm=100, multiprocessor_count=148, max_shared_memory_per_block_optin=227 * 1024)
BF16 = "DATA_TYPE_BF16"


@pytest.fixture(scope="module")
def package():
    return resolve(VERSION).location / "flashinfer"


@pytest.fixture(scope="module")
def selection(package):
    port = port_for(package)
    assert isinstance(port, Port) and port.era == "0.6.11 – 0.6.11.post3", port
    tables = tables_for(package, VERSION)
    assert tables.table is not None, tables.missing
    return port.selection(tables.table, B200)


@pytest.fixture(scope="module")
def gqa_selection(package):
    """The selection as depth makes it: with the release's GQA/MHA reading."""
    port = port_for(package)
    assert isinstance(port, Port) and not isinstance(port.gqa, str), port
    tables = tables_for(package, VERSION)
    assert tables.table is not None, tables.missing
    return port.selection_on(tables.table, B200)


def mla(heads: int, batch: int = 1, kv: int = 1024, top_k: int = 0, q_len: int = 1) -> FmhaCall:
    # trtllm_paged_attention_decode: query 576, out 512; sparse MLA reads one-token pages.
    return FmhaCall(False, BF16, BF16, BF16, heads, 576, 512, batch, q_len, kv, 1 if top_k else 64, top_k)


def test_the_hash_packs_sparse_mla_as_one_bit_and_skips_softmax_above_it():
    """hashID: "Bit 55 - 55: sparseMla. Bit 56 - 56: skipsSoftmax." (0.6.12 moved
    skipsSoftmax to 57 and gave sparse MLA two bits)."""
    base = (2, 1, 2, 0, 1, 512, 576, 512, 16, 128, 64, False, False)
    plain = hash_id(*base, False, False)
    assert hash_id(*base, True, False) == plain | 1 << 55
    assert hash_id(*base, False, True) == plain | 1 << 56
    with pytest.raises(Refusal, match="The numTokensPerPage must be power of 2."):
        hash_id(*base[:10], 48, False, False, False, False)


def test_dense_96_heads_find_the_causal_kernel_at_short_kv(selection):
    """The launcher gives generation kernels a causal mask, which selectKernel keeps;
    the table's MLA generation rows are causal. Batch 1, KV 1024: 96 > 32, and
    useSwapsMmaAbMlaGenKernel: 6 CTAs, per-CTA KV ceil(1024 / min(4, 24)) = 256 <= 1024
    -> SwapsMmaAb, tileSizeQ 16: 96 / 16 = 6 head CTAs. headDimPerCtaV 512 -> 128 once
    the grid is small (2 * 6 * 2 <= 148, then * 2 again): grid (2, 24, 1)."""
    launch = selection.launch(mla(96))
    assert (launch.kernel.mask_type, launch.kernel.tile_size_q, launch.kernel.head_dim_per_cta_v) == (1, 16, 128)
    assert launch.ctas == (2, 24, 1)


def test_dense_96_heads_are_refused_at_long_kv(selection):
    """KV 32768: per-CTA KV 1366 > 1024 -> KeepsMmaAb, tileSizeQ 64; 96 / 64 leaves
    32 heads: "The numHeadsQ/numHeadsKv is not supported."."""
    with pytest.raises(Refusal, match="numHeadsQ/numHeadsKv is not supported") as caught:
        selection.launch(mla(96, kv=32768))
    assert caught.value.function == "computeCtaAndClusterConfig"


def test_sparse_128_heads_use_one_cta_for_two_query_tokens(selection):
    """selectSparseMlaGenerationKernel's 2-CTA rule reads the batch alone here:
    1 * (128 / 64) * 8 = 16 <= 148 -> one CTA, though q_len is 2 (0.6.12 would take
    two). KeepsMmaAb, tileSizeQ 64: 2 token CTAs, 2 head CTAs; KV split
    min((2048 + 255) // 256, 148 // 4) = 8; headDimPerCtaV 512 -> 128 (32 * 2 * 2 <= 148):
    grid (16, 8, 1), cluster 1."""
    launch = selection.launch(mla(128, top_k=2048, kv=2048, q_len=2))
    assert not launch.kernel.uses_2cta_mma and launch.kernel.sparse_attn == 1
    assert (launch.ctas, launch.cluster_x) == ((16, 8, 1), 1)


def test_sparse_4_heads_find_no_cubin_and_the_message_is_this_releases(selection):
    """4 heads, top-k 2048: half 2 < 8 -> tileSizeQ 4; no such sparse kernel. The
    launcher's existence check says so in 0.6.11's words ("sparseMla=1", no
    dynamic-page field)."""
    with pytest.raises(Refusal) as caught:
        selection.launch(mla(4, top_k=2048, kv=2048))
    message = caught.value.message
    assert message.startswith("Missing TRTLLM-GEN kernel (decode)") and "maskType=1," in message
    assert "sparseMla=1, skipsSoftmax=0" in message and "dynamicNumTokensPerPage" not in message


def test_what_this_release_has_no_code_for_is_not_ported(selection):
    """No DeepSeek V4 launcher: a DSv4 call is not ported, never selected."""
    with pytest.raises(NotPorted):
        selection.launch(FmhaCall(True, BF16, BF16, BF16, 64, 512, 512, 1, 1, 0, 64, 2048))


def test_rank_256_mla_takes_the_gqa_selector(gqa_selection):
    """isMlaGenKernel knows 576/512 only here: a 320/256 call is GQA generation
    to selectKernel. 16 heads over one KV head, one token: numTokensHeadsQ 16 ->
    SwapsMmaAb, tileSizeQ 16, the HQk320HV256 kernel."""
    launch = gqa_selection.launch(FmhaCall(False, BF16, BF16, BF16, 16, 320, 256, 1, 1, 1024, 64, 0))
    assert (launch.kernel.tile_size_q, launch.kernel.kernel_type) == (16, 2)
    assert (launch.kernel.head_dim_qk, launch.kernel.head_dim_v) == (320, 256)


def test_head_dim_512_with_draft_tokens_finds_no_kernel_flashinfer_3343(gqa_selection):
    """flashinfer #3343, reported on 0.6.11.post1 for Gemma-4-31B's global layers
    (32 q / 4 kv heads, head dim 512) with 5 draft tokens: numTokensHeadsQ 8 x 5 =
    40 -> KeepsMmaAb tileSizeQ 64; with no traits sync the cost model loads it at
    headDimPerCtaV 512, a kernel the table lacks ("Trtllm-gen kernels not found:
    ... kernelType=3 ... tileSizeQ=64"). One token (8 -> SwapsMmaAb tile 8) launches."""
    with pytest.raises(Refusal) as refused:
        gqa_selection.launch(FmhaCall(False, BF16, BF16, BF16, 32, 512, 512, 1, 5, 1024, 32, 0, 4))
    message = refused.value.message
    assert message.startswith("Trtllm-gen kernels not found: qkvLayout=2, maskType=1, kernelType=3, ")
    assert "headDimPerCtaV=512, headDimQk=512, headDimV=512, tileSizeQ=64," in message
    assert (
        gqa_selection.launch(FmhaCall(False, BF16, BF16, BF16, 32, 512, 512, 1, 1, 1024, 32, 0, 4)).kernel.tile_size_q
        == 8
    )


def test_matrix_on_0611_answers_at_compiled_depth(cli_json):
    _, doc, _ = cli_json(
        "matrix", "-k", "trtllm-mla[backend=trtllm-gen]", "--sm", "100", "--flashinfer", VERSION, "--json"
    )
    result = next(r for r in doc["results"] if r["key"] == "trtllm-mla[backend=trtllm-gen]" and r["sm"] == 100)
    assert result["depth"] == "compiled"
    assert {1, 16, 32, 64, 128, 256} <= set(result["accepted"])
    assert not set(result["accepted"]) & set(range(17, 32))
    heads = {h["heads"]: h for h in result["heads"]}
    assert heads[17]["outcome"] == "rejected" and heads[17]["error_type"] == "compiled check"
    assert "fmhaKernels.cuh" in heads[17]["location"]
