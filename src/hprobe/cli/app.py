"""The `hprobe` command line: parse options, call the service, pick a format.

The commands import the rest of hprobe inside their bodies on purpose: `hprobe
--help`, `--version` and an input error answer in a fraction of a second,
without loading the probing machinery they do not need."""

from __future__ import annotations

import io
import os
import signal
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Callable, Iterator, List, Optional

import typer

from hprobe import __version__
from hprobe.model.errors import EXIT_INPUT, HprobeError, InputError
from hprobe.model.padding import MAX_HEADS
from hprobe.system.fileio import SiteWriter, check_output, write_output

if TYPE_CHECKING:

    pass

EXIT_INTERNAL = 5

# Axis options (--backend, --dtype, --topk, --q-len, --tokens, --page-size, ...)
# are whatever the probes declare, so they are read from the extra arguments.
AXIS_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True}
# Written out rather than read from the probes, which would load them for every
# `--help` and every warm check; tests/test_cli_misc.py fails when a probe's
# axes and this list differ.
AXIS_NAMES = ("backend", "dtype", "family", "kv_format", "kv_lora_rank", "page_size", "q_len", "tokens", "topk")
AXIS_EPILOG = (
    f"Axis options: {', '.join('--' + name.replace('_', '-') for name in AXIS_NAMES)} "
    "(every axis `hprobe kernels` lists; comma lists on matrix and diff)."
)

def _path_value(text: str) -> Path:
    """A path option's value: an empty one is an input error (Path('') would
    silently mean the current directory)."""
    if not text.strip():
        raise typer.BadParameter("empty path")
    return Path(text)


# Options `check` and `suggest` share, declared once.
TableOpt = Annotated[Optional[List[Path]], typer.Option("--table", "-t", parser=_path_value, help="Padding table (TOML). Repeatable. Default: the shipped tables in matrices/.")]
RepoOpt = Annotated[Optional[Path], typer.Option("--repo", parser=_path_value, help="Read the padding rules from this source tree or installed package (static analysis: nothing is imported or run).")]
MappingOpt = Annotated[Optional[Path], typer.Option("--mapping", parser=_path_value, help="With --repo: which padding class feeds which kernel. Default: the shipped mapping of the engine the tree is (vLLM or SGLang), else each in turn.")]
SetOpt = Annotated[Optional[List[str]], typer.Option("--set", help="With --repo: NAME=VALUE, a setting the consumer's rule reads (SGLang's envs), instead of its declared default (repeatable).")]
ExcludeOpt = Annotated[Optional[List[str]], typer.Option("--exclude", help="With --repo: also skip paths matching this glob (repeatable). Tests, fixtures, venvs, site-packages and build outputs inside the tree are always skipped.")]
PadFnOpt = Annotated[Optional[str], typer.Option("--pad-fn", help="Call your padding function (MODULE:QUALNAME or FILE.py:QUALNAME): imports and runs your code. Needs --kernel, --sm, --heads.")]
PadFnKernelOpt = Annotated[Optional[str], typer.Option("--kernel", "-k", help="With --pad-fn: the kernel (or variant) the function feeds.")]
TablesSmOpt = Annotated[Optional[str], typer.Option("--sm", help="Target SM(s): 100, sm_100a, 10.0, 12.1, or a comma list. Default: the visible GPUs, else every SM the tables name.")]
ModelHeadsOpt = Annotated[Optional[int], typer.Option("--heads", help="Override every model's total query heads.")]
TpOpt = Annotated[Optional[str], typer.Option("--tp", help="Override every model's TP degrees, e.g. 1,2,4,8.")]
PinOpt = Annotated[Optional[str], typer.Option("--pin", help="The consumer's flashinfer requirement, e.g. 'flashinfer-python>=0.6.13': probe the lowest and highest releases it admits.")]
FlashinferOpt = Annotated[Optional[str], typer.Option("--flashinfer", help="Probe these releases instead of the installed one: 0.6.13, a comma list, a wheel file or an unpacked directory. Fetched with your pip, cached, probed in a subprocess.")]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Ignore cached probe results.")]


