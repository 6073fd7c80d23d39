"""Nothing hprobe starts outlives it, and nothing it leaves behind stays.

A helper (pip, the release worker, the --pad-fn child, a forked prober) is
killed by the kernel when hprobe dies, even by SIGKILL, where Linux offers a
parent-death signal: a subprocess starts through a tiny guard that asks for
it and then becomes the real command (the signal survives exec); a forked
child asks for it itself. Elsewhere the process-group kill on every way out
that Python sees still holds.

Scratch directories carry their owner's pid in their name
(`<stem>-<pid>-<random>`): one whose owner is gone is removed the next time a
directory of the same stem is made there (a run killed mid-report, a worker
killed mid-probe)."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

_PR_SET_PDEATHSIG = 1

# Run as `python -I -S -c GUARD <hprobe pid> <command...>`: ask for SIGKILL when
# the parent dies, give up if it already has, then become the command.
_GUARD = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)\n"
    "except Exception:\n"
    "    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    os._exit(137)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def dies_with_us(cmd: list[str]) -> list[str]:
    """`cmd` started so that it is killed when this process dies (Linux), as it is."""
    if not sys.platform.startswith("linux") or not cmd or not os.path.isabs(cmd[0]):
        return cmd
    return [sys.executable, "-I", "-S", "-c", _GUARD, str(os.getpid()), *cmd]


def die_with_parent(parent: int) -> None:
    """In a forked child: be killed when `parent` dies; exit now if it already has."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(137)


def scratch_dir(parent: str | Path | None, stem: str) -> Path:
    """A new directory `<stem>-<pid>-<random>` under `parent` (the temp dir by
    default); directories of the same stem there whose owner is gone are
    removed first."""
    where = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    remove_orphans(where, stem)
    return Path(tempfile.mkdtemp(dir=where, prefix=f"{stem}-{os.getpid()}-"))


def remove_orphans(where: Path, stem: str) -> None:
    try:
        entries = list(where.iterdir())
    except OSError:
        return
    for entry in entries:
        owner = _owner(entry.name, stem)
        if owner is not None and owner != os.getpid() and not _alive(owner):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)  # a temp file of a killed writer


def _owner(name: str, stem: str) -> int | None:
    if not name.startswith(stem + "-"):
        return None
    pid, _, rest = name[len(stem) + 1 :].partition("-")
    return int(pid) if pid.isdigit() and rest else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process of that pid: leave its directory alone
    return True
