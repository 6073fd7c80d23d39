"""Every subprocess hprobe starts (pip, the release worker, the --pad-fn child)
runs through `run_bounded`: its own process group, stdin closed, a wall-clock
limit, and on timeout or interruption the whole group is killed, so a forked
grandchild can neither outlive hprobe nor hold its pipes open."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from hprobe.model.errors import InputError
from hprobe.system.lifetime import dies_with_us


def setting_from_env(setting: tuple[str, float], unit: str = "seconds") -> float:
    """A bound's value: its environment variable when set, else its default.
    `setting` is (variable, default); anything but a positive number is one
    input error naming the variable."""
    name, default = setting
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e6:
        raise InputError(f"{name}={text!r}: expected a number of {unit} above 0")
    return value


# Groups started and not yet reaped, from any thread: a thread waiting on a
# worker never sees the main thread's Ctrl-C or SIGTERM, so the main thread
# kills them all (kill_running) before it leaves.
_RUNNING: set[subprocess.Popen] = set()
_LOCK = threading.Lock()
_STOPPING = threading.Event()  # set while the main thread unwinds: nothing new starts


_STOPPERS: list[Callable[[], None]] = []  # long-lived helpers that stop (and reap) their own children


def kill_running() -> None:
    """Kill every group running now, and start none until `resume()`."""
    _STOPPING.set()
    with _LOCK:
        stoppers = list(_STOPPERS)
    for stop in stoppers:
        stop()
    with _LOCK:
        running = list(_RUNNING)
    for proc in running:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def resume() -> None:
    _STOPPING.clear()


def stopping() -> bool:
    """Whether the main thread is unwinding (nothing new may start)."""
    return _STOPPING.is_set()


def register_stopper(stop: Callable[[], None]) -> None:
    """A long-lived helper's `stop`, called by kill_running before the groups
    are killed: it ends its own children and waits for it to reap them."""
    with _LOCK:
        _STOPPERS.append(stop)


def unregister_stopper(stop: Callable[[], None]) -> None:
    with _LOCK:
        if stop in _STOPPERS:
            _STOPPERS.remove(stop)


class Timeout(Exception):
    """The command did not finish within its limit; its group was killed."""


def run_bounded(
    cmd: list[str],
    timeout: float,
    input_text: str | None = None,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    if _STOPPING.is_set():
        raise Timeout()  # hprobe is stopping: a thread must not start another process
    proc = subprocess.Popen(
        dies_with_us(cmd),  # killed by the kernel if hprobe is, SIGKILL included
        stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
    with _LOCK:
        _RUNNING.add(proc)
    try:
        out, err = proc.communicate(input_text, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise Timeout() from None
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        with _LOCK:
            _RUNNING.discard(proc)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def stream_bounded(
    cmd: list[str], timeout: float, input_text: str, on_line: Callable[[str], None]
) -> subprocess.CompletedProcess[str]:
    """As run_bounded, but each line the command writes to stdout is handed to
    `on_line` as it is written (stdout is not kept; stderr is)."""
    if _STOPPING.is_set():
        raise Timeout()
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(
            dies_with_us(cmd),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        with _LOCK:
            _RUNNING.add(proc)
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

        timer = threading.Timer(timeout, expire)
        timer.daemon = True
        timer.start()
        try:
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(input_text)
                proc.stdin.close()
            except BrokenPipeError:
                pass  # it ended before reading: its exit status says why
            for line in proc.stdout:
                on_line(line)
            proc.wait()
        except BaseException:
            _kill_group(proc)
            raise
        finally:
            timer.cancel()
            with _LOCK:
                _RUNNING.discard(proc)
        if expired.is_set():
            raise Timeout()
        errors.seek(0)
        err = errors.read().decode(errors="replace")
    return subprocess.CompletedProcess(cmd, proc.returncode, "", err)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for stream in (proc.stdout, proc.stderr, proc.stdin):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
    proc.wait()
