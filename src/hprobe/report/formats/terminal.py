"""The rich side of text output: a console sized for the stream, and lines
and tables through it (colour and wrapping on a terminal)."""

from __future__ import annotations

import os
import sys
from typing import TextIO

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from hprobe.report.formats.layout import UNBOUNDED_WIDTH, Column, Part, Row, isatty, plain_table_lines

MIN_WIDTH = 60


def make_console(stderr: bool = False, stream: TextIO | None = None, width: int | None = None) -> Console:
    plain = bool(os.environ.get("NO_COLOR"))
    stream = stream or (sys.stderr if stderr else sys.stdout)
    if width is None:
        columns = os.environ.get("COLUMNS", "").strip()
        width = int(columns) if columns.isdigit() and 0 < int(columns) <= UNBOUNDED_WIDTH else None
        if width is not None:
            # Narrower than this, rich drops table columns and breaks words a
            # letter a line: lines longer than a narrow terminal wrap there.
            width = max(width, MIN_WIDTH)
    if width is None:
        # COLUMNS unset or unusable (0, huge, not a number): the terminal's own
        # width, or unbounded for a pipe. Rich would read COLUMNS=0 as no room.
        width = UNBOUNDED_WIDTH
        if isatty(stream):
            try:
                width = max(os.get_terminal_size(stream.fileno()).columns, MIN_WIDTH)
            except (OSError, ValueError, AttributeError):
                width = 80
    # emoji=False: a name such as ":warning:" from a consumer's table prints as written.
    return _Console(file=stream, no_color=plain, highlight=False, emoji=False, width=width)


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # Rich would exit 1 here, which a CI gate reads as "broken"; the CLI
        # ends a closed pipe quietly with the status other tools give it.
        raise BrokenPipeError()


class RichWriter:
    """Lines as rich Text (never markup: no string from outside is read as a
    tag), tables as rich tables."""

    def __init__(self, console: Console):
        self.console = console

    def line(self, *parts: Part) -> None:
        self.console.print(Text.assemble(*parts))

    def table(self, columns: list[Column], rows: list[Row]) -> None:
        if self.console.color_system is None:
            # No colour (a test's console, NO_COLOR piped with COLUMNS set): the
            # plain layout where the table fits, as rich would lay it out.
            lines = plain_table_lines(columns, rows, self.console.width)
            if lines is not None:
                self.console.print(Text("\n".join(lines)), soft_wrap=True)
                return
        self.console.print(rich_table(columns, rows))


def rich_table(columns: list[Column], rows: list[Row]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for header, justify in columns:
        table.add_column(Text(header), justify=justify, overflow="fold")  # type: ignore[arg-type]
    for row in rows:
        if row is None:
            table.add_section()
        else:
            table.add_row(*(Text(text, style=style) for text, style in row))
    return table
