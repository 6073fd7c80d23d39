"""`hprobe suggest`: the padding rule the kernels' own answers call for.

For every backend of a table and every per-rank count n its models produce, the
safe count is the smallest count >= n that every release probed accepts on the
fast path, on every SM the backend runs on. The suggested rule is written in
the table's vocabulary (`no_padding`, `pad_to`, `pad_map`); a count no release
set can serve is reported, never papered over."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from .core import compact_set
from .outcome import KernelSMResult, Outcome
from .tables.model import Backend, NoPadding, PaddingRule, PaddingTable, PadMap, PadTo

if TYPE_CHECKING:
    from .reports import CheckReport


@dataclass(frozen=True)
class CountChange:
    model: str
    tp: int
    n: int
    current: int | None  # None: the current rule raises for n
    suggested: int | None  # None: no count >= n is safe on every SM and release

    @property
    def saving(self) -> float | None:
        if self.current is None or self.suggested is None or self.suggested >= self.current:
            return None
        return self.current / self.suggested

    def to_dict(self) -> dict:
        return {"model": self.model, "tp": self.tp, "n": self.n, "current": self.current, "suggested": self.suggested, "saving": self.saving}


@dataclass
class BackendSuggestion:
    table: str
    backend: Backend
    sms: tuple[int, ...]
    releases: tuple[str, ...]
    suggested: PaddingRule | None
    changes: list[CountChange] = field(default_factory=list)
    unsafe: dict[int, list[int]] = field(default_factory=dict)  # n -> SMs with no safe count
    inconclusive: list[str] = field(default_factory=list)  # why some answers are unknown
    refused_now: dict[str, list[int]] = field(default_factory=dict)  # release -> counts whose current padding it refuses

    @property
    def changed(self) -> bool:
        return any(c.current != c.suggested for c in self.changes)

    def words(self) -> str:
        """The advice in one line."""
        sms = "/".join(f"SM{sm}" for sm in self.sms)
        if self.inconclusive:
            return f"{sms}: no suggestion, some answers are inconclusive ({self.inconclusive[0]})"
        current = self.backend.rule.describe()
        if self.suggested is None:
            return f"{sms}: keep {current}; no count is safe for n={compact_set(list(self.unsafe))}"
        if not self.changed:
            return f"{sms}: keep {current}: it is what the kernels call for"
        savings = [c.saving for c in self.changes if c.saving]
        gain = f"; saves up to {max(savings):.3g}×" if savings else ""
        fixes = [c for c in self.changes if c.current is not None and c.suggested is not None and c.suggested > c.current]
        fix = f"; fixes {len(fixes)} refused count(s)" if fixes else ""
        refused = "".join(
            f"; the current rule crashes on flashinfer {version} for n={compact_set(ns)} (keep the suggested padding, or require a release that accepts them)"
            for version, ns in self.refused_now.items()
        )
        return f"{sms}: {current} → {self.suggested.describe()}{gain}{fix}{refused}"

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
            "changes": [c.to_dict() for c in self.changes],
            "unsafe": {str(n): sms for n, sms in self.unsafe.items()},
            "inconclusive": self.inconclusive,
            "refused_now": {version: sorted(ns) for version, ns in self.refused_now.items()},
            "advice": self.words(),
        }


def suggest(report: CheckReport, tables: list[PaddingTable]) -> list[BackendSuggestion]:
    out = []
    for table in tables:
        for backend in table.backends:
            rows = [f for f in report.findings if f.table == table.name and f.backend == backend.name]
            if not rows:
                continue
            sms = tuple(dict.fromkeys(f.sm for f in rows))
            versions = tuple(dict.fromkeys(v for f in rows for v in f.releases))
            results = {sm: _results(report, backend.variant_key, sm, versions) for sm in sms}
            out.append(_suggest_backend(table, backend, sms, versions, results))
    return out


def _results(report: CheckReport, key: str, sm: int, versions: tuple[str, ...]) -> list[KernelSMResult]:
    found = [rel.results[(key, sm)] for rel in report.releases if (key, sm) in rel.results]
    return [r for r in found if r.flashinfer_version in versions] or found


def _suggest_backend(table: PaddingTable, backend: Backend, sms: tuple[int, ...], versions: tuple[str, ...], results: dict[int, list[KernelSMResult]]) -> BackendSuggestion:
    suggestion = BackendSuggestion(table.name, backend, sms, versions, None)
    counts = sorted({n for m in table.models for _, n in m.per_rank()})
    safe: dict[int, set[int]] = {}
    for sm, per_release in results.items():
        unknown = [r for r in per_release if any(h >= min(counts) and r.outcome(h) is Outcome.INCONCLUSIVE for h in r.heads)]
        if unknown:
            suggestion.inconclusive.append(f"SM{sm} on flashinfer {unknown[0].flashinfer_version}")
        safe[sm] = set.intersection(*({h for h in r.accepted() if not r.heads[h].slow_path} for r in per_release)) if per_release else set()
    chosen: dict[int, int] = {}
    for n in counts:
        per_sm = {sm: min((h for h in accepted if h >= n), default=None) for sm, accepted in safe.items()}
        missing = [sm for sm, v in per_sm.items() if v is None]
        if missing:
            suggestion.unsafe[n] = missing
            continue
        # One rule serves every SM of the backend: the largest of their safe counts.
        chosen[n] = max(v for v in per_sm.values() if v is not None)
    for model in table.models:
        for tp, n in model.per_rank():
            suggestion.changes.append(CountChange(model.name, tp, n, backend.rule.pad(n), chosen.get(n)))
    # Which release refuses the current padding (the pin admits it): the case a
    # padding removal ahead of a flashinfer bump would have crashed on.
    for per_release in results.values():
        for r in per_release:
            refused = sorted({n for n in counts if (p := backend.rule.pad(n)) is not None and p in r.heads and r.outcome(p) is not Outcome.ACCEPTED and r.outcome(p) is not Outcome.INCONCLUSIVE})
            if refused:
                merged = suggestion.refused_now.setdefault(r.flashinfer_version, [])
                merged.extend(n for n in refused if n not in merged)
    if chosen and not suggestion.inconclusive:
        suggestion.suggested = _rule_for(chosen)
    return suggestion


def _rule_for(chosen: dict[int, int]) -> PaddingRule:
    """The simplest rule of the table vocabulary that gives `chosen` for its counts."""
    if all(v == n for n, v in chosen.items()):
        return NoPadding()
    to = PadTo(tuple(sorted(set(chosen.values()))))
    if all(to.pad(n) == v for n, v in chosen.items()):
        return to
    return PadMap(tuple(sorted(chosen.items())))


def rewritten(tables: list[PaddingTable], suggestions: list[BackendSuggestion]) -> list[PaddingTable]:
    """The tables with each backend's rule replaced by its suggestion (where there is one)."""
    by_backend = {(s.table, s.backend.name): s.suggested for s in suggestions if s.suggested is not None}
    return [
        replace(t, backends=[replace(b, rule=by_backend.get((t.name, b.name), b.rule)) for b in t.backends])
        for t in tables
    ]
