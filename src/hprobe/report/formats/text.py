"""Text output: styled lines and tables, plain when piped or in a CI log
(`layout`), coloured and wrapped by rich on a terminal (`terminal`).

Every string from outside hprobe goes through `visible` and is written as
text, never read as markup."""

from __future__ import annotations

import os
import sys
from itertools import groupby
from typing import TYPE_CHECKING, Any, TextIO, cast

from hprobe.model.heads import compact_set
from hprobe.model.outcome import Cause, KernelSMResult, Outcome
from hprobe.model.sm import sm_names
from hprobe.model.verdict import Finding, Verdict
from hprobe.report.formats.base import Formatter, RenderOptions, render_with
from hprobe.report.formats.layout import (
    PIPED_WIDTH,
    UNBOUNDED_WIDTH,
    Cell,
    Column,
    Part,
    Row,
    Writer,
    isatty,
    plain_table_lines,
    wrapped_lines,
)
from hprobe.system.escaping import visible

if TYPE_CHECKING:
    from rich.console import Console

    from hprobe.model.advice import TableAdvice
    from hprobe.report.cache import CacheReport
    from hprobe.report.catalogue import KernelsReport
    from hprobe.report.drift import BisectReport, DiffReport
    from hprobe.report.model import CheckReport, MatrixReport, ShapeAnswer
    from hprobe.report.suggest import SuggestReport


class PlainWriter:
    """Text without style, straight to the stream, no line wider than `width`:
    what rich writes without colour, without importing rich unless a line or a
    table needs wrapping (rich wraps a line at spaces and folds a cell, never
    cutting anything to `…`)."""

    def __init__(self, stream: TextIO, width: int = PIPED_WIDTH):
        self.stream = stream
        self.width = width
        self._rich: Any = None  # made once, on the first line or table that needs wrapping

    def line(self, *parts: Part) -> None:
        text = "".join(part if isinstance(part, str) else part[0] for part in parts)
        if any(len(piece) > self.width for piece in text.split("\n")):
            lines = wrapped_lines(text, self.width)
            if lines is None:
                from rich.text import Text

                self._console().print(Text(text))
                return
            text = "\n".join(lines)
        self.stream.write(text + "\n")

    def table(self, columns: list[Column], rows: list[Row]) -> None:
        lines = plain_table_lines(columns, rows, self.width)
        if lines is None:  # a cell of several lines, or a row wider than the width: rich folds it
            from hprobe.report.formats.terminal import rich_table

            self._console().print(rich_table(columns, rows))
            return
        self.stream.write("\n".join(lines) + "\n")

    def _console(self) -> Any:
        if self._rich is None:
            from hprobe.report.formats.terminal import make_console

            self._rich = make_console(stream=self.stream, width=self.width)
        return self._rich


def make_writer(stream: TextIO | None = None) -> Writer:
    """Plain for a stream that rich would not treat as a terminal and whose
    width nobody set (COLUMNS); rich, with its colour and wrapping, otherwise."""
    stream = stream or sys.stdout
    if _plain(stream):
        return PlainWriter(stream)
    from hprobe.report.formats.terminal import RichWriter, make_console

    return RichWriter(make_console(stream=stream))


def _plain(stream: TextIO) -> bool:
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and 0 < int(columns) <= UNBOUNDED_WIDTH:
        return False  # a width was asked for: rich wraps to it
    # As rich decides whether it writes to a terminal.
    tty_compatible = os.environ.get("TTY_COMPATIBLE", "")
    if tty_compatible in ("0", "1"):
        return tty_compatible == "0"
    force_color = os.environ.get("FORCE_COLOR")
    if force_color is not None:
        return force_color == ""
    return not isatty(stream)


def counted(n: int, noun: str) -> str:
    """`1 more note`, `2 more notes`: a count and its noun, singular where it is one."""
    return f"{n} {noun}{'s' * (n != 1)}"


def _dim(text: str) -> Part:
    return (text, "dim")


def _bold(text: str) -> Part:
    return (text, "bold")


def _merged_notes(report: CheckReport) -> list[str]:
    """Notes for the summary view: a release's requirements that are not
    installed on one line, where its first one stood, and only where an answer
    of that release is inconclusive for it, with the command that fixes it; a
    requirement no answer depended on asks nothing of the reader (--details
    shows each)."""
    missing = {
        u.note(r.info.version): (r.info.version, u.requirement)
        for r in report.releases
        for u in r.unmet
        if u.installed is None
    }
    stopped = {
        r.info.version: sum(
            1 for result in r.results.values() for h in result.heads.values() if h.cause == Cause.ENVIRONMENT.value
        )
        for r in report.releases
    }
    unmet: dict[str, list[str]] = {}
    slots: list[tuple[str | None, str]] = []  # (release whose requirements go here, or None: the note itself)
    for note in report.notes:
        if note not in missing:
            slots.append((None, note))
            continue
        version, requirement = missing[note]
        if version not in unmet and stopped.get(version):
            slots.append((version, ""))
        unmet.setdefault(version, []).append(requirement)
    return [
        note
        if version is None
        else f"flashinfer {version} requires {', '.join(unmet[version])}, not installed here: "
        f"{stopped[version]} {'answer is' if stopped[version] == 1 else 'answers are'} inconclusive for it "
        f"(`pip install {' '.join(repr(u) for u in unmet[version])}` in a separate venv; --details for each)"
        for version, note in slots
    ]


