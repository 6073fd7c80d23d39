"""The `hprobe` command line: parse options, call the service, pick a format."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable, List, Optional

import typer

from . import __version__
from .errors import EXIT_INPUT, HprobeError, InputError

EXIT_INTERNAL = 5

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    no_args_is_help=True,
    help="Which query-head counts FlashInfer's MLA kernels accept, from their own validators, "
    "and whether a padding table pads too much, too little, or just right.",
)


def _formatter(json_output: bool):
    from .formats import JsonFormatter, TextFormatter

    return JsonFormatter() if json_output else TextFormatter()


def _run(job: Callable[[], int]) -> None:
    """Run a command body: one line on stderr and a documented exit code on failure."""
    try:
        code = job()
    except HprobeError as exc:
        typer.echo(f"hprobe: error: {exc.message}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        typer.echo("hprobe: interrupted", err=True)
        raise typer.Exit(130) from None
    except Exception as exc:  # noqa: BLE001 - a bug of ours still gets one line, not a traceback
        if os.environ.get("HPROBE_DEBUG"):
            raise
        message = " ".join(str(exc).split())[:300]
        typer.echo(f"hprobe: internal error: {type(exc).__name__}: {message} (set HPROBE_DEBUG=1 for the traceback)", err=True)
        raise typer.Exit(EXIT_INTERNAL) from None
    raise typer.Exit(code)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"hprobe {__version__}")
        raise typer.Exit(0)


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."),
) -> None:
    """hprobe: a kernel compatibility probe for LLM-serving engineers."""


@app.command()
def check(
    table: Optional[List[Path]] = typer.Option(None, "--table", "-t", help="Padding table (TOML). Repeatable. Default: the shipped tables in matrices/."),
    sm: Optional[str] = typer.Option(None, "--sm", help="Target SM(s): 100, sm_100a, 10.0, 12.1, or a comma list. Default: the visible GPUs, else every SM the tables name."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 on reducible or table-refuses findings too."),
    heads: Optional[int] = typer.Option(None, "--heads", help="Override every model's total query heads."),
    tp: Optional[str] = typer.Option(None, "--tp", help="Override every model's TP degrees, e.g. 1,2,4,8."),
    json_output: bool = typer.Option(False, "--json", help="Emit the hprobe.check/1 JSON document."),
) -> None:
    """Check padding tables against the installed flashinfer's validators."""

    def job() -> int:
        from .service import run_check
        from .tables import load_tables, override_models

        if heads is not None and heads <= 0:
            raise InputError(f"--heads {heads}: the number of query heads must be positive")
        tp_list = _parse_int_list(tp, "--tp") if tp is not None else None
        tables = [override_models(t, heads, tp_list) for t in load_tables(table)]
        report = run_check(tables, sm, strict)
        _formatter(json_output).check(report)
        return report.exit_code

    _run(job)


@app.command()
def matrix(
    kernel: Optional[List[str]] = typer.Option(None, "--kernel", "-k", help="Kernel id(s); repeatable or comma list. Default: every probe."),
    sm: Optional[str] = typer.Option(None, "--sm", help="Target SM(s). Default: the visible GPUs, else every SM the kernels are built for."),
    heads: str = typer.Option("1-256", "--heads", help="Head counts to probe: 1-256, 8,16,24, 1-8,16."),
    grid: bool = typer.Option(False, "--grid", help="A table of marks, one row per h_q."),
    json_output: bool = typer.Option(False, "--json", help="Emit the hprobe.matrix/1 JSON document."),
) -> None:
    """Print the h_q each kernel accepts on each SM with the installed flashinfer."""

    def job() -> int:
        from .kernels import PROBES
        from .service import parse_heads, run_matrix

        ids = [k.strip() for item in (kernel or []) for k in item.split(",") if k.strip()] or sorted(PROBES)
        head_list = parse_heads(heads)
        report = run_matrix(ids, sm, head_list)
        _formatter(json_output).matrix(report, grid=grid)
        return 0

    _run(job)


@app.command()
def kernels(json_output: bool = typer.Option(False, "--json", help="Emit JSON.")) -> None:
    """List the kernel probes: entry point, SM families, and presence in the installed flashinfer."""

    def job() -> int:
        from .kernels import PROBES
        from .kernels.presence import entry_point_present

        rows = []
        for probe in PROBES.values():
            rows.append(
                {
                    "id": probe.id,
                    "entry_point": probe.entry_point,
                    "sms": list(probe.default_sms),
                    "summary": probe.summary,
                    "installed_flashinfer_has_entry_point": entry_point_present(probe.entry_point),
                }
            )
        if json_output:
            _formatter(True).data({"schema": "hprobe.kernels/1", "kernels": rows}, "kernels")
            return 0
        from rich import box
        from rich.table import Table

        from .formats.text import make_console

        t = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for col in ("id", "entry point", "SMs", "installed", "what"):
            t.add_column(col)
        for row in rows:
            present = row["installed_flashinfer_has_entry_point"]
            t.add_row(
                row["id"],
                row["entry_point"],
                ",".join(map(str, row["sms"])),
                {True: "yes", False: "absent", None: "no flashinfer"}[present],
                row["summary"],
            )
        make_console().print(t)
        return 0

    _run(job)


@app.command()
def env(json_output: bool = typer.Option(False, "--json", help="Emit JSON.")) -> None:
    """GPUs and their SM, CUDA as torch sees it, torch and flashinfer versions. Needs no GPU."""

    def job() -> int:
        from .envinfo import collect

        info = collect()
        if json_output:
            _formatter(True).data({"schema": "hprobe.env/1", **info}, "env")
            return 0
        gpus = info.pop("gpus")
        shown = dict(info)
        shown["gpus"] = ", ".join(f"{g['index']}: {g['name']} (SM{g['sm']})" for g in gpus) or "none visible"
        _formatter(False).data({k: ("-" if v is None else v) for k, v in shown.items()}, "hprobe env")
        return 0

    _run(job)


def _parse_int_list(text: str, option: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InputError(f"{option} {text!r}: expected a comma list of positive integers") from None
    if not values or min(values) <= 0:
        raise InputError(f"{option} {text!r}: expected a comma list of positive integers")
    return values


def run() -> None:  # console-script entry point
    app(prog_name="hprobe")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
