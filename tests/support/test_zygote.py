"""Workers forked from a zygote that imported torch once (support/zygote.py):
each answers as a fresh worker would, a tree that a fork could not serve
fresh goes to a fresh worker, and no worker outlives its limit or hprobe."""

from __future__ import annotations

import json
import os
import time

import pytest

from hprobe.support import workers, zygote
from hprobe.support.trees import resolve
from hprobe.system import bounded

pytestmark = pytest.mark.slow

RELEASE = "0.6.14"


def _probe_request(tree) -> dict:
    return {
        "tree": str(tree),
        "kernels": ["dsv4-sparse-mla", "trtllm-mla"],
        "sms": [90, 100, 120],
        "heads": list(range(1, 129)),
    }


def _read_request(tree) -> dict:
    return {"tree": str(tree), "read": {"module": "flashinfer.mla", "names": ["__all__", "no_such_name"]}, "sm": 100}


def _both(request: dict, monkeypatch) -> tuple[dict | str, dict | str]:
    monkeypatch.delenv("HPROBE_ZYGOTE", raising=False)
    forked = workers._worker(request)
    monkeypatch.setenv("HPROBE_ZYGOTE", "0")
    fresh = workers._worker(request)
    return forked, fresh


def test_a_forked_worker_answers_as_a_fresh_one(monkeypatch):
    tree = resolve(RELEASE).tree
    used: list[bool] = []
    real_run = zygote.Zygote.run
    monkeypatch.setattr(
        zygote.Zygote, "run", lambda self, *a: (lambda out: (used.append(out is not None), out)[1])(real_run(self, *a))
    )
    for request in (_probe_request(tree), _read_request(tree)):
        forked, fresh = _both(request, monkeypatch)
        assert isinstance(forked, dict) and "error" not in forked
        assert json.dumps(forked, sort_keys=True) == json.dumps(fresh, sort_keys=True)
    assert used == [True, True]  # both answered by a fork, not by the fallback


def test_a_tree_shipping_a_module_the_zygote_holds_gets_a_fresh_worker(tmp_path, monkeypatch):
    """A directory whose top level holds a package named like one the zygote
    imported (here `hprobe`): a fork would see the zygote's, a fresh worker
    the tree's order; the fork declines and a fresh worker answers."""
    tree = tmp_path / "tree"
    tree.mkdir()
    os.symlink(resolve(RELEASE).tree / "flashinfer", tree / "flashinfer")
    (tree / "hprobe").mkdir()
    z = zygote.zygote()
    assert z is not None
    workdir = tmp_path / "work"
    workdir.mkdir()
    assert z.run(_probe_request(tree), workdir, None, 600) is None
    forked, fresh = _both(_probe_request(tree), monkeypatch)
    assert json.dumps(forked, sort_keys=True) == json.dumps(fresh, sort_keys=True)


def test_a_forked_worker_past_its_limit_is_killed(tmp_path, monkeypatch):
    # A release whose import never ends within the limit, whatever the
    # machine's speed (a real probe of 0.6.14 now ends within a second).
    tree = tmp_path / "tree"
    (tree / "flashinfer").mkdir(parents=True)
    (tree / "flashinfer" / "__init__.py").write_text("import time\ntime.sleep(60)\n")
    monkeypatch.setenv("HPROBE_WORKER_TIMEOUT", "1")
    pids: list[int] = []
    real_run = zygote.Zygote.run

    def run(self, *args):
        try:
            return real_run(self, *args)
        finally:
            pids.extend(job.pid for job in self._jobs.values() if job.pid)

    monkeypatch.setattr(zygote.Zygote, "run", run)
    answer = workers._worker(_probe_request(tree))
    assert answer == "the probe worker did not finish within 1 s (HPROBE_WORKER_TIMEOUT sets the limit)"
    assert pids, "the worker was forked from the zygote"
    time.sleep(0.5)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # gone (reaped by the zygote), not merely signalled


def test_stopping_kills_the_zygote_and_a_new_one_starts_after(monkeypatch):
    first = zygote.zygote()
    assert first is not None and first.alive()
    bounded.kill_running()
    try:
        deadline = time.monotonic() + 10
        while first.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not first.alive()
    finally:
        bounded.resume()
    second = zygote.zygote()
    assert second is not None and second is not first and second.alive()
    forked, fresh = _both(_read_request(resolve(RELEASE).tree), monkeypatch)
    assert json.dumps(forked, sort_keys=True) == json.dumps(fresh, sort_keys=True)


def test_switched_off_no_zygote_starts_and_a_fresh_worker_answers(monkeypatch):
    monkeypatch.setenv("HPROBE_ZYGOTE", "0")
    assert zygote.zygote() is None
    answer = workers._worker(_read_request(resolve(RELEASE).tree))
    assert isinstance(answer, dict) and answer["values"]["no_such_name"] == {"missing": True}
