"""What hprobe's cache holds, per flashinfer release, and removing it: `hprobe cache`.

Sizes are disk usage as `du` counts it (allocated blocks, each inode once),
so the figures shown are the ones `du -s` prints. An entry belongs to a
release when it was made from it: its wheel, its unpacked tree and the
bytecode compiled from that tree, and the probe results answered by it.
The rest (kernel tables, bytecode of the interpreter's own modules, locks)
is shared.

Removal renames an entry aside first (`cache.discard`), so a run reading it
at the same time never meets a half-removed tree."""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from hprobe.support import cache

SHARED = "shared"
# What hprobe writes at the top of its cache. Anything else there (HPROBE_CACHE_DIR
# may name a directory that holds other things) is counted, never removed.
HPROBE_ENTRIES = frozenset(
    {"wheels", "trees", "results", "pycache", "bytecode", "kernel-tables", "table-rows", "deep", "names", "readings"}
)
# What no one release owns: bytecode keyed by source content (every release
# shipping the file shares it), kernel tables and their parsed rows, deep
# answers, and source trees' readings.
_SHARED_KINDS = {
    "bytecode": "bytecode",
    "kernel-tables": "kernel-table",
    "table-rows": "kernel-table",
    "deep": "answers",
    "names": "answers",
    "readings": "readings",
}
_WHEEL = re.compile(r"^flashinfer_python-([^-]+)-")
# The names hprobe gives what it writes inside each of its folders. HPROBE_CACHE_DIR
# may name a directory the user keeps other things in, their own `results/` among
# them: an entry named otherwise is theirs, counted and never removed.
_HEX64 = "[0-9a-f]{64}"
_KEPT = re.compile(r"^([a-z]+-)?[0-9a-f]{16,64}\.(json|pickle)$")
_OURS = {
    "wheels": re.compile(r"^flashinfer_[a-z_]+-[^/]+\.whl(\.sha256)?$"),
    "trees": re.compile(rf"^{_HEX64}(\.slim)?$"),
    "results": re.compile(rf"^{_HEX64}\.json$"),
    # What cache.keep and readings store: a digest, or a kind and a digest (`stat-…`, `requires-…`).
    "deep": _KEPT,
    "names": _KEPT,
    "readings": _KEPT,
    "table-rows": _KEPT,  # a kernel table's rows as parsed, keyed by the header and the parser
    # A kernel package's folder, and what the cubin wheels read whole hold (kernel_tables.LISTINGS).
    "kernel-tables": re.compile(rf"^({_HEX64}|cubin-listings\.json)$"),
    "bytecode": re.compile(r"^[0-9a-f]{8}$"),  # the interpreter's magic number
}
# What runs leave while they write: temp files and folders, locks, entries set aside.
_IN_PROGRESS = re.compile(r"^\.(unpack-|stale-|download-|.*\.tmp$|.*\.lock$)")


def ours(folder: str, name: str) -> bool:
    """Whether `name`, inside hprobe's `folder` of the cache, is one hprobe writes.
    `pycache/` mirrors the paths it compiled, so all of it is hprobe's."""
    if folder == "pycache":
        return True
    pattern = _OURS.get(folder)
    return pattern is not None and (pattern.match(name) is not None or _IN_PROGRESS.match(name) is not None)


_DIST_INFO = re.compile(r"^flashinfer_python-([^-]+)\.dist-info$")


@dataclass
class Entry:
    """One file or directory of the cache, what it is and which release it belongs to."""

    path: Path
    kind: str  # wheel, tree, bytecode, results, kernel-table, other
    release: str
    size: int  # bytes on disk, as du counts them
    modified: float  # the newest mtime inside
    folder: bool = False  # one of hprobe's folders at the top, shared by every release: emptied of what hprobe wrote


