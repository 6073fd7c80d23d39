"""The port of 0.7.4's trtllm-gen selection (compiled/trtllm_gen/era_0_7_4.py), on a
0.7.x-shaped table made from flashinfer-cubin 0.6.13's rows (later_tables.py beside it).
Worked by hand from the C++ 0.7.4 ships, beside 0.7.2.post1's port."""

from __future__ import annotations

import pytest

from hprobe.compiled.trtllm_gen.era_0_6_12 import Device, FmhaCall, Refusal, Selection, SelectKernelParams

from .later_tables import selections_on, table_0_7

pytestmark = pytest.mark.slow
B200 = Device(sm=100, multiprocessor_count=148, max_shared_memory_per_block_optin=227 * 1024)
BF16 = "DATA_TYPE_BF16"
ERAS = {"0.7.2.post1": "0.7.2.post1", "0.7.4": "0.7.4"}


@pytest.fixture(scope="module")
def selection(cubin_wheel):
    return selections_on(table_0_7(cubin_wheel), ERAS, B200)


def _select(selection: Selection, window_left: int, kv: int = 1024) -> SelectKernelParams:
    """selectKernel on a dense MLA decode call made with `window_left`, as the decode
    launcher makes it (0.7.4: window_right 0 when window_left >= 0, else -1)."""
    call = FmhaCall(False, BF16, BF16, BF16, 16, 576, 512, 1, 1, kv, 64, 0)
    params = selection._launcher_params(call, kv, 64, window_left, False)
    select = SelectKernelParams.of(params)
    selection.select_kernel(params, select)
    return select


def test_dense_mla_refuses_a_window_narrower_than_the_kv_in_its_new_words(selection):
    """selectKernel, dense MLA generation: 0.7.4 requires (left == -1 or maxSeqLenKv <= left + 1),
    right <= 0 and no chunking, and says the window's bounds; 0.7.2.post1 refused the same call
    as "does not support sliding-window or chunked attention". A window that covers the KV
    (left 2047, KV 1024) passes both, with the dense mask."""
    with pytest.raises(Refusal) as new:
        _select(selection("0.7.4"), window_left=127)
    assert new.value.message == (
        "TRTLLM-GEN MLA generation requires a window that covers the whole KV sequence "
        "(maxSeqLenKv=1024, leftSlidingWindow=127, rightSlidingWindow=0, chunkedAttentionSize=0)."
    )
    with pytest.raises(Refusal, match="does not support sliding-window or chunked attention"):
        _select(selection("0.7.2.post1"), window_left=127)
    for version in ERAS:
        assert _select(selection(version), window_left=2047).mask_type == 0


def test_what_0_7_4_left_alone_launches_as_before(selection):
    """The multi-wave KV split is opt-in and never for MLA; CGA for token-sparse MQA and
    NVFP4 grouping reach no MLA call: the clamp case of 0.7.2.post1 launches the same."""
    call = FmhaCall(False, BF16, BF16, BF16, 16, 320, 256, 1, 1, 32768, 64, 0)
    new, old = selection("0.7.4").launch(call), selection("0.7.2.post1").launch(call)
    assert (new.kernel.name, new.ctas, new.cluster_x) == (old.kernel.name, old.ctas, old.cluster_x)
    assert new.cluster_x == 16
