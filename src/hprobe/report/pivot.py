"""`matrix --pivot ROWS,COLS`: a matrix report's results laid out on two dimensions."""

from __future__ import annotations

from typing import Any

from hprobe.model.errors import InputError
from hprobe.model.outcome import KernelSMResult
from hprobe.model.release import ProbedRelease
from hprobe.report.model import MatrixReport

PIVOT_FIXED = ("heads", "sm", "release", "kernel")


def check_planned(rows: str, cols: str, releases: list[str], keys: list[str], sms: list[int]) -> None:
    """The collision pivot_cells would find, found before anything is probed:
    from the releases, variants and SMs a matrix is about to probe."""
    from hprobe.kernels import get_variant

    values = {key: get_variant(key).values for key in keys}
    axes = {name for config in values.values() for name in config}
    for dim in (rows, cols):
        if dim not in PIVOT_FIXED and dim not in axes:
            raise InputError(
                f"--pivot {rows},{cols}: {dim!r} is not heads, sm, release, kernel or an axis of the kernels probed "
                f"({', '.join(sorted(axes)) or 'none'})"
            )
    if rows == cols:
        raise InputError(f"--pivot {rows},{cols}: pick two different dimensions")
    shown = [d for d in (rows, cols) if d != "heads"]  # h_q spreads one result over a row or column
    seen: dict[tuple[Any, ...], tuple[str, str, int]] = {}
    for release in releases:
        for key in keys:
            for sm in sms:
                cell = tuple(
                    {"sm": f"SM{sm}", "release": release, "kernel": key}.get(d, values[key].get(d, "-")) for d in shown
                )
                if cell in seen:
                    other = seen[cell]
                    differ = [
                        n
                        for n, a, b in (("release", release, other[0]), ("kernel", key, other[1]), ("sm", sm, other[2]))
                        if a != b
                    ]
                    raise InputError(
                        f"--pivot {rows},{cols}: several results would fall in one cell "
                        f"({', '.join(map(str, cell)) or 'each h_q'}; "
                        f"they differ in {' and '.join(differ)}); narrow the others with --kernel, --sm, --flashinfer "
                        "or an axis option"
                    )
                seen[cell] = (release, key, sm)


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
            raise InputError(
                f"--pivot {rows},{cols}: {dim!r} is not heads, sm, release, kernel or an axis of the kernels probed "
                f"({', '.join(sorted(axes)) or 'none'})"
            )
    if rows == cols:
        raise InputError(f"--pivot {rows},{cols}: pick two different dimensions")

    def value(dim: str, rel: ProbedRelease, r: KernelSMResult) -> Any:
        return {"sm": f"SM{r.sm}", "release": rel.info.version, "kernel": r.key}.get(dim, r.config.get(dim, "-"))

    row_values: list[Any] = []
    col_values: list[Any] = []
    cells: dict[tuple[Any, Any], Any] = {}
    for rel in report.releases:
        for r in rel.results.values():
            for h in r.heads if "heads" in (rows, cols) else [None]:
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
