"""`hprobe suggest`: the padding rule the kernels' own answers call for.

For every backend of a table and every per-rank count n its models produce, the
suggested count is the smallest count >= n that the newest release probed
accepts on the fast path, on every SM the backend runs on; the pin it needs is
then searched over published releases (pin_advice.py). Beside it, the rule
that is safe on every release the current pin admits (its probed ends). Rules
are written in the table's vocabulary (`no_padding`, `pad_to`, `pad_map`); a
count no release can serve is reported, never papered over."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from hprobe.model.advice import CountChange
from hprobe.model.call import bound_to
from hprobe.model.heads import compact_set
from hprobe.model.outcome import HeadResult, KernelSMResult, Outcome
from hprobe.model.padding import Backend, NoPadding, PaddingRule, PaddingTable, PadMap, PadTo
from hprobe.model.sm import sm_names

if TYPE_CHECKING:
    from hprobe.advise.pins import PinAdvice
    from hprobe.model.release import ProbedRelease
    from hprobe.model.verdict import Finding


@dataclass
class BackendSuggestion:
    table: str
    backend: Backend
    sms: tuple[int, ...]
    releases: tuple[str, ...]
    suggested: PaddingRule | None  # the smallest counts the newest release probed accepts
    keep_pin: PaddingRule | None = None  # the smallest counts every release probed accepts
    newest: str | None = None  # the release `suggested` rests on
    changes: list[CountChange] = field(default_factory=list)
    unsafe: dict[int, list[int]] = field(default_factory=dict)  # n -> SMs with no safe count
    inconclusive: list[str] = field(default_factory=list)  # why some answers are unknown
    # release -> counts whose current padding it refuses
    refused_now: dict[str, list[int]] = field(default_factory=dict)
    pins: PinAdvice | None = None  # the pin `suggested` needs (None: not searched)
    pin_note: str | None = None  # why the pin was not searched

    @property
    def changed(self) -> bool:
        return any(c.current != c.suggested for c in self.changes)

    @property
    def shared(self) -> str | None:
        """Why the rule is not FlashInfer's alone to change (None: it is)."""
        reach = self.backend.reach
        if reach is None or reach.default_reaches:
            return None
        return (
            f"the rule also serves {reach.otherwise}, the engine's default ({reach.default}); "
            f"a change for FlashInfer alone needs a branch on {reach.flag} == {reach.value}"
        )

    def words(self) -> str:
        """The advice in one line."""
        text = self._words()
        reach = self.backend.reach
        if reach is not None and not reach.default_reaches:
            return f"{text} [{reach.scope()}: {self.shared}]"
        return text

    def _words(self) -> str:
        sms = sm_names(self.sms)
        if self.inconclusive:
            return f"{sms}: no suggestion, some answers are inconclusive ({self.inconclusive[0]})"
        current = self.backend.rule.describe()
        if self.suggested is None:
            return f"{sms}: keep {current}; no count is safe for n={compact_set(list(self.unsafe))}"
        refused = "".join(
            f"; the current rule crashes on flashinfer {version} for n={compact_set(ns)} (require a release that "
            "accepts them, or pad as below)"
            for version, ns in self.refused_now.items()
        )
        keep = ""
        if self.keep_pin is not None and self.keep_pin != self.suggested:
            keep = f"; on every release probed (the current pin's ends) only {self.keep_pin.describe()} is safe"
        if not self.changed:
            return f"{sms}: keep {current}: it is what flashinfer {self.newest} calls for{refused}{keep}"
        savings = [c.saving for c in self.changes if c.saving]
        gain = f"; saves up to {max(savings):.3g}×" if savings else ""
        fixes = [
            c for c in self.changes if c.current is not None and c.suggested is not None and c.suggested > c.current
        ]
        fix = f"; fixes {len(fixes)} refused count(s)" if fixes else ""
        said = f"{current} → {self.suggested.describe()} (on flashinfer {self.newest})"
        return f"{sms}: {said}{gain}{fix}{refused}{keep}"

    def rule_counts(self) -> set[int]:
        """The counts the suggested rule pads to, for the models' per-rank counts."""
        return {c.suggested for c in self.changes if c.suggested is not None}

    def per_rank(self) -> set[int]:
        return {c.n for c in self.changes}

    def current_safe_from(self) -> Version | None:
        """The first release from which the current padding is safe on every SM,
        as the pin search found it for each count the current rule launches
        (they are among the suggested rule's or the unpadded counts); None where
        it raises for a count or launches one the search did not ask."""
        if self.pins is None:
            return None
        found = {**self.pins.no_padding, **self.pins.rule_counts}
        launched = {c.current for c in self.changes}
        if not launched or None in launched:
            return None
        since = [found[count].since if count in found else None for count in launched if count is not None]
        if any(v is None for v in since):
            return None
        return max(v for v in since if v is not None)

    def to_dict(self) -> dict:
        return {
            "table": self.table,
            "backend": self.backend.name,
            "kernel": self.backend.variant_key,
            "source": str(self.backend.where),
            "sms": list(self.sms),
            "releases": list(self.releases),
            "current": self.backend.rule.describe(),
            "suggested": self.suggested.describe() if self.suggested else None,
            "suggested_on": self.newest,
            "safe_on_every_release_probed": self.keep_pin.describe() if self.keep_pin else None,
            "changes": [c.to_dict() for c in self.changes],
            "unsafe": {str(n): sms for n, sms in self.unsafe.items()},
            "inconclusive": self.inconclusive,
            "refused_now": {version: sorted(ns) for version, ns in self.refused_now.items()},
            "pin": self.pins.to_dict() if self.pins else None,
            "pin_not_searched": self.pin_note,
            "reach": self.backend.reach.to_dict() if self.backend.reach else None,
            "advice": self.words(),
        }


