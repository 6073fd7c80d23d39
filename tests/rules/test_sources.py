"""Rule sources behind one seam: the first kind the inputs name is the one used,
and a new kind is one class and one line in rules/sources.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from hprobe.model.errors import InputError
from hprobe.model.padding import PaddingTable
from hprobe.rules import sources
from hprobe.rules.interface import RuleInputs, RuleSource, SourceKind
from hprobe.rules.repo.extract import RepoRuleSource
from hprobe.rules.repo.padfn import PadFnRuleSource
from hprobe.rules.toml_source import TomlTableSource

# Pure: runs without torch, flashinfer or a subprocess (the fast tier, `-m "pure and not slow"`).
pytestmark = pytest.mark.pure


def test_the_kinds_are_asked_in_order_repo_then_pad_fn_then_tables(tmp_path):
    assert [k.name for k in sources.KINDS] == ["repo", "pad-fn", "tables"]
    [repo] = sources.rule_sources(RuleInputs(repo=tmp_path, pad_fn="x.py:f", tables=(tmp_path / "t.toml",)))
    assert isinstance(repo, RepoRuleSource) and repo.root == tmp_path
    [fn] = sources.rule_sources(
        RuleInputs(pad_fn="x.py:f", kernel="dsv4-sparse-mla", sm="100", heads=128, tables=(tmp_path / "t.toml",))
    )
    assert isinstance(fn, PadFnRuleSource) and fn.kernel == "dsv4-sparse-mla" and fn.sms == (100,)
    named = sources.rule_sources(RuleInputs(tables=(tmp_path / "a.toml", tmp_path / "b.toml")))
    assert [s.path for s in named if isinstance(s, TomlTableSource)] == [tmp_path / "a.toml", tmp_path / "b.toml"]
    shipped = sources.rule_sources(RuleInputs())
    assert shipped and all(isinstance(s, TomlTableSource) and Path(s.path).suffix == ".toml" for s in shipped)


def test_pad_fn_without_its_kernel_sm_and_heads_is_one_input_error():
    with pytest.raises(InputError, match="--pad-fn needs --kernel"):
        sources.rule_sources(RuleInputs(pad_fn="x.py:f"))


def test_a_new_kind_is_one_class_and_one_registry_line(monkeypatch):
    class Fixed(RuleSource):
        def collect(self) -> PaddingTable:
            return PaddingTable("fixed", "fixture", "<fixed>", None, [], [])

    class FixedKind(SourceKind):
        name = "fixed"

        def given(self, inputs: RuleInputs) -> bool:
            return inputs.heads == 7

        def make(self, inputs: RuleInputs) -> list[RuleSource]:
            return [Fixed()]

    monkeypatch.setattr(sources, "KINDS", (FixedKind(), *sources.KINDS))
    [got] = sources.rule_sources(RuleInputs(heads=7))
    assert got.collect().name == "fixed"
    assert not isinstance(sources.rule_sources(RuleInputs(heads=8))[0], Fixed)
