"""`self.<name>` on the head-count trail (rules/repo/tracing/attributes.py and
heads.py): the value a class stores once in `__init__`, followed back to each
construction of the class, evaluated per count; every other way the name may
be set ends the trail with its place, never a guess."""

from __future__ import annotations

from pathlib import Path

import pytest

from hprobe.rules.repo.tracing.heads import HeadTrail, TrailEnd, caller_key, trace_heads

from ..engine_tree import one_module_tree

pytestmark = pytest.mark.pure

ROOTS = {"forward_mqa": "q"}

# vLLM 0.34.0's Kimi K3 core, reduced: the count its call hands FlashInfer is
# set where the object is built (FlashInferCore(impl, layer, heads, ...)).
CORE = """
from flashinfer.decode import trtllm_batch_decode_with_kv_cache_mla


class Core:
    def __init__(self, impl, fold):
        self.impl, self.fold = impl, fold
        self.name = "core"

    def decode(self, q):
        rows, heads, dim = q.shape
        query = q.reshape(rows // self.fold, 1, self.fold * heads, dim)
        return trtllm_batch_decode_with_kv_cache_mla(query, None)


class Impl:
    def __init__(self, wide):
        self.core = Core(self, 2 if wide else 2)

    def forward_mqa(self, q, kv_cache, attn_metadata, layer):
        return self.core.decode(q)
"""


def _trail(tmp_path: Path, text: str) -> HeadTrail | TrailEnd:
    tmp_path.mkdir(parents=True, exist_ok=True)
    index, line = one_module_tree(tmp_path, text)
    module = index.by_suffix("engine.attn")
    assert module is not None
    return trace_heads(index, module, line, ("query", 0), ROOTS)


def test_a_constructor_argument_stored_on_self_is_followed_to_the_construction(tmp_path: Path) -> None:
    trail = _trail(tmp_path, CORE)
    assert isinstance(trail, HeadTrail), trail
    assert trail.said == "self.fold * heads"
    assert [trail.evaluate(n) for n in (16, 48)] == [32, 96]
    # The construction and the store are among what the trail read.
    assert {line for _, line in trail.cited} >= {7, 18}


NARROW = """

class Narrow:
    def __init__(self):
        self.core = Core(self, 4)

    def forward_mqa(self, q, kv_cache, attn_metadata, layer):
        return self.core.decode(q)
"""


def test_constructions_that_store_different_values_are_each_a_caller(tmp_path: Path) -> None:
    trail = _trail(tmp_path, CORE + NARROW)
    assert isinstance(trail, HeadTrail), trail
    # The layer's query comes from two callers alike; the fold from two constructions that differ.
    splits = dict(trail.splits)
    where = next(w for w in splits if w.endswith("attn.py:6"))
    assert [at.rpartition(":")[2] for _, at in splits[where]] == ["18", "26"]
    run = {caller_key(w): 0 for w in splits}
    assert [trail.evaluate(16, run={**run, caller_key(where): i}) for i in (0, 1)] == [32, 64]


STORED = '        self.name = "core"'
RETURN = "        return self.core.decode(q)"


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        (STORED, STORED + "\n\n    def grow(self):\n        self.fold = 4", "stored at 2 places"),
        (RETURN, "        self.core.fold = 8\n" + RETURN, "`self.core.fold` is stored"),
        (STORED, '        setattr(self, "fold", 3)', "`self` is passed to setattr(...)"),
        (STORED, STORED + "\n\n    def twin(self):\n        return type(self)(self.impl, 8)", "builds an instance"),
        (RETURN, "        keep(self.core)\n" + RETURN, "self.core"),
        (
            "class Impl:",
            "class Wide(Core):\n    def __init__(self, impl):\n        super().__init__(impl, 8)\n\n\nclass Impl:",
            "has an `__init__` of its own",
        ),
    ],
    ids=["stored twice", "stored outside", "setattr", "type(self)", "handed on", "subclass init"],
)
def test_any_other_way_to_set_the_attribute_leaves_the_count_undecided(tmp_path: Path, old, new, why) -> None:
    """Each may make `self.fold` another value than the construction's: the
    count is never judged at the construction's value, and the reason names it."""
    text = CORE.replace(old, new)
    assert text != CORE
    trail = _trail(tmp_path, text)
    assert isinstance(trail, HeadTrail), trail
    result = trail.evaluate(16)
    assert not isinstance(result, int), result
    assert why in str(result), result


def test_a_property_is_followed_to_what_it_returns(tmp_path: Path) -> None:
    """`self.fold` a `@property` returning what `__init__` stored (vLLM
    0.34.0's PreparedDsa.query): followed through its one `return`."""
    text = CORE.replace("self.impl, self.fold = impl, fold", "self.impl, self._fold = impl, fold").replace(
        "    def decode(self, q):",
        "    @property\n    def fold(self):\n        return self._fold\n\n    def decode(self, q):",
    )
    trail = _trail(tmp_path, text)
    assert isinstance(trail, HeadTrail), trail
    assert [trail.evaluate(n) for n in (16, 48)] == [32, 96]
    # A property that returns at two places is not read as one value.
    forked = text.replace(
        "        return self._fold", "        if self.impl:\n            return 4\n        return self._fold"
    )
    trail = _trail(tmp_path / "b", forked)
    assert isinstance(trail, HeadTrail), trail
    assert "gives its value at 2 places" in str(trail.evaluate(16))