def suggest(
    findings: list[Finding], releases: list[ProbedRelease], tables: list[PaddingTable], newest_only: bool = True
) -> list[BackendSuggestion]:
    """`newest_only`: suggest what the newest release probed accepts (a pin
    search then says what it needs); else what every release probed accepts
    (the releases were named outright: nothing to search, nothing to raise)."""
    out = []
    for table in tables:
        for backend in table.backends:
            rows = [f for f in findings if f.table == table.name and f.backend == backend.name]
            if not rows:
                continue
            sms = tuple(dict.fromkeys(f.sm for f in rows))
            versions = tuple(dict.fromkeys(v for f in rows for v in f.releases))
            results = {
                sm: [bound_to(backend.calls, r) for r in _results(releases, backend.variant_key, sm, versions)]
                for sm in sms
            }
            out.append(_suggest_backend(table, backend, sms, versions, results, newest_only))
    return out


def _results(releases: list[ProbedRelease], key: str, sm: int, versions: tuple[str, ...]) -> list[KernelSMResult]:
    found = [rel.results[(key, sm)] for rel in releases if (key, sm) in rel.results]
    return [r for r in found if r.flashinfer_version in versions] or found


def _suggest_backend(
    table: PaddingTable,
    backend: Backend,
    sms: tuple[int, ...],
    versions: tuple[str, ...],
    results: dict[int, list[KernelSMResult]],
    newest_only: bool,
) -> BackendSuggestion:
    suggestion = BackendSuggestion(table.name, backend, sms, versions, None)
    cases = backend.cases(table.models)
    counts = sorted({n for _, _, n in cases})
    safe_everywhere: dict[int, set[int]] = {}
    safe_newest: dict[int, set[int]] = {}
    for sm, per_release in results.items():
        unknown = [r for r in per_release if any(h >= min(counts) and _undecided(r.heads[h]) for h in r.heads)]
        if unknown:
            suggestion.inconclusive.append(_why_undecided(sm, unknown[0], min(counts)))
        sets = [_fast(r) for r in per_release]
        safe_everywhere[sm] = set.intersection(*sets) if sets else set()
        newest = max(per_release, key=lambda r: _version(r.flashinfer_version), default=None)
        safe_newest[sm] = _fast(newest) if newest is not None else set()
        suggestion.newest = newest.flashinfer_version if newest is not None else None
    floor = _floors(backend, counts)
    chosen = _choose(counts, safe_newest if newest_only else safe_everywhere, suggestion.unsafe, floor)
    kept = _choose(counts, safe_everywhere, {}, floor)
    if not newest_only:
        suggestion.newest = ", ".join(versions)
    for model, tp, n in cases:
        suggestion.changes.append(CountChange(model.name, tp, n, backend.rule.pad(n), chosen.get(n)))
    # Which release refuses the current padding (the pin admits it): the case a
    # padding removal ahead of a flashinfer bump would have crashed on.
    for per_release in results.values():
        for r in per_release:
            refused = sorted(
                {
                    n
                    for n in counts
                    if (p := backend.rule.pad(n)) is not None
                    and p in r.heads
                    and r.outcome(p) is not Outcome.ACCEPTED
                    and r.outcome(p) is not Outcome.INCONCLUSIVE
                }
            )
            if refused:
                merged = suggestion.refused_now.setdefault(r.flashinfer_version, [])
                merged.extend(n for n in refused if n not in merged)
    if not suggestion.inconclusive:
        suggestion.suggested = _rule_for(chosen) if chosen else None
        suggestion.keep_pin = _rule_for(kept) if len(kept) == len(counts) else None
    return suggestion


