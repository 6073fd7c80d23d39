"""report/formats/layout: tables and long lines laid out without rich where
no style is written, line for line what rich writes for the same input; where
rich would wrap, fold or rewrite, rich lays it out."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.text import Text

pytestmark = pytest.mark.pure


def _rich_lines(columns, rows, width=4000) -> str:
    from hprobe.report.formats.terminal import rich_table

    out = io.StringIO()
    Console(file=out, width=width, color_system=None, highlight=False, emoji=False).print(rich_table(columns, rows))
    return out.getvalue()


def test_plain_tables_are_laid_out_as_rich_lays_them_out():
    """Where no style is written, tables are laid out without rich; line for
    line, they are what rich writes for the same table: every justification,
    sections, wide and combining characters, empty cells, headers wider than
    their cells, text that looks like markup."""
    import random

    from hprobe.report.formats.layout import plain_table_lines

    words = [
        "",
        "a",
        "SM100",
        "reducible (validators only)",
        "模型名",
        "e\u0301t\u00e9",
        "✓",
        "🙂x",
        "  padded  ",
        "[bold]x[/bold]",
        "\\x1b",
        "2.00× waste",
    ]
    rng = random.Random(7)
    for _ in range(300):
        k = rng.randint(1, 5)
        columns = [(rng.choice(words[1:]), rng.choice(["left", "right", "center"])) for _ in range(k)]
        rows = []
        for _ in range(rng.randint(0, 6)):
            if rows and rng.random() < 0.2:
                rows.append(None)
            rows.append([(rng.choice(words), rng.choice(["", "red", "dim"])) for _ in range(k)])
        lines = plain_table_lines(columns, rows, 4000)
        assert lines is not None
        assert "\n".join(lines) + "\n" == _rich_lines(columns, rows), (columns, rows)
    # Where rich would wrap or fold, rich lays it out.
    wide = [("evidence", "left")]
    assert plain_table_lines(wide, [[("x" * 50, "")]], 40) is None
    assert plain_table_lines(wide, [[("two\nlines", "")]], 4000) is None


def test_plain_lines_are_wrapped_as_rich_wraps_them():
    """Where no style is written, a long line is wrapped without rich's
    console; it is what rich writes for the same text: words past the width,
    words wider than a line (folded), runs of spaces at a break, blank lines,
    wide and combining characters. Text rich rewrites first (a tab, a
    carriage return) goes to rich."""
    import random

    from hprobe.report.formats.layout import wrapped_lines
    from hprobe.report.formats.terminal import make_console

    pieces = [
        "a",
        "bb",
        "flashinfer/mla/_core.py:1234",
        "x" * 30,
        "y" * 130,
        " ",
        "  ",
        "   ",
        "\n",
        "✅",
        "模型名",
        "e\u0301t\u00e9",
        "{8,16,32,64,128}",
        "—",
        "[bold]x[/bold]",
    ]
    rng = random.Random(11)
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 60)))
        width = rng.choice([10, 17, 40, 80, 100])
        stream = io.StringIO()
        make_console(stream=stream, width=width).print(Text(text))
        lines = wrapped_lines(text, width)
        assert lines is not None
        assert "\n".join(lines) + "\n" == stream.getvalue(), (text, width)
    assert wrapped_lines("a\tb " * 40, 20) is None
    assert wrapped_lines("a\rb " * 40, 20) is None
