"""The port of 0.6.18's trtllm-gen selection (compiled/trtllm_gen/era_0_6_18.py).

0.6.18's kernel table lives only in NVIDIA's artifact store, which these machines
cannot reach; the cases run on a fixture made from a real one: flashinfer-cubin
0.6.13's table with the four fields 0.6.18's hash reads added to its struct and to
every row (false, except where a case flags a row). Each case is worked by hand from
the C++ 0.6.18 ships (fmhaKernels.cuh, trtllm_fmha_kernel_launcher.cu).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from hprobe.compiled.table import KernelTable, TableError, parse_table
from hprobe.compiled.trtllm_gen import Port, port_for
from hprobe.compiled.trtllm_gen.era_0_6_12 import Device, FmhaCall, Refusal, RunnerParams, SelectKernelParams
from hprobe.compiled.trtllm_gen.era_0_6_18 import hash_id
from hprobe.support.trees import resolve

from . import later_tables
from .later_tables import ADDED_0_6_18, header_of

pytestmark = pytest.mark.slow
B200 = Device(sm=100, multiprocessor_count=148, max_shared_memory_per_block_optin=227 * 1024)
BF16 = "DATA_TYPE_BF16"
Q16_P64 = (
    "fmhaSm100fKernel_QkvBfloat16OBfloat16HQk576HV512HVPerCta128"
    "PagedKvDenseP64MultiCtasKvVarSeqQ16Kv128StaticSwapsAbForGen"
)


@pytest.fixture(scope="module")
def release():
    package = resolve("0.6.18").location / "flashinfer"
    port = port_for(package)
    assert isinstance(port, Port) and port.era == "0.6.18 – 0.6.18.post1", port
    return package, port


@pytest.fixture(scope="module")
def header_0613(cubin_wheel) -> str:
    return header_of(cubin_wheel, resolve("0.6.13").location / "flashinfer")


def later_table(header: str, fp16_softmax: tuple[str, ...] = ()):
    return later_tables.later_table(header, ADDED_0_6_18, {"mFp16Softmax": fp16_softmax})


def dense(heads: int, q_len: int = 1, page: int = 64) -> FmhaCall:
    return FmhaCall(False, BF16, BF16, BF16, heads, 576, 512, 1, q_len, 1024, page, 0)


def test_the_hash_packs_fields_to_their_widths_and_checks_their_range():
    """hashID: "Bit 2 - 4 : maskType", "Bit 53 - 53: groupsTokensHeadsQ", "Bit 55 - 55:
    fp16Softmax"; an enum out of its width is refused rather than aliased."""
    args = [2, 0, 2, 0, 1, 512, 576, 512, 16, 128, 64, False, False, False, False, 0, False, 0, False, False, False]
    plain = hash_id(*args)  # type: ignore[arg-type]
    for position, bit in ((1, 2), (14, 53), (19, 55)):
        changed = list(args)
        changed[position] = 1 if position == 1 else True
        assert hash_id(*changed) == plain | 1 << bit  # type: ignore[arg-type]
    out_of_range = list(args)
    out_of_range[1] = 8
    with pytest.raises(Refusal, match="Kernel attribute out of range for the hash key: qkvLayout=2, maskType=8"):
        hash_id(*out_of_range)  # type: ignore[arg-type]


def test_a_table_without_the_fields_0618_hashes_is_refused(release, header_0613):
    _, port = release
    with pytest.raises(TableError, match="the struct has no mEnablesBf16QFp8KvKOnlyTransform"):
        port.selection(parse_table(header_0613.encode(), "0.6.13's own table"), B200)


def test_dense_64_heads_launch_the_swapsab_q16_kernel(release, header_0613):
    """One query token, page 64: not the grouped kernel (it needs 2..16 tokens and
    32-token pages). 64 heads: a power of two, so no padded tile; 64 > 32, and
    useSwapsMmaAbMlaGenKernel: 4 CTAs, per-CTA KV 256 <= 1024 -> SwapsMmaAb, tileSizeQ 16,
    groupsTokensHeadsQ false. The row's four added fields are false, as the key asks."""
    _, port = release
    launch = port.selection(later_table(header_0613), B200).launch(dense(64))
    assert launch.kernel.name == Q16_P64 and launch.kernel.head_dim_per_cta_v == 128


def test_fp16_softmax_in_a_row_keeps_it_from_a_call_that_does_not_ask_for_it(release, header_0613):
    """hashID(KernelMeta) takes mFp16Softmax (bit 55); the decode call passes
    use_fp16_softmax false. With the headDimPerCtaV-128 Q16/P64 kernel an FP16-softmax
    build, the launcher's existence check still finds the first pass's kernel
    (headDimPerCtaV 512), and run()'s second pass, which splits headDimV to 128 to fill
    the GPU, finds none: loadKernel's "Trtllm-gen kernels not found"."""
    _, port = release
    selection = port.selection(later_table(header_0613, fp16_softmax=(Q16_P64,)), B200)
    with pytest.raises(Refusal) as caught:
        selection.launch(dense(64))
    assert caught.value.function == "loadKernel"
    assert caught.value.message.startswith("Trtllm-gen kernels not found")
    assert "headDimPerCtaV=128," in caught.value.message and "fp16Softmax=0, usesSpcompress=0" in caught.value.message


