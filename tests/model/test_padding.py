"""model/padding: the padding rules as engines write them (a list of counts,
a map, a multiple, a tile), each rounding a per-rank count up or refusing it
(None: the rule raises); a backend serves the cases its models, counts and
TP degrees name."""

from __future__ import annotations

import pytest

from hprobe.model.padding import Backend, Model, NoPadding, PadMap, PadMultiple, PadTile, PadTo, Where

pytestmark = pytest.mark.pure


def test_pad_to_and_pad_map_round_up_or_refuse():
    rule = PadTo((8, 16, 32, 64, 128))
    assert [rule.pad(n) for n in (1, 8, 9, 24, 128, 129)] == [8, 8, 16, 32, 128, None]
    pmap = PadMap(((8, 64), (16, 64)))
    assert (pmap.pad(8), pmap.pad(12)) == (64, None)


def test_pad_multiple_and_pad_tile_rules():
    multiple = PadMultiple(16, 128)
    assert [multiple.pad(n) for n in (1, 12, 16, 24, 96, 128, 129)] == [16, 16, 16, 32, 96, 128, None]
    assert PadMultiple(16).pad(300) == 304
    tile = PadTile(((8, 8), (32, 16), (128, 64)))
    # n stays when min(n, tile) divides it; otherwise it rounds up to the tile.
    assert [tile.pad(n) for n in (4, 6, 8, 12, 16, 24, 48, 96, 128, 129)] == [4, 6, 8, 12, 16, 32, 48, 128, 128, None]
    assert tile.largest() == 128


def test_rules_describe_themselves_and_their_largest_count() -> None:
    assert PadTo((64, 128)).describe() == "pad_to {64, 128}" and PadTo((64, 128)).largest() == 128
    assert NoPadding().pad(7) == 7
    assert PadMap(((8, 64), (16, 64))).largest() == 64


def test_a_backend_serves_the_cases_its_models_counts_and_tps_name() -> None:
    kimi = Model("Kimi-K3", 96, (1, 2, 4, 8, 16), Where("m.toml", 3))
    dsv4 = Model("DSv4", 128, (1, 2, 4, 8, 16), Where("m.toml", 9))
    assert kimi.per_rank() == [(1, 96), (2, 48), (4, 24), (8, 12), (16, 6)]
    every = Backend("b", "trtllm-mla", (100,), PadTo((64, 128)), Where("t.toml", 1))
    assert len(every.cases([kimi, dsv4])) == 10
    only = Backend(
        "b", "trtllm-mla", (100,), PadTo((64, 128)), Where("t.toml", 1), models=("DSv4",), counts=(8, 16), tps=(16,)
    )
    assert [(m.name, tp, n) for m, tp, n in only.cases([kimi, dsv4])] == [("DSv4", 16, 8)]
    assert only.covers("DSv4", 16) and not only.covers("DSv4", 16, tp=8) and not only.covers("Kimi-K3", 8)
    # A regrouped count is judged as the work the call does; a padding, as the per-rank count.
    regrouped = Backend("d", "trtllm-mla", (100,), PadMap(((48, 96),)), Where("d.py", 405), regrouped=True)
    assert regrouped.judged_as(48, 96) == 96 and every.judged_as(48, 64) == 48
    assert every.source_for("DSv4", 8) == "t.toml:1"
