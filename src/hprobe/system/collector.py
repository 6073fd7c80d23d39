"""The cyclic garbage collector in hprobe's own processes.

What a run builds lives as long as the run: an engine tree's syntax trees
(1.6 million objects for vLLM 0.34.0), torch's and flashinfer's modules
(350,000), a kernel table's rows. CPython's defaults (700, 10, 10) run a full
collection each time that long-lived heap grows by a quarter, and each one
scans all of it to free next to nothing: 3.4 s of a cold `check --repo` on
vLLM 0.34.0, 0.3 s of a torch import, 0.3 s of the deep-ahead child here.
Cycles a run drops (a probe's exception, its traceback, its frames) die
young and are still collected by the young generations."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

# mypy's own setting for its build, a run of the same shape (a large heap
# built once and kept): young collections every 200,000 allocations, the
# older generations after 30 of the one below.
RUN_THRESHOLDS = (200_000, 30, 30)


def tune_for_a_run() -> None:
    """For a process hprobe starts and ends itself (the command, a release
    worker and the zygote, the deep-ahead child); never for a host that
    imports hprobe, whose collector stays its own."""
    gc.set_threshold(*RUN_THRESHOLDS)


@contextmanager
def paused() -> Iterator[None]:
    """The collector off for a stretch that makes many objects and nearly no
    cycles (importing torch and flashinfer); as it was afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