@dataclass
class Usage:
    root: Path
    entries: list[Entry] = field(default_factory=list)
    total: int = 0  # du -s of the root: the entries plus the directories that hold them

    def by_release(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self.entries:
            out[e.release] = out.get(e.release, 0) + e.size
        return dict(sorted(out.items(), key=lambda kv: _release_order(kv[0])))

    def to_dict(self) -> dict[str, object]:
        return {
            "schema": "hprobe.cache/1",
            "location": str(self.root),
            "total_bytes": self.total,
            "releases": [{"release": r, "bytes": b} for r, b in self.by_release().items()],
            "entries": [
                {"path": str(e.path), "kind": e.kind, "release": e.release, "bytes": e.size} for e in self.entries
            ],
        }


def _release_order(release: str) -> tuple[int, object]:
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(release))
    except InvalidVersion:
        return (1, release)


def _du(path: Path, seen: set[tuple[int, int]]) -> tuple[int, float]:
    """Bytes on disk (st_blocks) under `path`, each inode once, and the newest mtime."""
    total, newest = 0, 0.0
    stack = [path]
    while stack:
        p = stack.pop()
        try:
            st = p.lstat()
        except OSError:
            continue
        key = (st.st_dev, st.st_ino)
        if key not in seen:
            seen.add(key)
            total += st.st_blocks * 512
        newest = max(newest, st.st_mtime)
        if p.is_dir() and not p.is_symlink():
            try:
                stack.extend(p.iterdir())
            except OSError:
                continue
    return total, newest


def _tree_release(tree: Path) -> str:
    for child in _children(tree):
        m = _DIST_INFO.match(child.name)
        if m:
            return m.group(1)
    return SHARED


def _result_release(path: Path) -> str:
    try:
        st = path.lstat()
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_RESULT_BYTES:
            return SHARED  # a FIFO would block the read, a huge file is not an answer of ours
        doc = json.loads(path.read_text())
        versions = {r.get("flashinfer_version") for r in doc.get("results", [])}
    except (OSError, ValueError, AttributeError):
        return SHARED
    versions.discard(None)
    return str(versions.pop()) if len(versions) == 1 else SHARED


# The folders hprobe keeps entries in, walked one entry at a time.
_CONTAINERS = ("wheels", "trees", "results", "pycache")
# An answer file larger than this is not one hprobe wrote.
MAX_RESULT_BYTES = 64 * 2**20