def _matrix_notes(report: MatrixReport) -> list[str]:
    """Each release's notes, its unmet requirements merged into one line for
    every release, said to matter only where an answer is inconclusive for
    this machine (an import, a dependency), with the command that fixes it."""
    notes: list[str] = []
    missing: dict[str, list[str]] = {}
    for rel in report.releases:
        unmet = {u.note(rel.info.version) for u in rel.unmet}
        notes.extend(n for n in rel.notes if n not in unmet)
        for u in rel.unmet:
            missing.setdefault(u.requirement, []).append(rel.info.version)
    if missing:
        stopped = sum(1 for r in report.results for h in r.heads.values() if h.cause == Cause.ENVIRONMENT.value)
        releases = ", ".join(dict.fromkeys(v for vs in missing.values() for v in vs))
        needs = ", ".join(missing)
        if stopped:
            install = " ".join(f"'{r}'" for r in missing)
            notes.append(
                f"flashinfer {releases} {'require' if ',' in releases else 'requires'} {needs}, not installed here: "
                f"{stopped} answers are inconclusive for it (`pip install {install}` in a separate venv)"
            )
        else:
            notes.append(
                f"flashinfer {releases} {'require' if ',' in releases else 'requires'} {needs}, not installed here; no "
                f"answer depended on {'them' if len(missing) > 1 else 'it'}"
            )
    return notes


