"""Terminal output through rich: colour on a terminal, plain text when piped or NO_COLOR."""

from __future__ import annotations

import os
import sys
from itertools import groupby
from typing import TYPE_CHECKING, Any

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from hprobe.model.heads import compact_set
from hprobe.model.outcome import KernelSMResult, Outcome
from hprobe.model.sm import sm_names
from hprobe.model.verdict import Finding, Verdict
from hprobe.report.formats.base import Formatter
from hprobe.system.escaping import text as escape
from hprobe.system.escaping import visible

if TYPE_CHECKING:
    from rich.table import Table

    from hprobe.model.advice import TableAdvice
    from hprobe.report.model import BisectReport, CheckReport, DiffReport, MatrixReport, SuggestReport



# Width for output that is not a terminal (CI logs, pipes): wide enough that no
# name is cut to `…` and no message is split; COLUMNS still wins when set.
UNBOUNDED_WIDTH = 4000


def make_console(stderr: bool = False) -> Console:
    plain = bool(os.environ.get("NO_COLOR"))
    stream = sys.stderr if stderr else sys.stdout
    columns = os.environ.get("COLUMNS", "").strip()
    width = int(columns) if columns.isdigit() and 0 < int(columns) <= UNBOUNDED_WIDTH else None
    if width is None:
        # COLUMNS unset or unusable (0, huge, not a number): the terminal's own
        # width, or unbounded for a pipe. Rich would read COLUMNS=0 as no room.
        width = UNBOUNDED_WIDTH
        if _isatty(stream):
            try:
                width = os.get_terminal_size(stream.fileno()).columns or 80
            except (OSError, ValueError, AttributeError):
                width = 80
    # emoji=False: a name such as ":warning:" from a consumer's table prints as written.
    return _Console(stderr=stderr, no_color=plain, highlight=False, emoji=False, width=width)


# A table: its columns (header, justify), then its rows; None starts a section.
Column = tuple[str, str]
Row = list[Text] | None


def print_table(console: Console, columns: list[Column], rows: list[Row]) -> None:
    """A rich SIMPLE_HEAD table. Where no colour is written (a pipe, a CI log)
    and the table fits the width, its lines are laid out here, as rich lays
    them out (`plain_table_lines`; a test holds the two equal): rich's layout
    measures and renders every cell and was most of a warm check's time."""
    if console.color_system is None:
        lines = plain_table_lines(columns, rows, console.width)
        if lines is not None:
            console.print(Text("\n".join(lines)), soft_wrap=True)
            return
    console.print(rich_table(columns, rows))


def rich_table(columns: list[Column], rows: list[Row]) -> Table:
    from rich.table import Table  # here: a piped report lays out its tables without it

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for header, justify in columns:
        table.add_column(Text(header), justify=justify, overflow="fold")  # type: ignore[arg-type]
    for row in rows:
        if row is None:
            table.add_section()
        else:
            table.add_row(*row)
    return table


