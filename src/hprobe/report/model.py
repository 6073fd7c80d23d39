"""What a command found, as data every output format renders: the releases
probed and their results, and the reports of `matrix` and `check`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hprobe import __version__
from hprobe.model.advice import Suggestion, TableAdvice
from hprobe.model.errors import EXIT_FINDINGS, EXIT_INCONCLUSIVE, EXIT_OK
from hprobe.model.outcome import KernelSMResult, Outcome
from hprobe.model.padding import CallPathRecord, PaddingTable
from hprobe.model.release import FlashinferInfo, ProbedRelease
from hprobe.model.targets import Targets
from hprobe.model.verdict import Finding, VerdictGrid
from hprobe.model.waiver import WaiverUse

if TYPE_CHECKING:
    from hprobe.rules.repo.patch import Patch


def _header(schema: str, flashinfer: FlashinferInfo, releases: list[ProbedRelease], targets: Targets) -> dict[str, Any]:
    """What every report document starts with: what it is, and what it rests on."""
    return {
        "schema": schema,
        "hprobe_version": __version__,
        "flashinfer": {"version": flashinfer.version, "location": flashinfer.location},
        "releases": [rel.describe() for rel in releases],
        "sm_source": targets.source,
        "sms": [sm.number for sm in targets.sms],
    }


@dataclass
class MatrixReport:
    """What `matrix` and `report` print: per release, every variant x SM x h_q answer."""

    releases: list[ProbedRelease]
    targets: Targets
    heads: list[int]
    keys: list[str] = field(default_factory=list)  # the variants, in the order asked

    @property
    def flashinfer(self) -> FlashinferInfo:
        return self.releases[0].info

    @property
    def results(self) -> list[KernelSMResult]:
        return [r for rel in self.releases for r in rel.results.values()]

    @property
    def exit_code(self) -> int:
        """3 when nothing was answered (every cell inconclusive): a gate reading
        the exit code must not take an empty matrix for a full one."""
        answered = any(h.outcome is not Outcome.INCONCLUSIVE for r in self.results for h in r.heads.values())
        return 0 if answered else EXIT_INCONCLUSIVE

    def to_dict(self, runs: bool = False) -> dict[str, Any]:
        """hprobe.matrix/2, or with `runs` hprobe.matrix/3: the same document
        with each result's answers as runs of h_q (`KernelSMResult.head_runs`)."""
        return {
            **_header("hprobe.matrix/3" if runs else "hprobe.matrix/2", self.flashinfer, self.releases, self.targets),
            "heads": {"min": min(self.heads), "max": max(self.heads), "count": len(self.heads)},
            "results": [r.to_dict(runs=runs) for r in self.results],
            "exit_code": self.exit_code,
        }


@dataclass(frozen=True)
class CheckReport:
    """What `check` prints: the findings of every table against every release
    it covers, and what they conclude. Built whole by `commands` (judge and
    advise decide; see commands/conclude.py); formats only read it."""

    releases: list[ProbedRelease]
    targets: Targets
    tables: list[PaddingTable]
    findings: list[Finding]
    strict: bool
    notes: list[str] = field(default_factory=list)
    drift: DiffReport | None = None  # `--baseline`: what changed since a recorded matrix
    planned: list[str] = field(default_factory=list)  # the releases asked for (labels), probed or not
    call_paths: list[CallPathRecord] = field(default_factory=list)  # `--repo`: every call of a probed entry
    waivers: list[WaiverUse] = field(default_factory=list)  # every waiver given, and how it was used
    # What the findings conclude (commands/conclude.py): the gate's exit code,
    # one line of advice per table x backend x SM, the release-by-release
    # verdicts of the page, the flashinfer the report names.
    exit_code: int = EXIT_INCONCLUSIVE
    advice: list[TableAdvice] = field(default_factory=list)
    verdict_grids: list[VerdictGrid] = field(default_factory=list)
    flashinfer: FlashinferInfo = field(default_factory=lambda: FlashinferInfo("unknown", "not probed"))

    @property
    def unresolved_paths(self) -> list[CallPathRecord]:
        """Calls whose head count hprobe could not judge, each with its file:line and why."""
        return [p for p in self.call_paths if not p.judged]

    def to_dict(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for f in self.findings:
            counts[f.verdict.value] = counts.get(f.verdict.value, 0) + 1
        return {
            **_header("hprobe.check/2", self.flashinfer, self.releases, self.targets),
            "strict": self.strict,
            "exit_code": self.exit_code,
            "summary": counts,
            "tables": [{"name": t.name, "path": t.path, "source": t.source, "requires_flashinfer": t.requires_flashinfer} for t in self.tables],
            "findings": [f.to_dict() for f in self.findings],
            "drift": self.drift.to_dict() if self.drift else None,
            "call_paths": [p.to_dict() for p in self.call_paths],
            "waivers": [u.to_dict() for u in self.waivers],
            "notes": self.notes,
            "advice": [a.to_dict() for a in self.advice],
        }


@dataclass(frozen=True)
class KernelChange:
    """One variant x SM between two releases (`diff`, `check --baseline`)."""

    kernel: str
    sm: int
    old_status: str
    new_status: str
    old_accepted: tuple[int, ...]
    new_accepted: tuple[int, ...]
    became_accepted: tuple[int, ...]
    became_rejected: tuple[int, ...]
    unknown: tuple[int, ...]
    appeared: tuple[int, ...]  # absent in the old release, present in the new
    vanished: tuple[int, ...]  # present in the old release, absent in the new
    new_refusal: dict[str, Any] | None  # how the new release refuses the first count it stopped accepting

    @property
    def changed(self) -> bool:
        return bool(self.became_accepted or self.became_rejected or self.appeared or self.vanished)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "sm": self.sm,
            "old_status": self.old_status,
            "new_status": self.new_status,
            "old_accepted": list(self.old_accepted),
            "new_accepted": list(self.new_accepted),
            "became_accepted": list(self.became_accepted),
            "became_rejected": list(self.became_rejected),
            "unknown": list(self.unknown),
            "appeared": list(self.appeared),
            "vanished": list(self.vanished),
            "new_refusal": self.new_refusal,
        }


