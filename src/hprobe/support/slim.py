"""Slim trees: a fetched release unpacked as placeholders, each file written
from its wheel the first time anything opens it.

A wheel of 0.7.4 unpacks to 717 MB, of which a probe reads a few percent
(the Python it imports, the data files that Python reads); the rest is CUDA
sources and headers for JIT builds a probe stops before. A slim tree holds
every file of the wheel by name and by size, as a sparse file (no blocks on
disk) with a fixed modification time, so that listing, `exists` and
`getsize` answer exactly as they would on a full tree; an audit hook sees
every `open` (and `ctypes.dlopen`) in the process and, when it names a
placeholder of a watched tree, writes the real file from the wheel first.
What a probe reads is therefore always the wheel's own bytes: a dropped file
costs time, never a wrong answer.

A wheel removed once its release was answered (trees.drop_fetched_wheels),
or by another run sharing the cache, is fetched again by the tree's
`refetch` (given to `watch`) the first time a placeholder needs it, in
whichever thread of the process reads first; the fetched wheel is checked
against the digest the tree is named by before any file is written from it.

A tree read by range requests (support/remote_wheel.py) has no wheel on
disk: its marker says where the wheel is on the index, and a placeholder is
written from the member fetched from there and checked against the tree's
RECORD (RemoteSource).

When the wheel still cannot give the file (offline, damaged, another wheel
served), no code of flashinfer's may see a half-answer: a worker ends at once
with EXIT_TREE_UNREADABLE (its answers inconclusive, with the reason), and the
main process raises TreeUnreadable, a BaseException no `except Exception`
in flashinfer can swallow; hprobe's own readers turn it into an
inconclusive answer with its reason.
"""

from __future__ import annotations

import os
import sys
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hprobe.support.remote_wheel import Remote, RemoteWheel

MARKER = ".hprobe-slim"  # in a slim tree: the wheel it is written from, or the index (remote_wheel.Remote.marker)
# Placeholders carry this time and materialised files that plus two seconds:
# the compiled bytecode of a module (keyed by its source's time and size)
# then always matches the source it was compiled from.
PLACEHOLDER_MTIME_NS = 946_684_800 * 10**9  # 2000-01-01T00:00:00Z
MATERIALISED_MTIME_NS = PLACEHOLDER_MTIME_NS + 2 * 10**9
EXIT_TREE_UNREADABLE = 75


class TreeUnreadable(BaseException):
    """A slim tree's file could not be written from its wheel."""


def eager(name: str) -> bool:
    """Members written at unpacking: the distribution's metadata (read by
    hprobe itself on every run) and the package's `__init__.py`."""
    top = name.split("/", 1)[0]
    return top.endswith(".dist-info") or name == "flashinfer/__init__.py"


def write_placeholders(zf: zipfile.ZipFile, members: list[zipfile.ZipInfo], root: Path, wheel: Path | str) -> None:
    """Into `root` (a tree being unpacked, not yet published): the eager
    members written, every other file a sparse placeholder of its size.
    `wheel`: the wheel it is served from, or a marker (a remote wheel's)."""
    files: list[tuple[str, int]] = []
    for info in members:
        if info.is_dir():
            (root / info.filename).mkdir(parents=True, exist_ok=True)
        elif eager(info.filename):
            zf.extract(info, root)
        else:
            files.append((info.filename, info.file_size))
    if len(files) < CHILD_WRITES_FROM or not _written_by_a_child(os.fspath(root), files):
        _write_placeholder_files(os.fspath(root), files, PLACEHOLDER_MTIME_NS)
    (root / MARKER).write_text(str(wheel.resolve()) if isinstance(wheel, Path) else wheel)


def _write_placeholder_files(base: str, files: list[tuple[str, int]], mtime_ns: int) -> None:
    # Fifteen thousand files for 0.7.4: plain descriptors and joined strings
    # (pathlib and buffered files cost 2 s of the unpacking's 3 s here).
    made: set[str] = set()
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
    for name, size in files:
        path = os.path.join(base, name)
        folder = os.path.dirname(path)
        if folder not in made:
            os.makedirs(folder, exist_ok=True)
            made.add(folder)
        fd = os.open(path, flags, 0o666)  # the mode the umask gives, as extraction makes it
        try:
            os.ftruncate(fd, size)
            os.utime(fd, ns=(mtime_ns, mtime_ns))
        finally:
            os.close(fd)


# A tree of this many placeholders or more has them written by a child
# process. Each file is four system calls, each of which lets go of the GIL;
# beside a thread that computes (a release read while the next is unpacked),
# getting it back waits out the switch interval every time: 2,000 files took
# 44 s here with one busy thread, against 0.09 s alone.
CHILD_WRITES_FROM = 256
CHILD_TIMEOUT = 300.0  # seconds; past it (or on any failure) this process writes them itself


