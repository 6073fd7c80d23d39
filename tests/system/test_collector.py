"""The collector in hprobe's own processes: no full collection over what a run
keeps, and a pause that leaves the collector as it found it."""

from __future__ import annotations

import gc

import pytest

from hprobe.system import collector

pytestmark = pytest.mark.pure


@pytest.fixture
def thresholds():
    kept = gc.get_threshold()
    yield
    gc.set_threshold(*kept)


def _full_collections_while_keeping(objects: int) -> int:
    """Full collections run while a run keeps `objects` small containers (an
    engine tree's syntax trees, a release's modules)."""
    full = []

    def seen(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(info)

    # What the process held before (other tests' heaps, in a worker that ran
    # them) is frozen out of the count a full collection weighs, so the answer
    # is this heap's alone, whatever ran first.
    gc.collect()
    gc.freeze()
    gc.collect()  # a full collection of what is left: the count it weighs restarts from this heap
    gc.callbacks.append(seen)
    try:
        kept = [[index] for index in range(objects)]
    finally:
        gc.callbacks.remove(seen)
        gc.unfreeze()
    assert len(kept) == objects
    return len(full)


def test_a_run_keeping_a_large_heap_pays_no_full_collection_for_it(thresholds):
    gc.set_threshold(700, 10, 10)  # CPython's own
    assert _full_collections_while_keeping(600_000) >= 2
    collector.tune_for_a_run()
    assert gc.get_threshold() == collector.RUN_THRESHOLDS
    assert _full_collections_while_keeping(600_000) == 0


def test_cycles_a_run_drops_are_still_collected_young(thresholds):
    collector.tune_for_a_run()
    gc.collect()
    young = []

    def seen(phase: str, info: dict) -> None:
        if phase == "stop" and info["generation"] == 0:
            young.append(info["collected"])

    gc.callbacks.append(seen)
    try:
        for _ in range(250_000):
            cycle: list = []
            cycle.append(cycle)  # garbage once the loop moves on: only the collector frees it
    finally:
        gc.callbacks.remove(seen)
    assert young and sum(young) > 0


@pytest.mark.parametrize("enabled", [True, False])
def test_a_pause_leaves_the_collector_as_it_found_it(enabled):
    (gc.enable if enabled else gc.disable)()
    try:
        with collector.paused():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
        with pytest.raises(ImportError), collector.paused():
            raise ImportError("an import that fails")
        assert gc.isenabled() is enabled
    finally:
        gc.enable()
