"""Lines and tables of styled text, as text formats write them: the pieces,
and rich's word wrap and table layout without rich's console (where no style
is written, a pipe or a CI log, `text.PlainWriter` writes it; tests hold both
equal to rich's, cell for cell).

A warm check spent more time importing rich and laying out its tables than
judging; piped output, what a pre-commit hook or CI reads, now costs neither."""

from __future__ import annotations

import re
from typing import Any, Protocol

# The widest COLUMNS taken as a width (a larger one is read as unset).
UNBOUNDED_WIDTH = 4000
# Width for output that is not a terminal (CI logs, pipes) when COLUMNS is not
# set: long lines and cells wrap, nothing is cut to `…`; COLUMNS wins when set.
PIPED_WIDTH = 100

# A piece of a line: text as written, or (text, rich style). Text from outside
# hprobe goes through `escaping.visible` first; nothing here reads markup.
Part = str | tuple[str, str]
# A table: its columns (header, justify), then its rows of (text, style)
# cells; None starts a section.
Column = tuple[str, str]
Cell = tuple[str, str]
Row = list[Cell] | None


class Writer(Protocol):
    def line(self, *parts: Part) -> None: ...

    def table(self, columns: list[Column], rows: list[Row]) -> None: ...


def isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _width(text: str) -> int:
    if text.isascii():
        return len(text)  # printable ASCII (visible() leaves no controls): a cell each
    from rich.cells import cell_len

    return cell_len(text)


# What rich's Text changes before it wraps (tabs expanded; bell, backspace,
# vertical tab, form feed and carriage return stripped): its console does that.
_RICH_REWRITES = frozenset("\t\a\b\v\f\r")
_TRAILING_SPACE = re.compile(r"\s+$")


def wrapped_lines(text: str, width: int) -> list[str] | None:
    """The lines rich's console writes for `Text(text)` at `width`, without
    colour: rich's own word wrap (rich._wrap.divide_line, what Text.wrap
    calls), each piece's trailing space past the width dropped and what is
    still wider cut at the width, as Text.wrap does. None where rich would
    rewrite the text first, or where this rich has no such function."""
    if not _RICH_REWRITES.isdisjoint(text):
        return None
    try:
        from rich._wrap import divide_line
        from rich.cells import cell_len, set_cell_size
    except ImportError:
        return None
    lines = []
    for line in text.split("\n"):
        offsets = divide_line(line, width, fold=True)
        for start, end in zip([0, *offsets], [*offsets, len(line)], strict=True):
            piece = line[start:end]
            if len(piece) > width and (space := _TRAILING_SPACE.search(piece)):
                piece = piece[: len(piece) - min(len(space.group(0)), len(piece) - width)]
            if cell_len(piece) > width:
                piece = set_cell_size(piece, width)
            lines.append(piece)
    return lines


def plain_table_lines(columns: list[Column], rows: list[Row], width: int) -> list[str] | None:
    """The lines rich writes for `terminal.rich_table` without colour, or None
    where rich would wrap or fold a cell (wider than `width`, a cell of
    several lines)."""
    cells = [[text for text, _style in row] if row is not None else None for row in rows]
    widths = [_width(header) for header, _ in columns]
    for row_cells in cells:
        if row_cells is None:
            continue
        if len(row_cells) != len(columns):
            return None
        for i, value in enumerate(row_cells):
            if "\n" in value:
                return None
            widths[i] = max(widths[i], _width(value))
    total = 2 + sum(widths) + 3 * (len(columns) - 1)
    if total > width:
        return None
    blank = " " * total

    def line(values: list[str]) -> str:
        parts = []
        for value, w, (_, justify) in zip(values, widths, columns, strict=True):
            if justify != "left":
                value = value.rstrip()  # as rich does before it aligns right or centre
            room = w - _width(value)
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
