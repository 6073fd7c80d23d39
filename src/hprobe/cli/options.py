"""Options several commands share, declared once, and the axis options' help.
typer reads these annotations at run time."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hprobe.report.formats import format_help

# Axis options (--backend, --dtype, --topk, --q-len, --tokens, --page-size, ...)
# are whatever the probes declare, so they are read from the extra arguments.
AXIS_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True}
# Written out rather than read from the probes, which would load them for every
# `--help` and every warm check; tests/test_cli_misc.py fails when a probe's
# axes and this list differ.
AXIS_NAMES = (
    "backend",
    "dtype",
    "family",
    "head_dim",
    "head_dim_vo",
    "kv_counter",
    "kv_dtype",
    "kv_format",
    "kv_heads",
    "kv_lora_rank",
    "kv_pool",
    "layout",
    "page_size",
    "q_len",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "sinks",
    "tensor_cores",
    "tokens",
    "topk",
    "topk_lens",
)
AXIS_EPILOG = (
    f"Axis options: {', '.join('--' + name.replace('_', '-') for name in AXIS_NAMES)} "
    "(every axis `hprobe kernels` lists; comma lists on matrix and diff)."
)


def path_value(text: str) -> Path:
    """A path option's value: an empty one is an input error (Path('') would
    silently mean the current directory)."""
    if not text.strip():
        raise typer.BadParameter("empty path")
    return Path(text)


# Options `check` and `suggest` share, declared once.
TableOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--table",
        "-t",
        metavar="FILE",
        parser=path_value,
        help="Padding table (TOML). Repeatable. Default: the shipped tables in matrices/.",
    ),
]
RepoOpt = Annotated[
    Path | None,
    typer.Option(
        "--repo",
        metavar="DIR",
        parser=path_value,
        help=(
            "Read the padding rules from this source tree or installed package (static analysis: nothing is imported "
            "or run)."
        ),
    ),
]
MappingOpt = Annotated[
    Path | None,
    typer.Option(
        "--mapping",
        metavar="FILE",
        parser=path_value,
        help=(
            "With --repo: which padding class feeds which kernel. Default: the shipped mapping of the engine the tree "
            "is (vLLM or SGLang), else each in turn."
        ),
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="NAME=VALUE",
        help=(
            "With --repo: NAME=VALUE, a setting the consumer's rule reads (SGLang's envs), instead of its declared "
            "default (repeatable)."
        ),
    ),
]
ExcludeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--exclude",
        metavar="GLOB",
        help=(
            "With --repo: also skip paths matching this glob (repeatable). Tests, fixtures, venvs, site-packages and "
            "build outputs inside the tree are always skipped."
        ),
    ),
]
PadFnOpt = Annotated[
    str | None,
    typer.Option(
        "--pad-fn",
        metavar="MODULE:QUALNAME",
        help=(
            "Call your padding function (MODULE:QUALNAME or FILE.py:QUALNAME): imports and runs your code. Needs "
            "--kernel, --sm, --heads."
        ),
    ),
]
PadFnKernelOpt = Annotated[
    str | None,
    typer.Option("--kernel", "-k", metavar="KERNEL", help="With --pad-fn: the kernel (or variant) the function feeds."),
]
TablesSmOpt = Annotated[
    str | None,
    typer.Option(
        "--sm",
        metavar="SM",
        help=(
            "Target SM(s): 100, sm_100a, 10.0, 12.1, or a comma list. Default: the visible GPUs, else every SM the "
            "tables name."
        ),
    ),
]
ModelHeadsOpt = Annotated[
    int | None,
    typer.Option("--heads", metavar="N", help="Override every model's total query heads (its other attributes kept)."),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        metavar="NAME",
        help=(
            "Judge these models (comma list) of hprobe's model table (DeepSeek-V3, Kimi-K3, GLM-5, ...), each on the "
            "paths of its family. `hprobe models` lists them."
        ),
    ),
]
TpOpt = Annotated[
    str | None, typer.Option("--tp", metavar="TP", help="Override every model's TP degrees, e.g. 1,2,4,8.")
]
PinOpt = Annotated[
    str | None,
    typer.Option(
        "--pin",
        metavar="SPEC",
        help=(
            "The consumer's flashinfer requirement, e.g. 'flashinfer-python>=0.6.13': probe the lowest and highest "
            "releases it admits."
        ),
    ),
]
FlashinferOpt = Annotated[
    str | None,
    typer.Option(
        "--flashinfer",
        metavar="RELEASE",
        help=(
            "Probe these releases instead of the installed one: 0.6.13, a comma list, a wheel file or an unpacked "
            "directory. Fetched with your pip, cached, probed in a subprocess."
        ),
    ),
]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Ignore cached probe results.")]
WaiversOpt = Annotated[
    Path | None,
    typer.Option(
        "--waivers",
        metavar="FILE",
        parser=path_value,
        help=(
            "Accepted findings (TOML [[waiver]] tables with reason and expires). Default: hprobe-waivers.toml in the "
            "current directory or the --repo root, when there is one."
        ),
    ),
]
IgnoreOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--ignore",
        metavar="KEY=VALUE,...",
        help=(
            "Waive findings matching table, backend, kernel, sm, model, tp, release (every release the verdict rests "
            "on), verdict (globs); optional expires=YYYY-MM-DD and reason=TEXT (it may hold commas), keys in any "
            "order, each once. Repeatable."
        ),
    ),
]
# The formats `--format` offers, as the registry lists them (report/formats/__init__.py).
FORMAT_HELP = format_help("matrix")
CHECK_FORMAT_HELP = format_help("check")
FormatOpt = Annotated[str, typer.Option("--format", metavar="FORMAT", help=FORMAT_HELP)]


# What each command's exit code says, in its --help (docs/reference.md has the whole table).
GATE_EXITS = (
    "0 pass",
    "1 something would crash (broken, some-shapes; with --strict also reducible, table-refuses, off-fast-path)",
    "2 bad input",
    "3 undecided: something inconclusive or not judged, nothing broken",
    "4 torch or flashinfer unusable here",
)
MATRIX_EXITS = (
    "0 answered",
    "2 bad input",
    "3 nothing answered (every cell inconclusive)",
    "4 torch or flashinfer unusable here",
)
DIFF_EXITS = (
    "0 nothing changed",
    "1 an accepted set changed",
    "2 bad input",
    "3 nothing changed, some h_q inconclusive",
    "4 torch or flashinfer unusable here",
)
BISECT_EXITS = (
    "0 found",
    "2 bad input",
    "3 not found for sure (an inconclusive release in the way)",
    "4 torch or flashinfer unusable here",
)
TOOL_EXITS = ("0 done", "2 bad input")


def examples(*lines: str, exits: tuple[str, ...] | None = TOOL_EXITS) -> str:
    """A help epilog of example command lines and the command's exit codes
    (None: a group, whose commands say theirs); click keeps \\b blocks as written."""
    said = "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)
    if exits is None:
        return said + "\n\nEach command's --help lists its exit codes."
    codes = [*exits, "5 internal error (HPROBE_DEBUG=1 shows the traceback)", "130 Ctrl-C, 143 SIGTERM"]
    return said + "\n\nExit codes:\n\n\b\n" + "\n".join(f"  {code}" for code in codes)
