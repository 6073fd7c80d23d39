"""What `matrix` and `check` found, as data every output format renders: the
releases probed and their results, the findings and what they conclude. The
other commands' reports have modules of their own (drift, suggest,
catalogue, cache): a command defines only the report classes it builds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hprobe import __version__
from hprobe.model.advice import TableAdvice
from hprobe.model.errors import EXIT_INCONCLUSIVE
from hprobe.model.outcome import Depth, HeadResult, KernelSMResult, Outcome
from hprobe.model.padding import CallPathRecord, PaddingTable
from hprobe.model.release import FlashinferInfo, ProbedRelease, releases_judged
from hprobe.model.targets import Targets
from hprobe.model.verdict import TRUSTED_NOTE, Finding, Verdict, VerdictGrid, Verdicts
from hprobe.model.waiver import WaiverUse

if TYPE_CHECKING:
    from hprobe.report.drift import DiffReport
    from hprobe.support.answers import Answers


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


@dataclass(frozen=True)
class ModelShape:
    """What one rank of a model hands a kernel at one TP degree: its query heads
    and, for a GQA/MHA layer kind, its KV heads, head dim and sinks."""

    model: str
    tp: int
    heads: int  # query heads per rank
    layer: str = ""  # the kind of attention layer; "" for MLA
    kv_heads: int | None = None  # per rank; None for MLA
    head_dim: int | None = None
    sinks: bool = False

    @property
    def group(self) -> int | None:
        return self.heads // self.kv_heads if self.kv_heads else None

    @property
    def heads_said(self) -> str:
        """`32/4 (g8)`: query over KV heads per rank and the group; MLA: the query heads."""
        return f"{self.heads}/{self.kv_heads} (g{self.group})" if self.kv_heads else str(self.heads)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"model": self.model, "tp": self.tp, "heads": self.heads}
        if self.kv_heads is not None:
            data.update(
                layer=self.layer, kv_heads=self.kv_heads, group=self.group, head_dim=self.head_dim, sinks=self.sinks
            )
        return data


@dataclass(frozen=True)
class ShapeAnswer:
    """A model shape's answer from one kernel on one SM and release (`matrix
    --model`): the probed cell, or why none could be probed."""

    shape: ModelShape
    kernel: str  # the probe and the axes it was called with besides the shape
    sm: int
    release: str  # the flashinfer version
    key: str | None = None  # the variant probed
    result: HeadResult | None = None
    depth: Depth | None = None
    not_probed: str | None = None  # why no cell answers for this shape (its head dim is no axis value, ...)
    # What compiled code checks past what ran for this variant (KernelSMResult.unchecked)
    unchecked: tuple[str, ...] = ()

    @property
    def outcome(self) -> Outcome:
        return self.result.outcome if self.result else Outcome.INCONCLUSIVE

    def evidence(self) -> str:
        """What the answer rests on, in one line: the refusal's message and
        place, why it is inconclusive or not probed, or what an acceptance is
        qualified by."""
        hr = self.result
        if hr is None:
            return self.not_probed or ""
        if hr.outcome is Outcome.ACCEPTED:
            said = [f"reaches {hr.entry}" if hr.entry else ""]
            said += [
                f"pending: {hr.pending}" if hr.pending else "",
                f"some shapes only: {hr.shapes}" if hr.shapes else "",
            ]
            said += [hr.slow_path or "", *(f"not seen on a CPU: {item}" for item in self.unchecked)]
            return "; ".join(filter(None, said))
        if hr.outcome is Outcome.INCONCLUSIVE:
            return hr.reason or hr.message or ""
        where = f" [{hr.location}]" if hr.location else ""
        return " ".join(filter(None, [hr.error_type and f"{hr.error_type}:", hr.message or hr.reason or ""])) + where

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            **self.shape.to_dict(),
            "kernel": self.kernel,
            "sm": self.sm,
            "release": self.release,
            "variant": self.key,
        }
        if self.result is not None:
            data["answer"] = self.result.to_dict()
            data["depth"] = self.depth.value if self.depth else None
            data["unchecked"] = list(self.unchecked)
        else:
            data["not_probed"] = self.not_probed
        return data


@dataclass
class MatrixReport:
    """What `matrix` and `report` print: per release, every variant x SM x h_q answer."""

    releases: list[ProbedRelease]
    targets: Targets
    heads: list[int]
    keys: list[str] = field(default_factory=list)  # the variants, in the order asked
    # `matrix --model`: each model shape's answer, what the formats show instead of the grid
    shapes: list[ShapeAnswer] = field(default_factory=list)

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
        if self.shapes:
            answered = any(a.outcome is not Outcome.INCONCLUSIVE for a in self.shapes)
        else:
            answered = any(h.outcome is not Outcome.INCONCLUSIVE for r in self.results for h in r.heads.values())
        return 0 if answered else EXIT_INCONCLUSIVE

    def to_dict(self, runs: bool = False) -> dict[str, Any]:
        """hprobe.matrix/2, or with `runs` hprobe.matrix/3: the same document
        with each result's answers as runs of h_q (`KernelSMResult.head_runs`)."""
        return {
            **_header("hprobe.matrix/3" if runs else "hprobe.matrix/2", self.flashinfer, self.releases, self.targets),
            "heads": {"min": min(self.heads), "max": max(self.heads), "count": len(self.heads)},
            "results": [r.to_dict(runs=runs) for r in self.results],
            **({"model_shapes": [a.to_dict() for a in self.shapes]} if self.shapes else {}),
            "exit_code": self.exit_code,
        }


@dataclass(frozen=True)
class GateCounts:
    """The counts a gate's verdict rests on: findings per verdict (in the
    enum's order) and of them those a waiver covers, waivers past their date,
    and call paths judged on an assumption or not judged."""

    counts: dict[Verdict, int]
    waived_of: dict[Verdict, int]  # of each verdict's findings, those a waiver covers
    expired: int
    assumed: int
    not_judged: int
    # findings judged on the validators' word where compiled selection was
    # pending (--trust-validators): said on the gate's line
    trusted: int = 0

    @property
    def waived(self) -> int:
        return sum(self.waived_of.values())

    def beside(self) -> list[tuple[str, str]]:
        """What the gate's line says after the verdicts, each with what it is
        (`expired`, `assumed`, `not_judged`: a format styles it by that)."""
        out = []
        if self.expired:
            out.append((f"{self.expired} expired waiver{'s' * (self.expired != 1)}", "expired"))
        if self.assumed:
            out.append((f"{self.assumed} call path{'s' * (self.assumed != 1)} assumed", "assumed"))
        if self.not_judged:
            out.append((f"{self.not_judged} call path{'s' * (self.not_judged != 1)} not judged", "not_judged"))
        if self.trusted:
            out.append(
                (
                    f"{self.trusted} on the validators' word alone, compiled selection not evaluated "
                    "(--trust-validators)",
                    "trusted",
                )
            )
        return out

    def said(self, verdict: Verdict) -> str:
        """`22 broken (22 waived)`: a verdict's count, and how many of them a waiver covers."""
        waived = self.waived_of.get(verdict, 0)
        return f"{self.counts[verdict]} {verdict.value}" + (f" ({waived} waived)" if waived else "")


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
    # --trust-validators: a count the validators accept whose compiled
    # selection could not be evaluated is judged on their answer
    trust_validators: bool = False
    # What the findings conclude (commands/conclude.py): the gate's exit code,
    # one line of advice per table x backend x SM, the release-by-release
    # verdicts of the page, the flashinfer the report names.
    exit_code: int = EXIT_INCONCLUSIVE
    advice: list[TableAdvice] = field(default_factory=list)
    verdict_grids: list[VerdictGrid] = field(default_factory=list)
    flashinfer: FlashinferInfo = field(default_factory=lambda: FlashinferInfo("unknown", "not probed"))

    @classmethod
    def judged(cls, answers: Answers, verdicts: Verdicts, strict: bool, trust: bool = False) -> CheckReport:
        """The report of rules judged on their answers, before it is concluded
        (commands/conclude.py): `trust` is --trust-validators."""
        return cls(
            list(answers.probed.values()),
            answers.targets,
            answers.tables,
            verdicts.findings,
            strict,
            verdicts.notes,
            planned=answers.planned,
            call_paths=verdicts.call_paths,
            trust_validators=trust,
        )

    @property
    def releases_judged(self) -> str:
        """The releases the findings rest on (model.release.releases_judged)."""
        return releases_judged(self.releases)

    @property
    def unresolved_paths(self) -> list[CallPathRecord]:
        """Calls whose head count hprobe could not judge, each with its file:line and why."""
        return [p for p in self.call_paths if not p.judged]

    def gate(self) -> GateCounts:
        """What the gate's line says beside its exit code, the same in every format."""
        counts = {v: n for v in Verdict if (n := sum(1 for f in self.findings if f.verdict is v))}
        waived = {
            v: n
            for v in Verdict
            if (n := sum(1 for f in self.findings if f.verdict is v and v is not Verdict.OK and f.waiver is not None))
        }
        assumed = sum(1 for p in self.unresolved_paths if p.status == "assumed")
        return GateCounts(
            counts,
            waived_of=waived,
            expired=sum(1 for u in self.waivers if u.expired),
            assumed=assumed,
            not_judged=sum(
                1
                for p in self.unresolved_paths
                if p.status != "assumed" and p.runs_on([sm.number for sm in self.targets.sms])
            ),
            trusted=sum(1 for f in self.findings if any(n.startswith(TRUSTED_NOTE) for n in f.notes)),
        )

    def to_dict(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for f in self.findings:
            counts[f.verdict.value] = counts.get(f.verdict.value, 0) + 1
        return {
            **_header("hprobe.check/2", self.flashinfer, self.releases, self.targets),
            "strict": self.strict,
            "trust_validators": self.trust_validators,
            "exit_code": self.exit_code,
            "summary": counts,
            "tables": [
                {"name": t.name, "path": t.path, "source": t.source, "requires_flashinfer": t.requires_flashinfer}
                for t in self.tables
            ],
            "findings": [f.to_dict() for f in self.findings],
            "drift": self.drift.to_dict() if self.drift else None,
            "call_paths": [p.to_dict() for p in self.call_paths],
            "waivers": [u.to_dict() for u in self.waivers],
            "notes": self.notes,
            "advice": [a.to_dict() for a in self.advice],
        }