class TextFormatter(Formatter):
    def __init__(self, target: Console | TextIO | None = None):
        """`target`: a rich console (as tests build one), or the stream to
        write to, styled as `make_writer` decides for it."""
        # A console passed in means rich is loaded; piped text never imports
        # it (22 ms of a 0.4 s warm check).
        console = getattr(sys.modules.get("rich.console"), "Console", None)
        if console is not None and isinstance(target, console):
            from hprobe.report.formats.terminal import RichWriter

            self.out: Writer = RichWriter(target)
        else:
            self.out = make_writer(cast("TextIO | None", target))  # not a console: a stream or None

    # -- check ---------------------------------------------------------------------

    def check(self, report: CheckReport) -> None:
        """The verdict first and last. By default what fits a screen (at most
        SCREEN_LINES lines when nothing wraps): the summary, the rows that
        need action, each section capped with how many more `--details` shows."""
        out = _Counted(self.out)
        sms = ", ".join(str(sm) for sm in report.targets.sms)
        versions = report.releases_judged
        where = (
            "  " + ", ".join(f"{r.info.version}: {r.info.location}" for r in report.releases) if self.details else ""
        )
        verdict = _verdict_line(report)
        out.line(*verdict)
        out.line(_bold("hprobe check"), f"  flashinfer {visible(versions)}  targets: {sms}{visible(where)}")
        cap = None if self.details else _SCREEN_CAPS
        self._advice(report.advice, out, None if cap is None else cap["advice"])
        # The answer first; what it rests on after it.
        notes = report.notes if self.details else _merged_notes(report)
        if notes:
            out.line()
        for note in notes if cap is None else notes[: cap["notes"]]:
            out.line(_dim("note:"), f" {visible(note)}")
        if cap is not None and len(notes) > cap["notes"]:
            out.line(_dim(f"{counted(len(notes) - cap['notes'], 'more note')}: --details"))
        self._waivers(report, out)
        if report.drift:
            out.line()
            drift = report.drift
            out.line(
                _bold("drift against the baseline"),
                f"  flashinfer {visible(drift.old['version'])} → {visible(drift.new['version'])}",
            )
            lines = self._changes(drift, changed_only=True)
            for parts in lines or [["  ", _dim("no accepted set changed")]]:
                out.line(*parts)
        paths_lines = 0 if cap is None else _call_paths_lines(report, cap["paths"])
        # Less three lines: the "more" line, a blank, the verdict.
        budget = None if cap is None else SCREEN_LINES - out.count - paths_lines - 3
        hidden_ok, hidden_action = 0, 0
        for (table, backend), group in groupby(report.findings, key=lambda f: (f.table, f.backend)):
            rows = list(group)
            if not self.details:
                # The summary said the rest; the rows worth reading are those that need action.
                shown = [f for f in rows if _needs_action(f, report.strict)]
                hidden_ok += len(rows) - len(shown)
                rows = shown
                if not rows:
                    continue
            if budget is not None:
                fit = _rows_that_fit(rows, budget)
                hidden_action += len(rows) - fit
                rows = rows[:fit]
                if not rows:
                    continue
            before = out.count
            self._findings(table, backend, rows, out)
            if budget is not None:
                budget -= out.count - before
        self._call_paths(report, out, None if cap is None else cap["paths"])
        out.line()
        more = []
        if hidden_action:
            more.append(f"{counted(hidden_action, 'more row')} that need{'s' * (hidden_action == 1)} action")
        if hidden_ok:
            more.append(f"{counted(hidden_ok, 'row')} that need{'s' * (hidden_ok == 1)} none")
        if more:
            out.line(_dim(f"{' and '.join(more)} not shown: --details"))
        out.line(*verdict)

    def _waivers(self, report: CheckReport, out: Writer) -> None:
        """Every waiver given: expired ones fail the gate, unused ones are said."""
        if not report.waivers:
            return
        out.line()
        out.line(_bold("waivers"))
        for use in report.waivers:
            if use.expired:
                state: Part = (f"expired on {use.waiver.expires}: fails the gate", "bold red")
            elif use.unmatched:
                state = ("matches no finding that needs a waiver: remove it", "yellow")
            else:
                state = (f"waives {use.matched} finding{'s' * (use.matched != 1)}", "dim")
            out.line(f"  {visible(use.waiver.describe)}: ", state, _dim(f" — {visible(use.waiver.reason)}"))

    def _call_paths(self, report: CheckReport, out: Writer, cap: int | None = None) -> None:
        """Every call of a probed FlashInfer entry a repo makes: those not
        judged always (each with its file:line and why), all with --details."""
        shown = report.call_paths if self.details else report.unresolved_paths
        if not shown:
            return
        out.line()
        judged = len(report.call_paths) - len(report.unresolved_paths)
        assumed = sum(1 for p in report.call_paths if p.status == "assumed")
        out.line(
            _bold("call paths"),
            _dim(
                f"  {counted(len(report.call_paths), 'call')} of FlashInfer entries found, {judged} judged"
                + (f", {assumed} assumed" if assumed else "")
            ),
        )
        for path in shown if cap is None else shown[:cap]:
            style = "" if path.judged else "cyan"
            phase = f" [{path.phase}]" if path.phase else ""
            out.line(
                f"  {visible(path.site)}",
                _dim(f" {visible(path.function)} → {visible(path.calls)}{phase}: "),
                (f"{path.status}", style),
                f" {visible(path.detail)}",
            )
        if cap is not None and len(shown) > cap:
            out.line("  ", _dim(f"{counted(len(shown) - cap, 'more call path')} not judged: --details"))

    def _advice(self, advice: list[TableAdvice], out: Writer, cap: int | None = None) -> None:
        """The summary: one line per table x backend x SMs, with what to do."""
        if not advice:
            return
        out.line()
        out.line(_bold("summary"))
        left = cap
        for table in advice:
            if left is not None and left <= 0:
                break
            out.line("  ", _bold(visible(table.table)), "  ", _dim(visible(table.scope)))
            for a in table.backends:
                if left is not None:
                    if left <= 0:
                        break
                    left -= 1
                tally = _joined([(f"{n} {visible(v)}", Verdict(v).style) for v, n in a.counts.items()], ", ")
                sms = sm_names(a.sms)
                label = a.backend if f"({sms})" in a.backend else f"{a.backend} {sms}"  # SMs said once
                out.line(f"    {visible(label)}: ", *tally, f" → {visible(a.action)}")
        total = sum(len(table.backends) for table in advice)
        if cap is not None and total > cap:
            out.line("  ", _dim(f"{counted(total - cap, 'more backend')}: --details"))
        if any(not table.pin for table in advice):
            out.line(
                "  ",
                _dim("no pin: add requires_flashinfer (or --pin) for advice that holds across the releases you allow"),
            )

    def _findings(self, table: str, backend: str, rows: list[Finding], out: Writer) -> None:
        """One table x backend: a row per SM x model x TP, then what the rows rest on.
        A first note every row shares (a release's caveat) is said once, under the rows."""
        shared = _shared_note(rows)
        out.line()
        out.line(_bold(visible(table)), f" · {visible(backend)} → {visible(rows[0].kernel)}")
        columns: list[Column] = [
            ("SM", "left"),
            ("model", "left"),
            ("TP", "right"),
            ("n", "right"),
            ("padded", "right"),
            ("verdict", "left"),
            ("evidence", "left"),
        ]
        table_rows: list[Row] = []
        entries: dict[int, set[str]] = {}
        previous_sm = None
        for f in rows:
            if previous_sm is not None and f.sm != previous_sm:
                table_rows.append(None)
            previous_sm = f.sm
            if f.evidence is not None and f.evidence.entry:
                entries.setdefault(f.sm, set()).add(f.evidence.entry)
            table_rows.append(
                [
                    (f"SM{f.sm}", ""),
                    (visible(f.model), ""),
                    (str(f.tp), ""),
                    (str(f.n), ""),
                    (visible(f.padded_text), ""),
                    (visible(f.label), f.verdict.style),
                    (visible(f.explain(note=shared is None)), ""),
                ]
            )
        out.table(columns, table_rows)
        if shared is not None:
            out.line("  ", _dim(visible(shared)))
        if rows[0].reach is not None:
            out.line("  ", (visible(rows[0].reach.words()), "yellow"))
        for sm, names in entries.items():
            out.line("  ", _dim(f"SM{sm} reaches {visible(', '.join(sorted(names)))}"))
        if any("[" in f.source for f in rows):
            # A rule evaluated per SM, phase and setting: which branch padded which count.
            by_branch: dict[str, list[int]] = {}
            for f in rows:
                by_branch.setdefault(f.source, []).append(f.n)
            for source, ns in by_branch.items():
                out.line("  ", _dim(f"n={compact_set(ns)} padded by {visible(source)}"))
        for item in dict.fromkeys(u for f in rows for u in f.unchecked):
            out.line("  ", _dim(f"validators only: {visible(item)}"))

    # -- matrix --------------------------------------------------------------------

    def matrix(self, report: MatrixReport, grid: bool = False, pivot: tuple[str, str] | None = None) -> None:
        out = self.out
        fi = report.flashinfer
        versions = ", ".join(dict.fromkeys(r.info.version for r in report.releases)) or fi.version
        # The releases judged; where one lies is the JSON's (`releases[].location`), not a header's.
        out.line(_bold("hprobe matrix"), f"  flashinfer {visible(versions)}  h_q {compact_set(report.heads)}")
        if report.targets.note:
            out.line(_dim("note:"), f" {visible(report.targets.note)}")
        for note in _matrix_notes(report):
            out.line(_dim("note:"), f" {visible(note)}")
        if report.shapes:
            self._model_shapes(report)
            return
        if pivot is not None:
            self._pivot(report, *pivot)
            return
        if len(report.releases) > 1:
            self._release_columns(report)
            return
        if grid:
            self._grid(report)
            return
        for kernel, group in groupby(report.results, key=lambda r: r.key):
            out.line()
            out.line(_bold(visible(kernel)))
            for result in group:
                self._matrix_line(result)

    def _accepted_lines(self, r: KernelSMResult, head: str, indent: str) -> None:
        """An SM where some counts were accepted: where they reach, what is not
        seen, what is pending, refused or undecided among them."""
        out = self.out
        by_entry: dict[str, list[int]] = {}
        for h in r.accepted():
            by_entry.setdefault(r.heads[h].entry or "?", []).append(h)
        qualifier = r.depth.qualifier(bool(r.unchecked))
        depth = f" ({qualifier})" if qualifier else ""
        out.line(head, (f"accepted {compact_set(r.accepted())}", "green"), _dim(depth))
        for entry, hs in by_entry.items():
            slow = r.heads[hs[0]].slow_path
            where = f" for {compact_set(hs)}" if len(by_entry) > 1 else ""
            tail: list[Part] = [" ", (visible(slow), "yellow")] if slow else []
            out.line(indent, _dim(f"reaches {visible(entry)}{where}"), *tail)
        for item in r.unchecked:
            out.line(indent, _dim(f"not seen on a CPU: {visible(item)}"))
        for hs, sample in r.shape_groups():
            out.line(indent, (f"some shapes only {compact_set(hs)}: {visible(sample.shapes or '')}", "yellow"))
        pending = [h for h in r.accepted() if r.heads[h].pending]
        if pending:
            # Accepted by every check read, never `ok`: the first count's reason stands for the rest.
            why = r.heads[pending[0]].pending or ""
            out.line(indent, (f"pending {compact_set(pending)}: {visible(why)}", "yellow"))
        self._rejected_lines(r, indent)
        unclear = r.by_outcome(Outcome.INCONCLUSIVE)
        if unclear:
            sample = r.heads[unclear[0]]
            out.line(indent, (f"inconclusive {compact_set(unclear)}: {visible(sample.reason or '')}", "cyan"))

    def _rejected_lines(self, r: KernelSMResult, indent: str) -> None:
        """The counts refused on an SM where others went on, one line per check."""
        for hs, sample in r.refusal_groups(Outcome.REJECTED):
            where = f" [{sample.location}]" if sample.location else ""
            self.out.line(
                indent,
                _dim(
                    f"rejected {compact_set(hs)}: {visible(sample.error_type)}: "
                    f"{visible(sample.message or '')}{visible(where)}"
                ),
            )

    def _matrix_line(self, r: KernelSMResult) -> None:
        out = self.out
        status = r.status
        head = f"  SM{r.sm:<4}"
        indent = "          "
        if status is Outcome.ACCEPTED:
            self._accepted_lines(r, head, indent)
        elif status is Outcome.INCONCLUSIVE and r.by_outcome(Outcome.REJECTED):
            # Some h_q were refused by checks the others passed; the others stopped
            # at what this machine cannot pass.
            unclear = r.by_outcome(Outcome.INCONCLUSIVE)
            sample = r.heads[unclear[0]]
            said = sample.reason or sample.message or ""
            where = f" [{sample.location}]" if sample.location and sample.location not in said else ""
            out.line(head, (f"inconclusive {compact_set(unclear)}", "cyan"), f"  {visible(said + where)}")
            self._rejected_lines(r, indent)
        else:
            # The evidence of the status itself: an SM whose validator-accepted h_q
            # meet an architecture check shows that check, not the validators'.
            sample = next((h for h in r.heads.values() if h.outcome is status), next(iter(r.heads.values())))
            detail = " ".join(
                filter(
                    None,
                    [
                        sample.error_type and f"{sample.error_type}:",
                        sample.message,
                        sample.location and f"[{sample.location}]",
                    ],
                )
            )
            if status is Outcome.INCONCLUSIVE:
                detail = f"{sample.reason}" + (f" [{sample.error_type}: {sample.message}]" if sample.error_type else "")
            elif status is Outcome.ABSENT:
                detail = sample.reason or ""
            out.line(head, (status.value, status.status_style), f"  {visible(detail)}")
            if status in (Outcome.UNSUPPORTED_ARCH, Outcome.UNSUPPORTED_CONFIG) and sample.reason:
                out.line(indent, _dim(visible(sample.reason)))
        if r.metadata:
            out.line(indent, _dim(f"metadata: {visible(_metadata_text(r.metadata))}"))
        for note in r.notes:
            out.line(indent, (f"note: {visible(note)}", "yellow" if note.startswith("disagreement") else "dim"))

    def _model_shapes(self, report: MatrixReport) -> None:
        """`matrix --model`: per kernel, SM and release, a row per model, TP and
        layer kind, with what one rank hands the kernel and its answer; each
        answer's evidence once, numbered, under its table."""
        several = len({a.release for a in report.shapes}) > 1
        gqa = any(a.shape.kv_heads is not None for a in report.shapes)
        columns: list[Column] = [("model", "left"), ("TP", "right")]
        columns += [("layer", "left"), ("q/kv heads", "right"), ("head dim", "right")] if gqa else [("h_q", "right")]
        columns += [("answer", "left"), ("depth", "left")]
        groups: dict[tuple[str, int, str], list[ShapeAnswer]] = {}
        for a in report.shapes:  # a backend swept per shape interleaves the kernels: gathered here
            groups.setdefault((a.kernel, a.sm, a.release), []).append(a)
        for (kernel, sm, release), group in groups.items():
            self.out.line()
            self.out.line(
                _bold(f"{visible(kernel)} · SM{sm}" + (f" · flashinfer {visible(release)}" if several else ""))
            )
            evidence: dict[str, int] = {}
            rows: list[Row] = []
            for a in group:
                shape = a.shape
                row: list[Cell] = [(visible(shape.model), ""), (str(shape.tp), "")]
                if gqa:
                    heads = shape.heads_said
                    sinks = " +sinks" if shape.sinks else ""
                    row += [(visible(shape.layer) + sinks, ""), (heads, ""), (str(shape.head_dim or ""), "")]
                else:
                    row.append((str(shape.heads), ""))
                said = a.evidence()
                mark = f" [{evidence.setdefault(said, len(evidence) + 1)}]" if said else ""
                if a.result is None:
                    row += [(f"not probed{mark}", "dim"), ("", "")]
                else:
                    outcome = a.result.outcome
                    depth = a.depth.value if a.depth and outcome is Outcome.ACCEPTED else ""
                    row += [(f"{outcome.mark} {outcome.value}{mark}", outcome.style), (depth, "dim")]
                rows.append(row)
            self.out.table(columns, rows)
            for said, n in evidence.items():
                self.out.line(_dim(f"  [{n}] {visible(said)}"))

    def _pivot(self, report: MatrixReport, rows: str, cols: str) -> None:
        """Two dimensions of the report against each other (h_q, sm, release, or an
        axis); a cell holds the accepted h_q, or a mark when h_q is a dimension."""
        from hprobe.report.pivot import pivot_cells

        row_values, col_values, cells = pivot_cells(report, rows, cols)
        if "heads" in (rows, cols):
            self.out.line(_dim("marks: " + Outcome.legend()))
        columns: list[Column] = [(rows, "right"), *((visible(value), "center") for value in col_values)]
        table_rows: list[Row] = []
        for rv in row_values:
            row: list[Cell] = [(visible(rv), "")]
            for cv in col_values:
                cell = cells.get((rv, cv))
                if cell is None:
                    row.append(("", "dim"))
                elif isinstance(cell, Outcome):
                    row.append((cell.mark, cell.style))
                else:
                    row.append(_status_cell(cell))
            table_rows.append(row)
        self.out.table(columns, table_rows)
        self._caveats(report)

    def _caveats(self, report: MatrixReport) -> None:
        """The qualifications of accepted cells: a grid or pivot shows marks,
        and the marks must not lose them. Each caveat once, after every
        variant x SM (and release) it qualifies."""
        several = len(report.releases) > 1
        # caveat -> (variant, SM) -> the releases it qualifies there, in order of first appearance
        where: dict[str, dict[tuple[str, int], list[str]]] = {}
        for rel in report.releases:
            for r in rel.results.values():
                for item in r.caveats():
                    releases = where.setdefault(item, {}).setdefault((r.key, r.sm), [])
                    if rel.info.version not in releases:
                        releases.append(rel.info.version)
        if where:
            self.out.line(("caveats on accepted cells", "yellow"))
            for item, places in where.items():
                self.out.line(_dim(f"  {_caveat_places(places, several)}: {visible(item)}"))

    def _release_columns(self, report: MatrixReport) -> None:
        columns: list[Column] = [
            ("kernel", "left"),
            ("SM", "left"),
            *((f"flashinfer {visible(rel.info.version)}", "left") for rel in report.releases),
        ]
        keys = list(dict.fromkeys(key for rel in report.releases for key in rel.results))
        table_rows: list[Row] = []
        for key in keys:
            row: list[Cell] = [(visible(key[0]), ""), (f"SM{key[1]}", "")]
            for rel in report.releases:
                r = rel.results.get(key)
                row.append(_status_cell(r) if r else ("–", "dim"))
            table_rows.append(row)
        self.out.table(columns, table_rows)
        self._caveats(report)

    def _grid(self, report: MatrixReport) -> None:
        """One grid per variant (and release): h_q down, SMs across. Narrow at any
        number of variants, where one wide grid of every variant x SM was not."""
        out = self.out
        out.line(_dim("marks: " + Outcome.legend()))  # before the grids: a reader meets the key first
        groups: dict[tuple[str, str], list[KernelSMResult]] = {}
        for rel in report.releases:
            for r in rel.results.values():
                groups.setdefault((rel.info.version, r.key), []).append(r)
        several_releases = len(report.releases) > 1
        for (version, key), results in groups.items():
            if len(groups) > 1:
                out.line(_bold(visible(key)), f"  flashinfer {visible(version)}" if several_releases else "")
            columns: list[Column] = [("h_q", "right"), *((f"SM{r.sm}", "center") for r in results)]
            # A run of consecutive h_q marked alike is one row (`9-15`): 256 rows of
            # mostly the same marks hid the few counts that differ.
            runs: list[tuple[int, int, list[Cell]]] = []
            for h in report.heads:
                marks: list[Cell] = []
                for r in results:
                    outcome = r.outcome(h)
                    marks.append((outcome.mark, outcome.style) if outcome is not None else (" ", ""))
                if runs and runs[-1][1] == h - 1 and runs[-1][2] == marks:
                    runs[-1] = (runs[-1][0], h, marks)
                else:
                    runs.append((h, h, marks))
            table_rows: list[Row] = [[(str(a) if a == b else f"{a}-{b}", ""), *marks] for a, b, marks in runs]
            out.table(columns, table_rows)
        self._caveats(report)

    # -- suggest -------------------------------------------------------------------------

    def suggest(self, result: SuggestReport) -> None:
        report, suggestions, patch = result.check, result.suggestions, result.patch
        out = self.out
        out.line(_bold("hprobe suggest"), f"  flashinfer {visible(report.releases_judged)}")
        for s in suggestions:
            out.line()
            out.line(
                _bold(visible(s.table)),
                f" · {visible(s.backend.name)} → {visible(s.backend.variant_key)}  ",
                _dim(visible(str(s.backend.where))),
            )
            out.line(f"  {visible(s.words())}")
            for ch in s.changes:
                if ch.current == ch.suggested:
                    continue
                now = "raises" if ch.current is None else str(ch.current)
                then = "no safe count" if ch.suggested is None else str(ch.suggested)
                gain = f" ({ch.saving:.3g}× less compute)" if ch.saving else ""
                out.line(f"    {visible(ch.model)} TP{ch.tp} n={ch.n}: {visible(now)} → {visible(then)}{gain}")
            if s.pins is not None:
                for line in s.pins.words():
                    out.line("  ", _bold("pin"), f" {visible(line)}")
            elif s.pin_note:
                out.line("  ", _dim(f"pin: {visible(s.pin_note)}"))
        if patch is not None:
            out.line()
            for line in patch.changed:
                out.line(_bold("patch"), f" {visible(line)}")
            for line in patch.not_rewritten:
                out.line(("not rewritten", "yellow"), f" {visible(line)}")
        # The answer first; what it rests on after it.
        if report.notes:
            out.line()
        for note in report.notes:
            out.line(_dim("note:"), f" {visible(note)}")

    # -- diff and bisect ---------------------------------------------------------------

    def diff(self, result: DiffReport) -> None:
        out = self.out
        old, new = result.old, result.new
        out.line(_bold("hprobe diff"), f"  flashinfer {visible(old['version'])} → {visible(new['version'])}")
        for parts in self._changes(result):
            out.line(*parts)
        out.line(f"{'changed' if result.changed else 'no change'}  → exit {result.exit_code}")

    def _changes(self, result: DiffReport, changed_only: bool = False) -> list[list[Part]]:
        """One line per kernel x SM of a diff (`diff`, `check --baseline`)."""
        old = result.old
        lines = []
        for ch in result.changes:
            head = f"  {visible(ch.kernel)} SM{ch.sm}: "
            parts: list[list[Part]] = []
            if ch.became_accepted:
                parts.append([(f"became accepted {compact_set(list(ch.became_accepted))}", "green")])
            if ch.became_rejected:
                refusal = ch.new_refusal or {}
                why = " ".join(
                    filter(
                        None,
                        [
                            refusal.get("error_type") and f"{refusal['error_type']}:",
                            refusal.get("message"),
                            refusal.get("location") and f"[{refusal['location']}]",
                        ],
                    )
                )
                parts.append(
                    [
                        (f"became rejected {compact_set(list(ch.became_rejected))}", "red"),
                        *([f" ({visible(why)})"] if why else []),
                    ]
                )
            if ch.appeared:
                parts.append([("present from here on", "green"), f" (absent in {visible(old['version'])})"])
            if ch.vanished:
                parts.append([("absent here", "red"), f" (present in {visible(old['version'])})"])
            if ch.unknown:
                parts.append([(f"inconclusive {compact_set(list(ch.unknown))}", "cyan")])
            if not parts:
                if changed_only:
                    continue
                parts.append([_dim(f"unchanged ({visible(ch.new_status)} {compact_set(list(ch.new_accepted))})")])
            line: list[Part] = [head]
            for i, part in enumerate(parts):
                line.extend((["; "] if i else []) + part)
            lines.append(line)
        return lines

    def bisect(self, result: BisectReport) -> None:
        out = self.out
        out.line(
            _bold("hprobe bisect"),
            f"  {visible(result.kernel)} SM{result.sm} h_q={result.heads}  "
            f"releases {visible(result.range[0])}..{visible(result.range[1])} ({visible(result.releases_in_range)}); "
            f"{visible(result.method)}",
        )
        for p in result.probed:
            detail = p.entry or p.message or ""
            if p.outcome == Outcome.INCONCLUSIVE.value:
                detail = p.reason or detail
            style = {"accepted": "green", "rejected": "red"}.get(p.outcome, "cyan")
            out.line(f"  {visible(p.version):<14} ", (f"{visible(p.outcome):<16}", style), " ", _dim(visible(detail)))
        for accepted_in, then_not in result.non_monotonic:
            out.line(("non-monotonic:", "bold red"), f" accepted in {visible(accepted_in)}, not in {visible(then_not)}")
        if result.first_accepting:
            out.line(
                "first accepting release: ",
                _bold(visible(result.first_accepting)),
                f"; last rejecting: {visible(result.last_rejecting)}"
                if result.last_rejecting
                else " (the start of the range)",
            )
        else:
            out.line("no probed release in the range accepts it")
        out.line(f"→ exit {result.exit_code}")

    # -- cache ------------------------------------------------------------------------

    def cache(self, report: CacheReport) -> None:
        out, found = self.out, report.usage
        out.line(_bold("hprobe cache"), f"  {visible(str(found.root))}")
        if report.action != "show":
            kept = f"; {report.in_use} in use by a running hprobe, kept" if report.in_use else ""
            if report.left:
                kept += f"; {report.left} could not be removed (is the cache read-only?)"
            out.line(
                f"{report.action}: removed {report.removed} entr{'ies' if report.removed != 1 else 'y'}, freed "
                f"{human_size(report.freed)}{kept}"
            )
        rows: list[Row] = [
            [(visible(release), ""), (human_size(size), "")] for release, size in found.by_release().items()
        ]
        if rows:
            out.table([("release", "left"), ("size", "right")], rows)
        out.line(
            f"total {human_size(found.total)}",
            _dim("  (as du -s counts it; `hprobe cache prune --help` to free space)"),
        )

    # -- plain records ---------------------------------------------------------------

    def kernels(self, report: KernelsReport) -> None:
        out = self.out
        for row in report.rows:
            present = {True: "yes", False: "absent", None: "no flashinfer installed"}[
                row["installed_flashinfer_has_entry_point"]
            ]
            out.line(_bold(visible(row["id"])), f"  {visible(row['entry_point'])}")
            out.line(f"    {visible(row['summary'])}")
            out.line(f"    SMs {', '.join(map(str, row['sms']))} · installed flashinfer: {present}")
            axes = []
            for a in row["axes"]:
                choices = "|".join(map(str, a["choices"]))
                axes.append(
                    f"{a['name']}={a['default']}"
                    + (f" (swept: {choices})" if a["sweep"] else f" ({choices})" if choices else "")
                )
            if axes:
                out.line(f"    axes: {visible(', '.join(axes))}")
            if "releases" in row:
                out.line(f"    releases with it: {visible(row['releases'])}")
                if row["releases_without"]:
                    out.line("    ", _dim(f"absent in: {visible(', '.join(row['releases_without']))}"))

    def data(self, payload: dict[str, Any], title: str) -> None:
        out = self.out
        out.line(_bold(visible(title)))
        for key, value in payload.items():
            out.line(f"  {visible(key):<22} {visible(str(value))}")