def test_two_query_tokens_on_32_token_pages_ask_for_the_grouped_kernel(release, header_0613):
    """usesGroupedMlaGenerationKernel: BF16, 16 heads, 2 tokens, batch 1, page 32, dense ->
    selectGroupedMlaGenerationKernel: KeepsMmaAb, tileSizeQ 64, GmemReductionWithSeparateKernel,
    groupsTokensHeadsQ, and 1 * 1 * ceil(2 * 16 / 64) = 1 CTA -> headDimPerCtaV 128. 0.6.13's
    rows have no such kernel: the launcher's existence check says which it looked for.
    On 64-token pages the same call is not grouped and launches the SwapsMmaAb Q16 kernel."""
    _, port = release
    selection = port.selection(later_table(header_0613), B200)
    with pytest.raises(Refusal) as caught:
        selection.launch(dense(16, q_len=2, page=32))
    message = caught.value.message
    assert "kernelType=3," in message and "multiCtasKvMode=2," in message and "headDimPerCtaV=128," in message
    assert "tileSizeQ=64," in message and "groupsTokensHeadsQ=1," in message
    assert selection.launch(dense(16, q_len=2, page=64)).kernel.name == Q16_P64


def test_without_its_table_0618_says_what_would_make_it_reachable(cli_json, monkeypatch, tmp_path):
    """No kernel table for 0.6.18 on the index, and a store that holds none (served
    here, so that the answer is the same on a machine that reaches NVIDIA's)."""
    import functools
    import http.server
    import threading

    (tmp_path / "empty").mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "empty"))
    handler.log_message = lambda *_args: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.delenv("HPROBE_KERNEL_TABLE", raising=False)
        monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
        monkeypatch.setenv("FLASHINFER_CUBINS_REPOSITORY", f"http://127.0.0.1:{server.server_address[1]}/")
        _, doc, _ = cli_json(
            "matrix", "-k", "trtllm-mla[backend=trtllm-gen]", "--sm", "100", "--heads", "64", "--flashinfer", "0.6.18"
        )
    finally:
        server.shutdown()
        server.server_close()
    (result,) = doc["results"]
    assert result["depth"] != "compiled"
    (note,) = [n for n in result["notes"] if n.startswith("compiled depth: not evaluated:")]
    assert "no port" not in note and "to make it reachable: `curl -fL" in note


def gqa(heads_q: int, heads_kv: int = 1, q_len: int = 1) -> FmhaCall:
    return FmhaCall(False, BF16, BF16, BF16, heads_q, 128, 128, 1, q_len, 1024, 32, 0, heads_kv)


def test_gqa_decode_asks_for_grouped_kernels_and_hashes_the_grouping(release, header_0613):
    """0.6.18's selectGqGenerationKernel sets groupsTokensHeadsQ for a same-dtype
    call (syncGqaGenerationTraitsForKernelHash too: "Same-dtype GQA generation
    cubins export this trait for every tile size"), and hashID packs it (bit 53).
    Group 8, one token: SwapsMmaAb tile 8, found among rows exported grouped; group
    64: KeepsMmaAb tile 64, likewise. With the trait cleared on every row the
    same call finds no kernel, and the message says groupsTokensHeadsQ=1."""
    package, port = release
    assert not isinstance(port.gqa, str) and port.gqa.releases == "0.6.18 – 0.6.18.post1"
    selection = port.selection_on(later_table(header_0613), B200)
    for group, tile in ((8, 8), (64, 64)):
        kernel = selection.launch(gqa(group)).kernel
        assert (kernel.tile_size_q, kernel.groups_tokens_heads_q) == (tile, True)
    rows = later_table(header_0613).rows
    cleared = KernelTable(tuple(replace(r, groups_tokens_heads_q=False) for r in rows), "fixture", "grouping cleared")
    with pytest.raises(Refusal, match=r"Missing TRTLLM-GEN kernel \(decode\): .*groupsTokensHeadsQ=1"):
        port.selection_on(cleared, B200).launch(gqa(8))


def test_a_bf16_query_over_fp8_groups_only_in_a_transform_mode_and_costs_double_in_separate_kv(release, header_0613):
    """supportsGqaGroupingTokensHeadsQ: Q == K, or BF16 Q over E4M3 K/V with BF16
    out in a transform mode other than Full; kernelMainloopCostFactor is 2 for the
    SeparateKv transform of that generation, else 1."""
    _, port = release
    selection = port.selection_on(later_table(header_0613), B200)
    mixed = selection._launcher_params(
        FmhaCall(False, BF16, "DATA_TYPE_E4M3", BF16, 8, 128, 128, 1, 1, 1024, 32, 0, 1),
        max_kv_len=1024,
        page_size=32,
        window_left=-1,
        dynamic_sparse=False,
    )
    assert isinstance(mixed, RunnerParams)
    for mode, grouped, factor in ((0, False, 1.0), (1, True, 1.0), (2, True, 2.0)):
        select = SelectKernelParams.of(mixed)
        select.bf16q_fp8kv_transform_mode = mode
        assert selection.supports_gqa_grouping_tokens_heads_q(mixed, select) is grouped
        assert selection.gqa_mainloop_cost_factor(mixed, select) == factor
    plain = selection._launcher_params(gqa(8), 1024, 32, -1, False)
    assert selection.supports_gqa_grouping_tokens_heads_q(plain, SelectKernelParams.of(plain))