def _real_directory(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def _inside(top: Path, path: Path) -> bool:
    """No component from `top` down to `path` is a link: walking `path` stays in the cache."""
    for part in (path, *path.parents):
        if part == top:
            return True
        if part.is_symlink():
            return False
    return False


def _children(path: Path) -> list[Path]:
    try:
        return sorted(path.iterdir())
    except OSError:
        return []


def usage(root: Path | None = None) -> Usage:
    """Every entry of the cache at `root` (default: the configured one)."""
    root = root or cache.configured_root()
    found = Usage(root)
    if not root.is_dir():
        return found
    seen: set[tuple[int, int]] = set()
    trees = {t.name: _tree_release(t) for t in _children(root / "trees") if t.is_dir()}

    def add(path: Path, kind: str, release: str, folder: bool = False) -> None:
        size, modified = _du(path, seen)
        found.entries.append(Entry(path, kind, release, size, modified, folder))

    for top in _children(root):
        if top.name in HPROBE_ENTRIES and not _real_directory(top):
            # A link (or a file) where hprobe keeps a folder: hprobe never makes
            # one, and what it points at is not the cache's: neither walked nor removed.
            found.entries.append(Entry(top, "other", SHARED, 0, 0.0))
            continue
        match top.name:
            case "wheels":
                for w in _children(top):
                    m = _WHEEL.match(w.name)
                    add(w, "wheel" if ours("wheels", w.name) else "other", m.group(1) if m else SHARED)
            case "trees":
                for t in _children(top):
                    add(t, "tree" if t.is_dir() and ours("trees", t.name) else "other", trees.get(t.name, SHARED))
            case "results":
                for r in _children(top):
                    add(r, "results" if ours("results", r.name) else "other", _result_release(r))
            case "pycache":
                # Bytecode mirrors the paths it was compiled from: a tree's is the tree's.
                mirrored = top / str(root).lstrip(os.sep) / "trees"
                for t in _children(mirrored) if _inside(top, mirrored) else []:
                    add(t, "bytecode", trees.get(t.name, SHARED))
                add(top, "bytecode", SHARED)  # the rest: the interpreter's own modules
            case _:
                # "other": not hprobe's, never removed.
                shared = top.name in _SHARED_KINDS
                add(top, _SHARED_KINDS[top.name] if shared else "other", SHARED, folder=shared)
    # The directories that hold the entries count too, as du counts them.
    directories = [root, *(p for p in (root / "wheels", root / "trees", root / "results") if p.is_dir())]
    found.total = sum(e.size for e in found.entries) + sum(d.lstat().st_blocks * 512 for d in directories)
    return found


def remove(entries: list[Entry]) -> list[Entry]:
    """Remove `entries`; returns those left because a running hprobe uses them
    (a tree a worker probes from). A shared folder (kernel tables, kept
    answers, bytecode) loses only what hprobe wrote in it, and goes itself
    once nothing else is left."""
    in_use: list[Entry] = []
    for e in entries:
        if e.folder:
            empty_of_ours(e.path)
        elif e.kind in ("tree", "wheel"):
            # A slim tree reads its files out of its wheel as a probe opens
            # them: a wheel is held with the tree made from it.
            tree = e.path if e.kind == "tree" else _tree_of(e.path)
            with cache.held_alone(tree) if tree is not None else contextlib.nullcontext(True) as alone:
                if alone:
                    cache.discard(e.path)
                else:
                    in_use.append(e)
        elif e.path.exists() or e.path.is_symlink():
            cache.discard(e.path)  # a link goes, never what it points at
    return in_use


def _tree_of(wheel: Path) -> Path | None:
    """The tree unpacked from `wheel` (named by the wheel's digest, which its
    `.sha256` file beside it keeps on its first line; for that file, its own)."""
    sidecar = wheel if wheel.name.endswith(".sha256") else wheel.with_name(wheel.name + ".sha256")
    try:
        if not stat.S_ISREG(sidecar.lstat().st_mode):
            return None  # a FIFO would block the read; a link is not one hprobe wrote
        with open(sidecar, "rb") as kept:
            digest = kept.read(200).split(b"\n", 1)[0].decode("ascii", "replace").strip()
    except OSError:
        return None
    return wheel.parent.parent / "trees" / digest if re.fullmatch(_HEX64, digest) else None


def empty_of_ours(folder: Path, keep: frozenset[Path] | set[Path] = frozenset()) -> bool:
    """Remove what hprobe wrote in one of its folders at the cache's top (but
    `keep`, with the locks that hold them), then the folder if that leaves it
    empty; True when something was removed. A link in a folder's place is not
    walked: what it points at is not the cache's."""
    if not _real_directory(folder):
        return False
    held = {cache.tree_lock(path).name for path in keep}
    removed = False
    for child in _children(folder):
        if child in keep or child.name in held:
            continue
        if ours(folder.name, child.name):
            cache.discard(child)
            removed = True
    with contextlib.suppress(OSError):
        folder.rmdir()  # only when empty: the user's own files keep it
    return removed


def select(
    found: Usage, releases: list[str] | None = None, older_than_days: float | None = None, keep: list[str] | None = None
) -> list[Entry]:
    """The entries a prune removes: of the releases named; not written for
    `older_than_days`; of every release but those kept. Shared entries are
    removed only by `clear` (or by age)."""
    now = time.time()
    chosen = []
    for e in found.entries:
        if e.kind == "other":
            continue  # not hprobe's
        if e.kind == "bytecode" and e.release == SHARED and e.path.name == "pycache":
            continue  # holds the trees' bytecode too: removed per release, or by clear
        if releases is not None and e.release not in releases:
            continue
        if keep is not None and (e.release in keep or e.release == SHARED):
            continue
        if older_than_days is not None and now - e.modified < older_than_days * 86400:
            continue
        chosen.append(e)
    return chosen