def _written_by_a_child(base: str, files: list[tuple[str, int]]) -> bool:
    """Whether a child process wrote every placeholder; False (and this
    process writes them, over whatever the child left) where it could not."""
    import json

    import hprobe
    from hprobe.system.bounded import Timeout, run_bounded

    # The same function, in a fresh interpreter that imports only this module (60 ms).
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(hprobe.__file__)))
    child = (
        f"import json, sys; sys.path.insert(0, {package_root!r}); "
        "from hprobe.support.slim import _write_placeholder_files as write; "
        "r = json.load(sys.stdin); write(r['base'], r['files'], r['mtime_ns'])"
    )
    request = json.dumps({"base": base, "mtime_ns": PLACEHOLDER_MTIME_NS, "files": files})
    try:
        done = run_bounded([sys.executable, "-I", "-S", "-c", child], CHILD_TIMEOUT, request)
    except (Timeout, OSError):
        return False
    return done.returncode == 0


# tree root (with a trailing separator) -> its wheel, or the index it is read from
_watched: dict[str, Path | RemoteSource] = {}
# tree root -> what brings its wheel back when it was removed (fetched again, verified)
_refetchers: dict[str, Callable[[], object]] = {}
_refetch_locks: dict[str, threading.Lock] = {}
_lock = threading.Lock()
_local = threading.local()
_installed = False
_zips: dict[Path, zipfile.ZipFile] = {}


def unwritten(paths: list[Path]) -> bool:
    """Whether any of `paths` is a placeholder not yet written from its wheel
    (a reader in this process would have it served: its wheel must be there)."""
    return any(placeholder(os.fspath(path)) for path in paths)


def watch(tree: Path, refetch: Callable[[], object] | None = None) -> bool:
    """Serve `tree`'s placeholders from its wheel in this process; False when
    it is no slim tree (a full one, or a directory the user named).
    `refetch`: brings the wheel back (fetched again and verified) where it
    was removed; called at most once at a time, only when a placeholder
    needs the wheel and it is gone. A tree read by range requests
    (support/remote_wheel.py) is served from the index instead."""
    global _installed
    try:
        marker = (tree / MARKER).read_text().strip()
    except OSError:
        return False
    root = os.path.join(os.path.abspath(tree), "")
    from hprobe.support.remote_wheel import Remote

    remote = Remote.from_marker(marker)
    with _lock:
        if remote is not None:
            current = _watched.get(root)
            if not (isinstance(current, RemoteSource) and current.remote == remote[0]):
                _watched[root] = RemoteSource(root, *remote)
        else:
            _watched[root] = Path(marker)
        if refetch is not None:
            _refetchers[root] = refetch
            _refetch_locks.setdefault(root, threading.Lock())
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True
    return True


def _hook(event: str, args: tuple) -> None:
    if event != "open" and event != "ctypes.dlopen":
        return
    if getattr(_local, "busy", False) or not args:
        return
    target = args[0]
    if isinstance(target, int) or target is None:
        return  # an open file descriptor: opened (and served) before
    try:
        path = os.fsdecode(target)
    except TypeError:
        return
    if not os.path.isabs(path):
        path = os.path.abspath(path)
    for root, source in _watched.items():
        if path.startswith(root):
            _local.busy = True
            try:
                _serve(path, root, source)
            finally:
                _local.busy = False
            return


def _serve(path: str, root: str, source: Path | RemoteSource) -> None:
    try:
        info = os.stat(path)
    except OSError:
        return  # not in the tree: the open answers for itself
    if info.st_mtime_ns != PLACEHOLDER_MTIME_NS:
        return
    member = path[len(root) :].replace(os.sep, "/")
    try:
        if isinstance(source, RemoteSource):
            source.serve(member)
        else:
            if not source.is_file():
                _bring_back(root, source)
            materialise(Path(path), member, source)
    except Exception as exc:  # noqa: BLE001 - whatever failed, no reader may see the placeholder
        why = f"hprobe: {path} could not be written from {source}: {type(exc).__name__}: {exc}"
        if os.environ.get("HPROBE_WORKER") == "1":
            sys.stderr.write(why + "\n")
            sys.stderr.flush()
            os._exit(EXIT_TREE_UNREADABLE)
        raise TreeUnreadable(why) from None


