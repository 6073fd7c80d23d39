"""C++ as the release ships it, read as text: function definitions found by
name, comments stripped, and a digest of each that says whether a port of it
still describes the release (a port is used only where every function it ports
reads exactly as it did when ported, whitespace and comments aside)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TypeVar

from hprobe.compiled.files import data_dir

# A port's fingerprint: under a release's `flashinfer/data`, file -> function
# (or macro) -> the digests it reads with in the releases the port describes.
Fingerprint = Mapping[str, Mapping[str, Collection[str]]]


@dataclass(frozen=True)
class Definition:
    """One function definition: its text (signature and body) and first line."""

    name: str
    text: str
    line: int


_DEFINITIONS: dict[tuple[str, str], tuple[Definition, ...]] = {}


class SourceFile:
    """One C++ file of a release, with its comments blanked (line numbers kept)."""

    def __init__(self, path: Path, text: str | None = None):
        self.path = path
        self.raw = path.read_text(encoding="utf-8", errors="replace") if text is None else text

    @cached_property
    def code(self) -> str:
        return _blank_comments(self.raw)

    @cached_property
    def _content(self) -> str:
        return hashlib.sha256(self.raw.encode("utf-8", "surrogatepass")).hexdigest()

    def definitions(self, name: str) -> list[Definition]:
        """Every definition of `name` (overloads and same-named members alike,
        and a function-like macro `#define name(...)`), in file order; calls
        and declarations are not definitions."""
        # By content: releases ship the same file again and again, and finding
        # definitions is most of what compiled depth costs before the table.
        key = (self._content, name)
        if key not in _DEFINITIONS:
            _DEFINITIONS[key] = tuple(self._find(name))
        return list(_DEFINITIONS[key])

    def _find(self, name: str) -> list[Definition]:
        out: list[Definition] = []
        code = self.code
        for match in re.finditer(rf"(?<![\w.>:]){re.escape(name)}\s*\(", code):
            line_start = code.rfind("\n", 0, match.start()) + 1
            if re.fullmatch(r"\s*#\s*define\s+", code[line_start : match.start()]):
                # A function-like macro (a dispatch switch): its lines up to the
                # first that does not end in a continuation.
                end = line_start
                while True:
                    newline = code.find("\n", end)
                    end = len(code) if newline < 0 else newline
                    if newline < 0 or not code[:end].rstrip().endswith("\\"):
                        break
                    end += 1
                text = code[line_start:end]
                out.append(Definition(name, text, code.count("\n", 0, match.start()) + 1))
                continue
            start = _statement_start(code, match.start())
            body = _body_after(code, match.end() - 1)
            if body is None:
                continue
            text = code[start:body]
            out.append(Definition(name, text, code.count("\n", 0, match.start()) + 1))
        return out

    def digest(self, name: str) -> str | None:
        """sha256 (first 16 hex digits) of every definition of `name`, with
        whitespace collapsed; None when the file defines no `name`."""
        found = self.definitions(name)
        if not found:
            return None
        joined = "\n".join(" ".join(d.text.split()) for d in found)
        return hashlib.sha256(joined.encode()).hexdigest()[:16]

    def line_of(self, needle: str, after: int = 0) -> int | None:
        """The first line (1-based) at or after line `after` whose raw text holds `needle`."""
        for number, line in enumerate(self.raw.splitlines(), start=1):
            if number >= after and needle in line:
                return number
        return None


def _blank_comments(text: str) -> str:
    """`text` with // and /* */ comments replaced by spaces (newlines kept), and
    string and character literals left alone."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            i = _skip_literal(text, i)
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out[i:end] = " " * (end - i)
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out[i:end] = [c if c == "\n" else " " for c in text[i:end]]
            i = end
        else:
            i += 1
    return "".join(out)


def _skip_literal(text: str, i: int) -> int:
    quote, i = text[i], i + 1
    while i < len(text) and text[i] != quote:
        if text[i] == "\\":
            i += 1
        elif text[i] == "\n":
            break  # not a literal after all (an apostrophe in a digit separator)
        i += 1
    return i + 1


def _statement_start(code: str, at: int) -> int:
    """Where the declaration holding position `at` begins: after the previous
    `;`, `{` or `}` (so return type and qualifiers belong to the definition)."""
    i = at
    while i > 0 and code[i - 1] not in ";{}":
        i -= 1
    return i


def _body_after(code: str, open_paren: int) -> int | None:
    """The end of the body when the parenthesis at `open_paren` opens a
    definition's parameter list, else None (a call, a declaration). A
    constructor's initializer list (`: a(b), c{d}`) is passed over."""
    close = _match(code, open_paren, "(", ")")
    if close is None:
        return None
    i = close + 1
    initializers = False
    while i < len(code):
        ch = code[i]
        if ch in "\"'":
            i = _skip_literal(code, i)
            continue
        if ch == "(":
            end = _match(code, i, "(", ")")
            if end is None or not initializers:
                return None  # a call's result called, or a function pointer: not a definition
            i = end + 1
            continue
        if ch == ":" and not code.startswith("::", i) and code[i - 1] != ":":
            initializers = True
        elif ch in ";=)" or (ch == "," and not initializers):
            return None
        elif ch == "{":
            before = code[:i].rstrip()
            if (
                initializers
                and before
                and (before[-1].isalnum() or before[-1] == "_")
                and not before.endswith(("const", "noexcept", "override"))
            ):
                end = _match(code, i, "{", "}")  # a brace initializer: `mX{1}`
                if end is None:
                    return None
                i = end + 1
                continue
            end = _match(code, i, "{", "}")
            return None if end is None else end + 1
        i += 1
    return None


def _match(code: str, start: int, opening: str, closing: str) -> int | None:
    depth = 0
    i = start
    while i < len(code):
        ch = code[i]
        if ch in "\"'":
            i = _skip_literal(code, i)
            continue
        if ch == opening:
            depth += 1
        elif ch == closing:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def differences(package: Path, fingerprint: Fingerprint) -> list[str]:
    """`file function` for each function of `fingerprint` that the release at
    `package` defines otherwise, or not at all (its file missing too): where a
    port no longer describes the release."""
    differs: list[str] = []
    for relative, names in fingerprint.items():
        path = data_dir(package) / relative
        file = SourceFile(path) if path.is_file() else None
        differs.extend(
            f"{Path(relative).name} {name}"
            for name, digests in names.items()
            if file is None or file.digest(name) not in digests
        )
    return differs


Era = TypeVar("Era")


def matching_era(package: Path, eras: Sequence[Era], fingerprint: Callable[[Era], Fingerprint]) -> Era | str:
    """The first of `eras` (newest first) whose every function reads in the
    release at `package` as its fingerprint says, or why none does: what the
    nearest one reads differently."""
    nearest: list[str] | None = None
    for era in eras:
        differs = differences(package, fingerprint(era))
        if not differs:
            return era
        if nearest is None or len(differs) < len(nearest):
            nearest = differs
    assert nearest is not None, "no era to match"
    return f"no port of its C++ in hprobe ({', '.join(nearest)} read differently from the nearest ported release)"


def located(package: Path, relative: str, definition: str, needle: str) -> str:
    """Where a check stands in the release: `flashinfer/data/<relative>:<line>`,
    the line the first after `definition`'s start whose text holds `needle`
    (without a line where the file or the text is not there)."""
    path = data_dir(package) / relative
    line = None
    if path.is_file():
        file = SourceFile(path)
        start = min((d.line for d in file.definitions(definition)), default=0)
        line = file.line_of(needle, after=start) or file.line_of(needle)
    return f"flashinfer/data/{relative}" + (f":{line}" if line else "")
