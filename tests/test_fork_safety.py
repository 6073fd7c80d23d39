"""What a forked process inherits from hprobe's threads. Not in the pure tier:
it forks."""

from __future__ import annotations


def test_a_process_forked_while_a_thread_holds_the_once_locks_still_answers():
    """The code digest and the distribution listing are taken under a lock so
    two threads compute them once; a probe split forks while another thread
    may hold one, and the child must not wait on it forever."""
    import os
    import signal
    import threading

    from hprobe.support import results
    from hprobe.system import envinfo

    held, done = threading.Event(), threading.Event()

    def hold() -> None:
        with envinfo._listed._lock, results.code_digest._lock:
            held.set()
            done.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(30)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's exit status is the answer
            signal.alarm(20)  # a child stuck on the lock dies of SIGALRM
            code = 1
            try:
                envinfo._listed()
                results.code_digest()
                code = 0
            finally:
                os._exit(code)
    finally:
        done.set()
        thread.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
