"""Release workers forked from one process that has imported torch already.

A worker is a fresh interpreter that imports torch (about 2 s here) and then
one release's flashinfer. A run probing nineteen releases paid torch
nineteen times; the zygote (worker.serve, started once per run, isolated as
a worker is) imports torch and hprobe's probe code once, before any
flashinfer, and forks a worker per request. Each worker is what a fresh one
would be at that point: no flashinfer imported (the zygote refuses to serve
otherwise), its tree put first on sys.path by itself, its own session, its
own temp directory and process group, killed with the zygote and the zygote
with hprobe.

Only a faster road: when the zygote cannot start or dies, `run` answers None
and the caller starts a plain worker, which says what went wrong if anything
does.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import hprobe
from hprobe.support.worker import EXIT_NOT_FRESH
from hprobe.system.bounded import register_stopper, unregister_stopper
from hprobe.system.lifetime import dies_with_us

READY_TIMEOUT = 120.0  # seconds for the zygote to import torch and hprobe's probes


class TimedOut(Exception):
    """The worker did not finish within its limit; its group was killed."""


class _Job:
    def __init__(self) -> None:
        self.pid: int | None = None
        self.code: int | None = None
        self.started = threading.Event()
        self.ended = threading.Event()


class Zygote:
    def __init__(self) -> None:
        package_root = str(Path(hprobe.__file__).resolve().parent.parent)
        bootstrap = (
            f"import sys; sys.path.insert(0, {package_root!r}); from hprobe.support.worker import serve; "
            "sys.exit(serve())"
        )
        self._proc = subprocess.Popen(
            dies_with_us([sys.executable, "-I", "-c", bootstrap]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        register_stopper(self.stop)  # Ctrl-C or a signal stops its workers, then it
        self._jobs: dict[int, _Job] = {}
        self._lock = threading.Lock()
        self._next = 0
        self._ready = threading.Event()
        self.usable = True
        threading.Thread(target=self._read, name="hprobe-zygote", daemon=True).start()

    def alive(self) -> bool:
        return self.usable and self._proc.poll() is None

    def run(
        self, request: dict, workdir: Path, pycache: str | None, limit: float
    ) -> subprocess.CompletedProcess[str] | None:
        """The worker's end, TimedOut past `limit`, or None when the zygote
        could not run it (the caller runs a plain worker)."""
        if not self._ready.wait(READY_TIMEOUT) or not self.alive():
            self.usable = False
            return None
        job = _Job()
        with self._lock:
            self._next += 1
            number = self._next
            self._jobs[number] = job
            env = dict(os.environ, TMPDIR=str(workdir), HPROBE_WORKER="1")  # as a fresh worker's
            line = (
                json.dumps({"id": number, "request": request, "workdir": str(workdir), "pycache": pycache, "env": env})
                + "\n"
            )
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write(line.encode())
                self._proc.stdin.flush()
            except (OSError, ValueError):
                self.usable = False
                return None
        if not job.ended.wait(limit):
            if job.pid is not None:
                try:
                    os.killpg(job.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            job.ended.wait(5)
            raise TimedOut()
        if job.code is None or job.code == EXIT_NOT_FRESH:
            # The zygote ended first (whether the worker answered is unknown),
            # or a fork would not be a fresh worker for this tree.
            return None
        return subprocess.CompletedProcess(["hprobe-worker"], job.code, _read(workdir / "out"), _read(workdir / "err"))

    def stop(self) -> None:
        """Kill the workers running, let the zygote reap them (so none is left
        behind, not even as a zombie), then end it."""
        self.usable = False
        with self._lock:
            running = [job.pid for job in self._jobs.values() if job.pid is not None and not job.ended.is_set()]
        for pid in running:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.close()  # the zygote ends once it has reaped them
        except (OSError, ValueError):
            pass
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self._proc.wait()
        unregister_stopper(self.stop)

    def _read(self) -> None:
        assert self._proc.stdout is not None
        try:
            for raw in self._proc.stdout:
                try:
                    doc = json.loads(raw)
                except json.JSONDecodeError:
                    continue
                if "ready" in doc:
                    self._ready.set()
                    continue
                if "refused" in doc:
                    self.usable = False
                    self._ready.set()
                    continue
                job = self._jobs.get(doc.get("id"))
                if job is None:
                    continue
                if "pid" in doc:
                    job.pid = doc["pid"]
                    job.started.set()
                if "exit" in doc:
                    job.code = doc["exit"]
                    job.ended.set()
        finally:
            # Gone (killed, crashed, or closed): nothing more will end by its word.
            self.usable = False
            self._ready.set()
            with self._lock:
                for job in self._jobs.values():
                    job.ended.set()


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


_current: list[Zygote] = []
_start_lock = threading.Lock()


def zygote() -> Zygote | None:
    """This run's zygote, started on first use (again after one was killed);
    None off Linux (forking after torch is imported is not safe on macOS) or
    with HPROBE_ZYGOTE=0."""
    if not sys.platform.startswith("linux") or os.environ.get("HPROBE_ZYGOTE", "1") == "0":
        return None
    with _start_lock:
        if _current and _current[0].alive():
            return _current[0]
        if _current:
            _current.pop().stop()
        try:
            _current.append(Zygote())
        except OSError:
            return None
        if not _closing:
            _closing.append(True)
            atexit.register(_close_all)
        return _current[0]


_closing: list[bool] = []  # whether the close at exit is registered


def _close_all() -> None:
    for running in _current:
        running.stop()
