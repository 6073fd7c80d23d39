"""What a padding rule does for one count (the verdict), and one verdict with its
evidence (the finding). Each verdict carries its own presentation."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, assert_never

from hprobe.model.assumption import Assumption
from hprobe.model.outcome import Cause, Depth, HeadResult, Outcome
from hprobe.model.padding import Backend, CallPathRecord, PaddingTable, Reach
from hprobe.model.waiver import Waiver

# A note judge.py gives a finding whose count's compiled selection was pending
# and taken on the validators' word (check --trust-validators); the gate's line
# counts them.
TRUSTED_NOTE = "taken on the validators' word (--trust-validators): "


class Verdict(str, Enum):
    """What a padding table does for one count. Each member carries everything an
    output needs to show it (its explanation, mark, style, CI level, whether it
    fails the gate), so no format lists verdicts; judge.py decides when one is
    given, and mypy names every match that must say what a new one means."""

    OK = "ok"
    REDUCIBLE = "reducible"
    BROKEN = "broken"
    TABLE_REFUSES = "table-refuses"
    OFF_FAST_PATH = "off-fast-path"  # accepted, but served by a slower kernel than the family's own
    # accepted by the validators; the release's kernel table has a kernel for it
    # only at some batch sizes and KV lengths
    SOME_SHAPES = "some-shapes"
    INCONCLUSIVE = "inconclusive"
    # the count is the stated assumption (the model's heads // tp, unpadded) on
    # a call path whose head count hprobe could not follow: shown, never ok or broken
    ASSUMED = "assumed"

    @functools.cached_property
    def _traits(self) -> _Traits:
        # An exhaustive match: a verdict without its presentation fails mypy
        # here. Made once per member: a check asks thousands of times.
        match self:
            case Verdict.OK:
                return _Traits(
                    "the kernel accepts the padded count, and no smaller count serves",
                    "✅",
                    "green",
                    Gate.PASS,
                    None,
                    "#e3f4e8",
                )
            case Verdict.REDUCIBLE:
                return _Traits(
                    "the kernel accepts a smaller count: the padding wastes compute",
                    "🟡",
                    "yellow",
                    Gate.SOFT,
                    "notice",
                    "#fff4d6",
                )
            case Verdict.BROKEN:
                return _Traits(
                    "the kernel refuses the padded count: a crash in production",
                    "❌",
                    "bold red",
                    Gate.FAIL,
                    "error",
                    "#f9d6d5",
                )
            case Verdict.TABLE_REFUSES:
                return _Traits(
                    "the table raises for a count the kernel accepts", "🟣", "magenta", Gate.SOFT, "notice", "#efe0f5"
                )
            case Verdict.OFF_FAST_PATH:
                return _Traits(
                    "accepted, but served by a slower kernel than the family's own",
                    "🟡",
                    "yellow",
                    Gate.SOFT,
                    "notice",
                    "#fff4d6",
                )
            case Verdict.SOME_SHAPES:
                return _Traits(
                    "a kernel exists for the padded count only at some batch sizes and KV lengths: a crash at the "
                    "others",
                    "🟠",
                    "red",
                    Gate.FAIL,
                    "error",
                    "#fbe0c8",
                )
            case Verdict.INCONCLUSIVE:
                return _Traits(
                    "the kernel's answer could not be shown here", "❔", "cyan", Gate.UNDECIDED, "warning", "#fde9c8"
                )
            case Verdict.ASSUMED:
                return _Traits(
                    "judged on an assumed count (the model's heads // tp, unpadded): the call's own count was not "
                    "followed",
                    "🔷",
                    "blue",
                    Gate.ASSUMED,
                    "warning",
                    "#dfe8f6",
                )
            case _:
                assert_never(self)

    @property
    def explanation(self) -> str:
        return self._traits.explanation

    @property
    def mark(self) -> str:
        """For markdown and the step summary."""
        return self._traits.mark

    @property
    def style(self) -> str:
        """For the terminal (rich)."""
        return self._traits.style

    @property
    def page_colour(self) -> str:
        """The report page's background for a cell of this verdict (its legend too)."""
        return self._traits.page_colour

    @property
    def soft(self) -> bool:
        """Passes the gate unless --strict."""
        return self._traits.gate is Gate.SOFT

    def fails(self, strict: bool) -> bool:
        """Fails the CI gate (exit 1, a JUnit failure, an ::error annotation)."""
        return self._traits.gate is Gate.FAIL or (strict and (self.soft or self._traits.gate is Gate.ASSUMED))

    @property
    def undecided(self) -> bool:
        """Neither pass nor fail: exit 3 when nothing fails, a JUnit error."""
        return self._traits.gate in (Gate.UNDECIDED, Gate.ASSUMED)

    def ci_level(self, strict: bool) -> str | None:
        """The GitHub annotation level, or None for no annotation."""
        return "error" if self.fails(strict) else self._traits.ci_level


