"""Running one command as a process: signals, progress on stderr, and every
failure turned into one line and a documented exit code."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer

from hprobe.model.errors import EXIT_INCONCLUSIVE, EXIT_INPUT, HprobeError

EXIT_INTERNAL = 5


# A status line appears only once a command has run this long: a warm run
# (answers from the cache) ends before it and leaves nothing on the screen.
SHOW_PROGRESS_AFTER_S = 1.0


@contextmanager
def progress(json_output: bool) -> Iterator[Callable[[str], None]]:
    """One transient status line on stderr for slow steps, in the style of pip
    and uv: shown after SHOW_PROGRESS_AFTER_S, replaced by each message, gone
    when the command ends (nothing left in the scrollback). Silent with --json
    or when stderr is not a terminal, but for a Statement (what a long search
    will ask of the index and the disk), which stays as a line either way."""
    from hprobe.system.escaping import visible
    from hprobe.system.progress import Statement

    if json_output:
        yield lambda _message: None
        return
    if not sys.stderr.isatty():

        def statements_only(message: str) -> None:
            if isinstance(message, Statement):
                say(f"hprobe: {visible(message)}")

        yield statements_only
        return
    import threading

    from rich.text import Text

    from hprobe.report.formats.terminal import make_console

    console = make_console(stderr=True)
    status = console.status("")
    latest = ["working"]
    lock = threading.Lock()
    shown = [False, False]  # started, stopped

    def show() -> None:
        with lock:
            if shown[1]:
                return
            # As text: a message names releases and paths as the user wrote them.
            status.update(Text(latest[0]))
            status.start()
            shown[0] = True

    timer = threading.Timer(SHOW_PROGRESS_AFTER_S, show)
    timer.daemon = True
    timer.start()

    def update(message: str) -> None:
        with lock:
            if isinstance(message, Statement):
                console.print(Text(f"hprobe: {visible(message)}"), highlight=False)  # above the status line, kept
            latest[0] = message
            if shown[0]:
                status.update(Text(message))

    try:
        yield update
    finally:
        timer.cancel()
        with lock:
            shown[1] = True
            if shown[0]:
                status.stop()


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


def _new_run() -> None:
    """Forget what an earlier command in this process kept of its run (a host
    that runs hprobe's commands in-process runs several); modules not loaded
    kept nothing."""
    if (cache := sys.modules.get("hprobe.support.cache")) is not None:
        cache.new_run()  # what is said at the end is this run's alone
    if (trees := sys.modules.get("hprobe.support.trees")) is not None:
        trees.new_run()  # what pip refused, and the wheels read, are an earlier run's
    if (tables := sys.modules.get("hprobe.support.kernel_tables")) is not None:
        tables.new_run()  # a store an earlier run could not reach may answer now


def run_job(job: Callable[[], int]) -> None:
    """Run a command body: one line on stderr and a documented exit code on
    failure. Every failure the user or the machine causes is an input error
    (exit 2) named in one line; only a bug of hprobe's is exit 5."""
    from hprobe.system.escaping import visible

    previous = {signum: signal.signal(signum, _on_signal) for signum in _ENDING_SIGNALS}
    _new_run()
    try:
        code = job()
        _drop_fetched_wheels()
        _said_what_was_added()
    except _Terminated as exc:
        _kill_children()
        say(
            "hprobe: terminated"
            if exc.signum == signal.SIGTERM
            else f"hprobe: stopped by {signal.Signals(exc.signum).name}"
        )
        raise typer.Exit(128 + exc.signum) from None
    except HprobeError as exc:
        say(f"hprobe: error: {visible(exc.message)}")
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        _kill_children()
        say("hprobe: interrupted")
        raise typer.Exit(130) from None
    except BrokenPipeError:
        raise typer.Exit(_broken_pipe()) from None
    except OSError as exc:
        if working_directory() is None and not exc.filename:
            say(
                "hprobe: error: the working directory no longer exists, and a relative path needs one; cd to one that "
                "does"
            )
            raise typer.Exit(EXIT_INPUT) from None
        where = f"{exc.filename}: " if exc.filename else ""
        say(f"hprobe: error: {visible(where)}{visible(_errno_words(exc))}")
        raise typer.Exit(EXIT_INPUT) from None
    except MemoryError:
        say("hprobe: error: out of memory (an input asks for more than this machine has; see Bounds in the README)")
        raise typer.Exit(EXIT_INPUT) from None
    except ValueError as exc:
        if "integer string conversion" not in str(exc):
            _internal(exc)
        # A version, count or date in some input (an option, a requirement
        # file, a table) with more digits than Python turns into a number.
        say(f"hprobe: error: {MAX_DIGITS_SAID}")
        raise typer.Exit(EXIT_INPUT) from None
    except (typer.Exit, SystemExit, GeneratorExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - a bug of ours still gets one line, never a traceback nor exit 1
        _internal(exc)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    raise typer.Exit(code)


# Python turns at most 4,300 digits into an int; no release, count or date has
# a tenth of that.
MAX_DIGITS_SAID = "a number in the input has thousands of digits: no version, count or date is that long"


def _internal(exc: BaseException) -> NoReturn:
    """End on what no clause of run_job names: one line, never a traceback, and
    never the exit code a gate reads as "broken"."""
    from hprobe.support.slim import TreeUnreadable
    from hprobe.system.escaping import visible

    if os.environ.get("HPROBE_DEBUG"):
        raise exc
    message = " ".join(str(exc).split())[:300]
    if isinstance(exc, TreeUnreadable):
        # This machine's failure (a release's wheel gone and not to be had
        # again): nothing was decided, so the run is undecided, not broken.
        say(f"hprobe: error: {visible(message.removeprefix('hprobe: '))}")
        raise typer.Exit(EXIT_INCONCLUSIVE) from None
    say(
        f"hprobe: internal error: {type(exc).__name__}: {visible(message)} (a bug of hprobe's: please report it "
        "with the traceback HPROBE_DEBUG=1 prints)"
    )
    raise typer.Exit(EXIT_INTERNAL) from None


def _kill_children() -> None:
    from hprobe.system.bounded import kill_running

    kill_running()


def working_directory() -> str | None:
    """The current directory, or None where it was removed under the run."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        return None


def run_app(app: typer.Typer) -> None:
    """Set the process up (guarded streams, no probing of the working
    directory's packages), then run one command: a usage error is one line and
    exit 2 like every other input error, and a closed stdout ends quietly."""
    try:  # typer vendors click from 0.2x on; its exceptions are not click's
        from typer._click import exceptions as click_exceptions
    except ImportError:  # pragma: no cover - an older typer over click
        from click import exceptions as click_exceptions  # type: ignore[no-redef]
    from hprobe.system import collector
    from hprobe.system import escaping as escape
    from hprobe.system import streams as guard

    collector.tune_for_a_run()  # this process is hprobe's, and ends with the command

    # `python -m` puts the working directory first on sys.path, where a
    # `flashinfer/` (or `torch/`) of the tree being checked would shadow the
    # release hprobe means to probe; the console script never had it there.
    # Only that first entry goes: the same directory later on the path (a
    # site-packages one runs from) stays.
    guard.install()
    # A working directory removed under the shell does not stop a command whose
    # paths are absolute; one that needs it (a relative path) ends on the
    # OSError that follows, said as such (run_job).
    if sys.path and sys.path[0] in ("", ".", working_directory()):
        del sys.path[0]
    if "stdout" in guard.CLOSED:
        say("hprobe: note: stdout is closed; the report goes nowhere, the exit code still gives the verdict")
    code: object = 0
    try:
        code = app(prog_name="hprobe", standalone_mode=False)
    except click_exceptions.NoArgsIsHelpError as exc:
        exc.show()
        code = exc.exit_code
    except click_exceptions.UsageError as exc:
        say(f"hprobe: error: {escape.visible(exc.format_message())}")
        code = EXIT_INPUT
    except typer.Abort:
        say("hprobe: interrupted")
        code = 130
    except click_exceptions.ClickException as exc:
        say(f"hprobe: error: {escape.visible(exc.format_message())}")
        code = exc.exit_code
    except BrokenPipeError:
        code = _broken_pipe()
    except OSError as exc:  # stdout or stderr itself failed (/dev/full): nowhere left to say much
        say(f"hprobe: error: cannot write the output: {_errno_words(exc)}")
        code = EXIT_INPUT
    if not isinstance(code, int):
        code = 0
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        code = _broken_pipe()
    except OSError as exc:
        say(f"hprobe: error: cannot write the output: {_errno_words(exc)}")
        code = code or EXIT_INPUT
    _exit(code)


def _exit(code: int) -> None:
    """End now: exit handlers run (a temporary cache is removed), the streams
    are flushed, and the interpreter's teardown of every module and object is
    skipped. With torch and flashinfer loaded that teardown took about a second
    here, on top of answers already written."""
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed or broken stream: what could be said was said above
    os._exit(code)


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


def _drop_fetched_wheels() -> None:
    """The wheels this run read, removed once answered (support/trees.py); a
    run that never loaded the trees module read none."""
    trees = sys.modules.get("hprobe.support.trees")
    cache = sys.modules.get("hprobe.support.cache")
    if trees is None or cache is None:
        return
    try:
        for version, size in trees.drop_fetched_wheels():
            cache.record_dropped(version, size)
    except OSError:
        pass  # a cache that cannot be tidied keeps its wheels: the answers stand


def _said_what_was_added() -> None:
    """Run state (what this run fetched into the cache) on stderr, after the
    report: documents carry answers, never what the cache held. A run that
    never loaded the cache module fetched nothing."""
    from hprobe.system.escaping import visible

    cache = sys.modules.get("hprobe.support.cache")
    for line in cache.added_lines() if cache is not None else []:
        say(f"note: {visible(line)}")


def say(line: str) -> None:
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
