"""Where a class's instances live (rules/repo/tracing/instances.py), and the
callers' search that rests on it: a method call is a caller of a class's
method only where its receiver keeps an instance of that class, never by the
method's name alone (a tokenizer's `decode` is not an attention core's)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hprobe.rules.repo.tracing.heads import HeadTrail, TrailEnd, trace_heads
from hprobe.rules.repo.tracing.instances import Confined, NotConfined, confine
from hprobe.rules.repo.tree.scan import RepoIndex

pytestmark = pytest.mark.pure

ROOTS = {"forward_mqa": "q"}

CORE = """
from flashinfer.decode import trtllm_batch_decode_with_kv_cache_mla


class FlashInferCore:
    def __init__(self, heads):
        self.heads = heads

    def decode(self, query):
        assert query.shape[1] == self.heads
        return trtllm_batch_decode_with_kv_cache_mla(query=query, kv_cache=None)
"""

LAYER = """
from engine.core import FlashInferCore


class Prepared:
    def __init__(self, heads):
        self.core = None
        if heads:
            self.core = FlashInferCore(heads)

    def forward_mqa(self, q, kv_cache, attn_metadata, layer):
        assert self.core is not None
        core, other = self.core, None
        if not core.heads:
            return None
        return self.core.decode(q)
"""

# An unrelated class with a method of the same name, and a caller of it that
# hands it something else: never a caller of FlashInferCore.decode.
TOKENIZER = """
class Tokenizer:
    def decode(self, ids):
        return "".join(map(str, ids))


class Base:
    def decode(self, ids):
        return ids


class Child(Base):
    def decode(self, ids):
        return super().decode(ids)  # `super()` here is a Child: never a FlashInferCore


class AudioModel:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def describe(self, ids):
        return self.tokenizer.decode(ids[::2])