class Gate(Enum):
    """What a verdict does to the CI gate."""

    PASS = "pass"
    SOFT = "soft"  # fails under --strict
    FAIL = "fail"
    UNDECIDED = "undecided"  # neither: exit 3 when nothing fails
    ASSUMED = "assumed"  # undecided, and fails under --strict: an assumption is not an answer


@dataclass(frozen=True)
class _Traits:
    """How a verdict explains and shows itself, and what it does to a CI gate."""

    explanation: str
    mark: str
    style: str
    gate: Gate
    ci_level: str | None
    page_colour: str


@dataclass
class Finding:
    """One backend x SM x model x TP verdict, with its evidence."""

    table: str
    table_path: str
    model: str
    tp: int
    n: int  # per-rank query heads
    backend: str
    kernel: str
    sm: int
    flashinfer_version: str
    padded: int | None  # None: the table raises for n
    verdict: Verdict
    best: int | None = None  # smallest accepted count >= n
    waste: float | None = None  # padded / best for reducible
    evidence: HeadResult | None = None  # the kernel's answer for the padded count
    notes: list[str] = field(default_factory=list)
    releases: list[str] = field(default_factory=list)  # every release the verdict holds across
    source: str = ""  # file:line of the padding rule (table entry or the consumer's function)
    rule_unknown: bool = False  # the consumer's rule could not be evaluated: padded is unknown
    depth: Depth = Depth.VALIDATORS  # what an accepted answer rests on (see README "Depth")
    unchecked: list[str] = field(default_factory=list)  # what compiled code checks beyond that
    pin: str | None = None  # the pin whose releases `releases` are (None: the releases probed, no pin)
    reach: Reach | None = None  # the engine setting under which the rule reaches FlashInfer
    guard: str = ""  # where, inside the function holding the call, the call runs (Backend.guard)
    waiver: Waiver | None = None  # an unexpired waiver that accepts this finding (judge.waive)
    # For an `assumed` finding: the verdict the kernel's answer gives the
    # assumed count, shown as evidence and never concluded.
    on_assumption: Verdict | None = None
    assumed: Assumption | None = None  # for an `assumed` finding: what hprobe could not read
    # The engine's own code crashes before the call at this count (Python's
    # error on a flashinfer object it uses as the release does not allow), in
    # words with file:line: `broken` whatever the kernel says.
    crash: str | None = None

    def fails(self, strict: bool) -> bool:
        """Fails the CI gate: the verdict fails it and no waiver accepts it."""
        return self.waiver is None and self.verdict.fails(strict)

    @property
    def undecided(self) -> bool:
        return self.waiver is None and self.verdict.undecided

    def ci_level(self, strict: bool) -> str | None:
        """A waived finding is still annotated, as a notice: it is accepted, not gone."""
        if self.waiver is not None:
            return "notice" if self.verdict is not Verdict.OK else None
        return self.verdict.ci_level(strict)

    @property
    def label(self) -> str:
        """The verdict as printed, `[waived]` after it where a waiver accepts it."""
        return f"{self._verdict_label} [waived]" if self.waiver is not None else self._verdict_label

    @property
    def _verdict_label(self) -> str:
        """The verdict as printed: `ok (validators only)` where compiled code is
        known to check more than the Python a CPU probe runs."""
        if (
            self.verdict in (Verdict.OK, Verdict.REDUCIBLE, Verdict.OFF_FAST_PATH, Verdict.SOME_SHAPES)
            and self.padded is not None
        ):
            match self.depth:
                case Depth.PARTIAL:
                    # Never a plain "ok": Python after a compiled policy query did not run.
                    return f"{self.verdict.value} (partial)"
                case Depth.DISPATCH:
                    basis = "validators and dispatch"
                case Depth.VALIDATORS:
                    basis = "validators only"
                case Depth.FAKED_DEVICE:
                    # Always said: a device check was passed with faked tensors.
                    return f"{self.verdict.value} (validators, on faked CUDA tensors)"
                case Depth.COMPILED:
                    # Always said: the answer rests on the release's kernel table too.
                    return f"{self.verdict.value} (compiled)"
                case _:
                    assert_never(self.depth)
            if self.unchecked:
                return f"{self.verdict.value} ({basis})"
        return self.verdict.value

    @property
    def padded_text(self) -> str:
        if self.rule_unknown:
            return "?"
        return "raises" if self.padded is None else str(self.padded)

    @property
    def waiver_words(self) -> str:
        w = self.waiver
        if w is None:
            return ""
        until = f" until {w.expires.isoformat()}" if w.expires else ""
        return f"waived{until}: {w.reason} ({w.origin})"

    def explain(self, note: bool = True) -> str:
        """One line of evidence, the same in every output format (`note`:
        with the first note, which a caller showing it once may leave out)."""
        e = self.evidence
        # A waiver's reason is in the waivers section and the JSON; here, who waived it.
        parts = [f"waived by {self.waiver.origin}"] if self.waiver else []
        if self.verdict is Verdict.REDUCIBLE and self.waste is not None:
            # Removable on the releases probed: said with them, never as a general truth.
            # "Removable" only under a pin, whose ends were probed; without one,
            # what the releases probed accept, and no more.
            on = ", ".join(self.releases or [self.flashinfer_version])
            if self.best != self.n:
                removable = ""
            elif self.pin:
                removable = f", removable under pin {self.pin} (accepted on {on})"
            else:
                removable = f", accepted unpadded on flashinfer {on} only (no pin)"
            parts.append(f"{self.best} accepted: {self.waste:.2f}× waste{removable}")
        elif self.verdict is Verdict.BROKEN and self.crash is not None:
            parts.append(self.crash)
        elif self.verdict is Verdict.BROKEN and e is not None:
            parts.append(
                f"{e.outcome.value}: {e.error_type}: {e.message}"
                if e.error_type
                else f"{e.outcome.value}: {e.reason or ''}"
            )
        elif self.verdict is Verdict.TABLE_REFUSES:
            parts.append(f"table raises, kernel accepts {self.best}")
        elif self.verdict is Verdict.OFF_FAST_PATH and e is not None:
            parts.append(f"accepted, but {e.slow_path}" + (f"; {self.best} is on it" if self.best else ""))
        elif self.verdict is Verdict.INCONCLUSIVE and e is not None:
            if e.pending is not None and e.outcome is Outcome.ACCEPTED:
                parts.append(f"accepted by the validators; {e.pending}")
            else:
                refusal = f" [{e.error_type}: {e.message}]" if e.error_type else ""
                parts.append(f"{e.reason or e.outcome.value}{refusal}")
            # Where it is pending or the call as written decides it, its own line
            # is the whole reason: the release's notes (where a table was looked
            # for) are shown once elsewhere.
            if e.pending is not None or e.cause == Cause.CALL.value:
                return "; ".join(parts)
        elif self.verdict is Verdict.ASSUMED and self.on_assumption is not None:
            refusal = (
                f" ({e.error_type}: {e.message})"
                if e is not None and e.error_type and self.on_assumption is Verdict.BROKEN
                else ""
            )
            on = (
                f"on flashinfer {self.flashinfer_version}"
                if self.assumed is Assumption.RELEASE
                else "on the assumed count"
            )
            parts.append(f"{on}: {self.on_assumption.value}{refusal}")
        if note:
            parts.extend(self.notes[:1])
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "table_path": self.table_path,
            "model": self.model,
            "tp": self.tp,
            "n": self.n,
            "backend": self.backend,
            "kernel": self.kernel,
            "sm": self.sm,
            "flashinfer_version": self.flashinfer_version,
            "padded": self.padded,
            "verdict": self.verdict.value,
            "best": self.best,
            "waste": round(self.waste, 4) if self.waste is not None else None,
            "evidence": self.evidence.to_dict() if self.evidence else None,
            "notes": self.notes,
            "releases": self.releases,
            "pin": self.pin,
            "label": self.label,
            "source": self.source,
            "rule_unknown": self.rule_unknown,
            "depth": self.depth.value,
            "unchecked": self.unchecked,
            "reach": self.reach.to_dict() if self.reach else None,
            "guard": self.guard,
            "waiver": self.waiver.to_dict() if self.waiver else None,
            "on_assumption": self.on_assumption.value if self.on_assumption else None,
            "assumed": self.assumed.value if self.assumed else None,
            "crash": self.crash,
        }


@dataclass(frozen=True)
class VerdictCell:
    """One count judged on one release: the verdict, the smallest accepted count
    and the kernel's answer for the padded count."""

    verdict: Verdict
    best: int | None
    evidence: HeadResult | None


@dataclass(frozen=True)
class VerdictGrid:
    """A table's backend on one SM: per release (rows), the cell of each model x
    TP (columns: name, TP, per-rank count, padded count or None where the rule
    raises). A cell is None where the release has no result for the kernel."""

    table: PaddingTable
    backend: Backend
    sm: int
    cases: tuple[tuple[str, int, int, int | None], ...]
    rows: tuple[tuple[str, tuple[VerdictCell | None, ...]], ...]


@dataclass(frozen=True)
class Verdicts:
    """What the verdicts step concludes of a set of tables judged on their
    answers (judge.judge_answers): the findings, the notes to show beside them,
    and with --repo every call of a probed entry."""

    findings: list[Finding]
    notes: list[str]
    call_paths: list[CallPathRecord] = field(default_factory=list)
