"""A Python file of the consumer's tree as Python itself reads it, so that what
`ast` reports (a line and a column) names the same characters when the file is
edited.

- Encoding: PEP 263 (a `coding:` line) and a UTF-8 BOM, as `tokenize` detects them.
- Lines: Python ends a line at `\\r\\n`, `\\r` or `\\n` only; form feed, U+2028,
  U+0085 and `\\x1c`-`\\x1e` are characters within a line (`str.splitlines`
  would break on them and shift every edit below).
- Columns: `ast` gives UTF-8 byte offsets into the line; edits are made on
  characters, so each column is converted.

Edits keep everything else byte for byte: the encoding, the BOM, each line's
own ending."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hprobe.model.errors import InputError
from hprobe.system.fileio import MAX_SOURCE_BYTES, read_bytes
from hprobe.system.parsing import parse_module

_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Span:
    """A range of a source file as `ast` reports it (1-based lines, UTF-8 byte columns)."""

    line: int
    col: int
    end_line: int
    end_col: int


@dataclass(frozen=True)
class PythonSource:
    raw: bytes
    encoding: str  # as tokenize names it: "utf-8-sig" when the file starts with a BOM
    text: str  # decoded, line endings as in the file

    @classmethod
    def from_bytes(cls, raw: bytes, where: str) -> PythonSource:
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
            text = raw.decode(encoding)
        except (SyntaxError, LookupError, UnicodeDecodeError) as exc:
            raise InputError(f"{where}: not readable as Python source: {getattr(exc, 'msg', None) or exc}") from None
        if encoding == "utf-8-sig" and text.startswith("\ufeff"):
            text = text[1:]  # decode() of utf-8-sig drops it; kept out of `text` either way
        return cls(raw, encoding, text)

    @classmethod
    def read(cls, path: Path, where: str | None = None) -> PythonSource:
        return cls.from_bytes(read_bytes(path, "source file", MAX_SOURCE_BYTES), where or str(path))

    def parse(self, where: str) -> ast.Module:
        """The module as Python parses it (a `str` source: the coding line is
        already honoured by the decode)."""
        return parse_module(self.text, filename=where)

    def _line_starts(self) -> list[int]:
        return [0, *(m.end() for m in _LINE_END.finditer(self.text))]

    def offset(self, line: int, byte_col: int, starts: list[int] | None = None) -> int:
        """The character offset in `text` of an `ast` position."""
        starts = starts if starts is not None else self._line_starts()
        if not 1 <= line <= len(starts):
            raise ValueError(f"line {line} is outside the file ({len(starts)} lines)")
        begin = starts[line - 1]
        end = starts[line] if line < len(starts) else len(self.text)
        encoded = self.text[begin:end].encode("utf-8")
        if byte_col > len(encoded):
            raise ValueError(f"column {byte_col} is past the end of line {line}")
        try:
            return begin + len(encoded[:byte_col].decode("utf-8"))
        except UnicodeDecodeError:
            raise ValueError(f"column {byte_col} of line {line} falls inside a character") from None

    def segment(self, span: Span) -> str:
        starts = self._line_starts()
        return self.text[self.offset(span.line, span.col, starts) : self.offset(span.end_line, span.end_col, starts)]

    def replaced(self, edits: Sequence[tuple[Span, str]]) -> PythonSource:
        """This file with each span replaced; spans must not overlap."""
        starts = self._line_starts()
        ranges = sorted(
            ((self.offset(s.line, s.col, starts), self.offset(s.end_line, s.end_col, starts), new) for s, new in edits),
            reverse=True,
        )
        for (begin, _, _), (_, end, _) in zip(ranges, ranges[1:], strict=False):
            if end > begin:
                raise ValueError("overlapping edits")
        text = self.text
        for begin, end, new in ranges:
            text = text[:begin] + new + text[end:]
        bom = b"\xef\xbb\xbf" if self.raw.startswith(b"\xef\xbb\xbf") else b""
        codec = "utf-8" if self.encoding == "utf-8-sig" else self.encoding
        try:
            raw = bom + text.encode(codec)
        except UnicodeEncodeError:
            raise ValueError(f"the new text cannot be written in the file's encoding ({self.encoding})") from None
        return PythonSource(raw, self.encoding, text)
