"""The 0.6.18 port: the same entry, with 0.6.18's DSV4 prefill dispatch
(`csrc/sparse_mla_sm120_prefill.cu`: `case 8` in both dispatchers'
switches, top-k 192 and 256 in the single-cache one)."""

from __future__ import annotations

import pytest

from hprobe.compiled.sm120_sparse.era_0_6_14 import Refusal
from hprobe.compiled.sm120_sparse.era_0_6_18 import Entry

from .test_era_0_6_14 import call

pytestmark = pytest.mark.pure


def served(**kw: object) -> set[int]:
    out = set()
    for h in range(1, 129):
        try:
            Entry().check(call(h, **kw))  # type: ignore[arg-type]
        except Refusal:
            continue
        out.add(h)
    return out


@pytest.mark.parametrize("topk", [128, 192, 256, 512, 1024, 2048])
def test_dsv4_prefill_serves_8_heads_too(topk):
    assert served(topk=topk) == {8, 16, 32, 64, 128}


def test_dsv4_dual_serves_8_heads_too_and_dsv32_is_unchanged():
    assert served(extra_kv_cache=(2, 64, 584), extra_indices=(128, 64)) == {8, 16, 32, 64, 128}
    assert served(topk=2048, d_qk=576) == {8, 16, 32, 64, 128}
    assert served(topk=320) == set()
