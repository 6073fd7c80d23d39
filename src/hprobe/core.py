"""Compare a padding table with probed support. Nothing here probes or prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from .outcome import HeadResult, KernelSMResult, Outcome
from .tables import Backend, Model, PaddingTable
from .tables.model import Reach


class Verdict(str, Enum):
    """What a padding table does for one count. Each member carries everything an
    output needs to show it (its explanation, mark, style, CI level, whether it
    fails the gate), so adding a verdict touches this class and nothing else."""

    OK = "ok"
    REDUCIBLE = "reducible"
    BROKEN = "broken"
    TABLE_REFUSES = "table-refuses"
    OFF_FAST_PATH = "off-fast-path"  # accepted, but served by a slower kernel than the family's own
    INCONCLUSIVE = "inconclusive"

    @property
    def _traits(self) -> _Traits:
        return _TRAITS[self]

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
    def soft(self) -> bool:
        """Passes the gate unless --strict."""
        return self._traits.gate == "soft"

    def fails(self, strict: bool) -> bool:
        """Fails the CI gate (exit 1, a JUnit failure, an ::error annotation)."""
        return self._traits.gate == "fail" or (strict and self.soft)

    @property
    def undecided(self) -> bool:
        """Neither pass nor fail: exit 3 when nothing fails, a JUnit error."""
        return self._traits.gate == "undecided"

    def ci_level(self, strict: bool) -> str | None:
        """The GitHub annotation level, or None for no annotation."""
        return "error" if self.fails(strict) else self._traits.ci_level


@dataclass(frozen=True)
class _Traits:
    explanation: str
    mark: str
    style: str
    gate: str  # "pass", "soft" (fails under --strict), "fail" or "undecided"
    ci_level: str | None


_TRAITS = {
    Verdict.OK: _Traits("the kernel accepts the padded count, and no smaller count serves", "✅", "green", "pass", None),
    Verdict.REDUCIBLE: _Traits("the kernel accepts a smaller count: the padding wastes compute", "🟡", "yellow", "soft", "notice"),
    Verdict.BROKEN: _Traits("the kernel refuses the padded count: a crash in production", "❌", "bold red", "fail", "error"),
    Verdict.TABLE_REFUSES: _Traits("the table raises for a count the kernel accepts", "🟣", "magenta", "soft", "notice"),
    Verdict.OFF_FAST_PATH: _Traits("accepted, but served by a slower kernel than the family's own", "🟡", "yellow", "soft", "notice"),
    Verdict.INCONCLUSIVE: _Traits("the kernel's answer could not be shown here", "❔", "cyan", "undecided", "warning"),
}



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
    depth: str = "validators"  # what an accepted answer rests on (see README "Depth")
    unchecked: list[str] = field(default_factory=list)  # what compiled code checks beyond that
    pin: str | None = None  # the pin whose releases `releases` are (None: the releases probed, no pin)
    reach: Reach | None = None  # the engine setting under which the rule reaches FlashInfer

    @property
    def label(self) -> str:
        """The verdict as printed: `ok (validators only)` where compiled code is
        known to check more than the Python a CPU probe runs."""
        if self.verdict in (Verdict.OK, Verdict.REDUCIBLE, Verdict.OFF_FAST_PATH) and self.padded is not None:
            if self.depth == "partial":
                # Never a plain "ok": Python after a compiled policy query did not run.
                return f"{self.verdict.value} (partial)"
            if self.unchecked:
                basis = "validators and dispatch" if self.depth == "dispatch" else "validators only"
                return f"{self.verdict.value} ({basis})"
        return self.verdict.value

    @property
    def padded_text(self) -> str:
        if self.rule_unknown:
            return "?"
        return "raises" if self.padded is None else str(self.padded)

    def explain(self) -> str:
        """One line of evidence, the same in every output format."""
        e = self.evidence
        parts = []
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
        elif self.verdict is Verdict.BROKEN and e is not None:
            parts.append(f"{e.outcome.value}: {e.error_type}: {e.message}" if e.error_type else f"{e.outcome.value}: {e.reason or ''}")
        elif self.verdict is Verdict.TABLE_REFUSES:
            parts.append(f"table raises, kernel accepts {self.best}")
        elif self.verdict is Verdict.OFF_FAST_PATH and e is not None:
            parts.append(f"accepted, but {e.slow_path}" + (f"; {self.best} is on it" if self.best else ""))
        elif self.verdict is Verdict.INCONCLUSIVE and e is not None:
            parts.append(f"{e.reason} [{e.error_type}: {e.message}]")
        parts.extend(self.notes[:1])
        return "; ".join(parts)

    def to_dict(self) -> dict:
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
            "depth": self.depth,
            "unchecked": self.unchecked,
            "reach": self.reach.to_dict() if self.reach else None,
        }


def judge(n: int, padded: int | None, support: KernelSMResult) -> tuple[Verdict, int | None, float | None, HeadResult | None, list[str]]:
    """The verdict for one per-rank count n padded to `padded` against probed support."""
    notes: list[str] = []
    above = sorted(h for h in support.heads if h >= n)
    accepted_above = [h for h in above if support.heads[h].outcome is Outcome.ACCEPTED]
    best = accepted_above[0] if accepted_above else None
    if padded is None:
        if not above:
            return Verdict.INCONCLUSIVE, None, None, None, [f"no count >= {n} was probed"]
        if best is not None:
            return Verdict.TABLE_REFUSES, best, None, support.heads[best], notes
        unclear = [h for h in above if support.heads[h].outcome is Outcome.INCONCLUSIVE]
        if unclear:
            return Verdict.INCONCLUSIVE, None, None, support.heads[unclear[0]], notes
        notes.append(f"the table raises for {n}; the kernel accepts no count in {n}..{max(support.heads)} either")
        return Verdict.OK, None, None, None, notes
    result = support.heads.get(padded)
    if result is None:
        return Verdict.INCONCLUSIVE, best, None, None, [f"{padded} was not probed"]
    if result.outcome is Outcome.ACCEPTED and result.slow_path:
        fast = [h for h in accepted_above if not support.heads[h].slow_path]
        if fast:
            notes.append(f"{fast[0]} reaches {support.heads[fast[0]].entry}")
        return Verdict.OFF_FAST_PATH, (fast[0] if fast else None), None, result, notes + [result.slow_path]
    if result.outcome is Outcome.ACCEPTED:
        # Only counts on the fast path are worth padding to instead.
        smaller = [h for h in accepted_above if h < padded and not support.heads[h].slow_path]
        unclear = [h for h in range(n, padded) if h in support.heads and support.heads[h].outcome is Outcome.INCONCLUSIVE]
        if unclear:
            notes.append(f"counts {compact_set(unclear)} between n and the padded count were inconclusive")
        if smaller:
            return Verdict.REDUCIBLE, smaller[0], padded / smaller[0], result, notes
        return Verdict.OK, padded, None, result, notes
    if result.outcome in (Outcome.REJECTED, Outcome.UNSUPPORTED_ARCH, Outcome.UNSUPPORTED_CONFIG, Outcome.ABSENT):
        return Verdict.BROKEN, best, None, result, notes
    return Verdict.INCONCLUSIVE, best, None, result, notes


def judge_across(n: int, padded: int | None, supports: list[KernelSMResult]):
    """A verdict that holds for every release in `supports`.

    broken if any release refuses the padded count; reducible only if a smaller
    count is accepted by all of them, so that advice to remove padding is safe
    for every release the consumer allows.
    """
    per = [(s.flashinfer_version, judge(n, padded, s)) for s in supports]
    if len(per) == 1:
        return per[0][1]
    broken = [(v, j) for v, j in per if j[0] is Verdict.BROKEN]
    if broken:
        _, (_, best, _, evidence, notes) = broken[0]
        names = ", ".join(v for v, _ in broken)
        return Verdict.BROKEN, best, None, evidence, [f"broken on flashinfer {names}"] + notes
    unclear = [(v, j) for v, j in per if j[0] is Verdict.INCONCLUSIVE]
    if unclear:
        _, (_, best, _, evidence, notes) = unclear[0]
        return Verdict.INCONCLUSIVE, best, None, evidence, [f"inconclusive on flashinfer {', '.join(v for v, _ in unclear)}"] + notes
    slow = [(v, j) for v, j in per if j[0] is Verdict.OFF_FAST_PATH]
    if slow:
        _, (_, best, _, evidence, notes) = slow[0]
        return Verdict.OFF_FAST_PATH, best, None, evidence, [f"off the fast path on flashinfer {', '.join(v for v, _ in slow)}"] + notes
    accepted_by_all = set.intersection(*({h for h in s.accepted() if not s.heads[h].slow_path} for s in supports))
    evidence = per[-1][1][3]
    if padded is None:
        common = sorted(h for h in accepted_by_all if h >= n)
        if common:
            return Verdict.TABLE_REFUSES, common[0], None, supports[-1].heads[common[0]], []
        return Verdict.OK, None, None, None, [f"the table raises for {n}; no count >= {n} is accepted by every release"]
    smaller = sorted(h for h in accepted_by_all if n <= h < padded)
    if smaller:
        return Verdict.REDUCIBLE, smaller[0], padded / smaller[0], evidence, []
    notes = [f"reducible on flashinfer {v} alone, not on every release" for v, j in per if j[0] is Verdict.REDUCIBLE]
    return Verdict.OK, padded, None, evidence, notes


def check_table(
    table: PaddingTable,
    supports: list[dict[tuple[str, int], KernelSMResult]],
    sms: list[int],
) -> tuple[list[Finding], list[str]]:
    """Every backend x SM (among `sms`) x model x TP of a table, judged across releases.

    Each element of `supports` maps (kernel id, SM) to one release's results
    covering 1..max padded.
    """
    findings: list[Finding] = []
    notes: list[str] = []
    for backend in table.backends:
        targets = [sm for sm in backend.sms if sm in sms]
        if not targets:
            notes.append(
                f"{table.name}: backend {backend.name} runs on SM{'/'.join(map(str, backend.sms))}, "
                "none of the SMs checked"
            )
            continue
        for sm in targets:
            probed = [support[(backend.variant_key, sm)] for support in supports]
            for model in table.models:
                if not backend.models or model.name in backend.models:
                    findings.extend(_judge_model(table, backend, sm, probed, model))
    return findings, notes


def _judge_model(table: PaddingTable, backend: Backend, sm: int, probed: list[KernelSMResult], model: Model) -> list[Finding]:
    out = []
    versions = [p.flashinfer_version for p in probed]
    extra_notes = list(dict.fromkeys(n for p in probed for n in p.notes))
    for tp, n in model.per_rank():
        padded = backend.rule.pad(n)
        verdict, best, waste, evidence, notes = judge_across(n, padded, probed)
        out.append(
            Finding(
                table=table.name,
                table_path=table.path,
                model=model.name,
                tp=tp,
                n=n,
                backend=backend.name,
                kernel=backend.variant_key,
                sm=sm,
                flashinfer_version=", ".join(versions),
                padded=padded,
                verdict=verdict,
                best=best,
                waste=waste,
                evidence=evidence,
                notes=notes + extra_notes,
                releases=versions,
                source=backend.source_for(model.name, n),
                depth=_weakest_depth(probed),
                unchecked=list(dict.fromkeys(u for p in probed for u in p.unchecked)),
                reach=backend.reach,
            )
        )
    return out


def _weakest_depth(probed: list[KernelSMResult]) -> str:
    depths = {p.depth for p in probed}
    if "partial" in depths:
        return "partial"
    return "dispatch" if depths == {"dispatch"} else "validators"


def exit_code(findings: list[Finding], strict: bool) -> int:
    verdicts = {f.verdict for f in findings}
    if any(v.fails(strict) for v in verdicts):
        return 1
    if any(v.undecided for v in verdicts) or not findings:
        return 3
    return 0


def compact_set(values: list[int] | set[int]) -> str:
    """{1-4, 8, 16}: runs of three or more collapse to a range."""
    ordered = sorted(set(values))
    if not ordered:
        return "{}"
    parts = []
    start = prev = ordered[0]
    for v in ordered[1:] + [None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        if prev - start >= 2:
            parts.append(f"{start}-{prev}")
        else:
            parts.extend(str(x) for x in range(start, prev + 1))
        if v is not None:
            start = prev = v
    return "{" + ", ".join(parts) + "}"
