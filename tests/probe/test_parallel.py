"""probe/parallel: variants probed in two processes once flashinfer is
imported. Every key is answered once, in the order given, whichever process
took it; a child that fails or dies leaves its keys to the parent, so
forking can only save time, never lose or change results."""

from __future__ import annotations

import os

import pytest

from hprobe.model.outcome import HeadResult, KernelSMResult, Outcome
from hprobe.probe.parallel import probe_split

pytestmark = pytest.mark.slow  # forks

KEYS = [f"k{i}" for i in range(7)]


def _answer(keys: list[str]) -> list[KernelSMResult]:
    out = []
    for key in keys:
        result = KernelSMResult(key, 100, "0.6.14", key=key)
        result.heads[8] = HeadResult(8, Outcome.ACCEPTED, entry=f"pid {os.getpid()}")
        out.append(result)
    return out


def test_every_key_is_answered_once_in_order_by_either_process() -> None:
    results = probe_split(KEYS, _answer, workers=2)
    assert [r.key for r in results] == KEYS
    pids = {r.heads[8].entry for r in results}
    assert f"pid {os.getpid()}" in pids  # the parent took some; with 7 keys the child usually takes others
    assert probe_split(KEYS, _answer, workers=1) == [
        KernelSMResult(k, 100, "0.6.14", key=k, heads={8: HeadResult(8, Outcome.ACCEPTED, entry=f"pid {os.getpid()}")})
        for k in KEYS
    ]


@pytest.mark.parametrize("how", ["raises", "dies"])
def test_a_child_that_fails_leaves_its_keys_to_the_parent(how) -> None:
    parent = os.getpid()

    def job(keys: list[str]) -> list[KernelSMResult]:
        if os.getpid() != parent:
            if how == "dies":
                os._exit(3)
            raise RuntimeError("the child's probe failed")
        return _answer(keys)

    results = probe_split(KEYS, job, workers=2)
    assert [r.key for r in results] == KEYS
    assert {r.heads[8].entry for r in results} == {f"pid {parent}"}  # all answered here


def test_one_key_or_one_worker_runs_in_this_process() -> None:
    calls: list[list[str]] = []

    def job(keys: list[str]) -> list[KernelSMResult]:
        calls.append(keys)
        return _answer(keys)

    probe_split(["only"], job, workers=2)
    probe_split(KEYS, job, workers=1)
    assert calls == [["only"], KEYS]
