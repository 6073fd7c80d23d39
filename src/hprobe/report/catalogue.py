"""What `report`, `kernels`, `env`, `models` and `table extract --json`
report: a page over releases, the probes, and plain records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hprobe.report.model import CheckReport, MatrixReport


@dataclass(frozen=True)
class SiteReport:
    """`hprobe report`: a matrix over releases, and the tables judged on it,
    written as a page (index.html), its markdown and its data (matrix.json)."""

    matrix: MatrixReport
    tables: CheckReport | None = None

    def to_dict(self) -> dict[str, Any]:
        """hprobe.matrix/3, compact runs of h_q: the page's data file."""
        return self.matrix.to_dict(runs=True)


@dataclass(frozen=True)
class KernelsReport:
    """`hprobe kernels`: one row per probe (entry point, SMs, axes, releases)."""

    rows: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"schema": "hprobe.kernels/1", "kernels": self.rows}


@dataclass(frozen=True)
class RecordsReport:
    """Plain records (`env`, `models`, `table extract --json`): the document
    tools read, and the lines a person reads (`shown`, name -> value)."""

    title: str
    document: dict[str, Any]  # with its schema
    shown: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return self.document
