"""The interface every output format implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hprobe.report.cache import CacheReport
    from hprobe.report.model import BisectReport, CheckReport, DiffReport, MatrixReport, SuggestReport


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
    def kernels(self, rows: list[dict[str, Any]]) -> None: ...

    @abstractmethod
    def data(self, payload: dict[str, Any], title: str) -> None:
        """Plain records (`hprobe env`, `hprobe kernels`)."""

    def cache(self, report: CacheReport) -> None:
        """`hprobe cache`: by default its document as plain records."""
        self.data(report.to_dict(), "hprobe cache")