def _joined(parts: list[Part], separator: str) -> list[Part]:
    joined: list[Part] = []
    for i, part in enumerate(parts):
        if i:
            joined.append(separator)
        joined.append(part)
    return joined


def _status_cell(r: KernelSMResult) -> Cell:
    status = r.status
    if status is Outcome.ACCEPTED:
        unclear = r.by_outcome(Outcome.INCONCLUSIVE)
        text = compact_set(r.accepted()) + (f" ?{compact_set(unclear)}" if unclear else "")
        return (text, "green")
    return (status.value, status.status_style)


def _metadata_text(meta: dict[str, Any]) -> str:
    parts = [meta["source"]]
    if "sm_supported" in meta:
        parts.append("SM supported" if meta["sm_supported"] else "SM not supported")
    if "heads" in meta:
        parts.append(f"h_q {compact_set(meta['heads'])}")
    return ": ".join(parts[:1]) + (" " + ", ".join(parts[1:]) if len(parts) > 1 else "")


# The default `check` text fits a screen: at most this many lines where nothing wraps.
SCREEN_LINES = 60
_SCREEN_CAPS = {"advice": 24, "notes": 4, "paths": 5}


class _Counted:
    """A writer that counts the lines it has written (a plain table: its rows
    and the four lines around them)."""

    def __init__(self, out: Writer):
        self.out = out
        self.count = 0

    def line(self, *parts: Part) -> None:
        self.count += 1
        self.out.line(*parts)

    def table(self, columns: list[Column], rows: list[Row]) -> None:
        self.count += len(rows) + 4
        self.out.table(columns, rows)