def plain_table_lines(columns: list[Column], rows: list[Row], width: int) -> list[str] | None:
    """The lines rich writes for `rich_table` without colour, or None where
    rich would wrap or fold a cell (wider than `width`, a cell of several lines)."""
    cells = [[text.plain for text in row] if row is not None else None for row in rows]
    widths = [cell_len(header) for header, _ in columns]
    for row_cells in cells:
        if row_cells is None:
            continue
        if len(row_cells) != len(columns):
            return None
        for i, value in enumerate(row_cells):
            if "\n" in value:
                return None
            widths[i] = max(widths[i], cell_len(value))
    total = 2 + sum(widths) + 3 * (len(columns) - 1)
    if total > width:
        return None
    blank = " " * total

    def line(values: list[str]) -> str:
        parts = []
        for value, w, (_, justify) in zip(values, widths, columns, strict=True):
            if justify != "left":
                value = value.rstrip()  # as rich does before it aligns right or centre
            room = w - cell_len(value)
            if justify == "right":
                parts.append(" " * room + value)
            elif justify == "center":
                parts.append(" " * (room // 2) + value + " " * (room - room // 2))
            else:
                parts.append(value + " " * room)
        return " " + "   ".join(parts) + " "

    lines = [blank, line([header for header, _ in columns]), " " + "─" * (total - 2) + " "]
    for row_cells in cells:
        lines.append(blank if row_cells is None else line(row_cells))
    lines.append(blank)
    return lines


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # Rich would exit 1 here, which a CI gate reads as "broken"; the CLI
        # ends a closed pipe quietly with the status other tools give it.
        raise BrokenPipeError()


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _merged_notes(report: CheckReport) -> list[str]:
    """Notes for the summary view: a release's requirements that are not
    installed on one line, where its first one stood (--details shows each with
    how to install it)."""
    missing = {u.note(r.info.version): (r.info.version, u.requirement) for r in report.releases for u in r.unmet if u.installed is None}
    unmet: dict[str, list[str]] = {}
    slots: list[tuple[str | None, str]] = []  # (release whose requirements go here, or None: the note itself)
    for note in report.notes:
        if note not in missing:
            slots.append((None, note))
            continue
        version, requirement = missing[note]
        if version not in unmet:
            slots.append((version, ""))
        unmet.setdefault(version, []).append(requirement)
    return [note if version is None else f"flashinfer {version} requires {', '.join(unmet[version])}, not installed here (--details for how to install)" for version, note in slots]


class TextFormatter(Formatter):
    def __init__(self, console: Console | None = None):
        self.console = console or make_console()

    # -- check ---------------------------------------------------------------------

    def check(self, report: CheckReport) -> None:
        c = self.console
        fi = report.flashinfer
        sms = ", ".join(str(sm) for sm in report.targets.sms)
        versions = ", ".join(dict.fromkeys(r.info.version for r in report.releases)) or fi.version
        where = "  " + ", ".join(f"{r.info.version}: {r.info.location}" for r in report.releases) if self.details else ""
        c.print(f"[bold]hprobe check[/bold]  flashinfer {escape(versions)}  targets: {sms}{escape(where)}")
        self._advice(report.advice)
        # The answer first; what it rests on after it.
        notes = report.notes if self.details else _merged_notes(report)
        if notes:
            c.print()
        for note in notes:
            c.print(f"[dim]note:[/dim] {escape(note)}")
        hidden = 0
        for (table, backend), group in groupby(report.findings, key=lambda f: (f.table, f.backend)):
            rows = list(group)
            if not self.details:
                # The summary said it; the rows worth reading are those that are not ok.
                hidden += sum(f.verdict is Verdict.OK for f in rows)
                rows = [f for f in rows if f.verdict is not Verdict.OK]
                if not rows:
                    continue
            self._findings(table, backend, rows)
        c.print()
        if hidden:
            c.print(f"[dim]{hidden} ok rows not shown; --details shows every row[/dim]")
        if report.drift:
            drift = report.drift
            c.print(f"[bold]drift against the baseline[/bold]  flashinfer {escape(drift.old['version'])} → {escape(drift.new['version'])}")
            lines = self._changes(drift, changed_only=True)
            for line in lines or ["  [dim]no accepted set changed[/dim]"]:
                c.print(line)
            c.print()
        counts: dict[Verdict, int] = {}
        for f in report.findings:
            counts[f.verdict] = counts.get(f.verdict, 0) + 1
        summary = ", ".join(
            f"[{v.style}]{counts[v]} {v.value}[/]" for v in Verdict if v in counts
        ) or "nothing checked"
        c.print(f"{summary}  → exit {report.exit_code}{' (--strict)' if report.strict else ''}")

    def _advice(self, advice: list[TableAdvice]) -> None:
        """The summary: one line per table x backend x SMs, with what to do."""
        c = self.console
        if not advice:
            return
        c.print()
        c.print("[bold]summary[/bold]")
        for table in advice:
            c.print(f"  [bold]{escape(table.table)}[/bold]  [dim]{escape(table.scope)}[/dim]")
            for a in table.backends:
                tally = ", ".join(f"[{Verdict(v).style}]{n} {v}[/]" for v, n in a.counts.items())
                sms = sm_names(a.sms)
                label = a.backend if f"({sms})" in a.backend else f"{a.backend} {sms}"  # SMs said once
                c.print(f"    {escape(label)}: {tally} → {escape(a.action)}")
        if any(not table.pin for table in advice):
            c.print("  [dim]no pin: add requires_flashinfer (or --pin) for advice that holds across the releases you allow[/dim]")

    def _findings(self, table: str, backend: str, rows: list[Finding]) -> None:
        """One table x backend: a row per SM x model x TP, then what the rows rest on."""
        c = self.console
        c.print()
        c.print(f"[bold]{escape(table)}[/bold] · {escape(backend)} → {escape(rows[0].kernel)}")
        columns: list[Column] = [("SM", "left"), ("model", "left"), ("TP", "right"), ("n", "right"),
                                 ("padded", "right"), ("verdict", "left"), ("evidence", "left")]
        table_rows: list[Row] = []
        entries: dict[int, set[str]] = {}
        previous_sm = None
        for f in rows:
            if previous_sm is not None and f.sm != previous_sm:
                table_rows.append(None)
            previous_sm = f.sm
            if f.evidence is not None and f.evidence.entry:
                entries.setdefault(f.sm, set()).add(f.evidence.entry)
            table_rows.append([
                Text(f"SM{f.sm}"),
                Text(visible(f.model)),
                Text(str(f.tp)),
                Text(str(f.n)),
                Text(visible(f.padded_text)),
                Text(visible(f.label), style=f.verdict.style),
                Text(visible(f.explain())),
            ])
        print_table(c, columns, table_rows)
        if rows[0].reach is not None:
            c.print(f"  [yellow]{escape(rows[0].reach.words())}[/yellow]")
        for sm, names in entries.items():
            c.print(f"  [dim]SM{sm} reaches {escape(', '.join(sorted(names)))}[/dim]")
        if any("[" in f.source for f in rows):
            # A rule evaluated per SM, phase and setting: which branch padded which count.
            by_branch: dict[str, list[int]] = {}
            for f in rows:
                by_branch.setdefault(f.source, []).append(f.n)
            for source, ns in by_branch.items():
                c.print(f"  [dim]n={escape(compact_set(ns))} padded by {escape(source)}[/dim]")
        for item in dict.fromkeys(u for f in rows for u in f.unchecked):
            c.print(f"  [dim]validators only: {escape(item)}[/dim]")

    # -- matrix --------------------------------------------------------------------

    def matrix(self, report: MatrixReport, grid: bool = False, pivot: tuple[str, str] | None = None) -> None:
        c = self.console
        fi = report.flashinfer
        c.print(
            f"[bold]hprobe matrix[/bold]  flashinfer {escape(fi.version)}  ({escape(fi.location)})  "
            f"h_q {compact_set(report.heads)}"
        )
        if report.targets.note:
            c.print(f"[dim]note:[/dim] {escape(report.targets.note)}")
        for rel in report.releases:
            for note in rel.notes:
                c.print(f"[dim]note:[/dim] {escape(note)}")
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
            c.print()
            c.print(f"[bold]{escape(kernel)}[/bold]")
            for result in group:
                self._matrix_line(result)

    def _matrix_line(self, r: KernelSMResult) -> None:
        c = self.console
        status = r.status
        head = f"  SM{r.sm:<4}"
        if status is Outcome.ACCEPTED:
            by_entry: dict[str, list[int]] = {}
            for h in r.accepted():
                by_entry.setdefault(r.heads[h].entry or "?", []).append(h)
            qualifier = r.depth.qualifier(bool(r.unchecked))
            depth = f" ({qualifier})" if qualifier else ""
            c.print(f"{head}[green]accepted {compact_set(r.accepted())}[/green][dim]{depth}[/dim]")
            for entry, hs in by_entry.items():
                slow = r.heads[hs[0]].slow_path
                where = f" for {compact_set(hs)}" if len(by_entry) > 1 else ""
                c.print(f"          [dim]reaches {escape(entry)}{where}[/dim]" + (f" [yellow]{escape(slow)}[/yellow]" if slow else ""))
            for item in r.unchecked:
                c.print(f"          [dim]not seen on a CPU: {escape(item)}[/dim]")
            for hs, sample in r.refusal_groups(Outcome.REJECTED):
                where = f" [{sample.location}]" if sample.location else ""
                c.print(f"          [dim]rejected {compact_set(hs)}: {escape(sample.error_type)}: {escape(sample.message or '')}{escape(where)}[/dim]")
            unclear = r.by_outcome(Outcome.INCONCLUSIVE)
            if unclear:
                sample = r.heads[unclear[0]]
                c.print(f"          [cyan]inconclusive {compact_set(unclear)}: {escape(sample.reason or '')}[/cyan]")
        elif status is Outcome.INCONCLUSIVE and r.by_outcome(Outcome.REJECTED):
            # Some h_q were refused by checks the others passed; the others stopped
            # at what this machine cannot pass.
            unclear = r.by_outcome(Outcome.INCONCLUSIVE)
            sample = r.heads[unclear[0]]
            said = sample.reason or sample.message or ""
            where = f" [{sample.location}]" if sample.location and sample.location not in said else ""
            c.print(f"{head}[cyan]inconclusive {compact_set(unclear)}[/cyan]  {escape(said + where)}")
            for hs, refused in r.refusal_groups(Outcome.REJECTED):
                where = f" [{refused.location}]" if refused.location else ""
                c.print(f"          [dim]rejected {compact_set(hs)}: {escape(refused.error_type)}: {escape(refused.message or '')}{escape(where)}[/dim]")
        else:
            sample = next(iter(r.heads.values()))
            style = status.status_style
            detail = " ".join(filter(None, [sample.error_type and f"{sample.error_type}:", sample.message, sample.location and f"[{sample.location}]"]))
            if status is Outcome.INCONCLUSIVE:
                detail = f"{sample.reason}" + (f" [{sample.error_type}: {sample.message}]" if sample.error_type else "")
            elif status is Outcome.ABSENT:
                detail = sample.reason or ""
            c.print(f"{head}[{style}]{status.value}[/{style}]  {escape(detail)}")
            if status in (Outcome.UNSUPPORTED_ARCH, Outcome.UNSUPPORTED_CONFIG) and sample.reason:
                c.print(f"          [dim]{escape(sample.reason)}[/dim]")
        if r.metadata:
            c.print(f"          [dim]metadata: {escape(_metadata_text(r.metadata))}[/dim]")
        for note in r.notes:
            style = "yellow" if note.startswith("disagreement") else "dim"
            c.print(f"          [{style}]note: {escape(note)}[/{style}]")

    def _pivot(self, report: MatrixReport, rows: str, cols: str) -> None:
        """Two dimensions of the report against each other (h_q, sm, release, or an
        axis); a cell holds the accepted h_q, or a mark when h_q is a dimension."""
        from hprobe.report.pivot import pivot_cells

        row_values, col_values, cells = pivot_cells(report, rows, cols)
        columns: list[Column] = [(rows, "right"), *((visible(value), "center") for value in col_values)]
        table_rows: list[Row] = []
        for rv in row_values:
            row: list[Text] = [Text(visible(rv))]
            for cv in col_values:
                cell = cells.get((rv, cv))
                if cell is None:
                    row.append(Text("", style="dim"))
                elif isinstance(cell, Outcome):
                    mark, style = cell.mark, cell.style
                    row.append(Text(mark, style=style))
                else:
                    row.append(_status_cell(cell))
            table_rows.append(row)
        print_table(self.console, columns, table_rows)
        if "heads" in (rows, cols):
            self.console.print(f"[dim]{Outcome.legend()}[/dim]")
        self._caveats(report)

    def _caveats(self, report: MatrixReport) -> None:
        """The qualifications of accepted cells, once per variant x SM x release:
        a grid or pivot shows marks, and the marks must not lose them."""
        several = len(report.releases) > 1
        lines = [
            f"  {escape(r.key)} SM{r.sm}{f' on {escape(rel.info.version)}' if several else ''}: {escape(item)}"
            for rel in report.releases
            for r in rel.results.values()
            for item in r.caveats()
        ]
        if lines:
            self.console.print("[yellow]caveats on accepted cells[/yellow]")
            for line in dict.fromkeys(lines):
                self.console.print(f"[dim]{line}[/dim]")

    def _release_columns(self, report: MatrixReport) -> None:
        columns: list[Column] = [("kernel", "left"), ("SM", "left"), *((f"flashinfer {visible(rel.info.version)}", "left") for rel in report.releases)]
        keys = list(dict.fromkeys(key for rel in report.releases for key in rel.results))
        table_rows: list[Row] = []
        for key in keys:
            row: list[Text] = [Text(visible(key[0])), Text(f"SM{key[1]}")]
            for rel in report.releases:
                r = rel.results.get(key)
                row.append(_status_cell(r) if r else Text("–", style="dim"))
            table_rows.append(row)
        print_table(self.console, columns, table_rows)
        self._caveats(report)

    def _grid(self, report: MatrixReport) -> None:
        """One grid per variant (and release): h_q down, SMs across. Narrow at any
        number of variants, where one wide grid of every variant x SM was not."""
        c = self.console
        groups: dict[tuple[str, str], list[KernelSMResult]] = {}
        for rel in report.releases:
            for r in rel.results.values():
                groups.setdefault((rel.info.version, r.key), []).append(r)
        several_releases = len(report.releases) > 1
        for (version, key), results in groups.items():
            if len(groups) > 1:
                c.print(f"[bold]{escape(key)}[/bold]" + (f"  flashinfer {escape(version)}" if several_releases else ""))
            columns: list[Column] = [("h_q", "right"), *((f"SM{r.sm}", "center") for r in results)]
            table_rows: list[Row] = []
            for h in report.heads:
                row: list[Text] = [Text(str(h))]
                for r in results:
                    outcome = r.outcome(h)
                    mark, style = (outcome.mark, outcome.style) if outcome is not None else (" ", "")
                    row.append(Text(mark, style=style))
                table_rows.append(row)
            print_table(c, columns, table_rows)
        c.print(f"[dim]{Outcome.legend()}[/dim]")
        self._caveats(report)

    # -- suggest -------------------------------------------------------------------------

    def suggest(self, result: SuggestReport) -> None:
        report, suggestions, patch = result.check, result.suggestions, result.patch
        c = self.console
        releases = ", ".join(r.info.version for r in report.releases) or report.flashinfer.version
        c.print(f"[bold]hprobe suggest[/bold]  flashinfer {escape(releases)}")
        for s in suggestions:
            c.print()
            c.print(f"[bold]{escape(s.table)}[/bold] · {escape(s.backend.name)} → {escape(s.backend.variant_key)}  [dim]{escape(str(s.backend.where))}[/dim]")
            c.print(f"  {escape(s.words())}")
            for ch in s.changes:
                if ch.current == ch.suggested:
                    continue
                now = "raises" if ch.current is None else str(ch.current)
                then = "no safe count" if ch.suggested is None else str(ch.suggested)
                gain = f" ({ch.saving:.3g}× less compute)" if ch.saving else ""
                c.print(f"    {escape(ch.model)} TP{ch.tp} n={ch.n}: {escape(now)} → {escape(then)}{gain}")
            if s.pins is not None:
                for line in s.pins.words():
                    c.print(f"  [bold]pin[/bold] {escape(line)}")
            elif s.pin_note:
                c.print(f"  [dim]pin: {escape(s.pin_note)}[/dim]")
        if patch is not None:
            c.print()
            for line in patch.changed:
                c.print(f"[bold]patch[/bold] {escape(line)}")
            for line in patch.not_rewritten:
                c.print(f"[yellow]not rewritten[/yellow] {escape(line)}")
        # The answer first; what it rests on after it.
        if report.notes:
            c.print()
        for note in report.notes:
            c.print(f"[dim]note:[/dim] {escape(note)}")

    # -- diff and bisect ---------------------------------------------------------------

    def diff(self, result: DiffReport) -> None:
        c = self.console
        old, new = result.old, result.new
        c.print(f"[bold]hprobe diff[/bold]  flashinfer {escape(old['version'])} → {escape(new['version'])}")
        for line in self._changes(result):
            c.print(line)
        c.print(f"{'changed' if result.changed else 'no change'}  → exit {result.exit_code}")

    def _changes(self, result: DiffReport, changed_only: bool = False) -> list[str]:
        """One line per kernel x SM of a diff (`diff`, `check --baseline`)."""
        old = result.old
        lines = []
        for ch in result.changes:
            head = f"  {escape(ch.kernel)} SM{ch.sm}: "
            parts = []
            if ch.became_accepted:
                parts.append(f"[green]became accepted {compact_set(list(ch.became_accepted))}[/green]")
            if ch.became_rejected:
                refusal = ch.new_refusal or {}
                why = " ".join(filter(None, [refusal.get("error_type") and f"{refusal['error_type']}:", refusal.get("message"), refusal.get("location") and f"[{refusal['location']}]"]))
                parts.append(f"[red]became rejected {compact_set(list(ch.became_rejected))}[/red]" + (f" ({escape(why)})" if why else ""))
            if ch.appeared:
                parts.append(f"[green]present from here on[/green] (absent in {escape(old['version'])})")
            if ch.vanished:
                parts.append(f"[red]absent here[/red] (present in {escape(old['version'])})")
            if ch.unknown:
                parts.append(f"[cyan]inconclusive {compact_set(list(ch.unknown))}[/cyan]")
            if not parts:
                if changed_only:
                    continue
                parts.append(f"[dim]unchanged ({ch.new_status} {compact_set(list(ch.new_accepted))})[/dim]")
            lines.append(head + "; ".join(parts))
        return lines

    def bisect(self, result: BisectReport) -> None:
        c = self.console
        c.print(
            f"[bold]hprobe bisect[/bold]  {escape(result.kernel)} SM{result.sm} h_q={result.heads}  "
            f"releases {escape(result.range[0])}..{escape(result.range[1])} ({escape(result.releases_in_range)}); {escape(result.method)}"
        )
        for p in result.probed:
            detail = p.entry or p.message or ""
            if p.outcome == Outcome.INCONCLUSIVE.value:
                detail = p.reason or detail
            style = {"accepted": "green", "rejected": "red"}.get(p.outcome, "cyan")
            c.print(f"  {escape(p.version):<14} [{style}]{escape(p.outcome):<16}[/{style}] [dim]{escape(detail)}[/dim]")
        for accepted_in, then_not in result.non_monotonic:
            c.print(f"[bold red]non-monotonic:[/bold red] accepted in {escape(accepted_in)}, not in {escape(then_not)}")
        if result.first_accepting:
            c.print(
                f"first accepting release: [bold]{escape(result.first_accepting)}[/bold]"
                + (f"; last rejecting: {escape(result.last_rejecting)}" if result.last_rejecting else " (the start of the range)")
            )
        else:
            c.print("no probed release in the range accepts it")
        c.print(f"→ exit {result.exit_code}")

    # -- plain records ---------------------------------------------------------------

    def kernels(self, rows: list[dict[str, Any]]) -> None:
        c = self.console
        for row in rows:
            present = {True: "yes", False: "absent", None: "no flashinfer installed"}[row["installed_flashinfer_has_entry_point"]]
            c.print(f"[bold]{escape(row['id'])}[/bold]  {escape(row['entry_point'])}")
            c.print(f"    {escape(row['summary'])}")
            c.print(f"    SMs {', '.join(map(str, row['sms']))} · installed flashinfer: {present}")
            axes = []
            for a in row["axes"]:
                choices = "|".join(map(str, a["choices"]))
                axes.append(f"{a['name']}={a['default']}" + (f" (swept: {choices})" if a["sweep"] else f" ({choices})" if choices else ""))
            if axes:
                c.print(f"    axes: {escape(', '.join(axes))}")
            if "releases" in row:
                c.print(f"    releases with it: {escape(row['releases'])}")
                if row["releases_without"]:
                    c.print(f"    [dim]absent in: {escape(', '.join(row['releases_without']))}[/dim]")

    def data(self, payload: dict[str, Any], title: str) -> None:
        c = self.console
        c.print(f"[bold]{escape(title)}[/bold]")
        for key, value in payload.items():
            c.print(f"  {escape(key):<22} {escape(str(value))}")


def _status_cell(r: KernelSMResult) -> Text:
    status = r.status
    if status is Outcome.ACCEPTED:
        unclear = r.by_outcome(Outcome.INCONCLUSIVE)
        text = compact_set(r.accepted()) + (f" ?{compact_set(unclear)}" if unclear else "")
        return Text(text, style="green")
    return Text(status.value, style=status.status_style)




def _metadata_text(meta: dict[str, Any]) -> str:
    parts = [meta["source"]]
    if "sm_supported" in meta:
        parts.append("SM supported" if meta["sm_supported"] else "SM not supported")
    if "heads" in meta:
        parts.append(f"h_q {compact_set(meta['heads'])}")
    return ": ".join(parts[:1]) + (" " + ", ".join(parts[1:]) if len(parts) > 1 else "")
