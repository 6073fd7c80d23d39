"""Releases probed ahead (support/gather.py `gather(..., ahead=...)`): suggest's
pin search always asks the newest release, so it is probed beside the check
and not waited for; when the search asks, that probe's answer is the one it
gets, the same as a probe then, and nothing of it is the check's."""

from __future__ import annotations

import threading

import pytest

from hprobe.model.errors import InputError
from hprobe.model.outcome import Depth
from hprobe.model.release import quiet
from hprobe.support import gather as gather_module
from hprobe.support import kernel_tables, results

pytestmark = pytest.mark.slow

NEEDED = {"dsv4-sparse-mla": [100, 120]}
HEADS = list(range(1, 129))


def _answers(probed) -> dict:
    return {f"{key}@{sm}": result.to_dict() for (key, sm), result in sorted(probed.results.items())}


def test_a_release_probed_ahead_is_the_answer_when_asked(tmp_path, monkeypatch):
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "alone"))
    alone = gather_module.probe_named("0.6.14", NEEDED, HEADS, False, quiet)

    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "ahead"))
    probed: list[str] = []
    real_worker = results._run_worker
    monkeypatch.setattr(
        results, "_run_worker", lambda release, *a: (probed.append(release.version), real_worker(release, *a))[1]
    )
    # 0.0.999 does not exist: a release probed ahead that fails is not the check's failure.
    assert list(gather_module.gather(["0.6.13"], NEEDED, HEADS, True, quiet, ahead=("0.0.999",))) == ["0.6.13"]
    # One core is idle beside one release (two here): one release ahead, and never one the check probes.
    monkeypatch.setattr(gather_module, "search_width", lambda: 2)
    got = gather_module.gather(["0.6.13"], NEEDED, HEADS, True, quiet, ahead=("0.6.13", "0.6.14", "0.6.15"))
    assert list(got) == ["0.6.13"]
    assert gather_module._ahead_key("0.6.15", NEEDED, HEADS) not in gather_module._AHEAD
    later = gather_module.probe_named("0.6.14", NEEDED, HEADS, True, quiet)  # waits for the probe ahead
    assert _answers(later) == _answers(alone)
    assert sorted(probed) == ["0.6.13", "0.6.14"]  # each probed once: asked, 0.6.14 was not probed again
    again = gather_module.probe_named("0.6.14", NEEDED, HEADS, True, quiet)  # from the result cache
    assert _answers(again) == _answers(alone) and sorted(probed) == ["0.6.13", "0.6.14"]
    with pytest.raises(InputError, match="0.0.999"):  # its failure is said when it is asked
        gather_module.probe_named("0.0.999", NEEDED, HEADS, True, quiet)


def test_without_the_cache_nothing_is_probed_ahead(tmp_path, monkeypatch):
    import threading

    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    got = gather_module.gather(["0.6.13"], NEEDED, HEADS, False, quiet, ahead=("0.6.14",))
    assert list(got) == ["0.6.13"]
    assert gather_module._ahead_key("0.6.14", NEEDED, HEADS) not in gather_module._AHEAD
    assert not [t for t in threading.enumerate() if t.name == "hprobe-ahead"]


def test_a_kernel_table_is_fetched_while_the_worker_probes_and_not_when_answers_are_cached(tmp_path, monkeypatch):
    """A release whose kernels can reach trtllm-gen's launchers has its kernel
    table fetched beside its worker, not after it (a cold report's first
    releases waited on the index with every core idle); the answers are the
    compiled-depth ones either way, and a warm run starts no fetch."""
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    events: list[str] = []
    real_worker, real_tables = results._run_worker, kernel_tables.tables_for

    def worker(release, *args):
        events.append("worker starts")
        try:
            return real_worker(release, *args)
        finally:
            events.append("worker ends")

    def tables(*args, **kwargs):
        events.append(f"table asked in {threading.current_thread().name}")
        return real_tables(*args, **kwargs)

    monkeypatch.setattr(results, "_run_worker", worker)
    monkeypatch.setattr(kernel_tables, "tables_for", tables)
    needed = {"trtllm-mla": [100]}
    first = gather_module.probe_named("0.6.14", needed, HEADS, True, quiet)
    assert events.count("table asked in hprobe-tables") == 1 and len(events) == 3, events
    assert events.index("table asked in hprobe-tables") < events.index("worker ends")
    assert first.results[("trtllm-mla", 100)].depth is Depth.COMPILED
    events.clear()
    again = gather_module.probe_named("0.6.14", needed, HEADS, True, quiet)
    assert events == [] and _answers(again) == _answers(first)