CONTAINERS = """
from dataclasses import dataclass
from typing import NamedTuple

from flashinfer.decode import trtllm_batch_decode_with_kv_cache_mla


@dataclass
class Box:
    q: object
    fold: int = 2


class Pair(NamedTuple):
    q: object
    k: int


class Holder:
    def __init__(self, q, k):
        rows, heads, dim = q.shape
        self.q = q.reshape(rows // k, 1, k * heads, dim)


class Impl:
    def forward_mqa(self, q, kv_cache, attn_metadata, layer):
        rows, heads, dim = q.shape
        {body}
        return trtllm_batch_decode_with_kv_cache_mla({query}, None)
"""


@pytest.mark.parametrize(
    ("body", "query", "counts"),
    [
        # A dataclass field, and one left at its default.
        ("box = Box(q)", "box.q.reshape(rows // box.fold, 1, box.fold * heads, dim)", [32, 96]),
        # A named tuple's fields, by position.
        ("pair = Pair(q, k=4)", "pair.q.reshape(rows // pair.k, 1, pair.k * heads, dim)", [64, 192]),
        # A class whose __init__ stores what it is handed.
        ("held = Holder(q, 2)", "held.q", [32, 96]),
    ],
    ids=["dataclass", "named tuple", "init"],
)
def test_a_field_of_a_construction_is_what_the_construction_hands_it(tmp_path: Path, body, query, counts) -> None:
    trail = _trail(tmp_path, CONTAINERS.replace("{body}", body).replace("{query}", query))
    assert isinstance(trail, HeadTrail), trail
    assert [trail.evaluate(n) for n in (16, 48)] == counts


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ("box = Box(q)\n        box.fold = 3", "`box.fold` is stored"),
        ("box = Box(q)\n        setattr(box, 'fold', 3)", "may set `.fold`"),
        ("box = Box(q)\n        object.__setattr__(box, 'fold', 3)", "may set `.fold`"),
        ("box = Box(*[q])", "called with *args or **kwargs"),
    ],
    ids=["stored after", "setattr", "object.__setattr__", "starred"],
)
def test_a_field_changed_after_or_handed_unread_is_not_the_constructions(tmp_path: Path, change, why) -> None:
    query = "box.q.reshape(rows // box.fold, 1, box.fold * heads, dim)"
    trail = _trail(tmp_path, CONTAINERS.replace("{body}", change).replace("{query}", query))
    assert isinstance(trail, HeadTrail), trail
    result = trail.evaluate(16)
    assert not isinstance(result, int) and why in str(result), result


def test_a_field_whose_position_other_fields_move_is_not_read_by_position(tmp_path: Path) -> None:
    """`field(init=False)` before `q` takes no argument: `Box(q)` hands `q`
    position 0, not 1. hprobe does not count such fields: undecided."""
    text = CONTAINERS.replace(
        "    q: object\n    fold: int = 2", "    tag: str = field(init=False)\n    q: object\n    fold: int = 2"
    )
    text = text.replace("from dataclasses import dataclass", "from dataclasses import dataclass, field")
    query = "box.q.reshape(rows // box.fold, 1, box.fold * heads, dim)"
    trail = _trail(tmp_path, text.replace("{body}", "box = Box(q)").replace("{query}", query))
    assert isinstance(trail, HeadTrail), trail
    result = trail.evaluate(16)
    assert not isinstance(result, int) and "fields before `fold` are configured" in str(result), result


# vLLM 0.34.0's draft DCP path, reduced: `box = self.box` (a construction the
# class's `__init__` stores), then `box.q[parity]`, a mailbox whose head axis
# the box's own `__init__` sizes from what it is handed.
MAILBOX = """
import torch
from flashinfer.decode import trtllm_batch_decode_with_kv_cache_mla


class Box:
    def __init__(self, size, heads, cap=64, q_heads=None):
        self.q_heads = q_heads or size * heads
        self.q = torch.empty((2, cap, self.q_heads, 576), dtype=torch.uint8)


class Impl:
    def __init__(self):
        self.box = Box(2, 8{extra})

    def forward_mqa(self, q, kv_cache, attn_metadata, layer):
        rows = q.shape[0]
        box = self.box
        mailbox = box.q[rows % 2]
        query = mailbox[:rows].view(torch.float8_e4m3fn)
        return trtllm_batch_decode_with_kv_cache_mla(query, None)
"""


@pytest.mark.parametrize(("extra", "count"), [("", 16), (", q_heads=64", 64)], ids=["default", "handed"])
def test_a_local_copy_of_a_stored_construction_is_followed_into_its_class(tmp_path: Path, extra, count) -> None:
    """`box = self.box` reads the construction `__init__` stores, as
    `self.box.q` does: the count is the mailbox's head axis, from the box's
    arguments (its default where the construction hands none)."""
    trail = _trail(tmp_path, MAILBOX.replace("{extra}", extra))
    assert isinstance(trail, HeadTrail), trail
    assert trail.said == "q_heads or size * heads"
    assert [trail.evaluate(n) for n in (16, 48)] == [count, count]
    # The store of the copy's source and the box's allocation are among what the trail read.
    assert {line for _, line in trail.cited} >= {9, 14, 19}