def _needs_action(f: Finding, strict: bool) -> bool:
    """A row the default view shows: it fails the gate, is undecided, or a waiver accepts it."""
    return f.fails(strict) or f.undecided or (f.waiver is not None and f.verdict is not Verdict.OK)


def _shared_note(rows: list[Finding]) -> str | None:
    firsts = {f.notes[0] if f.notes else None for f in rows}
    return next(iter(firsts)) if len(firsts) == 1 and len(rows) > 1 else None


def _group_overhead(rows: list[Finding]) -> int:
    """Lines a group of rows takes besides its rows (as `_findings` writes them)."""
    extra = 2 + 4  # a blank and the title; the table's frame
    extra += _shared_note(rows) is not None
    extra += rows[0].reach is not None
    extra += len({f.sm for f in rows if f.evidence is not None and f.evidence.entry})
    if any("[" in f.source for f in rows):
        extra += len({f.source for f in rows})
    extra += len({u for f in rows for u in f.unchecked})
    extra += sum(1 for a, b in zip(rows, rows[1:], strict=False) if a.sm != b.sm)  # section breaks
    return extra


def _rows_that_fit(rows: list[Finding], budget: int) -> int:
    """How many of `rows` fit in `budget` lines with their group's frame (0: none).
    The lines a prefix takes only grow with it, so the count is bisected: a
    vLLM tree's groups run to hundreds of rows."""
    fits, over = 0, len(rows) + 1
    while over - fits > 1:
        count = (fits + over) // 2
        if _group_overhead(rows[:count]) + count <= budget:
            fits = count
        else:
            over = count
    return fits


