"""Probe kernel variants in two processes once flashinfer is imported.

Importing flashinfer is most of a probe's cost and is paid once; the calls that
follow are independent per variant. A forked child inherits the open session
(and its fakes), probes half of the variants and hands its results back
pickled (the same code runs on both ends of a fork). A child that fails
leaves its half to the parent, so forking can only save time, never lose
results.
"""

from __future__ import annotations

import os
import pickle
import signal
from collections.abc import Callable

from hprobe.model.outcome import KernelSMResult

Job = Callable[[list[str]], list[KernelSMResult]]


def probe_split(keys: list[str], job: Job, workers: int | None = None) -> list[KernelSMResult]:
    """`job(keys)` for all keys, spread over up to `workers` processes."""
    workers = workers or _default_workers()
    if workers < 2 or len(keys) < 2 or not hasattr(os, "fork"):
        return job(keys)
    mine, theirs = keys[::2], keys[1::2]
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child; its result is checked by the parent
        os.close(read_fd)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)  # stdout carries the parent's report only
        os.dup2(devnull, 2)
        try:
            payload = pickle.dumps(job(theirs))
        except BaseException as exc:  # noqa: BLE001 - reported, then redone by the parent
            payload = pickle.dumps({"error": f"{type(exc).__name__}: {exc}"})
        with os.fdopen(write_fd, "wb") as out:
            out.write(payload)
        os._exit(0)
    os.close(write_fd)
    try:
        results = job(mine)
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM) or failed: the child must not outlive us.
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read_fd)
        raise
    with os.fdopen(read_fd, "rb") as stream:
        payload = stream.read()
    os.waitpid(pid, 0)
    try:
        data = pickle.loads(payload)
        if not isinstance(data, list) or not all(isinstance(r, KernelSMResult) for r in data):
            raise ValueError("no results")
        results.extend(data)
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError):
        results.extend(job(theirs))
    return results


def _default_workers() -> int:
    text = os.environ.get("HPROBE_WORKERS")
    if text and text.isdigit():
        return int(text)
    return min(2, os.cpu_count() or 1)
