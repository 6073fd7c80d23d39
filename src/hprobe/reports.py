"""What a command found, as data every output format renders: the releases
probed and their results, and the reports of `matrix` and `check`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from . import __version__
from .core import Finding, exit_code
from .envinfo import distribution_version, flashinfer_origin
from .errors import EXIT_INCONCLUSIVE, InputError
from .outcome import KernelSMResult, Outcome
from .tables import PaddingTable
from .targets import Targets


@dataclass
class FlashinferInfo:
    version: str
    location: str


@dataclass(frozen=True)
class Unmet:
    """A requirement of a probed release that this environment does not meet."""

    requirement: str  # as the release's Requires-Dist states it
    name: str  # the distribution it names
    installed: str | None = None  # the version installed here; None: not installed

    def __str__(self) -> str:
        if self.installed is None:
            return f"{self.requirement} (not installed; try `pip install '{self.requirement}'` in a separate venv)"
        return f"{self.requirement} (installed {self.name} {self.installed}; try a separate venv with `pip install '{self.requirement}'`)"

    def note(self, version: str) -> str:
        return f"flashinfer {version} requires {self}"


@dataclass
class ProbedRelease:
    """One flashinfer (installed, or fetched) and what its validators answered."""

    label: str  # "installed" or what the user named
    info: FlashinferInfo
    results: dict[tuple[str, int], KernelSMResult]  # (variant key, SM) -> result
    notes: list[str] = field(default_factory=list)
    unmet: list[Unmet] = field(default_factory=list)  # its requirements not met here (each also a note)

    def describe(self) -> dict:
        return {"label": self.label, "version": self.info.version, "location": self.info.location, "notes": self.notes}


INSTALLED = "installed"


Progress = Callable[[str], None]


def quiet(_: str) -> None:
    pass


def installed_flashinfer_info() -> FlashinferInfo:
    return FlashinferInfo(distribution_version("flashinfer-python") or "not installed", flashinfer_origin() or "")


def _header(schema: str, flashinfer: FlashinferInfo, releases: list[ProbedRelease], targets: Targets) -> dict:
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

    def to_dict(self) -> dict:
        return {
            **_header("hprobe.matrix/2", self.flashinfer, self.releases, self.targets),
            "heads": {"min": min(self.heads), "max": max(self.heads), "count": len(self.heads)},
            "results": [r.to_dict() for r in self.results],
            "exit_code": self.exit_code,
        }


@dataclass
class CheckReport:
    releases: list[ProbedRelease]
    targets: Targets
    tables: list[PaddingTable]
    findings: list[Finding]
    strict: bool
    notes: list[str] = field(default_factory=list)
    drift: DiffReport | None = None  # `--baseline`: what changed since a recorded matrix
    planned: list[str] = field(default_factory=list)  # the releases asked for (labels), probed or not

    @property
    def flashinfer(self) -> FlashinferInfo:
        if self.releases:
            return self.releases[0].info
        named = [label for label in self.planned if label != INSTALLED]
        if named:
            # Nothing was probed: name the releases asked for, not the one installed here.
            return FlashinferInfo(", ".join(named), "not probed")
        return installed_flashinfer_info()

    @property
    def exit_code(self) -> int:
        code = exit_code(self.findings, self.strict)
        if self.drift is not None and code != 1:
            drift_code = self.drift.exit_code
            if drift_code == 1 or (drift_code == 3 and code == 0):
                code = drift_code
        return code

    def to_dict(self) -> dict:
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
            "notes": self.notes,
        }


PIVOT_FIXED = ("heads", "sm", "release", "kernel")


def pivot_cells(report: MatrixReport, rows: str, cols: str) -> tuple[list, list, dict]:
    """Row values, column values and cells for `matrix --pivot ROWS,COLS`.

    A dimension is h_q (`heads`), `sm`, `release`, `kernel` (the variant) or an
    axis. With h_q a dimension a cell is one Outcome; otherwise it is the
    KernelSMResult whose accepted set the cell shows. Two results landing in one
    cell is an input error: the other dimensions must be narrowed first.
    """
    axes = {name for r in report.results for name in r.config}
    for dim in (rows, cols):
        if dim not in PIVOT_FIXED and dim not in axes:
            raise InputError(f"--pivot {rows},{cols}: {dim!r} is not heads, sm, release, kernel or an axis of the kernels probed ({', '.join(sorted(axes)) or 'none'})")
    if rows == cols:
        raise InputError(f"--pivot {rows},{cols}: pick two different dimensions")

    def value(dim: str, rel: ProbedRelease, r: KernelSMResult):
        return {"sm": f"SM{r.sm}", "release": rel.info.version, "kernel": r.key}.get(dim, r.config.get(dim, "-"))

    row_values: list = []
    col_values: list = []
    cells: dict = {}
    for rel in report.releases:
        for r in rel.results.values():
            for h in (r.heads if "heads" in (rows, cols) else [None]):
                rv = h if rows == "heads" else value(rows, rel, r)
                cv = h if cols == "heads" else value(cols, rel, r)
                cell = r.heads[h].outcome if h is not None else r
                if (rv, cv) in cells:
                    raise InputError(
                        f"--pivot {rows},{cols}: several results fall in one cell ({rv}, {cv}); "
                        "narrow the others with --kernel, --sm or an axis option"
                    )
                cells[(rv, cv)] = cell
                row_values.append(rv)
                col_values.append(cv)
    return list(dict.fromkeys(row_values)), list(dict.fromkeys(col_values)), cells


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
    new_refusal: dict | None  # how the new release refuses the first count it stopped accepting

    @property
    def changed(self) -> bool:
        return bool(self.became_accepted or self.became_rejected or self.appeared or self.vanished)

    def to_dict(self) -> dict:
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
    old: dict  # ProbedRelease.describe() of each side
    new: dict
    changes: tuple[KernelChange, ...]

    @property
    def changed(self) -> bool:
        return any(c.changed for c in self.changes)

    @property
    def exit_code(self) -> int:
        """1 when an accepted set changed (a drift gate), 3 when nothing changed but some h_q were inconclusive."""
        return 1 if self.changed else (3 if any(c.unknown for c in self.changes) else 0)

    def to_dict(self) -> dict:
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
    version: str
    outcome: str
    entry: str | None
    error_type: str | None
    message: str | None
    reason: str | None

    def to_dict(self) -> dict:
        return {"version": self.version, "outcome": self.outcome, "entry": self.entry, "error_type": self.error_type, "message": self.message, "reason": self.reason}


@dataclass(frozen=True)
class BisectReport:
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

    def to_dict(self) -> dict:
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