def _call_paths_lines(report: CheckReport, cap: int) -> int:
    unresolved = len(report.unresolved_paths)
    return 0 if not unresolved else 2 + min(unresolved, cap) + (unresolved > cap)


def _verdict_line(report: CheckReport) -> list[Part]:
    """What the gate says, with the counts it rests on: the first and the last line of `check`."""
    code = report.exit_code
    word = {0: ("pass", "bold green"), 1: ("fail", "bold red")}.get(code, ("undecided", "bold cyan"))
    gate = report.gate()
    parts: list[Part] = [word, ": "]
    # "pass: 56 ok, 22 broken (22 waived)": what a waiver covers is said beside
    # its verdict, so a pass beside broken findings reads as what it is.
    parts += _joined([(gate.said(v), v.style) for v in gate.counts], ", ") or ["nothing checked"]
    styles = {"expired": "bold red", "assumed": "blue", "not_judged": "cyan", "trusted": "yellow"}
    for phrase, kind in gate.beside():
        parts += [", ", (phrase, styles[kind])]
    return [*parts, f"  → exit {code}{' (--strict)' if report.strict else ''}"]


def human_size(size: int) -> str:
    """Binary units, as `du -h` prints them."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError


def render(report: object, options: RenderOptions) -> str:
    return render_with(TextFormatter, report, options)


def _caveat_places(places: dict[tuple[str, int], list[str]], several: bool) -> str:
    """`A SM100/SM120, B SM100 on 0.6.14, 0.7.4`: the variants and SMs a
    caveat qualifies, with the releases once where they are the same for each."""
    releases = list(places.values())
    if several and any(r != releases[0] for r in releases):
        return ", ".join(
            f"{visible(key)} SM{sm} on {', '.join(visible(v) for v in rels)}" for (key, sm), rels in places.items()
        )
    sms: dict[str, list[int]] = {}
    for key, sm in places:
        sms.setdefault(key, []).append(sm)
    named = ", ".join(f"{visible(key)} {'/'.join(f'SM{sm}' for sm in on)}" for key, on in sms.items())
    return f"{named} on {', '.join(visible(v) for v in releases[0])}" if several else named