def _bring_back(root: str, wheel: Path) -> None:
    """The wheel of a watched tree, fetched again where it was removed (by
    this run once answered, or by another run): one thread fetches, the
    others wait for it and find the wheel there."""
    refetch = _refetchers.get(root)
    if refetch is None:
        raise FileNotFoundError(f"{wheel} was removed, and this tree has no way to fetch it again")
    with _refetch_locks[root]:
        if not wheel.is_file():
            refetch()
    with _lock:
        stale = _zips.pop(wheel, None)  # an open handle of the removed file is not the wheel now there
    if stale is not None:
        stale.close()
    if not wheel.is_file():
        raise FileNotFoundError(f"{wheel} was removed and could not be fetched again")


def materialise(path: Path, member: str, wheel: Path) -> None:
    """The member's bytes in place of its placeholder, published with one
    rename (another process may be writing the same file: either copy is it)."""
    with _lock:
        zf = _zips.get(wheel)
        if zf is None:
            zf = _zips[wheel] = zipfile.ZipFile(wheel)
        data = zf.read(member)  # checks the member's CRC
    publish(path, data)


def publish(path: Path, data: bytes) -> None:
    """`data` in place of the placeholder at `path`, with one rename."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        with open(tmp, "wb") as fh:  # the mode the umask gives, as extraction makes it
            fh.write(data)
        os.utime(tmp, ns=(MATERIALISED_MTIME_NS, MATERIALISED_MTIME_NS))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def source_of(tree: Path) -> RemoteSource | None:
    """The index serving `tree` in this process, where it is read by range requests."""
    source = _watched.get(os.path.join(os.path.abspath(tree), ""))
    return source if isinstance(source, RemoteSource) else None


def served_from_index(tree: Path) -> bool:
    """Whether `tree`'s marker says it is read by range requests."""
    from hprobe.support.remote_wheel import REMOTE_MARKER

    try:
        return (tree / MARKER).read_text().startswith(REMOTE_MARKER)
    except OSError:
        return False


def received() -> int:
    """Bytes this process took off the network serving remote trees."""
    with _lock:
        return sum(source.received for source in _watched.values() if isinstance(source, RemoteSource))


def placeholder(path: str) -> bool:
    """Whether the file at `path` is a placeholder not yet written (no file: not one)."""
    try:
        return os.stat(path).st_mtime_ns == PLACEHOLDER_MTIME_NS
    except OSError:
        return False


class RemoteSource:
    """A slim tree's members read from the index by range requests
    (support/remote_wheel.py), each checked against the tree's RECORD (an
    eager member, written when the tree was made): one at a time per tree,
    with the modules a served module imports at module level in the same
    round."""

    def __init__(self, root: str, remote: Remote, size: int):
        self.root, self.remote, self.size = root, remote, size
        self._lock = threading.Lock()
        self._wheel: RemoteWheel | None = None
        self._record: dict[str, str] | None = None
        self._single = 0
        self._swept = False
        self.received = 0

    def serve(self, member: str, imports_of: tuple[str, ...] = ()) -> None:
        """`member` (and what it imports) written from the index; with
        `imports_of`, what those written modules import as well."""
        from hprobe.support import remote_wheel

        with self._lock:
            wheel = self._open()
            record = self._digests()
            level = [member] if member else []
            for written in imports_of:
                with open(os.path.join(self.root, written), "rb") as fh:
                    level += remote_wheel.imported_members(written, fh.read(), wheel.infos.__contains__)
            if member:
                self._single += 1
                if self._single > remote_wheel.SWEEP_AFTER and not self._swept:
                    self._swept = True
                    level += [name for name in wheel.infos if name.endswith(".py")]
            done: set[str] = set()
            while level:
                todo = [
                    name
                    for name in dict.fromkeys(level)
                    if name not in done and name in wheel.infos and placeholder(os.path.join(self.root, name))
                ]
                if not todo:
                    break
                before = wheel.file.received
                data = wheel.read(todo)
                self.received += wheel.file.received - before
                level = []
                for name in todo:
                    done.add(name)
                    remote_wheel.check(name, data[name], record)
                    publish(Path(self.root, name), data[name])
                    level += remote_wheel.imported_members(name, data[name], wheel.infos.__contains__)

    def take_received(self) -> int:
        """Bytes fetched since last asked (the run counts each once)."""
        with self._lock:
            got, self.received = self.received, 0
        return got

    def _open(self) -> RemoteWheel:
        from hprobe.support import remote_wheel

        if self._wheel is None:
            directory = Path(self.root, remote_wheel.CENTRAL_DIRECTORY).read_bytes()
            self._wheel = remote_wheel.reopen(self.remote, directory, self.size)
        return self._wheel

    def _digests(self) -> dict[str, str]:
        from hprobe.support import remote_wheel

        if self._record is None:
            self._record = remote_wheel.tree_record(Path(self.root))[1]
        return self._record