"""


def _tree(root: Path, files: dict[str, str]) -> RepoIndex:
    for name, text in {"engine/__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return RepoIndex.build(root)


def _trail(index: RepoIndex, core: str = CORE) -> HeadTrail | TrailEnd:
    module = index.by_suffix("engine.core")
    assert module is not None
    line = next(i for i, row in enumerate(core.splitlines(), 1) if "trtllm_batch_decode_with_kv_cache_mla(" in row)
    return trace_heads(index, module, line, ("query", 0), ROOTS)


def test_a_method_of_the_same_name_on_another_class_is_no_caller(tmp_path: Path) -> None:
    index = _tree(tmp_path, {"engine/core.py": CORE, "engine/layer.py": LAYER, "engine/audio.py": TOKENIZER})
    owner = index.by_suffix("engine.core").classes["FlashInferCore"]  # type: ignore[union-attr]
    confined = confine(index, owner)
    assert isinstance(confined, Confined), confined
    assert {(p.holder, p.name) for p in confined.places} == {
        ("engine.layer.Prepared", "core"),
        (None, "core"),  # the local copy in forward_mqa
    }
    trail = _trail(index)
    assert isinstance(trail, HeadTrail), trail
    assert trail.said == "the layer's count" and trail.root.endswith("layer.py:11")


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ("return self.core.decode(q)", None),
        ("return run(self.core, q)", "`self.core` is passed to run(...)"),
        ("self.cores = [FlashInferCore(4)]\n        return self.core.decode(q)", "put in a container"),
    ],
)
def test_an_instance_handed_on_leaves_the_search_to_the_names(tmp_path: Path, change, why) -> None:
    """Where an instance goes somewhere hprobe does not follow, the class is
    not confined (with the place): the search falls back to names, and with
    another class defining `decode` the trail ends there, never judged."""
    layer = LAYER.replace("return self.core.decode(q)", change)
    index = _tree(tmp_path, {"engine/core.py": CORE, "engine/layer.py": layer, "engine/audio.py": TOKENIZER})
    owner = index.by_suffix("engine.core").classes["FlashInferCore"]  # type: ignore[union-attr]
    confined = confine(index, owner)
    trail = _trail(index)
    if why is None:
        assert isinstance(confined, Confined) and isinstance(trail, HeadTrail)
        return
    assert isinstance(confined, NotConfined) and why in str(confined), confined
    assert isinstance(trail, TrailEnd), trail
    assert "may call FlashInferCore.decode or another class's decode" in trail.why


def test_self_handed_on_by_the_class_itself_is_not_confined(tmp_path: Path) -> None:
    core = CORE + "\n    def register(self, registry):\n        registry.append(self)\n"
    index = _tree(tmp_path, {"engine/core.py": core, "engine/layer.py": LAYER})
    owner = index.by_suffix("engine.core").classes["FlashInferCore"]  # type: ignore[union-attr]
    confined = confine(index, owner)
    assert isinstance(confined, NotConfined) and "`self` is passed to registry.append(...)" in str(confined)


def test_a_subclass_that_overrides_the_method_does_not_reach_it(tmp_path: Path) -> None:
    """The place keeps an instance of a subclass whose own `decode` never
    calls FlashInfer: the call is no caller of the base's, and with no other
    caller the trail ends where the engine calls it from code not followed."""
    layer = LAYER.replace("FlashInferCore(heads)", "Quiet(heads)") + (
        "\n\nclass Quiet(FlashInferCore):\n    def decode(self, query):\n        return query\n"
    )
    index = _tree(tmp_path, {"engine/core.py": CORE, "engine/layer.py": layer, "engine/audio.py": TOKENIZER})
    trail = _trail(index)
    assert isinstance(trail, TrailEnd) and "no call of decode in the tree hands it `query`" in trail.why, trail


def test_a_local_read_in_a_closure_is_the_place_and_a_class_made_by_name_is_not_confined(tmp_path: Path) -> None:
    closure = LAYER.replace(
        "        return self.core.decode(q)",
        "        local = FlashInferCore(4)\n\n        def inner(x):\n            return local.decode(x)\n\n"
        "        return inner(q)",
    )
    index = _tree(tmp_path / "a", {"engine/core.py": CORE, "engine/layer.py": closure, "engine/audio.py": TOKENIZER})
    trail = _trail(index)
    # Past `local.decode(x)` (the enclosing function's local) into `inner`,
    # whose own caller, a nested function's, the trail does not search.
    assert isinstance(trail, TrailEnd) and "no call of inner in the tree hands it `x`" in trail.why, trail

    by_name = LAYER + '\n\ndef make(module):\n    return getattr(module, "FlashInferCore")(4)\n'
    index = _tree(tmp_path / "b", {"engine/core.py": CORE, "engine/layer.py": by_name})
    owner = index.by_suffix("engine.core").classes["FlashInferCore"]  # type: ignore[union-attr]
    confined = confine(index, owner)
    assert isinstance(confined, NotConfined) and "FlashInferCore is named in a string" in str(confined)


def test_a_name_of_the_class_that_does_not_resolve_may_be_it(tmp_path: Path) -> None:
    """Through a star import the name resolves to nothing hprobe reads: it may
    be the class, made and kept anywhere, so the class is not confined."""
    starred = "from engine.core import *\n\n\ndef make():\n    return FlashInferCore(4)\n"
    index = _tree(tmp_path, {"engine/core.py": CORE, "engine/layer.py": LAYER, "engine/starred.py": starred})
    owner = index.by_suffix("engine.core").classes["FlashInferCore"]  # type: ignore[union-attr]
    confined = confine(index, owner)
    assert isinstance(confined, NotConfined) and "`FlashInferCore` may be FlashInferCore, not resolved" in str(confined)


@pytest.mark.parametrize(
    ("core_extra", "check", "confined_why"),
    [
        # vLLM 0.34.0's drafter: `DraftDcp.eligible(a, heads)` before it builds one.
        ("    @staticmethod\n    def eligible(heads):\n        return heads > 0\n", None, None),
        # A class method may build an instance (`cls(...)`): not taken.
        (
            "    @classmethod\n    def eligible(cls, heads):\n        return heads > 0\n",
            None,
            "`FlashInferCore` is used in an expression hprobe does not follow",
        ),
        # A static method that builds one and hands it back: that construction is found and said.
        (
            "    @staticmethod\n    def eligible(heads):\n        return FlashInferCore(heads)\n",
            None,
            "is returned",
        ),
        # The static method named without a call: the class handed on as a value.
        (
            "    @staticmethod\n    def eligible(heads):\n        return heads > 0\n",
            "check = FlashInferCore.eligible",
            "`FlashInferCore` is used in an expression hprobe does not follow",
        ),
    ],
    ids=["static", "classmethod", "static builds one", "not called"],
)
def test_a_static_method_called_on_the_class_keeps_it_confined(tmp_path: Path, core_extra, check, confined_why) -> None:
    """Calling a `@staticmethod` through the class makes no instance and hands
    none on; anything else said of the class still ends the confinement."""
    core = CORE + "\n" + core_extra
    guard = check or "assert FlashInferCore.eligible(heads)"
    layer = LAYER.replace("        self.core = None\n", f"        self.core = None\n        {guard}\n")
    index = _tree(tmp_path, {"engine/core.py": core, "engine/layer.py": layer, "engine/audio.py": TOKENIZER})
    owner = index.by_suffix("engine.core").classes["FlashInferCore"]  # type: ignore[union-attr]
    confined = confine(index, owner)
    if confined_why is None:
        assert isinstance(confined, Confined), confined
        assert isinstance(_trail(index), HeadTrail)
    else:
        assert isinstance(confined, NotConfined) and confined_why in str(confined), confined


@pytest.mark.parametrize(
    ("core_extra", "layer_extra", "confined_why"),
    [
        # An export list names the class for `import *`: no construction by name.
        ('__all__ = ["FlashInferCore"]\n', "", None),
        # Any other string naming it may be a `getattr`: said.
        ('REGISTRY = {"core": "FlashInferCore"}\n', "", "FlashInferCore is named in a string"),
        # A fluent method whose every call drops what it returns hands nothing on.
        ("", "        self.core.prepare(1)\n", None),
        # Kept, the returned instance lives where no construction put it.
        ("", "        kept = self.core.prepare(1)\n", "`self` is returned"),
        # Named in a string, the method may be fetched by getattr and its result kept.
        ("", '        getattr(self.core, "prepare")(1)\n', "`self` is returned"),
    ],
    ids=["__all__", "other string", "fluent dropped", "fluent kept", "fluent by name"],
)
def test_an_export_list_and_a_fluent_method_whose_result_is_dropped_keep_it_confined(
    tmp_path: Path, core_extra, layer_extra, confined_why
) -> None:
    core = (
        CORE.replace("\n\nclass FlashInferCore:", f"\n{core_extra}\n\nclass FlashInferCore:")
        + "\n    def prepare(self, kv):\n        self.kv = kv\n        return self\n"
    )
    layer = LAYER.replace(
        "        assert self.core is not None\n", "        assert self.core is not None\n" + layer_extra
    )
    index = _tree(tmp_path, {"engine/core.py": core, "engine/layer.py": layer, "engine/audio.py": TOKENIZER})
    owner = index.by_suffix("engine.core").classes["FlashInferCore"]  # type: ignore[union-attr]
    confined = confine(index, owner)
    if confined_why is None:
        assert isinstance(confined, Confined), confined
        assert isinstance(_trail(index, core), HeadTrail)
    else:
        assert isinstance(confined, NotConfined) and confined_why in str(confined), confined
