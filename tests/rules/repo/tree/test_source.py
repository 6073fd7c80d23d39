"""rules/repo/tree/source: a file of the consumer's tree as Python reads it,
so that an `ast` position names the same characters an edit replaces, and an
edit keeps everything else byte for byte (encoding, BOM, each line's end)."""

from __future__ import annotations

import ast

import pytest

from hprobe.model.errors import InputError
from hprobe.rules.repo.tree.source import PythonSource, Span

pytestmark = pytest.mark.pure


def _span_of_constant(source: PythonSource, value: object) -> Span:
    node = next(n for n in ast.walk(source.parse("f.py")) if isinstance(n, ast.Constant) and n.value == value)
    assert node.end_lineno is not None and node.end_col_offset is not None
    return Span(node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)


@pytest.mark.parametrize(
    "raw",
    [
        # Multi-byte characters before the literal: ast's columns are UTF-8 bytes.
        "x = 'π…'; y = 64\n".encode(),
        # Characters str.splitlines would break a line on, and \r\n / \r endings.
        "a = '\x0c\u2028\x85'\r\nb = 1\ry = 64\n".encode(),
        # A BOM, kept on the way out.
        b"\xef\xbb\xbf" + "x = 'é'\ny = 64\n".encode(),
        # PEP 263: a latin-1 file stays latin-1.
        "# -*- coding: latin-1 -*-\nx = 'é'\ny = 64\n".encode("latin-1"),
    ],
    ids=["utf-8 columns", "line ends", "bom", "latin-1"],
)
def test_an_edit_replaces_exactly_the_span_and_keeps_every_other_byte(raw: bytes) -> None:
    source = PythonSource.from_bytes(raw, "f.py")
    span = _span_of_constant(source, 64)
    assert source.segment(span) == "64"
    edited = source.replaced([(span, "128")])
    assert edited.raw == raw.replace(b"64", b"128")
    assert edited.encoding == source.encoding


def test_overlapping_edits_and_unwritable_text_are_refused() -> None:
    source = PythonSource.from_bytes("# -*- coding: latin-1 -*-\ny = 64\n".encode("latin-1"), "f.py")
    span = _span_of_constant(source, 64)
    with pytest.raises(ValueError, match="overlapping edits"):
        source.replaced([(span, "1"), (Span(span.line, span.col + 1, span.end_line, span.end_col), "2")])
    with pytest.raises(ValueError, match="cannot be written in the file's encoding"):
        source.replaced([(span, "'π'")])


@pytest.mark.parametrize(
    ("line", "col", "said"),
    [(9, 0, "outside the file"), (1, 99, "past the end of line 1"), (1, 6, "falls inside a character")],
)
def test_a_position_that_names_no_character_is_refused(line, col, said) -> None:
    source = PythonSource.from_bytes("x = 'π'\n".encode(), "f.py")
    with pytest.raises(ValueError, match=said):
        source.offset(line, col)


def test_a_file_not_readable_as_python_is_one_input_error() -> None:
    with pytest.raises(InputError, match="f.py: not readable as Python source"):
        PythonSource.from_bytes(b"# -*- coding: no-such-codec -*-\n", "f.py")
    with pytest.raises(InputError, match="f.py: not readable as Python source"):
        PythonSource.from_bytes(b"x = '\xff'\n", "f.py")