def _why_undecided(sm: int, result: KernelSMResult, least: int) -> str:
    """Where and why the first undecided count is: the probe's own reason (an
    environment failure, a compiled check left pending) and the release's note
    on what the deeper check lacked, so the advice says what to fix."""
    head = next(r for h, r in sorted(result.heads.items()) if h >= least and _undecided(r))
    why = head.reason if head.outcome is Outcome.INCONCLUSIVE else head.pending
    said = "; ".join(dict.fromkeys(w for w in (why, result.why_not_deepened()) if w))
    return f"SM{sm} on flashinfer {result.flashinfer_version}, h_q={head.heads}" + (f": {said}" if said else "")


def _undecided(head: HeadResult) -> bool:
    """Inconclusive, or accepted with a compiled check that decides it pending."""
    return head.outcome is Outcome.INCONCLUSIVE or head.pending is not None


def _fast(result: KernelSMResult) -> set[int]:
    return {h for h in result.accepted() if result.heads[h].serves}


def _version(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


def _floors(backend: Backend, counts: list[int]) -> dict[int, int]:
    """The least count each per-rank count may be launched with: itself, or,
    where the count is regrouped (draft tokens folded into heads), the
    regrouped count — the work the call does, not a padding: nothing below it
    serves the query."""
    return {n: (backend.rule.pad(n) or n) if backend.regrouped else n for n in counts}


def _choose(
    counts: list[int], safe: dict[int, set[int]], unsafe: dict[int, list[int]], floor: dict[int, int] | None = None
) -> dict[int, int]:
    """n -> the count to pad it to: the smallest count >= n (>= floor[n]) safe on
    every SM (one rule serves every SM of a backend, so the largest of their smallest)."""
    chosen: dict[int, int] = {}
    for n in counts:
        least = floor[n] if floor is not None else n
        per_sm = {sm: min((h for h in accepted if h >= least), default=None) for sm, accepted in safe.items()}
        missing = [sm for sm, v in per_sm.items() if v is None]
        if missing:
            unsafe[n] = missing
            continue
        chosen[n] = max(v for v in per_sm.values() if v is not None)
    return chosen


def route_ahead(
    s: BackendSuggestion,
    table: PaddingTable,
    versions: list[Version],
    results_at: Callable[[Version], dict[int, KernelSMResult] | None],
    parallel: int = 1,
    prepare: Callable[[list[Version]], None] | None = None,
    answered: Callable[[Version], bool] | None = None,
) -> bool:
    """For a backend that no release probed can serve (no count is safe for
    some n on some SM: an SM with no route there, say): the first of `versions`
    (newer releases, oldest first) from which every per-rank count has a
    serving count on every SM. The suggestion then rests on that release, and
    the pin search that follows says what it needs: the pin raise and the rule
    as one change, never padding for a kernel that cannot run. False: no
    release among `versions` serves them all. `parallel`, `prepare` and
    `answered` are `first_true`'s: a round's releases readied at once."""
    from hprobe.advise.history import first_true

    counts = sorted(s.per_rank())

    def serves_all(v: Version) -> bool | None:
        results = results_at(v)
        if results is None or any(sm not in results for sm in s.sms):
            return None
        safe = {sm: _fast(results[sm]) for sm in s.sms}
        return len(_choose(counts, safe, {}, _floors(s.backend, counts))) == len(counts)

    found = first_true(versions, serves_all, parallel=parallel, prepare=prepare, answered=answered).first
    if found is None:
        return False
    results = results_at(found)
    assert results is not None
    ahead = _suggest_backend(table, s.backend, s.sms, (str(found),), {sm: [results[sm]] for sm in s.sms}, True)
    s.suggested, s.changes, s.newest, s.unsafe, s.keep_pin = (
        ahead.suggested,
        ahead.changes,
        str(found),
        ahead.unsafe,
        None,
    )
    return s.suggested is not None


def _rule_for(chosen: dict[int, int]) -> PaddingRule:
    """The simplest rule of the table vocabulary that gives `chosen` for its counts."""
    if all(v == n for n, v in chosen.items()):
        return NoPadding()
    to = PadTo(tuple(sorted(set(chosen.values()))))
    if all(to.pad(n) == v for n, v in chosen.items()):
        return to
    return PadMap(tuple(sorted(chosen.items())))


def adopted(s: BackendSuggestion) -> tuple[PaddingRule | None, Version | None]:
    """(rule, the first release it is safe from) to write for one backend: the
    suggested rule when the pin search says from which release it is safe;
    else nothing. A rule is never adopted without its floor (the patch then
    checks the tree's own requirements against it), nor where the engine's
    default path, which hprobe does not probe, shares it."""
    if s.shared is not None:
        return None, None
    if s.pins is not None and s.pins.needs is not None and s.suggested is not None:
        return s.suggested, s.pins.needs
    return None, None


def new_requirement(current: str | None, suggestions: list[BackendSuggestion]) -> str | None:
    """The table's pin raised to what its adopted rules need (None: unchanged,
    or a pin that cannot be raised mechanically)."""
    from hprobe.model.pins import parse_pin, raised_pin

    needs = [v for s in suggestions if (v := adopted(s)[1]) is not None]
    if not needs:
        return None
    floor = max(needs)
    specifier = parse_pin(current) if current else None
    if specifier is not None and not any(v < floor and specifier.contains(v) for v in _admitted(suggestions)):
        return None  # the pin already excludes every release below the floor
    return raised_pin(str(specifier) if specifier is not None else None, floor)


def _admitted(suggestions: list[BackendSuggestion]) -> list[Version]:
    return [Version(v) for s in suggestions if s.pins for v in s.pins.admitted_below]


def rewritten(tables: list[PaddingTable], suggestions: list[BackendSuggestion]) -> list[PaddingTable]:
    """The tables with each backend's rule replaced by the one adopted for it,
    and the pin raised to what those rules need. A rule whose pin cannot be
    raised is not adopted: the table keeps its rule."""
    out = []
    for t in tables:
        mine = [s for s in suggestions if s.table == t.name]
        pin = new_requirement(t.requires_flashinfer, mine)
        blocked = pin is None and any(s.pins and s.pins.admitted_below for s in mine if adopted(s)[0] is not None)
        kept = [s for s in mine if not (blocked and s.pins and s.pins.admitted_below)]
        rules = {s.backend.name: rule for s in kept if (rule := adopted(s)[0]) is not None}
        pin = new_requirement(t.requires_flashinfer, kept)
        out.append(
            replace(
                t,
                backends=[replace(b, rule=rules.get(b.name, b.rule)) for b in t.backends],
                requires_flashinfer=pin or t.requires_flashinfer,
            )
        )
    return out
