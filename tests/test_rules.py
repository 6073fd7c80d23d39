"""rules/__init__: the tables judged and what --heads, --tp and --model make
of them. --heads replaces the models with one named by its count (a model's
name never outlives its head count), keeping the config attributes a rule
may read; a pad_map written for other counts is an input error, never read
as the table refusing a count it does not name."""

from __future__ import annotations

import pytest

from hprobe.model.errors import InputError
from hprobe.model.padding import Backend, Model, PaddingTable, PadMap, PadTo, Where
from hprobe.rules import overridden_models, override_models

pytestmark = pytest.mark.pure

KIMI = Model("Kimi-K3", 96, (1, 2, 4, 8), Where("m.toml", 1), ("dense-mla",), (("q_head_norm", True),))
DSV4 = Model("DeepSeek-V4-Pro", 128, (1, 2, 4, 8, 16), Where("m.toml", 9), ("dsv4",), (("q_head_norm", False),))
GLM = Model("GLM-5", 64, (1, 2, 4), Where("m.toml", 17), ("dsa",))


def test_heads_make_one_model_per_value_of_an_attribute_the_models_disagree_on() -> None:
    made = overridden_models([KIMI, DSV4, GLM], 48, None)
    assert [(m.name, m.tp, m.families, m.attributes) for m in made] == [
        ("48 heads (q_head_norm=true)", (1, 2, 4, 8, 16), ("dense-mla",), (("q_head_norm", True),)),
        ("48 heads (q_head_norm=false)", (1, 2, 4, 8, 16), ("dsv4",), (("q_head_norm", False),)),
        ("48 heads", (1, 2, 4, 8, 16), ("dsa",), ()),  # GLM gives no value: on its own paths, no attribute
    ]
    # Models that agree make one, on every path, with the attribute kept.
    [one] = overridden_models([KIMI], 24, [2, 4])
    assert (one.name, one.tp, one.families, one.attributes) == ("24 heads", (2, 4), (), (("q_head_norm", True),))


def test_tp_and_picked_models_are_checked_to_divide() -> None:
    assert [m.tp for m in overridden_models([KIMI, GLM], None, [2])] == [(2,), (2,)]
    assert overridden_models([], None, [4], picked=[DSV4])[0].tp == (4,)
    with pytest.raises(InputError, match="model Kimi-K3: 96 query heads do not divide evenly over tp=64"):
        overridden_models([KIMI], None, [64])
    with pytest.raises(InputError, match="100 query heads do not divide evenly over tp=8"):
        overridden_models([KIMI], 100, [8])


def test_a_pad_map_says_nothing_of_counts_it_was_not_written_for() -> None:
    mapped = Backend("b", "trtllm-mla", (100,), PadMap(((24, 32), (48, 64), (96, 128), (12, 16))), Where("t.toml", 5))
    table = PaddingTable("t", "s", "t.toml", None, [KIMI], [mapped])
    assert override_models(table, None, None) is table  # nothing asked: the table as it is
    kept = override_models(table, 48, [2, 4])  # 24 and 12: counts the map names
    assert [m.name for m in kept.models] == ["48 heads"] and kept.backends[0].models == ()
    with pytest.raises(InputError, match=r"pad_map \(t.toml:5\) does not say what n=40 pads to"):
        override_models(table, 80, [2])
    # A repo's maps were evaluated over every count: a missing count is the rule's own answer.
    assert override_models(table, 80, [2], maps_cover_every_count=True).models[0].num_q_heads == 80
    padded = PaddingTable(
        "t", "s", "t.toml", None, [KIMI], [Backend("p", "trtllm-mla", (100,), PadTo((64, 128)), Where("t.toml", 9))]
    )
    assert override_models(padded, 80, [2]).models[0].per_rank() == [(2, 40)]
