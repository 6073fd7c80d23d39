"""`suggest --diff`: the change the suggestions ask of a consumer's tree, as
one plan (each rule adopted, or kept with the release it holds from, and the
pin they need together) written by rules/repo/patch.py against the tree's own
requirements."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hprobe.advise.suggest import adopted
from hprobe.rules.repo.patch import Adoption, build_patch
from hprobe.support.published import listed_or_none

if TYPE_CHECKING:
    from packaging.version import Version

    from hprobe.advise.search import HoldsAt
    from hprobe.advise.suggest import BackendSuggestion
    from hprobe.rules.repo.extract import RepoTables
    from hprobe.rules.repo.patch import Patch


def patch_for(
    repo_tables: RepoTables,
    suggestions: list[BackendSuggestion],
    published: list[Version],
    holds_at: HoldsAt | None,
    diff_name: str,
) -> Patch:
    """The patch the suggestions ask for, checked against the tree's own
    requirements, whatever --pin or --flashinfer the rules were judged under."""
    chosen: dict[str, Adoption] = {}
    for s in suggestions:
        rule, needs = adopted(s)
        if rule is not None:
            chosen[s.backend.name] = Adoption(rule, needs, s.changed, s.backend.rule, s.current_safe_from())
    for s in suggestions:
        kept = s.current_safe_from()
        if s.backend.name not in chosen and s.backend.rule is not None and kept is not None:
            # Left as it is (its rule serves a path hprobe does not probe, or
            # nothing better is known): no code of it changes, but the pin it
            # is safe from is part of the plan, or the patched tree crashes
            # on a release the written pin admits.
            chosen[s.backend.name] = Adoption(s.backend.rule, kept, False, s.backend.rule, kept)
    by_name = {s.backend.name: s for s in suggestions}

    def holds(qualname: str, v: Version) -> bool | None:
        # The counts the patched tree launches on this path: the adopted rule's, or the current ones kept.
        s, adoption = by_name.get(qualname), chosen[qualname]
        if s is None or holds_at is None:
            return None
        counts = s.rule_counts() if adoption.changes else {c.current for c in s.changes}
        return None if None in counts else holds_at(s, frozenset(c for c in counts if c is not None), v)

    patch = build_patch(repo_tables, chosen, published, listed_or_none, holds)
    patch.not_rewritten.extend(
        f"{s.backend.name}: not rewritten: {s.shared}{_kept(s, chosen)}" for s in suggestions if s.shared and s.changed
    )
    # A rule whose answers are undecided is left as it is, and said: what
    # `check` finds wanting in it is then named here too.
    patch.not_rewritten.extend(
        f"{s.backend.name}: not rewritten: undecided ({s.inconclusive[0]})"
        for s in suggestions
        if s.inconclusive and s.backend.name not in chosen
    )
    # Nothing to change: no rule's code or pin moves, and no change the
    # advice asks for is left unwritten (by hand, held back, not adopted).
    patch.nothing_needed = (
        not patch.diff
        and not patch.not_rewritten
        and not any(s.changed and s.backend.name not in chosen for s in suggestions)
    )
    if not patch.diff and not patch.nothing_needed:
        patch.not_rewritten.append(f"--diff {diff_name}: nothing to rewrite, not written")
    return patch


def _kept(suggestion: BackendSuggestion, chosen: dict[str, Adoption]) -> str:
    """Where a rule left as it is holds from, when the plan's pin moves with it."""
    kept = chosen.get(suggestion.backend.name)
    if kept is None or kept.needs is None:
        return ""
    return f"; as it is, it holds from flashinfer {kept.needs}, and the pin moves with it"
