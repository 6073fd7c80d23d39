"""The port of 0.6.16 – 0.6.17's trtllm-gen selection (compiled/trtllm_gen/era_0_6_16.py):
its own hooks over 0.6.12's, each case read from the C++ 0.6.16 ships
(fmhaKernels.cuh ~672-681 getPaddedMlaTileSizeQ: a power of two or a group of 128
or more keeps the heuristic's tile; another group up to 64 gets the power of two
above it, at least 8; above 64 it is refused; a group below one is refused). Its
selections over a release's table run in tests/test_compiled_releases.py."""

from __future__ import annotations

import pytest

from hprobe.compiled.trtllm_gen.era_0_6_12 import Refusal
from hprobe.compiled.trtllm_gen.era_0_6_16 import Selection

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("group", "tile"),
    [
        (1, 0),
        (2, 0),
        (8, 0),
        (64, 0),
        (128, 0),
        (192, 0),
        (3, 8),
        (5, 8),
        (9, 16),
        (12, 16),
        (24, 32),
        (48, 64),
        (63, 64),
    ],
)
def test_a_group_that_is_no_power_of_two_gets_one_padded_tile(group, tile) -> None:
    assert Selection.padded_mla_tile_size_q(group) == tile


@pytest.mark.parametrize(
    ("group", "words"),
    [
        (96, "Non-power-of-two MLA numHeadsQPerKv must be <= 64, got 96."),
        (65, "Non-power-of-two MLA numHeadsQPerKv must be <= 64, got 65."),
        (0, "The numHeadsQPerKv must be positive, got 0."),
    ],
)
def test_a_group_the_cxx_refuses_is_refused_in_its_words(group, words) -> None:
    with pytest.raises(Refusal) as refused:
        Selection.padded_mla_tile_size_q(group)
    assert words in str(refused.value)


def test_sm107_is_served_beside_sm100_and_sm103() -> None:
    assert Selection.RUNNER_SMS == (100, 103, 107)
    assert "kSM_107" in Selection.COMPATIBLE[107]
