"""GitHub-flavoured Markdown: for `$GITHUB_STEP_SUMMARY` and pull-request comments."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TextIO

from hprobe.model.heads import compact_set
from hprobe.model.outcome import Outcome
from hprobe.model.sm import sm_names
from hprobe.model.verdict import Verdict
from hprobe.report.formats.base import Formatter, RenderOptions, render_with
from hprobe.system.escaping import md_code, md_text

if TYPE_CHECKING:
    from hprobe.report.catalogue import KernelsReport
    from hprobe.report.drift import BisectReport, DiffReport
    from hprobe.report.model import CheckReport, MatrixReport
    from hprobe.report.suggest import SuggestReport


cell = md_text  # prose and table cells alike
_OPENER, _CLOSER = "<details>", "</details>"


# GitHub refuses a step summary over 1 MiB (the whole upload fails): what is
# written stops short of it, closing what it opened, and says what was left out.
STEP_SUMMARY_BYTES = 1 << 20
_RESERVE = 4096  # for the closing lines and the one that says what was cut


class MarkdownFormatter(Formatter):
    def __init__(self, stream: TextIO | None = None, budget: int = STEP_SUMMARY_BYTES):
        self.stream = stream or sys.stdout
        self._left = budget - _RESERVE
        self._dropped = 0
        self._open = 0  # <details> blocks written and not closed yet

    def _w(self, line: str = "") -> None:
        size = len(line.encode("utf-8", "replace")) + 1
        if self._dropped or size > self._left:
            self._dropped += 1
            if line == _CLOSER and self._open:
                self._open -= 1
                self.stream.write(line + "\n")  # a block opened is closed, whatever was cut inside it
            return
        self._left -= size
        self._open += line.startswith(_OPENER) - (line == _CLOSER)
        self.stream.write(line + "\n")

    def cut_note(self) -> str:
        """What is said once at the end where lines were left out for the limit."""
        if not self._dropped:
            return ""
        return (
            f"\n_{self._dropped} more lines not shown: GitHub takes at most 1 MiB of step summary; the whole "
            "report is in `--json` and `--junit`._\n"
        )

    def check(self, report: CheckReport) -> None:
        gate = report.gate()
        said = [f"{v.mark} {gate.said(v)}" for v in gate.counts] or ["nothing checked"]
        said += [phrase for phrase, _ in gate.beside()]
        summary = ", ".join(said)
        self._w(f"## hprobe check — flashinfer {cell(report.releases_judged)}")
        self._w()
        self._w(
            f"**{summary}** → exit {report.exit_code}{' (`--strict`)' if report.strict else ''}; SMs "
            f"{', '.join(str(s) for s in report.targets.sms)}"
        )
        self._w()
        for table in report.advice:
            self._w(f"- **{cell(table.table)}** ({cell(table.scope)})")
            for a in table.backends:
                tally = ", ".join(f"{Verdict(v).mark} {n} {v}" for v, n in a.counts.items())
                sms = sm_names(a.sms)
                self._w(f"  - {md_code(a.backend)} {sms}: {tally} — {cell(a.action)}")
        self._w()
        unresolved = report.unresolved_paths
        if unresolved:
            assumed = f" ({gate.assumed} shown on an assumed count)" if gate.assumed else ""
            self._w(
                f"**{len(unresolved)} call path{'s' * (len(unresolved) != 1)} not judged**{assumed} (of "
                f"{len(report.call_paths)} calls of FlashInfer entries found):"
            )
            self._w()
            self._w("| site | calls | status | why |")
            self._w("|---|---|---|---|")
            for path in unresolved:
                self._w(f"| {md_code(path.site)} | {md_code(path.calls)} | {cell(path.status)} | {cell(path.detail)} |")
            self._w()
        self._problems(report)
        if report.waivers:
            self._w("Waivers:")
            self._w()
            for use in report.waivers:
                state = (
                    f"**expired on {use.waiver.expires}: fails the gate**"
                    if use.expired
                    else "matches no finding that needs a waiver"
                    if use.unmatched
                    else f"waives {use.matched}"
                )
                self._w(f"- {md_code(use.waiver.describe)}: {state} — {cell(use.waiver.reason)}")
            self._w()
        ok = [f for f in report.findings if f.verdict is Verdict.OK]
        if ok:
            self._w(f"<details><summary>{len(ok)} ok</summary>")
            self._w()
            self._w("| verdict | table · backend | SM | model | TP | n | padded |")
            self._w("|---|---|---|---|---:|---:|---:|")
            for f in ok:
                padded = f.padded_text
                self._w(
                    f"| {cell(f.label)} | {cell(f.table)} · {md_code(f.backend)} | SM{f.sm} "
                    f"| {cell(f.model)} | {f.tp} | {f.n} | {padded} |"
                )
            self._w()
            self._w("</details>")
            self._w()
        if report.drift:
            self._drift(report.drift)
        for note in report.notes:
            self._w(f"- {cell(note)}")

    def _drift(self, drift: DiffReport) -> None:
        changed = [c for c in drift.changes if c.became_accepted or c.became_rejected]
        self._w(f"### Drift against the baseline ({cell(drift.old['version'])} → {cell(drift.new['version'])})")
        self._w()
        if not changed:
            self._w("No accepted set changed.")
            self._w()
            return
        self._w("| kernel | SM | became accepted | became rejected |")
        self._w("|---|---|---|---|")
        for c in changed:
            self._w(
                f"| {md_code(c.kernel)} | SM{c.sm} | {compact_set(list(c.became_accepted))} | "
                f"{compact_set(list(c.became_rejected))} |"
            )
        self._w()

    def matrix(self, report: MatrixReport, grid: bool = False, pivot: tuple[str, str] | None = None) -> None:
        self._w(f"## hprobe matrix — flashinfer {cell(', '.join(r.info.version for r in report.releases))}")
        self._w()
        if report.shapes:
            self._model_shapes(report)
            return
        self._w("| kernel | SM | release | status | accepted h_q | depth | refused by | notes |")
        self._w("|---|---|---|---|---|---|---|---|")
        for rel in report.releases:
            for r in rel.results.values():
                accepted = compact_set(r.accepted()) if r.status is Outcome.ACCEPTED else ""
                depth = r.depth.value + (" (compiled checks not seen)" if r.unchecked else "")
                refusals = "<br>".join(
                    cell(
                        f"{compact_set(hs)}: {hr.error_type}: {hr.message}"
                        + (f" ({hr.location})" if hr.location else "")
                    )
                    for outcome in (Outcome.REJECTED, Outcome.UNSUPPORTED_ARCH, Outcome.UNSUPPORTED_CONFIG)
                    for hs, hr in r.refusal_groups(outcome)[:3]
                )
                flagged = "<br>".join(cell(n) for n in r.notes if n.startswith(("disagreement", "partial")))
                self._w(
                    f"| {md_code(r.key)} | SM{r.sm} | {cell(rel.info.version)} | {r.status.value} | {accepted} | "
                    f"{depth} | {refusals} | {flagged} |"
                )

    def _model_shapes(self, report: MatrixReport) -> None:
        """`matrix --model`: a row per model shape, kernel, SM and release."""
        self._w("| model | TP | layer | q/kv heads | head dim | kernel | SM | release | answer | depth | evidence |")
        self._w("|---|---:|---|---:|---:|---|---|---|---|---|---|")
        for a in report.shapes:
            shape = a.shape
            heads = shape.heads_said
            layer = cell(shape.layer + (" +sinks" if shape.sinks else ""))
            answer = a.result.outcome.value if a.result else "not probed"
            depth = a.depth.value if a.depth and a.result and a.result.outcome is Outcome.ACCEPTED else ""
            dim = shape.head_dim or ""
            self._w(
                f"| {cell(shape.model)} | {shape.tp} | {layer} | {heads} | {dim} | {md_code(a.kernel)} | SM{a.sm} "
                f"| {cell(a.release)} | {answer} | {depth} | {cell(a.evidence())} |"
            )

    def _problems(self, report: CheckReport) -> None:
        """Every finding that is not ok, with its evidence and the rule's place."""
        problems = [f for f in report.findings if f.verdict is not Verdict.OK]
        if problems:
            self._w("| verdict | table · backend | SM | model | TP | n | padded | evidence | rule at |")
            self._w("|---|---|---|---|---:|---:|---:|---|---|")
            for f in problems:
                padded = f.padded_text
                self._w(
                    f"| {f.verdict.mark} {cell(f.label)} | {cell(f.table)} · {md_code(f.backend)} → "
                    f"{md_code(f.kernel)} "
                    f"| SM{f.sm} | {cell(f.model)} | {f.tp} | {f.n} | {padded} | {cell(f.explain())} | "
                    f"{md_code(f.source)} |"
                )
            self._w()

    def suggest(self, result: SuggestReport) -> None:
        report, suggestions, patch = result.check, result.suggestions, result.patch
        self._w(f"## hprobe suggest — flashinfer {cell(report.releases_judged)}")
        self._w()
        for s in suggestions:
            self._w(
                f"- **{cell(s.table)}** · {md_code(s.backend.name)} ({cell(str(s.backend.where))}): {cell(s.words())}"
            )
            for line in s.pins.words() if s.pins else []:
                self._w(f"  - pin: {cell(line)}")
        for line in (patch.changed + patch.not_rewritten) if patch else []:
            self._w(f"- patch: {cell(line)}")
        self._w()
        if any(f.verdict is not Verdict.OK for f in report.findings):
            # The evidence the suggestion rests on: the current rules on the releases judged.
            self._w(f"### The current rules on flashinfer {cell(report.releases_judged)}")
            self._w()
            self._problems(report)
        for note in report.notes:
            self._w(f"- {cell(note)}")

    def diff(self, result: DiffReport) -> None:
        self._drift(result)
        self._w(f"exit {result.exit_code}")

    def bisect(self, result: BisectReport) -> None:
        self._w(f"## hprobe bisect — {md_code(result.kernel)} SM{result.sm} h_q={result.heads}")
        self._w()
        self._w("| release | outcome |")
        self._w("|---|---|")
        for p in result.probed:
            self._w(f"| {cell(p.version)} | {cell(p.outcome)} |")
        self._w()
        self._w(f"first accepting: **{cell(result.first_accepting or 'none')}**")

    def kernels(self, report: KernelsReport) -> None:
        self._w("| id | entry point | SMs | axes |")
        self._w("|---|---|---|---|")
        for row in report.rows:
            axes = ", ".join(f"{a['name']}={a['default']}" for a in row["axes"])
            self._w(
                f"| {md_code(row['id'])} | {md_code(row['entry_point'])} | {', '.join(map(str, row['sms']))} | "
                f"{cell(axes)} |"
            )

    def data(self, payload: dict[str, Any], title: str) -> None:
        self._w(f"## {title}")
        self._w()
        for key, value in payload.items():
            self._w(f"- **{cell(key)}**: {cell(value)}")


def render(report: object, options: RenderOptions) -> str:
    made: list[MarkdownFormatter] = []

    def make(stream: TextIO) -> MarkdownFormatter:
        made.append(MarkdownFormatter(stream))
        return made[-1]

    text = render_with(make, report, options)
    return text + made[-1].cut_note()
