"""`matrix --pivot ROWS,COLS`: a matrix report's results laid out on two dimensions."""

from __future__ import annotations

from typing import Any

from hprobe.model.errors import InputError
from hprobe.model.outcome import KernelSMResult
from hprobe.model.release import ProbedRelease
from hprobe.report.model import MatrixReport

PIVOT_FIXED = ("heads", "sm", "release", "kernel")


def pivot_cells(report: MatrixReport, rows: str, cols: str) -> tuple[list[Any], list[Any], dict[tuple[Any, Any], Any]]:
    """Row values, column values and cells for `matrix --pivot ROWS,COLS`.

    A dimension is h_q (`heads`), `sm`, `release`, `kernel` (the variant) or an
    axis. With h_q a dimension a cell is one Outcome; otherwise it is the
    KernelSMResult whose accepted set the cell shows. Two results landing in one
    cell is an input error: the other dimensions must be narrowed first.
    """
    axes = {name for r in report.results for name in r.config}
    for dim in (rows, cols):
        if dim not in PIVOT_FIXED and dim not in axes:
            raise InputError(f"--pivot {rows},{cols}: {dim!r} is not heads, sm, release, kernel or an axis of the kernels probed ({', '.join(sorted(axes)) or 'none'})")
    if rows == cols:
        raise InputError(f"--pivot {rows},{cols}: pick two different dimensions")

    def value(dim: str, rel: ProbedRelease, r: KernelSMResult) -> Any:
        return {"sm": f"SM{r.sm}", "release": rel.info.version, "kernel": r.key}.get(dim, r.config.get(dim, "-"))

    row_values: list[Any] = []
    col_values: list[Any] = []
    cells: dict[tuple[Any, Any], Any] = {}
    for rel in report.releases:
        for r in rel.results.values():
            for h in (r.heads if "heads" in (rows, cols) else [None]):
                rv = h if rows == "heads" else value(rows, rel, r)
                cv = h if cols == "heads" else value(cols, rel, r)
                cell = r.heads[h].outcome if h is not None else r
                if (rv, cv) in cells:
                    raise InputError(
                        f"--pivot {rows},{cols}: several results fall in one cell ({rv}, {cv}); "
                        "narrow the others with --kernel, --sm or an axis option"
                    )
                cells[(rv, cv)] = cell
                row_values.append(rv)
                col_values.append(cv)
    return list(dict.fromkeys(row_values)), list(dict.fromkeys(col_values)), cells
