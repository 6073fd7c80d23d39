"""Probe kernel variants in two processes once flashinfer is imported.

Importing flashinfer is most of a probe's cost and is paid once; the calls that
follow are independent per variant. A forked child inherits the open session
(and its fakes); parent and child take the next variant from a shared counter
until none is left, so a slow variant (a release's cute-dsl path takes twice
another's) does not leave one process idle. The child hands its results back
pickled (the same code runs on both ends of a fork). A child that fails leaves
what it did not hand back to the parent, so forking can only save time, never
lose results.
"""

from __future__ import annotations

import os
import pickle
import signal
from collections.abc import Callable

from hprobe.model.outcome import KernelSMResult
from hprobe.system.lifetime import die_with_parent

Job = Callable[[list[str]], list[KernelSMResult]]


def probe_split(keys: list[str], job: Job, workers: int | None = None) -> list[KernelSMResult]:
    """`job(keys)` for all keys, spread over up to `workers` processes (two at most)."""
    workers = workers or _default_workers()
    if workers < 2 or len(keys) < 2 or not hasattr(os, "fork"):
        return job(keys)
    import multiprocessing

    counter = multiprocessing.get_context("fork").Value("i", 0)  # shared memory, inherited by the fork

    def take() -> int:
        with counter.get_lock():
            index = counter.value
            counter.value += 1
        return index

    def work() -> dict[str, list[KernelSMResult]]:
        done: dict[str, list[KernelSMResult]] = {}
        while (index := take()) < len(keys):
            done[keys[index]] = job([keys[index]])
        return done

    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child; its result is checked by the parent
        die_with_parent(parent)  # a SIGKILLed parent takes its prober with it
        os.close(read_fd)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)  # stdout carries the parent's report only
        os.dup2(devnull, 2)
        try:
            payload = pickle.dumps(work())
        except BaseException as exc:  # noqa: BLE001 - reported, then redone by the parent
            payload = pickle.dumps({"error": f"{type(exc).__name__}: {exc}"})
        with os.fdopen(write_fd, "wb") as out:
            out.write(payload)
        os._exit(0)
    os.close(write_fd)
    try:
        mine = work()
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM) or failed: the child must not outlive us.
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read_fd)
        raise
    with os.fdopen(read_fd, "rb") as stream:
        payload = stream.read()
    os.waitpid(pid, 0)
    theirs: dict[str, list[KernelSMResult]] = {}
    try:
        data = pickle.loads(payload)
        if isinstance(data, dict) and all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(r, KernelSMResult) for r in v)
            for k, v in data.items()
        ):
            theirs = data
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError):
        pass
    results: list[KernelSMResult] = []
    for key in keys:  # in the order given; what neither process handed back is probed here
        results.extend(mine[key] if key in mine else theirs[key] if key in theirs else job([key]))
    return results


def _default_workers() -> int:
    text = os.environ.get("HPROBE_WORKERS")
    if text and text.isdigit():
        return int(text)
    return min(2, os.cpu_count() or 1)
