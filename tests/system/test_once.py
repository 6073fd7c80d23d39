"""system/once: a value taken once per process, however many threads ask
for it first, and a forked child that never waits on a lock its parent's
other thread held at the fork."""

from __future__ import annotations

import os
import threading

import pytest

from hprobe.system.once import Once


@pytest.mark.pure  # the fast tier: threads, no process
def test_a_value_taken_once_is_computed_once_when_two_threads_ask_together():
    import threading
    import time

    from hprobe.system.once import Once

    computed: list[int] = []

    @Once
    def slow() -> int:
        computed.append(1)
        time.sleep(0.2)  # the second thread asks while the first computes
        return 42

    answers: list[int] = []
    threads = [threading.Thread(target=lambda: answers.append(slow())) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [42, 42] and computed == [1]
    slow.cache_clear()
    assert slow() == 42 and computed == [1, 1]


@pytest.mark.slow  # forks a process: not the pure tier's
def test_a_child_forked_while_another_thread_computes_takes_its_own_value() -> None:
    """A fork while a thread of the parent holds the lock: the child's lock is
    new, so the child computes rather than waiting forever on a holder that
    does not exist in it."""
    started, release = threading.Event(), threading.Event()

    @Once
    def held() -> int:
        started.set()
        release.wait(10)
        return os.getpid()

    thread = threading.Thread(target=held)
    thread.start()
    started.wait(10)
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's exit code is the assertion
        # The parent's thread is not here; a lock copied in its held state would
        # never open: the alarm ends the child (a failure, not a hang).
        import signal

        signal.alarm(5)
        release.set()
        os._exit(0 if held() == os.getpid() else 1)
    release.set()
    thread.join()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert held() != child