app = typer.Typer(
    # `--install-completion` / `--show-completion` for bash, zsh, fish and PowerShell, as typer offers them.
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    no_args_is_help=True,
    help="Which query-head counts FlashInfer's MLA kernels accept, from their own validators, "
    "and whether a padding table pads too much, too little, or just right.",
)


def _formatter(json_output: bool):
    return _formatter_for("json" if json_output else "text")


def _formatter_for(fmt: str):
    from hprobe.report.formats import FORMATS

    return FORMATS[fmt]()


def _format(option: str, json_output: bool) -> str:
    from hprobe.report.formats import FORMATS

    fmt = "json" if json_output else option.strip().lower()
    if fmt not in FORMATS:
        raise InputError(f"--format {option!r}: expected {', '.join(FORMATS)}")
    return fmt


@contextmanager
def _progress(json_output: bool) -> Iterator[Callable[[str], None]]:
    """A status line on stderr for slow steps; silent with --json or when not a terminal."""
    if json_output or not sys.stderr.isatty():
        yield lambda _message: None
        return
    from hprobe.report.formats.text import make_console

    console = make_console(stderr=True)
    with console.status("starting") as status:

        def update(message: str) -> None:
            status.update(message)
            console.log(message)

        yield update


class _Terminated(BaseException):
    """A signal that ends hprobe (TERM, HUP, QUIT), raised where the process
    is, so every `subprocess.run` and forked helper on the way out is killed
    rather than orphaned."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum: int, _frame: object) -> None:
    raise _Terminated(signum)


# The signals that end hprobe besides Ctrl-C (SIGINT, KeyboardInterrupt).
_ENDING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGQUIT") if hasattr(signal, name))


def _run(job: Callable[[], int]) -> None:
    """Run a command body: one line on stderr and a documented exit code on
    failure. Every failure the user or the machine causes is an input error
    (exit 2) named in one line; only a bug of hprobe's is exit 5."""
    from hprobe.system.escaping import visible

    previous = {signum: signal.signal(signum, _on_signal) for signum in _ENDING_SIGNALS}
    try:
        code = job()
    except _Terminated as exc:
        _kill_children()
        _say("hprobe: terminated" if exc.signum == signal.SIGTERM else f"hprobe: stopped by {signal.Signals(exc.signum).name}")
        raise typer.Exit(128 + exc.signum) from None
    except HprobeError as exc:
        _say(f"hprobe: error: {visible(exc.message)}")
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        _kill_children()
        _say("hprobe: interrupted")
        raise typer.Exit(130) from None
    except BrokenPipeError:
        raise typer.Exit(_broken_pipe()) from None
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        _say(f"hprobe: error: {visible(where)}{visible(_errno_words(exc))}")
        raise typer.Exit(EXIT_INPUT) from None
    except MemoryError:
        _say("hprobe: error: out of memory (an input asks for more than this machine has; see Bounds in the README)")
        raise typer.Exit(EXIT_INPUT) from None
    except Exception as exc:  # a bug of ours still gets one line, not a traceback
        if os.environ.get("HPROBE_DEBUG"):
            raise
        message = " ".join(str(exc).split())[:300]
        _say(f"hprobe: internal error: {type(exc).__name__}: {visible(message)} (set HPROBE_DEBUG=1 for the traceback)")
        raise typer.Exit(EXIT_INTERNAL) from None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    raise typer.Exit(code)


def _kill_children() -> None:
    from hprobe.system.bounded import kill_running

    kill_running()


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"hprobe {__version__}")
        raise typer.Exit(0)


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."),
) -> None:
    """hprobe: a kernel compatibility probe for LLM-serving engineers."""


