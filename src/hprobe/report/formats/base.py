"""What the stream formats (text, json, markdown) implement, one method per
report, and `render_with`, which turns such a formatter into the
`render(report, options) -> str` every format module offers."""

from __future__ import annotations

import io
import re
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from hprobe.model.errors import InputError

if TYPE_CHECKING:
    from hprobe.report.cache import CacheReport
    from hprobe.report.catalogue import KernelsReport, RecordsReport, SiteReport
    from hprobe.report.drift import BisectReport, DiffReport
    from hprobe.report.model import CheckReport, MatrixReport
    from hprobe.report.suggest import SuggestReport


class Formatter(ABC):
    # Every row of `check`, or only those that are not ok (the summary covers
    # the rest). Formats meant for machines or summaries keep every row.
    details: bool = True

    @abstractmethod
    def check(self, report: CheckReport) -> None: ...

    @abstractmethod
    def matrix(self, report: MatrixReport, grid: bool = False, pivot: tuple[str, str] | None = None) -> None: ...

    @abstractmethod
    def diff(self, result: DiffReport) -> None: ...

    @abstractmethod
    def bisect(self, result: BisectReport) -> None: ...

    @abstractmethod
    def suggest(self, result: SuggestReport) -> None: ...

    @abstractmethod
    def kernels(self, report: KernelsReport) -> None: ...

    @abstractmethod
    def data(self, payload: dict[str, Any], title: str) -> None:
        """Plain records, name -> value."""

    def records(self, report: RecordsReport) -> None:
        """`env`, `models`, `table extract`: by default what a person reads."""
        self.data(report.shown, report.title)

    def site(self, report: SiteReport) -> None:
        """`hprobe report`'s matrix, by default as `matrix` prints it."""
        self.matrix(report.matrix)

    def cache(self, report: CacheReport) -> None:
        """`hprobe cache`: by default its document as plain records."""
        self.data(report.to_dict(), "hprobe cache")


class NotRendered(InputError):
    """A format asked for a report it has no rendering of (`--format sarif`
    on a matrix): one line naming what it renders."""


@dataclass(frozen=True)
class RenderOptions:
    """How a report is rendered, beyond the report itself."""

    details: bool = True  # every row of `check` (text shows only rows that need action without it)
    grid: bool = False  # matrix: one row per variant x SM, a mark per h_q
    pivot: tuple[str, str] | None = None  # matrix: rows x columns
    # The stream the text will be written to: its terminal (or not) decides
    # colour and width, as if the text were printed there directly.
    like: TextIO | None = None


class _Capture(io.StringIO):
    """Text kept in memory, styled for the stream it will be written to."""

    def __init__(self, like: TextIO):
        super().__init__()
        self.like = like

    def isatty(self) -> bool:
        return bool(getattr(self.like, "isatty", lambda: False)())

    def fileno(self) -> int:
        return self.like.fileno()


def render_with(make: Callable[[TextIO], Formatter], report: object, options: RenderOptions) -> str:
    """`report` rendered by the formatter `make` builds, as text."""
    stream = _Capture(options.like or sys.stdout)
    formatter = make(stream)
    formatter.details = options.details
    if not _rendered(formatter, report, options):
        raise NotRendered(f"no rendering of {type(report).__name__}")
    return stream.getvalue()


def _rendered(formatter: Formatter, report: object, options: RenderOptions) -> bool:
    """Hand `report` to the formatter's method for its class. A report module
    not yet imported defines no class this report can be (a check never
    imports the cache's or suggest's), so only loaded ones are asked."""
    loaded = sys.modules
    renderings: list[tuple[type, Callable[[Any], None]]] = []
    if "hprobe.report.model" in loaded:
        from hprobe.report.model import CheckReport, MatrixReport

        renderings += [
            (CheckReport, formatter.check),
            (MatrixReport, lambda r: formatter.matrix(r, grid=options.grid, pivot=options.pivot)),
        ]
    if "hprobe.report.suggest" in loaded:
        from hprobe.report.suggest import SuggestReport

        renderings.append((SuggestReport, formatter.suggest))
    if "hprobe.report.drift" in loaded:
        from hprobe.report.drift import BisectReport, DiffReport

        renderings += [(DiffReport, formatter.diff), (BisectReport, formatter.bisect)]
    if "hprobe.report.catalogue" in loaded:
        from hprobe.report.catalogue import KernelsReport, RecordsReport, SiteReport

        renderings += [
            (SiteReport, formatter.site),
            (KernelsReport, formatter.kernels),
            (RecordsReport, formatter.records),
        ]
    if "hprobe.report.cache" in loaded:
        from hprobe.report.cache import CacheReport

        renderings.append((CacheReport, formatter.cache))
    for kind, render in renderings:
        if isinstance(report, kind):
            render(report)
            return True
    return False


_LOCATION = re.compile(r"(?P<path>.+?):(?P<line>\d+)(?::(?P<col>\d+))?(?=$|\s)(?P<rest>.*)", re.DOTALL)


@dataclass(frozen=True)
class SourceLocation:
    """A finding's `source` split as CI tools need it: `path:line[:col] words`
    -> the file, its line and column, and the words after them ("[SM100/SM103,
    unpadded]"), which belong in the message, never in the file name."""

    path: str
    line: int | None = None
    col: int | None = None
    rest: str = ""


# What follows a path without a line: "vllm/x.py [SM100, decode]".
_LOOSE_WORDS = re.compile(r"\s+\[.*$", re.DOTALL)


def source_location(source: str) -> SourceLocation:
    m = _LOCATION.fullmatch(source)
    if m is None:
        words = _LOOSE_WORDS.search(source)
        if words is not None:
            return SourceLocation(source[: words.start()], rest=words.group().strip())
        return SourceLocation(source)
    col = m.group("col")
    return SourceLocation(m.group("path"), int(m.group("line")), int(col) if col else None, m.group("rest").strip())
