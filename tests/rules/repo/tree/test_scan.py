"""rules/repo/tree/scan: the index of a source tree, read with `ast` and parsed
on demand — which files it holds, which it parses for a name, how it resolves a
class's bases, and what makes a class's hierarchy not what its source says."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hprobe.rules.repo.tree import scan
from hprobe.rules.repo.tree.scan import RepoIndex, resolve_relative

pytestmark = pytest.mark.pure


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_tests_fixtures_and_environments_are_left_out_by_default(tmp_path):
    root = _tree(
        tmp_path / "eng",
        {
            "eng/__init__.py": "",
            "eng/attn.py": "",
            "eng/tests/test_attn.py": "",
            "eng/fixtures/rules.py": "",
            ".venv/lib/x.py": "",
            "build/lib/eng/attn.py": "",
        },
    )
    assert sorted(RepoIndex.build(root).files) == ["eng", "eng.attn"]
    assert sorted(RepoIndex.build(root, excludes=()).files) == [
        ".venv.lib.x",
        "build.lib.eng.attn",
        "eng",
        "eng.attn",
        "eng.fixtures.rules",
        "eng.tests.test_attn",
    ]


def test_a_module_is_found_from_the_package_or_its_parent(tmp_path):
    root = _tree(tmp_path, {"vllm/__init__.py": "", "vllm/models/deepseek.py": "HEADS = 128\n"})
    whole = RepoIndex.build(root)
    package = RepoIndex.build(root / "vllm")
    for index in (whole, package):
        module = index.by_suffix("vllm.models.deepseek")
        assert module is not None and module.constants["HEADS"].value == 128  # type: ignore[attr-defined]
    assert whole.by_suffix("vllm.models.qwen") is None


def test_a_name_is_searched_whole_and_never_as_its_own_def(tmp_path):
    root = _tree(
        tmp_path,
        {
            "defines.py": "def decode(q):\n    return q\n",
            "calls.py": "from defines import decode\ndecode(1)\n",
            "longer.py": "def decode_all(q):\n    return q\n",
        },
    )
    index = RepoIndex.build(root)
    assert [m.name for m in index.each_module_naming("decode")] == ["calls"]
    assert index.count_naming("decode") == 1
    # Only the modules asked about are parsed; a text search settles the rest.
    assert sorted(index.modules) == ["calls"]
    assert [m.name for m in index.each_module_naming("decode", also=frozenset({"nowhere"}))] == []


def test_bases_resolve_through_imports_and_stop_at_the_tree(tmp_path):
    root = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/base.py": "import torch\nclass Base(torch.nn.Module):\n    def pad(self, n):\n        return n\n",
            "pkg/mid.py": "from .base import Base\nclass Mid(Base):\n    pass\n",
            "pkg/leaf.py": "from pkg import mid\nclass Leaf(mid.Mid):\n    def pad(self, n):\n        return 64\n",
        },
    )
    index = RepoIndex.build(root)
    leaf = index.by_suffix("pkg.leaf").classes["Leaf"]  # type: ignore[union-attr]
    assert [c.qualname for c in index.mro(leaf)] == ["pkg.leaf.Leaf", "pkg.mid.Mid", "pkg.base.Base"]
    assert sorted(c.qualname for c in index.classes_with("pad")) == ["pkg.base.Base", "pkg.leaf.Leaf", "pkg.mid.Mid"]
    assert index.taint(leaf) is None


def test_a_hierarchy_is_walked_a_bounded_number_of_classes(tmp_path, monkeypatch):
    monkeypatch.setattr(scan, "MAX_MRO", 5)
    chain = "class C0:\n    pass\n" + "".join(f"class C{i}(C{i - 1}):\n    pass\n" for i in range(1, 50))
    cycle = "class A(B):\n    pass\nclass B(A):\n    pass\n"
    index = RepoIndex.build(_tree(tmp_path, {"chain.py": chain, "cycle.py": cycle}))
    chain_module = index.by_suffix("chain")
    assert len(index.mro(chain_module.classes["C49"])) == 5  # type: ignore[union-attr]
    cycle_module = index.by_suffix("cycle")
    assert [c.name for c in index.mro(cycle_module.classes["A"])] == ["A", "B"]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("class Base(metaclass=Registry):\n    pass\nclass Leaf(Base):\n    pass\n", "is made with metaclass=Registry"),
        (
            "class Base:\n    def __init_subclass__(cls):\n        pass\nclass Leaf(Base):\n    pass\n",
            "__init_subclass__",
        ),
        ("class Base:\n    pass\nBase.pad = None\nclass Leaf(Base):\n    pass\n", "class Base is changed after"),
    ],
)
def test_a_class_a_hook_or_a_later_statement_may_rewrite_is_tainted(tmp_path, source, said):
    index = RepoIndex.build(_tree(tmp_path, {"m.py": source}))
    leaf = index.by_suffix("m").classes["Leaf"]  # type: ignore[union-attr]
    why = index.taint(leaf)
    assert why is not None and said in why


def test_a_plain_metaclass_leaves_the_hierarchy_as_written(tmp_path):
    index = RepoIndex.build(_tree(tmp_path, {"m.py": "import abc\nclass Base(metaclass=abc.ABCMeta):\n    pass\n"}))
    assert index.taint(index.by_suffix("m").classes["Base"]) is None  # type: ignore[union-attr]


def test_builtins_the_tree_replaces_are_named_with_their_place(tmp_path):
    index = RepoIndex.build(
        _tree(tmp_path, {"p.py": "import builtins\nbuiltins.len = lambda x: 0\nsetattr(builtins, 'max', min)\n"})
    )
    patched = index.patched_builtins()
    assert set(patched) == {"len", "max"} and patched["len"].endswith("p.py:2")


def test_relative_imports_resolve_against_the_package():
    assert resolve_relative("vllm.models", "deepseek", 1) == "vllm.models.deepseek"
    assert resolve_relative("vllm.models", "layers", 2) == "vllm.layers"
    assert resolve_relative("vllm.models", None, 1) == "vllm.models"


@pytest.mark.parametrize(
    ("package_init", "resolves"),
    [
        ("", True),  # the package binds no `mid`: the name is its submodule
        ("from .other import Mid as mid\n", False),  # the package's own `mid` wins
        ("mid = None\n", False),
        ("if True:\n    mid = None\n", False),
        ("from .other import *\n", False),  # a star import may bind it
        ("def __getattr__(name):\n    return None\n", False),  # asked before the submodule
    ],
)
def test_a_name_imported_from_a_package_is_its_submodule_only_where_the_package_binds_none(
    tmp_path, package_init, resolves
):
    root = _tree(
        tmp_path,
        {
            "pkg/__init__.py": package_init,
            "pkg/other.py": "class Mid:\n    pass\n",
            "pkg/mid.py": "class Mid:\n    def pad(self, n):\n        return 64\n",
            "leaf.py": "from pkg import mid\nclass Leaf(mid.Mid):\n    pass\n",
        },
    )
    index = RepoIndex.build(root)
    leaf = index.by_suffix("leaf").classes["Leaf"]  # type: ignore[union-attr]
    bases = [c.qualname for c in index.mro(leaf)[1:]]
    assert bases == (["pkg.mid.Mid"] if resolves else [])


@pytest.mark.parametrize(
    ("imported", "base", "resolves"),
    [
        ("import pkg.mid as m", "m.Mid", True),
        ("import pkg.mid", "pkg.mid.Mid", True),  # through the package to its submodule
        ("import pkg.mid", "pkg.other.Mid", False),  # no such submodule
        ("import torch as m", "m.Mid", False),  # not the tree's
    ],
)
def test_a_module_imported_under_a_name_resolves_its_classes(tmp_path, imported, base, resolves):
    package_init = ""
    root = _tree(
        tmp_path,
        {
            "pkg/__init__.py": package_init,
            "pkg/mid.py": "class Mid:\n    def pad(self, n):\n        return 64\n",
            "leaf.py": f"{imported}\nclass Leaf({base}):\n    pass\n",
        },
    )
    index = RepoIndex.build(root)
    leaf = index.by_suffix("leaf").classes["Leaf"]  # type: ignore[union-attr]
    assert [c.qualname for c in index.mro(leaf)[1:]] == (["pkg.mid.Mid"] if resolves else [])
    assert ("leaf.Leaf" in {c.qualname for c in index.classes_with("pad")}) is resolves


def test_a_package_binding_the_submodules_name_keeps_the_chain_unresolved(tmp_path):
    root = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "from .other import Thing as mid\n",
            "pkg/other.py": "class Thing:\n    pass\n",
            "pkg/mid.py": "class Mid:\n    pass\n",
            "leaf.py": "import pkg\nclass Leaf(pkg.mid.Mid):\n    pass\n",
        },
    )
    index = RepoIndex.build(root)
    assert index.resolve_class(index.by_suffix("leaf"), "pkg.mid.Mid") is None  # type: ignore[arg-type]
