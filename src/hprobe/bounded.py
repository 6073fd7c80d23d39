"""Every subprocess hprobe starts (pip, the release worker, the --pad-fn child)
runs through `run_bounded`: its own process group, stdin closed, a wall-clock
limit, and on timeout or interruption the whole group is killed, so a forked
grandchild can neither outlive hprobe nor hold its pipes open."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from .errors import InputError


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


class Timeout(Exception):
    """The command did not finish within its limit; its group was killed."""


def run_bounded(
    cmd: list[str],
    timeout: float,
    input_text: str | None = None,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(input_text, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise Timeout() from None
    except BaseException:
        _kill_group(proc)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


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
