"""The port of 0.7.2.post1's trtllm-gen selection (compiled/trtllm_gen/era_0_7_2_post1.py:
a long KV split clamped to keep the CGA reduction), on a 0.7.x-shaped table made from
flashinfer-cubin 0.6.13's rows (later_tables.py beside it), worked by hand from the
C++ 0.7.2.post1 ships, beside 0.7.2's."""

from __future__ import annotations

import pytest

from hprobe.compiled.trtllm_gen.era_0_6_12 import FmhaCall

from .later_tables import selections_0_7

pytestmark = pytest.mark.slow
BF16 = "DATA_TYPE_BF16"


@pytest.fixture(scope="module")
def selection(cubin_wheel):
    return selections_0_7(cubin_wheel)


def test_a_long_kv_split_is_clamped_to_16_to_keep_the_cga_reduction(selection):
    """Rank 256 (320/256), 16 heads, batch 1, KV 32768: SwapsMmaAb Q16 (stepKv 256); the
    split is min((32768 + 511) // 512, 148) = 64 > 16. 0.7.2.post1 clamps it to 16: a
    SwapsMmaAb kernel, one token, headDimV 256 < 512, not DeepSeek's min-latency shape
    (576/512), 32768 / 16 = 2048 <= 4096 KV tokens per CTA, and the table has the CGA
    kernel -> 16 splits, CgaSmemReduction, cluster 16. 0.7.2: 64 splits, more than a
    cluster holds: GmemReduction, cluster 1. At KV 131072 (8192 tokens per CTA) neither clamps."""
    call = FmhaCall(False, BF16, BF16, BF16, 16, 320, 256, 1, 1, 32768, 64, 0)
    clamped = selection("0.7.2.post1").launch(call)
    assert (clamped.kernel.multi_ctas_kv_mode, clamped.ctas, clamped.cluster_x) == (3, (16, 1, 1), 16)
    before = selection("0.7.2").launch(call)
    assert (before.kernel.multi_ctas_kv_mode, before.ctas, before.cluster_x) == (1, (64, 1, 1), 1)
    longer = FmhaCall(False, BF16, BF16, BF16, 16, 320, 256, 1, 1, 131072, 64, 0)
    assert selection("0.7.2.post1").launch(longer).cluster_x == 1
