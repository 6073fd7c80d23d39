"""Versioned JSON: `hprobe.check/2`, `hprobe.matrix/2` and `/3`, and the rest the README lists."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from hprobe.report.formats.base import Formatter
from hprobe.system.escaping import json_text

if TYPE_CHECKING:
    from hprobe.report.model import BisectReport, CheckReport, DiffReport, MatrixReport, SuggestReport


class JsonFormatter(Formatter):
    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stdout

    def _write(self, payload: dict[str, Any], compact: bool = False) -> None:
        text = json.dumps(payload, separators=(",", ":")) if compact else json.dumps(payload, indent=2)
        self.stream.write(json_text(text) + "\n")

    def matrix_runs(self, report: MatrixReport) -> None:
        """hprobe.matrix/3 without indentation: the report page's data file,
        which is passed around with the page (`jq .` reads it indented)."""
        self._write(report.to_dict(runs=True), compact=True)

    def check(self, report: CheckReport) -> None:
        self._write(report.to_dict())

    def matrix(self, report: MatrixReport, grid: bool = False, pivot: tuple[str, str] | None = None) -> None:
        self._write(report.to_dict())

    def suggest(self, result: SuggestReport) -> None:
        report, suggestions, patch = result.check, result.suggestions, result.patch
        doc = report.to_dict()
        self._write({
            "schema": "hprobe.suggest/1",
            "hprobe_version": doc["hprobe_version"],
            "releases": doc["releases"],
            "sms": doc["sms"],
            "suggestions": [s.to_dict() for s in suggestions],
            "patch": patch.to_dict() if patch is not None else None,
            "notes": report.notes,
        })

    def diff(self, result: DiffReport) -> None:
        self._write(result.to_dict())

    def bisect(self, result: BisectReport) -> None:
        self._write(result.to_dict())

    def kernels(self, rows: list[dict[str, Any]]) -> None:
        self._write({"schema": "hprobe.kernels/1", "kernels": rows})

    def data(self, payload: dict[str, Any], title: str) -> None:
        self._write(payload)
