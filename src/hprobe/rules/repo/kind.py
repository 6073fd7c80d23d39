"""The --repo rule source kind, apart from its reader: a run that names no
repo (a warm `check` on the shipped tables) never imports the extractor and
the evaluator behind it (rules/repo/extract.py)."""

from __future__ import annotations

from hprobe.rules.interface import RuleInputs, RuleSource, SourceKind


class RepoSourceKind(SourceKind):
    """--repo: the padding classes and call paths of a source tree."""

    name = "repo"

    def given(self, inputs: RuleInputs) -> bool:
        return inputs.repo is not None

    def make(self, inputs: RuleInputs) -> list[RuleSource]:
        from hprobe.rules import overridden_models
        from hprobe.rules.repo.extract import RepoRuleSource
        from hprobe.rules.repo.tree.mapping import load_mapping

        assert inputs.repo is not None
        chosen = load_mapping(inputs.mapping) if inputs.mapping is not None else None
        heads, tp = inputs.heads, list(inputs.tp) if inputs.tp is not None else None
        picked = list(inputs.picked) if inputs.picked is not None else None
        models = (
            (lambda found: overridden_models(found, heads, tp, picked))
            if heads is not None or tp is not None or picked is not None
            else None
        )
        return [RepoRuleSource(inputs.repo, chosen, inputs.exclude, dict(inputs.settings), models, inputs.read_tree)]
