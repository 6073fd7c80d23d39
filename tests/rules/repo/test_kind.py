"""rules/repo/kind: --repo as a rule source kind, built from what the user named
without reading the tree (the reading happens when the source is read)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hprobe.rules.interface import RuleInputs
from hprobe.rules.repo.kind import RepoSourceKind

pytestmark = pytest.mark.pure


def test_the_kind_is_chosen_by_a_repo_only():
    kind = RepoSourceKind()
    assert kind.name == "repo"
    assert kind.given(RuleInputs(repo=Path("engine")))
    assert not kind.given(RuleInputs(tables=(Path("t.toml"),)))


def test_a_source_carries_what_was_named_and_reads_nothing_yet(tmp_path):
    missing = tmp_path / "not-there"  # read only when the source is read
    reader = object()
    (source,) = RepoSourceKind().make(
        RuleInputs(repo=missing, exclude=("tests/*",), settings=(("tp", "8"),), read_tree=reader)  # type: ignore[arg-type]
    )
    assert (source.root, source.excludes, source.overrides) == (missing, ("tests/*",), {"tp": "8"})
    assert source.mapping is None and source.reader is reader
    # No --heads, --tp or --model: the tree's own models, not a replacement.
    assert source.models is None


def test_heads_or_tp_replace_the_models_the_tree_serves(tmp_path):
    (source,) = RepoSourceKind().make(RuleInputs(repo=tmp_path, heads=96, tp=(4, 8)))
    assert source.models is not None
    (model,) = source.models([])
    assert model.num_q_heads == 96 and list(model.tp) == [4, 8]