@dataclass(frozen=True)
class DiffReport:
    """What changed between two releases, per variant x SM."""

    old: dict[str, Any]  # ProbedRelease.describe() of each side
    new: dict[str, Any]
    changes: tuple[KernelChange, ...]

    @property
    def changed(self) -> bool:
        return any(c.changed for c in self.changes)

    @property
    def exit_code(self) -> int:
        """1 when an accepted set changed (a drift gate), 3 when nothing changed but some h_q were inconclusive."""
        return EXIT_FINDINGS if self.changed else (EXIT_INCONCLUSIVE if any(c.unknown for c in self.changes) else EXIT_OK)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "hprobe.diff/1",
            "hprobe_version": __version__,
            "old": self.old,
            "new": self.new,
            "changes": [c.to_dict() for c in self.changes],
            "changed": self.changed,
            "exit_code": self.exit_code,
        }


@dataclass(frozen=True)
class BisectStep:
    """One release probed by `bisect`, and its answer."""

    version: str
    outcome: str
    entry: str | None
    error_type: str | None
    message: str | None
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "outcome": self.outcome, "entry": self.entry, "error_type": self.error_type, "message": self.message, "reason": self.reason}


@dataclass(frozen=True)
class BisectReport:
    """What `bisect` prints: the first release that accepts an h_q, and every step to it."""

    kernel: str
    sm: int
    heads: int
    range: tuple[str, str]
    releases_in_range: int
    method: str
    first_accepting: str | None
    last_rejecting: str | None
    already_accepted_at_start: bool
    non_monotonic: tuple[tuple[str, str], ...]  # (accepted in, then not accepted in)
    probed: tuple[BisectStep, ...]
    exit_code: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "hprobe.bisect/1",
            "hprobe_version": __version__,
            "kernel": self.kernel,
            "sm": self.sm,
            "heads": self.heads,
            "range": list(self.range),
            "releases_in_range": self.releases_in_range,
            "method": self.method,
            "first_accepting": self.first_accepting,
            "last_rejecting": self.last_rejecting,
            "already_accepted_at_start": self.already_accepted_at_start,
            "non_monotonic": [{"accepted": a, "then_not_accepted": b} for a, b in self.non_monotonic],
            "probed": [p.to_dict() for p in self.probed],
            "exit_code": self.exit_code,
        }


@dataclass
class SuggestReport:
    """`hprobe suggest`: the check it rests on, a suggestion per backend, and
    what to write (the table's TOML for -o, the patch for --diff)."""

    check: CheckReport
    suggestions: list[Suggestion]
    patch: Patch | None = None
    table_toml: str | None = None
    exit_code: int = EXIT_INCONCLUSIVE  # 0, or 3 when a suggestion is undecided or there is none (commands/suggest.py)

    def to_dict(self) -> dict[str, Any]:
        """hprobe.suggest/1: the suggestions, the patch, and what they rest on."""
        doc = self.check.to_dict()
        return {
            "schema": "hprobe.suggest/1",
            "hprobe_version": doc["hprobe_version"],
            "releases": doc["releases"],
            "sms": doc["sms"],
            "suggestions": [s.to_dict() for s in self.suggestions],
            "patch": self.patch.to_dict() if self.patch is not None else None,
            "notes": self.check.notes,
        }


@dataclass(frozen=True)
class SiteReport:
    """`hprobe report`: a matrix over releases, and the tables judged on it,
    written as a page (index.html), its markdown and its data (matrix.json)."""

    matrix: MatrixReport
    tables: CheckReport | None = None

    def to_dict(self) -> dict[str, Any]:
        """hprobe.matrix/3, compact runs of h_q: the page's data file."""
        return self.matrix.to_dict(runs=True)


@dataclass(frozen=True)
class KernelsReport:
    """`hprobe kernels`: one row per probe (entry point, SMs, axes, releases)."""

    rows: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"schema": "hprobe.kernels/1", "kernels": self.rows}


@dataclass(frozen=True)
class RecordsReport:
    """Plain records (`env`, `models`, `table extract --json`): the document
    tools read, and the lines a person reads (`shown`, name -> value)."""

    title: str
    document: dict[str, Any]  # with its schema
    shown: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return self.document