@app.command(context_settings=AXIS_CONTEXT, epilog=AXIS_EPILOG)
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
    strict: bool = typer.Option(False, "--strict", help="Exit 1 on reducible, table-refuses or off-fast-path findings too."),
    heads: ModelHeadsOpt = None,
    tp: TpOpt = None,
    pin: PinOpt = None,
    flashinfer: FlashinferOpt = None,
    baseline: Optional[Path] = typer.Option(None, "--baseline", parser=_path_value, help="A recorded `hprobe matrix --json`: also report what changed since (exit 1 on change)."),
    junit: Optional[Path] = typer.Option(None, "--junit", parser=_path_value, help="Also write a JUnit XML report here (one test case per backend x SM x per-rank count)."),
    output_format: str = typer.Option("text", "--format", help="text, json or markdown (for $GITHUB_STEP_SUMMARY)."),
    details: bool = typer.Option(False, "--details", help="Text: show every row after the summary, not only those that are not ok."),
    no_cache: NoCacheOpt = False,
    json_output: bool = typer.Option(False, "--json", help="Emit the hprobe.check/2 JSON document (same as --format json)."),
) -> None:
    """Check padding tables (or the rules in a repo) against flashinfer's own validators."""

    def job() -> int:
        from hprobe.commands.request import RuleRequest
        from hprobe.commands.rules import run_check_command
        from hprobe.report.formats.github import emit

        fmt = _format(output_format, json_output)
        request = RuleRequest.parse("check", tables=table, repo=repo, mapping=mapping, exclude=exclude, settings=settings, pad_fn=pad_fn, kernel=kernel, sm=sm, heads=heads, tp=tp, pin=pin, flashinfer=flashinfer, extra_args=ctx.args)
        if junit is not None:
            check_output(junit, "--junit")  # a bad path costs nothing: refused before probing
        recorded = None
        if baseline is not None:
            from hprobe.commands.drift import load_baseline

            recorded = load_baseline(str(baseline))
        with _progress(fmt == "json") as progress:
            report = run_check_command(request, strict, recorded, not no_cache, progress)
        if junit is not None:
            # Written before the report is printed: a failed write is the exit
            # code the printed report (and its JSON `exit_code`) then never contradicts.
            from hprobe.report.formats.junit import junit_text

            write_output(junit, junit_text(report), "--junit")
        formatter = _formatter_for(fmt)
        formatter.details = details or fmt != "text"
        formatter.check(report)
        emit(report, sys.stderr)
        return report.exit_code

    _run(job)


@app.command(context_settings=AXIS_CONTEXT, epilog=AXIS_EPILOG)
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
    tp: TpOpt = None,
    pin: PinOpt = None,
    flashinfer: FlashinferOpt = None,
    output: Optional[Path] = typer.Option(None, "--output", "-o", parser=_path_value, help="Write the table(s) with the suggested rules here as TOML (readable by `check --table`)."),
    diff_file: Optional[Path] = typer.Option(None, "--diff", parser=_path_value, help="With --repo: write the suggested rules and pin as a unified diff of the tree's own source here (apply with `git apply` in the --repo directory)."),
    force: bool = typer.Option(False, "--force", help="Overwrite --output / --diff."),
    since: Optional[str] = typer.Option(None, "--since", help="Start the search for the first safe release here (default: the first release whose source defines the kernel's entry point)."),
    no_cache: NoCacheOpt = False,
    output_format: str = typer.Option("text", "--format", help="text, json or markdown."),
    json_output: bool = typer.Option(False, "--json", help="Emit the hprobe.suggest/1 JSON document."),
) -> None:
    """The padding rule the kernels call for: per backend, the smallest count every release probed accepts."""

    def job() -> int:
        from hprobe.commands.request import RuleRequest, release_number
        from hprobe.commands.suggest import run_suggest

        fmt = _format(output_format, json_output)
        request = RuleRequest.parse("suggest", tables=table, repo=repo, mapping=mapping, exclude=exclude, settings=settings, pad_fn=pad_fn, kernel=kernel, sm=sm, heads=heads, tp=tp, pin=pin, flashinfer=flashinfer, extra_args=ctx.args)
        start = release_number(since, "--since") if since is not None else None  # refused before any probing
        if output is not None:
            check_output(output, "--output", overwrite=force)
        if diff_file is not None:
            check_output(diff_file, "--diff", overwrite=force)
        with _progress(fmt == "json") as progress:
            result = run_suggest(request, start=start, want_table=output is not None, diff_name=str(diff_file) if diff_file is not None else None, use_cache=not no_cache, progress=progress)
        if output is not None and result.table_toml is not None:
            write_output(output, result.table_toml, "--output", overwrite=force)
        if diff_file is not None and result.patch is not None and result.patch.diff:
            write_output(diff_file, result.patch.diff, "--diff", overwrite=force)
        _formatter_for(fmt).suggest(result)
        return result.exit_code

    _run(job)


