"""Versioned JSON: `hprobe.check/2`, `hprobe.matrix/2` and `/3`, and the rest the README lists."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from hprobe.report.formats.base import Formatter, RenderOptions, render_with
from hprobe.system.escaping import json_text

if TYPE_CHECKING:
    from hprobe.report.cache import CacheReport
    from hprobe.report.catalogue import KernelsReport, RecordsReport, SiteReport
    from hprobe.report.drift import BisectReport, DiffReport
    from hprobe.report.model import CheckReport, MatrixReport
    from hprobe.report.suggest import SuggestReport


class JsonFormatter(Formatter):
    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stdout

    def _write(self, payload: dict[str, Any], compact: bool = False) -> None:
        text = json.dumps(payload, separators=(",", ":")) if compact else json.dumps(payload, indent=2)
        self.stream.write(json_text(text) + "\n")

    def check(self, report: CheckReport) -> None:
        self._write(report.to_dict())

    def matrix(self, report: MatrixReport, grid: bool = False, pivot: tuple[str, str] | None = None) -> None:
        self._write(report.to_dict())

    def site(self, report: SiteReport) -> None:
        """hprobe.matrix/3 without indentation: the report page's data file,
        which is passed around with the page (`jq .` reads it indented)."""
        self._write(report.to_dict(), compact=True)

    def suggest(self, result: SuggestReport) -> None:
        self._write(result.to_dict())

    def diff(self, result: DiffReport) -> None:
        self._write(result.to_dict())

    def bisect(self, result: BisectReport) -> None:
        self._write(result.to_dict())

    def kernels(self, report: KernelsReport) -> None:
        self._write(report.to_dict())

    def records(self, report: RecordsReport) -> None:
        self._write(report.to_dict())

    def cache(self, report: CacheReport) -> None:
        self._write(report.to_dict())

    def data(self, payload: dict[str, Any], title: str) -> None:
        self._write(payload)


def render(report: object, options: RenderOptions) -> str:
    return render_with(JsonFormatter, report, options)
