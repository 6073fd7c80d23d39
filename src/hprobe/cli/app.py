"""The `hprobe` commands: parse options into a request, call one command,
render it with the chosen format, exit.

The commands import the rest of hprobe inside their bodies on purpose: `hprobe
--help`, `--version` and an input error answer in a fraction of a second,
without loading the probing machinery they do not need."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from hprobe import __version__
from hprobe.cli.coercion import install as install_light_coercion
from hprobe.cli.options import (
    AXIS_CONTEXT,
    AXIS_EPILOG,
    BISECT_EXITS,
    CHECK_FORMAT_HELP,
    DIFF_EXITS,
    FORMAT_HELP,
    GATE_EXITS,
    MATRIX_EXITS,
    ExcludeOpt,
    FlashinferOpt,
    FormatOpt,
    IgnoreOpt,
    MappingOpt,
    ModelHeadsOpt,
    ModelOpt,
    NoCacheOpt,
    PadFnKernelOpt,
    PadFnOpt,
    PinOpt,
    RepoOpt,
    SetOpt,
    TableOpt,
    TablesSmOpt,
    TpOpt,
    WaiversOpt,
    examples,
    path_value,
)
from hprobe.cli.run import progress as progress_line
from hprobe.cli.run import run_app, run_job, say, working_directory
from hprobe.model.errors import InputError
from hprobe.model.padding import MAX_HEADS
from hprobe.report.formats import DEFAULT as DEFAULT_FORMAT
from hprobe.system.fileio import SiteWriter, check_output, is_stdout, write_output

if TYPE_CHECKING:
    from hprobe.report.formats import Format


def _placeholders_without_types() -> None:
    """typer writes an argument's Python type after its placeholder (`OLD
    <str>`); a named placeholder says what to give, the type adds nothing."""
    from typer.core import TyperArgument

    shown = getattr(TyperArgument, "display_type_rich", None)
    if shown is None:
        return

    def display(self: TyperArgument, ctx: object) -> str | None:
        return None if self.metavar else shown(self, ctx)

    TyperArgument.display_type_rich = display  # type: ignore[method-assign, assignment]


_placeholders_without_types()
install_light_coercion()  # before any command parses: every way in (console script, -m, CliRunner) coerces alike

app = typer.Typer(
    # `--install-completion` / `--show-completion` for bash, zsh, fish and PowerShell, as typer offers them.
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    no_args_is_help=True,
    help="Which query-head counts FlashInfer's MLA kernels accept, from their own validators, "
    "and whether a padding table pads too much, too little, or just right.",
    epilog=examples(
        "hprobe check --repo ~/vllm --flashinfer 0.7.4",
        "hprobe suggest --repo ~/vllm --flashinfer 0.7.4 --diff hprobe.diff",
        "hprobe matrix -k dsv4-sparse-mla --sm 100,120",
        exits=None,
    ),
)


def _show(
    fmt: Format, report: object, details: bool = True, grid: bool = False, pivot: tuple[str, str] | None = None
) -> None:
    """The report, rendered, on stdout (styled for it): formats only render."""
    from hprobe.report.formats import RenderOptions, render

    options = RenderOptions(details=details or not fmt.summarised, grid=grid, pivot=pivot, like=sys.stdout)
    sys.stdout.write(render(fmt.name, report, options))
    sys.stdout.flush()


def _format(option: str, json_output: bool, command: str) -> Format:
    """The --format asked for, refused before any work when the command has no
    rendering in it."""
    from hprobe.report.formats import chosen

    return chosen(option, json_output, command)


def _axis_args(ctx: typer.Context) -> list[str]:
    """The axis options among a command's extra arguments; any other unknown
    option is one line, with the closest real option when there is one."""
    import difflib

    from hprobe.cli.options import AXIS_NAMES

    axes = ["--" + name.replace("_", "-") for name in AXIS_NAMES]
    own = [opt for param in ctx.command.params for opt in param.opts if opt.startswith("--")]
    for token in ctx.args:
        flag = token.partition("=")[0]
        if token.startswith("--") and flag not in axes:
            close = difflib.get_close_matches(flag, own + axes, n=1, cutoff=0.7)
            hint = f"did you mean {close[0]}?" if close else f"`hprobe {ctx.command.name} --help` lists the options"
            raise InputError(f"no such option: {flag} ({hint})")
    return ctx.args


def _no_clobbering(
    outputs: dict[str, Optional[Path]],
    tables: Optional[List[Path]] = None,
    mapping: Optional[Path] = None,
    baseline: Optional[Path] = None,
    repo: Optional[Path] = None,
    waivers: Optional[Path] = None,
) -> None:
    """Refuse, before any work, an output that would replace an input or another output."""
    from hprobe.system.fileio import refuse_clobbering

    inputs = {
        "--table": list(tables or []),
        "--mapping": [mapping] if mapping else [],
        "--baseline": [baseline] if baseline else [],
        "--waivers": [waivers] if waivers else [],
    }
    refuse_clobbering(outputs, inputs, repo)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"hprobe {__version__}")
        raise typer.Exit(0)


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """hprobe: a kernel compatibility probe for LLM-serving engineers."""


@app.command(
    context_settings=AXIS_CONTEXT,
    epilog=examples(
        "hprobe check",
        "hprobe check --repo ~/vllm --flashinfer 0.7.4",
        "hprobe check --table my-table.toml --sm 100,120 --strict",
        "hprobe check --repo . --junit hprobe.xml --format markdown",
        exits=GATE_EXITS,
    )
    + "\n\n"
    + AXIS_EPILOG,
)
def check(
    ctx: typer.Context,
    table: TableOpt = None,
    repo: RepoOpt = None,
    mapping: MappingOpt = None,
    exclude: ExcludeOpt = None,
    settings: SetOpt = None,
    pad_fn: PadFnOpt = None,
    kernel: PadFnKernelOpt = None,
    sm: TablesSmOpt = None,
    strict: bool = typer.Option(
        False,
        "--strict",
        help=(
            "Exit 1 on reducible, table-refuses or off-fast-path findings too, on `assumed` rows (a call whose "
            "head count or arguments were not read) and on calls not judged."
        ),
    ),
    trust_validators: bool = typer.Option(
        False,
        "--trust-validators",
        help="Judge a count the validators accept as they say where trtllm-gen's compiled selection follows and "
        "cannot be evaluated here (no kernel table, no port): said on the verdict line. Otherwise such a count is "
        "inconclusive (exit 3).",
    ),
    heads: ModelHeadsOpt = None,
    model: ModelOpt = None,
    tp: TpOpt = None,
    pin: PinOpt = None,
    flashinfer: FlashinferOpt = None,
    baseline: Optional[Path] = typer.Option(
        None,
        "--baseline",
        metavar="FILE",
        parser=path_value,
        help="A recorded `hprobe matrix --json`: also report what changed since (exit 1 on change).",
    ),
    junit: Optional[Path] = typer.Option(
        None,
        "--junit",
        metavar="FILE",
        parser=path_value,
        help="Also write a JUnit XML report here (one test case per backend x SM x per-rank count).",
    ),
    output_format: str = typer.Option(DEFAULT_FORMAT, "--format", metavar="FORMAT", help=CHECK_FORMAT_HELP),
    details: bool = typer.Option(
        False, "--details", help="Text: show every row after the summary, not only those that are not ok."
    ),
    no_cache: NoCacheOpt = False,
    waivers: WaiversOpt = None,
    ignore: IgnoreOpt = None,
    json_output: bool = typer.Option(
        False, "--json", help="Emit the hprobe.check/2 JSON document (same as --format json)."
    ),
) -> None:
    """Check padding tables (or the rules in a repo) against flashinfer's own validators."""

    def job() -> int:
        from hprobe.commands.check import run_check
        from hprobe.commands.request import RuleRequest

        fmt = _format(output_format, json_output, "check")
        request = RuleRequest.parse(
            "check",
            tables=table,
            repo=repo,
            mapping=mapping,
            exclude=exclude,
            settings=settings,
            pad_fn=pad_fn,
            kernel=kernel,
            sm=sm,
            heads=heads,
            tp=tp,
            pin=pin,
            flashinfer=flashinfer,
            extra_args=_axis_args(ctx),
            model=model,
        )
        from hprobe.rules.waivers import gather_waivers, waivers_file

        here = working_directory()  # none where it was removed: no waiver file to find there
        places = [*([Path(here)] if here is not None else []), *([repo] if repo is not None else [])]
        accepted = gather_waivers(waivers, list(ignore or []), places)  # read before probing
        if junit is not None:
            check_output(junit, "--junit")  # a bad path costs nothing: refused before probing
            if fmt.whole_document and is_stdout(junit):
                # XML after a document (JSON, SARIF, Markdown) would break it.
                raise InputError(f"--junit {junit}: stdout carries the {fmt.name} document; write the JUnit to a file")
        _no_clobbering({"--junit": junit}, table, mapping, baseline, repo, waivers_file(waivers, places))
        recorded = None
        if baseline is not None:
            from hprobe.commands.drift import load_baseline

            recorded = load_baseline(str(baseline))
        with progress_line(fmt.for_tools) as progress:
            report = run_check(request, strict, recorded, not no_cache, progress, accepted, trust=trust_validators)
        from hprobe.report.formats import render, wanted_lines, written_by
        from hprobe.system.streams import write_command

        if junit is not None:
            # Written before the report is printed: a failed write is the exit
            # code the printed report (and its JSON `exit_code`) then never contradicts.
            write_output(junit, render(written_by("--junit").name, report), "--junit")
        _show(fmt, report, details=details)
        for line in wanted_lines("check", report):
            write_command(sys.stderr, line)
        return report.exit_code

    run_job(job)


@app.command(
    context_settings=AXIS_CONTEXT,
    epilog=examples(
        "hprobe suggest --repo ~/vllm --flashinfer 0.7.4 --diff hprobe.diff",
        "hprobe suggest --table my-table.toml -o fixed.toml",
        exits=GATE_EXITS,
    )
    + "\n\n"
    + AXIS_EPILOG,
)
def suggest(
    ctx: typer.Context,
    table: TableOpt = None,
    repo: RepoOpt = None,
    mapping: MappingOpt = None,
    exclude: ExcludeOpt = None,
    settings: SetOpt = None,
    pad_fn: PadFnOpt = None,
    kernel: PadFnKernelOpt = None,
    sm: TablesSmOpt = None,
    heads: ModelHeadsOpt = None,
    model: ModelOpt = None,
    tp: TpOpt = None,
    pin: PinOpt = None,
    flashinfer: FlashinferOpt = None,
    output: Optional[Path] = typer.Option(
        None,
        "--output",
        "-o",
        metavar="FILE",
        parser=path_value,
        help="Write the table(s) with the suggested rules here as TOML (readable by `check --table`).",
    ),
    diff_file: Optional[Path] = typer.Option(
        None,
        "--diff",
        metavar="FILE",
        parser=path_value,
        help=(
            "With --repo: write the suggested rules and pin as a unified diff of the tree's own source here (apply "
            "with `git apply` in the --repo directory)."
        ),
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite --output / --diff."),
    since: Optional[str] = typer.Option(
        None,
        "--since",
        metavar="RELEASE",
        help=(
            "Start the search for the first safe release here: a release, or `first` for the first release whose "
            "source defines the kernel's entry point (default: your pin's floor, else the release judged)."
        ),
    ),
    no_cache: NoCacheOpt = False,
    output_format: str = typer.Option(DEFAULT_FORMAT, "--format", metavar="FORMAT", help=CHECK_FORMAT_HELP),
    json_output: bool = typer.Option(False, "--json", help="Emit the hprobe.suggest/1 JSON document."),
) -> None:
    """The padding rule the kernels call for: per backend, the smallest count every release probed accepts."""

    def job() -> int:
        from packaging.version import Version

        from hprobe.commands.request import RuleRequest, release_number
        from hprobe.commands.suggest import run_suggest
        from hprobe.model.pins import SINCE_FIRST

        fmt = _format(output_format, json_output, "suggest")
        request = RuleRequest.parse(
            "suggest",
            tables=table,
            repo=repo,
            mapping=mapping,
            exclude=exclude,
            settings=settings,
            pad_fn=pad_fn,
            kernel=kernel,
            sm=sm,
            heads=heads,
            tp=tp,
            pin=pin,
            flashinfer=flashinfer,
            extra_args=_axis_args(ctx),
            model=model,
        )
        # Refused before any probing.
        start: Version | str | None = None
        if since is not None:
            start = SINCE_FIRST if since.strip() == SINCE_FIRST else release_number(since, "--since")
        if output is not None:
            check_output(output, "--output", overwrite=force)
        if diff_file is not None:
            check_output(diff_file, "--diff", overwrite=force)
        _no_clobbering({"--output": output, "--diff": diff_file}, table, mapping, None, repo)
        with progress_line(fmt.for_tools) as progress:
            result = run_suggest(
                request,
                start=start,
                want_table=output is not None,
                diff_name=str(diff_file) if diff_file is not None else None,
                use_cache=not no_cache,
                progress=progress,
            )
        from hprobe.system.escaping import visible

        written: list[str] = []
        if output is not None and result.table_toml is not None:
            write_output(output, result.table_toml, "--output", overwrite=force)
            written.append(f"wrote {visible(str(output))}")
        diff_written = diff_file is not None and result.patch is not None and bool(result.patch.diff)
        if diff_written:
            assert diff_file is not None and result.patch is not None
            write_output(diff_file, result.patch.diff, "--diff", overwrite=force)
            written.append(
                f"wrote {visible(str(diff_file))}: {len(result.patch.changed)} "
                f"change{'s' * (len(result.patch.changed) != 1)} (apply with `git apply` in the --repo directory)"
            )
        _show(fmt, result)
        for line in written:
            say(line)
        if diff_file is not None and not diff_written and result.patch is not None and result.patch.nothing_needed:
            # The tree needs no change: said once, the file not written, and the
            # run's own verdict the exit code (0, or 3 where answers are undecided).
            say(f"hprobe: --diff {visible(str(diff_file))} not written: nothing to change")
            return result.exit_code
        if diff_file is not None and not diff_written:
            # Asked for and not written: a script's next step (`git apply`) must not run on nothing.
            why = "nothing to rewrite" if result.patch is not None else "no patch was made"
            say(
                f"hprobe: error: --diff {visible(str(diff_file))} not written: {why} (the report above says why for "
                "each rule)"
            )
            return result.exit_code if result.exit_code in (1, 3) else 2
        return result.exit_code

    run_job(job)


@app.command(
    context_settings=AXIS_CONTEXT,
    epilog=examples(
        "hprobe matrix -k dsv4-sparse-mla --sm 100,120",
        "hprobe matrix -k trtllm-mla --sm 100 --flashinfer 0.6.13,0.7.4",
        "hprobe matrix -k dsv4-sparse-mla --sm 100 --heads 1-128 --grid",
        "hprobe matrix -k gqa-decode --model Llama-3.1-405B,Qwen3.5-27B --sm 90 --flashinfer 0.6.14,0.7.4",
        exits=MATRIX_EXITS,
    )
    + "\n\n"
    + AXIS_EPILOG,
)
def matrix(
    ctx: typer.Context,
    kernel: Optional[List[str]] = typer.Option(
        None, "--kernel", "-k", metavar="KERNEL", help="Kernel id(s); repeatable or comma list. Default: every probe."
    ),
    sm: Optional[str] = typer.Option(
        None,
        "--sm",
        metavar="SM",
        help="Target SM(s). Default: the visible GPUs, else every SM the kernels are built for.",
    ),
    heads: Optional[str] = typer.Option(
        None, "--heads", metavar="HEADS", help="Head counts to probe: 1-256 (the default), 8,16,24, 1-8,16."
    ),
    model: Optional[str] = typer.Option(
        None,
        "--model",
        metavar="NAME",
        help=(
            "Probe these models (comma list; `hprobe models` lists them) as one rank hands the kernel at each "
            "TP degree: query heads, and for GQA/MHA each layer kind's KV heads, head dim and sinks."
        ),
    ),
    tp: Optional[str] = typer.Option(
        None, "--tp", metavar="TP", help="With --model: these TP degrees instead of the model's, e.g. 1,2,4,8."
    ),
    grid: bool = typer.Option(
        False, "--grid", help="A table of marks, one row per h_q, one column per kernel variant and SM."
    ),
    pivot: Optional[str] = typer.Option(
        None,
        "--pivot",
        metavar="ROWS,COLS",
        help="ROWS,COLS: any two of heads, sm, release, kernel or an axis (topk, backend, ...).",
    ),
    json_output: bool = typer.Option(False, "--json", help="Emit the hprobe.matrix/2 JSON document."),
    output_format: FormatOpt = DEFAULT_FORMAT,
    flashinfer: Optional[str] = typer.Option(
        None,
        "--flashinfer",
        metavar="RELEASE",
        help=(
            "Probe these releases instead of the installed one: 0.6.13, a comma list, a wheel file or an unpacked "
            "directory. Fetched with your pip, cached, probed in a subprocess."
        ),
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help="Ignore cached probe results for fetched releases."),
) -> None:
    """Print the h_q each kernel accepts on each SM with the installed flashinfer."""

    def job() -> int:
        fmt = _format(output_format, json_output, "matrix")
        from hprobe.commands.matrix import run_matrix
        from hprobe.commands.request import check_release_options, kernel_ids, parse_axes, parse_pivot
        from hprobe.model.targets import parse_heads
        from hprobe.support.trees import parse_spec

        check_release_options(flashinfer, None)
        dims = parse_pivot(pivot)
        models = None
        if model is not None:
            from hprobe.commands.request import model_options

            models = model_options(model, heads, grid, dims, tp)
        elif tp is not None:
            raise InputError("--tp: TP degrees apply to models; give --model too")
        with progress_line(fmt.for_tools) as progress:
            report = run_matrix(
                kernel_ids(kernel),
                sm,
                parse_heads(heads or "1-256"),
                parse_spec(flashinfer) if flashinfer else None,
                not no_cache,
                progress,
                parse_axes(_axis_args(ctx)),
                dims,
                models,
            )
        if dims is not None:
            from hprobe.report.pivot import pivot_cells

            pivot_cells(report, *dims)  # an impossible pivot is an input error before any output
        _show(fmt, report, grid=grid, pivot=dims)
        return report.exit_code

    run_job(job)


@app.command(
    context_settings=AXIS_CONTEXT,
    epilog=examples("hprobe diff 0.6.13 0.6.14 -k dsv4-sparse-mla --sm 100", exits=DIFF_EXITS) + "\n\n" + AXIS_EPILOG,
)
def diff(
    ctx: typer.Context,
    old: str = typer.Argument(..., metavar="OLD", help="The release before: 0.6.13, a wheel file or a directory."),
    new: str = typer.Argument(..., metavar="NEW", help="The release after."),
    kernel: Optional[List[str]] = typer.Option(
        None, "--kernel", "-k", metavar="KERNEL", help="Kernel id(s). Default: every probe."
    ),
    sm: Optional[str] = typer.Option(
        None, "--sm", metavar="SM", help="Target SM(s). Default: every SM the kernels are built for."
    ),
    heads: str = typer.Option("1-256", "--heads", metavar="HEADS", help="Head counts to compare."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Ignore cached probe results."),
    json_output: bool = typer.Option(False, "--json", help="Emit the hprobe.diff/1 JSON document."),
    output_format: FormatOpt = DEFAULT_FORMAT,
) -> None:
    """h_q that became accepted or rejected between two releases. Exit 1 when any changed."""

    def job() -> int:
        fmt = _format(output_format, json_output, "diff")
        from hprobe.commands.drift import diff_reports
        from hprobe.commands.matrix import run_matrix
        from hprobe.commands.request import kernel_ids, parse_axes
        from hprobe.model.targets import parse_heads
        from hprobe.support.trees import parse_spec

        with progress_line(fmt.for_tools) as progress:
            report = run_matrix(
                kernel_ids(kernel),
                sm,
                parse_heads(heads),
                parse_spec(old) + parse_spec(new),
                not no_cache,
                progress,
                parse_axes(_axis_args(ctx)),
            )
        result = diff_reports(report)
        _show(fmt, result)
        return result.exit_code

    run_job(job)


@app.command(
    epilog=examples(
        "hprobe bisect -k dsv4-sparse-mla --sm 100 --heads 16",
        "hprobe bisect -k trtllm-mla --sm 100 --heads 96 --range 0.6.10..0.7.4",
        exits=BISECT_EXITS,
    )
)
def bisect(
    kernel: str = typer.Option(
        ..., "--kernel", "-k", metavar="KERNEL", help="Kernel id or variant, e.g. trtllm-mla[backend=xqa]."
    ),
    sm: str = typer.Option(..., "--sm", metavar="SM", help="One target SM."),
    heads: int = typer.Option(..., "--heads", metavar="N", help="The per-rank head count in question."),
    range_: Optional[str] = typer.Option(
        None, "--range", metavar="LO..HI", help="LO..HI release range, inclusive, e.g. 0.6.10..0.6.16."
    ),
    exhaustive: bool = typer.Option(
        False, "--exhaustive", help="Probe every release in the range, not a binary search."
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help="Ignore cached probe results."),
    json_output: bool = typer.Option(False, "--json", help="Emit the hprobe.bisect/1 JSON document."),
    output_format: FormatOpt = DEFAULT_FORMAT,
) -> None:
    """The first release whose validators accept --heads (and the last that rejects it)."""

    def job() -> int:
        fmt = _format(output_format, json_output, "bisect")
        from hprobe.commands.drift import run_bisect
        from hprobe.model.sm import parse_sm_list

        sms = parse_sm_list(sm)
        if len(sms) != 1:
            raise InputError("--sm: bisect takes one SM")
        if not 0 < heads <= MAX_HEADS:
            raise InputError(f"--heads {heads}: must be a count from 1 to {MAX_HEADS}")
        with progress_line(fmt.for_tools) as progress:
            result = run_bisect(kernel, sms[0], heads, range_, exhaustive, not no_cache, progress)
        _show(fmt, result)
        return result.exit_code

    run_job(job)


@app.command(
    context_settings=AXIS_CONTEXT,
    epilog=examples(
        "hprobe report --releases 0.6.12..0.7.4 -k dsv4-sparse-mla --sm 100,120 -o site/", exits=MATRIX_EXITS
    )
    + "\n\n"
    + AXIS_EPILOG,
)
def report(
    ctx: typer.Context,
    releases: str = typer.Option(
        ...,
        "--releases",
        metavar="RELEASES",
        help="LO..HI (every published release in it, inclusive) or a comma list of releases, wheels or directories.",
    ),
    kernel: Optional[List[str]] = typer.Option(
        None, "--kernel", "-k", metavar="KERNEL", help="Kernel id(s); repeatable or comma list. Default: every probe."
    ),
    sm: Optional[str] = typer.Option(
        None, "--sm", metavar="SM", help="Target SM(s). Default: every SM the kernels are built for."
    ),
    heads: str = typer.Option("1-256", "--heads", metavar="HEADS", help="Head counts: 1-256, 8,16,24."),
    output: Path = typer.Option(
        ...,
        "--output",
        "-o",
        metavar="DIR",
        parser=path_value,
        help="Directory to write index.html, matrix.md and matrix.json into.",
    ),
    table: TableOpt = None,
    repo: RepoOpt = None,
    mapping: MappingOpt = None,
    force: bool = typer.Option(False, "--force", help="Overwrite those files if they exist."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Ignore cached probe results."),
) -> None:
    """A static page of the support matrix across releases: one heatmap per kernel variant and SM,
    and with --table or --repo each padding table's verdicts release by release."""

    def job() -> int:
        from hprobe.report.formats import SITE_FILES

        _no_clobbering({f"--output ({name})": output / name for name in SITE_FILES}, table, mapping, None, repo)
        site = SiteWriter(output, SITE_FILES, "--output", force)
        try:
            return _report(site)
        finally:
            site.discard()

    def _report(site: SiteWriter) -> int:
        from hprobe.commands.report import run_report
        from hprobe.commands.request import RuleRequest, kernel_ids, parse_axes
        from hprobe.model.targets import parse_heads
        from hprobe.report.formats import SITE_FILES, site_documents
        from hprobe.system.escaping import visible

        wanted, kernels, axes = parse_heads(heads), kernel_ids(kernel), parse_axes(_axis_args(ctx))
        request = None
        if table or repo is not None:
            request = RuleRequest.parse(
                "report",
                tables=table,
                repo=repo,
                mapping=mapping,
                exclude=None,
                settings=None,
                pad_fn=None,
                kernel=None,
                sm=sm,
                heads=None,
                tp=None,
                pin=None,
                flashinfer=None,
                extra_args=[],
            )
        with progress_line(False) as progress:
            report = run_report(releases, kernels, sm, wanted, axes, request, not no_cache, progress)
        site.commit(site_documents(report))
        say(
            f"wrote {visible(str(output))}/{', '.join(SITE_FILES)}: {len(report.matrix.releases)} releases, "
            f"{len(report.matrix.keys)} variants"
        )
        return 0

    run_job(job)


table_app = typer.Typer(no_args_is_help=True, help="Padding tables: extract one from a source tree.")
app.add_typer(table_app, name="table")


@table_app.command("extract", epilog=examples("hprobe table extract --repo ~/vllm -o vllm-table.toml"))
def table_extract(
    repo: Path = typer.Option(
        ...,
        "--repo",
        metavar="DIR",
        parser=path_value,
        help="Source tree or installed package to read (static analysis: nothing is imported or run).",
    ),
    mapping: MappingOpt = None,
    exclude: Optional[List[str]] = typer.Option(
        None,
        "--exclude",
        metavar="GLOB",
        help=(
            "Also skip paths matching this glob (repeatable). Tests, fixtures, venvs, site-packages and build outputs "
            "inside the tree are always skipped."
        ),
    ),
    settings: SetOpt = None,
    model: ModelOpt = None,
    flashinfer: Optional[str] = typer.Option(
        None,
        "--flashinfer",
        metavar="RELEASE",
        help=(
            "For rules that read flashinfer's own tables (SGLang): the release to evaluate them against. Default: the "
            "repo's pin when it names one release, else the installed flashinfer."
        ),
    ),
    output: Optional[Path] = typer.Option(
        None,
        "--output",
        "-o",
        metavar="FILE",
        parser=path_value,
        help="Write the TOML here instead of stdout (an existing file is not overwritten without --force).",
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite --output."),
    json_output: bool = typer.Option(False, "--json", help="Emit what was found as JSON instead of TOML."),
) -> None:
    """Write the padding table found in a source tree as TOML, to commit and review."""

    def job() -> int:
        from hprobe.commands.catalogue import extract_table
        from hprobe.commands.request import parse_settings
        from hprobe.rules.repo.extract import table_toml

        if output is not None:
            check_output(output, "--output", overwrite=force)
        _no_clobbering({"--output": output}, None, mapping, None, repo)
        found = extract_table(repo, mapping, tuple(exclude or ()), parse_settings(settings), flashinfer, model)
        if json_output:
            from hprobe.commands.catalogue import extract_report

            _show(_format("", True, "table"), extract_report(found))
            return 0
        text = table_toml(found)
        if output is None:
            sys.stdout.write(text)
        else:
            write_output(output, text, "--output", overwrite=force)
            typer.echo(
                f"wrote {output}: {len(found.table.backends)} backends, {len(found.classes)} padding classes", err=True
            )
        return 0

    run_job(job)


@app.command(epilog=examples("hprobe kernels", "hprobe kernels --releases 0.6.10..0.7.4"))
def kernels(
    releases: Optional[str] = typer.Option(
        None,
        "--releases",
        metavar="RELEASES",
        help=(
            "Also say which of these releases define each entry point: a comma list or LO..HI (fetched, read without "
            "importing)."
        ),
    ),
    json_output: bool = typer.Option(False, "--json", help="Emit JSON."),
    output_format: FormatOpt = DEFAULT_FORMAT,
) -> None:
    """List the kernel probes: entry point, SM families, axes, and which releases have the entry point."""

    def job() -> int:
        fmt = _format(output_format, json_output, "kernels")
        from hprobe.commands.catalogue import kernels_report

        if releases:  # fetched: worth a status line
            with progress_line(fmt.for_tools) as progress:
                report = kernels_report(releases, progress)
        else:
            report = kernels_report(None)
        _show(fmt, report)
        return 0

    run_job(job)


@app.command(epilog=examples("hprobe env", "hprobe env --format json"))
def env(
    json_output: bool = typer.Option(False, "--json", help="Emit JSON (same as --format json)."),
    output_format: FormatOpt = DEFAULT_FORMAT,
) -> None:
    """GPUs and their SM, CUDA as torch sees it, torch and flashinfer versions. Needs no GPU."""

    def job() -> int:
        from hprobe.commands.catalogue import env_report

        fmt = _format(output_format, json_output, "env")
        _show(fmt, env_report())
        return 0

    run_job(job)


@app.command(epilog=examples("hprobe models", "hprobe check --model Kimi-K3 --sm 100"))
def models(
    json_output: bool = typer.Option(False, "--json", help="Emit JSON (same as --format json)."),
    output_format: FormatOpt = DEFAULT_FORMAT,
) -> None:
    """The models hprobe knows: MLA ones (`check --model`: total query heads, TP
    degrees, the engine paths they take) and GQA/MHA ones (`matrix --model`: KV
    heads and head dim per kind of layer), with the config each count comes from."""

    def job() -> int:
        from hprobe.commands.catalogue import models_report

        fmt = _format(output_format, json_output, "models")
        _show(fmt, models_report())
        return 0

    run_job(job)


cache_app = typer.Typer(
    no_args_is_help=False,
    invoke_without_command=True,
    help="What hprobe's cache holds per flashinfer release (wheels, unpacked trees, answers), and freeing it.",
    epilog=examples(
        "hprobe cache", "hprobe cache --format json", "hprobe cache prune --keep '>=0.7'", "hprobe cache clear"
    ),
)
app.add_typer(cache_app, name="cache")
CacheFormatOpt = typer.Option(DEFAULT_FORMAT, "--format", metavar="FORMAT", help=FORMAT_HELP)


def _cache_job(action, output_format: str) -> None:
    def job() -> int:
        fmt = _format(output_format, False, "cache")
        _show(fmt, action())
        return 0

    run_job(job)


@cache_app.callback()
def cache_show(ctx: typer.Context, output_format: str = CacheFormatOpt) -> None:
    """Sizes per release and in all, and where the cache is."""
    if ctx.invoked_subcommand is None:
        from hprobe.commands.cache import show_cache

        _cache_job(show_cache, output_format)


@cache_app.command(
    "prune",
    epilog=examples(
        "hprobe cache prune --release 0.6.13",
        "hprobe cache prune --keep '>=0.6.14,<0.8'",
        "hprobe cache prune --older-than 30",
    ),
)
def cache_prune(
    release: Optional[List[str]] = typer.Option(
        None,
        "--release",
        metavar="RELEASE",
        help="Remove this release's wheel, tree, bytecode and answers (repeatable).",
    ),
    older_than: Optional[float] = typer.Option(
        None, "--older-than", metavar="DAYS", help="Remove entries not written for DAYS days."
    ),
    keep: Optional[str] = typer.Option(
        None,
        "--keep",
        metavar="PIN",
        help="Remove every release but these: a comma list (0.6.13,0.7.2) or a pin ('>=0.6.13,<0.8').",
    ),
    output_format: str = CacheFormatOpt,
) -> None:
    """Remove part of the cache; says what it freed."""
    from hprobe.commands.cache import prune_cache

    _cache_job(lambda: prune_cache(release, older_than, keep), output_format)


@cache_app.command("clear", epilog=examples("hprobe cache clear"))
def cache_clear(output_format: str = CacheFormatOpt) -> None:
    """Remove everything in the cache."""
    from hprobe.commands.cache import clear_cache

    _cache_job(clear_cache, output_format)


def run() -> None:  # console-script entry point, and `python -m hprobe`
    _only_the_command_named(app, sys.argv[1:2])
    run_app(app)


def _only_the_command_named(group: typer.Typer, first: list[str]) -> None:
    """Leave out of this process's group every command but the one the first
    argument names. typer makes a click command of each command on every run
    (signatures, annotations, options: 20 ms of a warm check's 430), and
    click hands a command line that starts with a command's name to that
    command alone. Anything else (no argument, an option, a group, a
    mistyped name, shell completion) keeps the whole group, so help and
    "no such command" read as before."""
    from typer.main import get_command_name

    if not first:
        return
    named = [
        info
        for info in group.registered_commands
        if (info.name or get_command_name(getattr(info.callback, "__name__", ""))) == first[0]
    ]
    if len(named) == 1:
        group.registered_commands = named
        group.registered_groups = []


if __name__ == "__main__":  # pragma: no cover
    run()