@app.command(context_settings=AXIS_CONTEXT, epilog=AXIS_EPILOG)
def matrix(
    ctx: typer.Context,
    kernel: Optional[List[str]] = typer.Option(None, "--kernel", "-k", help="Kernel id(s); repeatable or comma list. Default: every probe."),
    sm: Optional[str] = typer.Option(None, "--sm", help="Target SM(s). Default: the visible GPUs, else every SM the kernels are built for."),
    heads: str = typer.Option("1-256", "--heads", help="Head counts to probe: 1-256, 8,16,24, 1-8,16."),
    grid: bool = typer.Option(False, "--grid", help="A table of marks, one row per h_q, one column per kernel variant and SM."),
    pivot: Optional[str] = typer.Option(None, "--pivot", help="ROWS,COLS: any two of heads, sm, release, kernel or an axis (topk, backend, ...)."),
    json_output: bool = typer.Option(False, "--json", help="Emit the hprobe.matrix/2 JSON document."),
    flashinfer: Optional[str] = typer.Option(None, "--flashinfer", help="Probe these releases instead of the installed one: 0.6.13, a comma list, a wheel file or an unpacked directory. Fetched with your pip, cached, probed in a subprocess."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Ignore cached probe results for fetched releases."),
) -> None:
    """Print the h_q each kernel accepts on each SM with the installed flashinfer."""

    def job() -> int:
        from hprobe.commands.check import run_matrix
        from hprobe.commands.request import check_release_options, kernel_ids, parse_axes, parse_pivot
        from hprobe.model.targets import parse_heads

        check_release_options(flashinfer, None)
        with _progress(json_output) as progress:
            report = run_matrix(kernel_ids(kernel), sm, parse_heads(heads), flashinfer, not no_cache, progress, parse_axes(ctx.args))
        dims = parse_pivot(pivot)
        if dims is not None:
            from hprobe.report.pivot import pivot_cells

            pivot_cells(report, *dims)  # an impossible pivot is an input error before any output
        _formatter(json_output).matrix(report, grid=grid, pivot=dims)
        return report.exit_code

    _run(job)


@app.command(context_settings=AXIS_CONTEXT, epilog=AXIS_EPILOG)
def diff(
    ctx: typer.Context,
    old: str = typer.Argument(..., help="The release before: 0.6.13, a wheel file or a directory."),
    new: str = typer.Argument(..., help="The release after."),
    kernel: Optional[List[str]] = typer.Option(None, "--kernel", "-k", help="Kernel id(s). Default: every probe."),
    sm: Optional[str] = typer.Option(None, "--sm", help="Target SM(s). Default: every SM the kernels are built for."),
    heads: str = typer.Option("1-256", "--heads", help="Head counts to compare."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Ignore cached probe results."),
    json_output: bool = typer.Option(False, "--json", help="Emit the hprobe.diff/1 JSON document."),
) -> None:
    """h_q that became accepted or rejected between two releases. Exit 1 when any changed."""

    def job() -> int:
        from hprobe.commands.check import run_matrix
        from hprobe.commands.drift import diff_reports
        from hprobe.commands.request import kernel_ids, parse_axes
        from hprobe.model.targets import parse_heads

        with _progress(json_output) as progress:
            report = run_matrix(kernel_ids(kernel), sm, parse_heads(heads), f"{old},{new}", not no_cache, progress, parse_axes(ctx.args))
        result = diff_reports(report)
        _formatter(json_output).diff(result)
        return result.exit_code

    _run(job)


@app.command()
def bisect(
    kernel: str = typer.Option(..., "--kernel", "-k", help="Kernel id or variant, e.g. trtllm-mla[backend=xqa]."),
    sm: str = typer.Option(..., "--sm", help="One target SM."),
    heads: int = typer.Option(..., "--heads", help="The per-rank head count in question."),
    range_: Optional[str] = typer.Option(None, "--range", help="LO..HI release range, inclusive, e.g. 0.6.10..0.6.16."),
    exhaustive: bool = typer.Option(False, "--exhaustive", help="Probe every release in the range, not a binary search."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Ignore cached probe results."),
    json_output: bool = typer.Option(False, "--json", help="Emit the hprobe.bisect/1 JSON document."),
) -> None:
    """The first release whose validators accept --heads (and the last that rejects it)."""

    def job() -> int:
        from hprobe.commands.drift import run_bisect
        from hprobe.model.sm import parse_sm_list

        sms = parse_sm_list(sm)
        if len(sms) != 1:
            raise InputError("--sm: bisect takes one SM")
        if not 0 < heads <= MAX_HEADS:
            raise InputError(f"--heads {heads}: must be a count from 1 to {MAX_HEADS}")
        with _progress(json_output) as progress:
            result = run_bisect(kernel, sms[0], heads, range_, exhaustive, not no_cache, progress)
        _formatter(json_output).bisect(result)
        return result.exit_code

    _run(job)


@app.command(context_settings=AXIS_CONTEXT, epilog=AXIS_EPILOG)
def report(
    ctx: typer.Context,
    releases: str = typer.Option(..., "--releases", help="LO..HI (every published release in it, inclusive) or a comma list of releases, wheels or directories."),
    kernel: Optional[List[str]] = typer.Option(None, "--kernel", "-k", help="Kernel id(s); repeatable or comma list. Default: every probe."),
    sm: Optional[str] = typer.Option(None, "--sm", help="Target SM(s). Default: every SM the kernels are built for."),
    heads: str = typer.Option("1-256", "--heads", help="Head counts: 1-256, 8,16,24."),
    output: Path = typer.Option(..., "--output", "-o", parser=_path_value, help="Directory to write index.html, matrix.md and matrix.json into."),
    table: TableOpt = None,
    repo: RepoOpt = None,
    mapping: MappingOpt = None,
    force: bool = typer.Option(False, "--force", help="Overwrite those files if they exist."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Ignore cached probe results."),
) -> None:
    """A static page of the support matrix across releases: one heatmap per kernel variant and SM,
    and with --table or --repo each padding table's verdicts release by release."""

    def job() -> int:
        site = SiteWriter(output, ("index.html", "matrix.md", "matrix.json"), "--output", force)
        try:
            return _report(site)
        finally:
            site.discard()

    def _report(site: SiteWriter) -> int:
        from hprobe.commands.check import run_matrix
        from hprobe.commands.drift import release_labels
        from hprobe.commands.request import RuleRequest, kernel_ids, parse_axes
        from hprobe.commands.rules import collect_rules, judge_rules
        from hprobe.model.targets import parse_heads
        from hprobe.report.formats.html_site import render_site
        from hprobe.report.formats.json_format import JsonFormatter
        from hprobe.report.formats.markdown import MarkdownFormatter
        from hprobe.system.escaping import visible

        wanted = parse_heads(heads)
        request = None
        if table or repo is not None:  # read and checked before anything is probed
            request = RuleRequest.parse("report", tables=table, repo=repo, mapping=mapping, exclude=None, settings=None, pad_fn=None, kernel=None, sm=sm, heads=None, tp=None, pin=None, flashinfer=None, extra_args=[])
            rule_tables, repo_tables = collect_rules(request)
        tables = None
        with _progress(False) as progress:
            labels = release_labels(releases, progress)
            matrix_report = run_matrix(kernel_ids(kernel), sm, wanted, ",".join(labels), not no_cache, progress, parse_axes(ctx.args))
            if request is not None:
                tables = judge_rules(request, rule_tables, repo_tables, False, not no_cache, progress, flashinfer=",".join(labels))
        markdown, document = io.StringIO(), io.StringIO()
        MarkdownFormatter(markdown).matrix(matrix_report)
        JsonFormatter(document).matrix(matrix_report)
        site.commit({"index.html": render_site(matrix_report, tables), "matrix.md": markdown.getvalue(), "matrix.json": document.getvalue()})
        _say(f"wrote {visible(str(output))}/index.html, matrix.md, matrix.json: {len(matrix_report.releases)} releases, {len(matrix_report.keys)} variants")
        return 0

    _run(job)


table_app = typer.Typer(no_args_is_help=True, help="Padding tables: extract one from a source tree.")
app.add_typer(table_app, name="table")


@table_app.command("extract")
def table_extract(
    repo: Path = typer.Option(..., "--repo", parser=_path_value, help="Source tree or installed package to read (static analysis: nothing is imported or run)."),
    mapping: MappingOpt = None,
    exclude: Optional[List[str]] = typer.Option(None, "--exclude", help="Also skip paths matching this glob (repeatable). Tests, fixtures, venvs, site-packages and build outputs inside the tree are always skipped."),
    settings: SetOpt = None,
    flashinfer: Optional[str] = typer.Option(None, "--flashinfer", help="For rules that read flashinfer's own tables (SGLang): the release to evaluate them against. Default: the repo's pin when it names one release, else the installed flashinfer."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", parser=_path_value, help="Write the TOML here instead of stdout (an existing file is not overwritten without --force)."),
    force: bool = typer.Option(False, "--force", help="Overwrite --output."),
    json_output: bool = typer.Option(False, "--json", help="Emit what was found as JSON instead of TOML."),
) -> None:
    """Write the padding table found in a source tree as TOML, to commit and review."""

    def job() -> int:
        from hprobe.commands.request import check_release_options, parse_settings, single_release
        from hprobe.rules.repo.extract import extract_any, table_toml
        from hprobe.rules.repo.mapping import load_mapping

        if output is not None:
            check_output(output, "--output", overwrite=force)
        if flashinfer is not None:
            check_release_options(flashinfer, None)
        chosen = load_mapping(mapping) if mapping is not None else None
        found = extract_any(repo, chosen, tuple(exclude or ()), None, parse_settings(settings))
        if found.per_release:
            from hprobe.support.gather import release_reader
            from hprobe.support.releases import parse_spec

            label = parse_spec(flashinfer)[-1] if flashinfer else single_release(found.pin.spec if found.pin else None)
            found = found.against(release_reader(label), label)
        if json_output:
            _formatter(True).data({"schema": "hprobe.extract/1", **found.to_dict()}, "extract")
            return 0
        text = table_toml(found)
        if output is None:
            sys.stdout.write(text)
        else:
            write_output(output, text, "--output", overwrite=force)
            typer.echo(f"wrote {output}: {len(found.table.backends)} backends, {len(found.classes)} padding classes", err=True)
        return 0

    _run(job)


@app.command()
def kernels(
    releases: Optional[str] = typer.Option(None, "--releases", help="Also say which of these releases define each entry point: a comma list or LO..HI (fetched, read without importing)."),
    json_output: bool = typer.Option(False, "--json", help="Emit JSON."),
) -> None:
    """List the kernel probes: entry point, SM families, axes, and which releases have the entry point."""

    def job() -> int:
        from hprobe.kernels import PROBES
        from hprobe.support.presence import entry_point_present, releases_with_entry_points

        present_in = None
        if releases:
            with _progress(json_output) as progress:
                present_in = releases_with_entry_points(releases, [p.entry_point for p in PROBES.values()], progress)
        rows = []
        for probe in PROBES.values():
            row: dict[str, object] = {
                "id": probe.id,
                "entry_point": probe.entry_point,
                "sms": list(probe.default_sms),
                "axes": [
                    {"name": a.name, "default": a.default, "choices": list(a.choices), "sweep": a.sweep, "help": a.help}
                    for a in probe.axes
                ],
                "summary": probe.summary,
                "installed_flashinfer_has_entry_point": entry_point_present(probe.entry_point),
            }
            if present_in is not None:
                have = present_in[probe.entry_point]
                row["releases"] = ", ".join(v for v, ok in have.items() if ok) or "none probed"
                row["releases_without"] = [v for v, ok in have.items() if not ok]
            rows.append(row)
        _formatter(json_output).kernels(rows)
        return 0

    _run(job)


@app.command()
def env(json_output: bool = typer.Option(False, "--json", help="Emit JSON.")) -> None:
    """GPUs and their SM, CUDA as torch sees it, torch and flashinfer versions. Needs no GPU."""

    def job() -> int:
        from hprobe.system.envinfo import collect

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


def run() -> None:  # console-script entry point, and `python -m hprobe`
    """Set the process up (guarded streams, no probing of the working
    directory's packages), then run one command: a usage error is one line and
    exit 2 like every other input error, and a closed stdout ends quietly."""
    try:  # typer vendors click from 0.2x on; its exceptions are not click's
        from typer._click import exceptions as click_exceptions
    except ImportError:  # pragma: no cover - an older typer over click
        from click import exceptions as click_exceptions  # type: ignore[no-redef]
    from hprobe.system import escaping as escape
    from hprobe.system import streams as guard

    # `python -m` puts the working directory first on sys.path, where a
    # `flashinfer/` (or `torch/`) of the tree being checked would shadow the
    # release hprobe means to probe; the console script never had it there.
    # Only that first entry goes: the same directory later on the path (a
    # site-packages one runs from) stays.
    if sys.path and sys.path[0] in ("", ".", os.getcwd()):
        del sys.path[0]
    guard.install()
    code: object = 0
    try:
        code = app(prog_name="hprobe", standalone_mode=False)
    except click_exceptions.NoArgsIsHelpError as exc:
        exc.show()
        code = exc.exit_code
    except click_exceptions.UsageError as exc:
        _say(f"hprobe: error: {escape.visible(exc.format_message())}")
        code = EXIT_INPUT
    except typer.Abort:
        _say("hprobe: interrupted")
        code = 130
    except click_exceptions.ClickException as exc:
        _say(f"hprobe: error: {escape.visible(exc.format_message())}")
        code = exc.exit_code
    except BrokenPipeError:
        code = _broken_pipe()
    except OSError as exc:  # stdout or stderr itself failed (/dev/full): nowhere left to say much
        _say(f"hprobe: error: cannot write the output: {_errno_words(exc)}")
        code = EXIT_INPUT
    if not isinstance(code, int):
        code = 0
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        code = _broken_pipe()
    except OSError as exc:
        _say(f"hprobe: error: cannot write the output: {_errno_words(exc)}")
        code = code or EXIT_INPUT
    sys.exit(code)


# A reader that went away (`hprobe matrix | head`): no message, and the status
# a shell gives a process SIGPIPE ended, as other command-line tools end.
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE


def _broken_pipe() -> int:
    # Further writes (the interpreter's own flush at exit) go nowhere.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ else 1)
    except (OSError, ValueError):
        pass
    return EXIT_BROKEN_PIPE


def _say(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except OSError:
        pass


def _errno_words(exc: OSError) -> str:
    import errno

    name = errno.errorcode.get(exc.errno or 0, "")
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{reason} ({name})" if name else reason


if __name__ == "__main__":  # pragma: no cover
    run()
