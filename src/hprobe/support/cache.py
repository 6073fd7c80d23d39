"""hprobe's per-user cache: fetched wheels, unpacked trees, probe results.

Several hprobe processes may share it at once, so nothing here replaces or
deletes what another may be reading: files are published with an atomic rename
from a temporary name of their own, damaged entries are moved aside before
removal, and leftovers of killed runs are removed once they are old. A cache
that cannot be written (read-only home, a full disk) is no error: this run then
works in a temporary directory of its own, says so once, and answers as usual,
reading what the configured cache holds (`found`).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import functools
import json
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from hprobe.model.errors import InputError

T = TypeVar("T")

STALE_AFTER_S = 3600.0  # temp dirs of a killed run older than this are removed


def configured_root() -> Path:
    override = os.environ.get("HPROBE_CACHE_DIR")
    if override is not None:
        if not override.strip():
            raise InputError("HPROBE_CACHE_DIR is set but empty; unset it or name a directory")
        root = Path(override).expanduser()
        if root.exists() and not root.is_dir():
            raise InputError(f"HPROBE_CACHE_DIR={root}: not a directory")
        return root
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("hprobe"))


# Why a cache write fails that no run can fix: full, read-only, not permitted.
# Anything else (a damaged entry, a file where a directory should be) is not
# a reason to abandon the cache.
UNWRITABLE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})

_fallback: list[tuple[Path, str]] = []  # the temporary cache this run moved to, and why
_lock = threading.Lock()


@functools.cache
def _usable(root: Path) -> Path:
    """The directory to use for a configured root: itself, or the temporary
    fallback when it cannot be written."""
    if root.exists() and not root.is_dir():
        raise InputError(f"HPROBE_CACHE_DIR={root}: not a directory")
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = root / f".write-test-{uuid.uuid4().hex}"
        try:
            probe.write_bytes(bytes(4096))  # an empty file fits even on a full disk
        finally:
            probe.unlink(missing_ok=True)
        return root
    except OSError as exc:
        return _fall_back(root, exc)


def _fall_back(configured: Path, exc: OSError) -> Path:
    """Move this run to a temporary cache of its own, once; say so in `note()`."""
    with _lock:
        if not _fallback:
            path = Path(tempfile.mkdtemp(prefix="hprobe-cache-"))
            atexit.register(shutil.rmtree, path, True)
            reason = exc.strerror or type(exc).__name__
            _fallback.append(
                (
                    path,
                    f"the cache {configured} cannot be written ({reason}): this run read what it holds and kept "
                    "nothing new",
                )
            )
        return _fallback[0][0]


# Bytes this run put into the cache, per release label (what a fetch says it added).
_added: dict[str, int] = {}
_received: dict[str, int] = {}
_dropped: dict[str, int] = {}
_said: list[str] = []  # lines about how this run fetched, each said once at exit


def record_added(label: str, size: int) -> None:
    with _lock:
        _added[label] = _added.get(label, 0) + size


def new_run() -> None:
    """Forget what an earlier run in this process added and downloaded (a
    host that runs hprobe's commands in-process runs several)."""
    with _lock:
        _added.clear()
        _received.clear()
        _dropped.clear()
        _said.clear()


def record_received(kind: str, size: int) -> None:
    """Bytes this run took off the network for `kind` ("wheels", "kernel
    tables"): hprobe's own count of what it fetched, said on stderr at exit."""
    with _lock:
        _received[kind] = _received.get(kind, 0) + size


def received_by_kind() -> dict[str, int]:
    """This process's count so far (a child hands it to the run that started it)."""
    with _lock:
        return dict(_received)


def received_line() -> str | None:
    """What this run downloaded, one line for stderr; None when nothing."""
    with _lock:
        received = sorted(_received.items())
    total = sum(size for _, size in received)
    if not total:
        return None
    parts = ", ".join(f"{kind} {size / 2**20:,.1f} MiB" for kind, size in received if size)
    # Wheels come through the user's pip: from the index, or from a folder pip
    # is told to read; either way they are what this run had to bring in.
    return f"fetched {total / 2**20:,.1f} MiB this run ({parts}; not counting the index listings pip reads)"


def say_once(line: str) -> None:
    """A line for stderr at the end of the run (how releases were fetched:
    run state, never part of a report), said once however often it comes."""
    with _lock:
        if line not in _said:
            _said.append(line)


def record_dropped(label: str, size: int) -> None:
    """A wheel removed at the end of the run, its answers and tree kept (trees.drop_fetched_wheels)."""
    with _lock:
        _dropped[label] = _dropped.get(label, 0) + size


def added_for(label: str) -> int:
    with _lock:
        return _added.get(label, 0)


def added_lines() -> list[str]:
    """What this run added to the cache, a line per release, and what it
    downloaded, for stderr."""
    with _lock:
        dropped = dict(_dropped)
        # What a release added stays in the cache less its wheel, removed at the end.
        added = sorted((label, size - dropped.get(label, 0)) for label, size in _added.items())
    downloaded = [line] if (line := received_line()) else []
    with _lock:
        downloaded += _said
    if _fallback:
        return downloaded  # the temporary cache this run used is gone at exit
    lines = [
        f"flashinfer {label}: fetched into the cache, {size / 2**20:,.1f} MiB added (`hprobe cache` lists it, `hprobe "
        "cache prune` frees it)"
        for label, size in added
        if size > 0
    ]
    if dropped:
        lines.append(
            f"removed the wheel{'s' * (len(dropped) > 1)} of flashinfer {', '.join(sorted(dropped))} once answered "
            f"({sum(dropped.values()) / 2**20:,.1f} MiB): answers and trees stay, a question none answers fetches a "
            "wheel again (HPROBE_KEEP_WHEELS=1 keeps them)"
        )
    return lines + downloaded


def root() -> Path:
    usable = _usable(configured_root())
    return _fallback[0][0] if _fallback else usable


def note() -> str | None:
    """One line when this run could not use the configured cache."""
    return _fallback[0][1] if _fallback else None


def with_fallback(action: Callable[[], T]) -> T:
    """`action`, and once more in the temporary cache should the configured
    one turn out unwritable part way (a disk that fills while a wheel is
    fetched or unpacked)."""
    try:
        return action()
    except OSError as exc:
        if exc.errno not in UNWRITABLE or _fallback:
            raise
        _fall_back(configured_root(), exc)
        return action()


def directory(name: str) -> Path:
    path = root() / name
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if exc.errno in UNWRITABLE and not _fallback:
            _fall_back(configured_root(), exc)
            return directory(name)
        raise InputError(f"cache directory {path}: cannot be created ({exc.strerror or type(exc).__name__})") from None
    return path


def write_atomically(path: Path, data: bytes) -> bool:
    """Publish `data` at `path` through a temp name unique to this process.
    False when the cache cannot be written: the caller still has its answer."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return True
    except OSError:
        return False


def discard(path: Path) -> None:
    """Remove a damaged entry without pulling it from under a concurrent
    reader mid-walk: rename it aside first (atomic), then delete the copy."""
    aside = path.with_name(f".stale-{path.name}-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(path, aside)
    except OSError:
        return  # already gone, or someone else moved it
    if aside.is_dir() and not aside.is_symlink():  # a link goes, never what it points at
        shutil.rmtree(aside, ignore_errors=True)
    else:
        aside.unlink(missing_ok=True)


@contextlib.contextmanager
def exclusive(lock_file: Path, wait_s: float, remove: bool = False) -> Iterator[bool | None]:
    """An exclusive lock on `lock_file` between runs sharing the cache: yields
    False when it was had at once, True when had after another holder let go,
    None when not had (a filesystem without locks, `wait_s` passed, the run
    unwinding), where the caller works without it. Waited for in one-second
    slices: a thread waiting here never sees Ctrl-C, and must not hold its run
    up once the main thread unwinds (bounded.kill_running). `remove`: the
    holder removes the file as it lets go (a lock per question, not per entry)."""
    from filelock import FileLock, Timeout

    from hprobe.system.bounded import stopping

    lock = FileLock(str(lock_file))
    waited: bool | None = False
    try:
        try:
            lock.acquire(timeout=0)
        except Timeout:
            waited = True
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    lock.acquire(timeout=1.0)
                    break
                except Timeout:
                    if stopping() or time.monotonic() > deadline:
                        raise
    except (Timeout, OSError, NotImplementedError):  # filelock 3 refuses a filesystem without flock so
        waited = None
    try:
        yield waited
    finally:
        if waited is not None:
            lock.release()
            if remove:
                with contextlib.suppress(OSError):
                    os.unlink(lock_file)


def tree_lock(tree: Path) -> Path:
    """The lock file of a tree in the cache (`trees/<sha>` and `trees/<sha>.slim`
    share one): unpacking takes it alone, a run using the tree takes it shared,
    and prune removes the tree only when it can take it alone."""
    return tree.parent / f".{tree.name.removesuffix('.slim')}.lock"


@contextlib.contextmanager
def in_use(tree: Path) -> Iterator[None]:
    """Hold a cached tree against removal while a worker runs from it (a
    concurrent `cache prune` or `clear` leaves it). Only a safeguard: where the
    lock cannot be had, the run goes on as before."""
    import fcntl

    try:
        fd = os.open(tree_lock(tree), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def held_alone(tree: Path) -> Iterator[bool]:
    """True while no run holds `tree` (in_use) nor unpacks it, and none can
    start to until the block ends: prune removes it inside the block."""
    import fcntl

    try:
        fd = os.open(tree_lock(tree), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield True  # no lock to be had: as before
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def clean_stale(parent: Path) -> None:
    """Temp dirs and files (`.unpack-*`, `.stale-*`, `.*.tmp`) left by killed runs."""
    now = time.time()
    try:
        entries = list(parent.iterdir())
    except OSError:
        return
    for entry in entries:
        name = entry.name
        if not (
            name.startswith((".unpack-", ".stale-", ".download-")) or (name.startswith(".") and name.endswith(".tmp"))
        ):
            continue
        try:
            old = now - entry.lstat().st_mtime > STALE_AFTER_S
        except OSError:
            continue
        if old:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def found(kind: str, name: str) -> Path:
    """Where the entry `name` of `kind` ("results", "readings", a kernel
    table's folder) is read from: this run's cache; or, where this run works
    in a temporary cache because the configured one cannot be written (a
    read-only home, a cache mounted read-only on a CI runner), the
    configured one where it holds the entry, read only. New entries go to
    this run's cache either way."""
    here = root() / kind / name
    if _fallback and not here.exists():
        there = configured_root() / kind / name
        with contextlib.suppress(OSError):
            if there.exists():
                return there
    return here


def read_kept(kind: str, key: str) -> Any | None:
    """What `keep` stored under `kind` ("deep", "names", "readings") and `key`, or None; a
    corrupt or foreign entry is discarded, never trusted."""
    path = found(kind, f"{key}.json")
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
        if doc.get("schema") != f"hprobe.{kind}/1" or doc.get("key") != key or "value" not in doc:
            raise ValueError("foreign entry")
        return doc["value"]
    except Exception:  # noqa: BLE001 - a corrupt or foreign entry is discarded, never trusted
        discard(path)
        return None


def keep(kind: str, key: str, value: Any) -> bool:
    """Store a JSON value beside the answers; False when the cache cannot be written."""
    doc = {"schema": f"hprobe.{kind}/1", "key": key, "value": value}
    return write_atomically(root() / kind / f"{key}.json", json.dumps(doc).encode())
