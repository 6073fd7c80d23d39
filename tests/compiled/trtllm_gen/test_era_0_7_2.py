"""The port of 0.7.2's trtllm-gen selection (compiled/trtllm_gen/era_0_7_2.py),
on a 0.7.x-shaped table made from flashinfer-cubin 0.6.13's rows (later_tables.py
beside it). Each case is worked by hand from the C++ each release ships, beside the
era before it; 0.7.2.post1's own change is in test_era_0_7_2_post1.py."""

from __future__ import annotations

import pytest

from hprobe.compiled.trtllm_gen.era_0_6_12 import FmhaCall, Refusal

from .later_tables import selections_0_7

pytestmark = pytest.mark.slow
BF16 = "DATA_TYPE_BF16"


@pytest.fixture(scope="module")
def selection(cubin_wheel):
    return selections_0_7(cubin_wheel)


def test_sparse_mla_below_8_heads_asks_for_a_padded_q8_kernel(selection):
    """DSv3.2-style sparse MLA, 4 heads, batch 1, top-k 2048. 0.7.0: half 2 < 8, so the
    full tile, 4 (a power of two: getPaddedMlaTileSizeQ keeps it); no Q4 sparse kernel.
    0.7.2: getPaddedMlaTileSizeQ pads powers of two below 8 to 8: the Q8 kernel, heads per
    CTA min(4, 8) = 4, one CTA for the heads."""
    call = FmhaCall(False, BF16, BF16, BF16, 4, 576, 512, 1, 1, 2048, 1, 2048)
    with pytest.raises(Refusal, match=r"Missing TRTLLM-GEN kernel \(decode\): .*tileSizeQ=4,"):
        selection("0.7.0").launch(call)
    launch = selection("0.7.2").launch(call)
    assert (launch.kernel.tile_size_q, launch.kernel.sparse_attn) == (8, 1)
