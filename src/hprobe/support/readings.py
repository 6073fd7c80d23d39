"""A consumer tree's reading (rules/repo/extract.py) kept in the cache: a warm
`check --repo` parses nothing.

A reading rests on, and is keyed by: hprobe's code and Python's version (what
`ast` parses); the tree as given, its shape (every name in each directory an
index walks) and its Python files' contents; the `.dist-info` folders beside
it; the mapping as loaded (models overridden or not), the excludes and the
--set values; and the flashinfer release its rules read, by content (a
file's content digest is taken again only when its identity changed:
`_StatMemo`). What else
it read or looked for (a requirements file, a METADATA, an include) is
recorded as it is read (system/fileio) and checked again before an entry is
used. A reading is kept only when every answer the release gave was a kept
one (an import error may be this machine's) and the tree is a directory.

Kept without the parsed tree (unpickling an AST is slower than parsing it):
a reading from the cache has no `index`, and what needs one reads the tree
again (`RepoTables.indexed`). Entries are unpickled with only hprobe's own
types and a few standard ones allowed; a corrupt or foreign one is discarded."""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hprobe.rules.repo.extract import RepoTables, extract
from hprobe.rules.repo.tree.scan import ClassInfo, ModuleInfo, tree_shape
from hprobe.support import cache
from hprobe.support.results import code_digest
from hprobe.system.fileio import MAX_INPUT_BYTES, MAX_SOURCE_BYTES, content_digest, read_bytes, reads_recorded

if TYPE_CHECKING:
    from hprobe.rules.repo.interpreter.evaluate import FlashinferSource
    from hprobe.rules.repo.tree.mapping import Mapping
    from hprobe.rules.repo.tree.scan import RepoIndex

SCHEMA = "hprobe.reading/1"


class KeptReadings:
    """`extract` read through the cache, for one command: the tree's digest is
    taken once per tree and command (a check reads a tree once, then once per
    release its rules read)."""

    def __init__(self, use_cache: bool = True):
        self.use_cache = use_cache
        self._shapes: dict[tuple[str, tuple[str, ...]], tuple[str, dict[str, str]]] = {}

    def extract(
        self,
        root: Path,
        mapping: Mapping,
        excludes: tuple[str, ...] = (),
        flashinfer: FlashinferSource | None = None,
        overrides: dict[str, str] | None = None,
        index: RepoIndex | None = None,
    ) -> RepoTables:
        key = self._key(root, mapping, excludes, flashinfer, overrides) if self.use_cache else None
        if key is None:
            return extract(root, mapping, excludes, flashinfer, overrides, index)
        kept = _load(key)
        if kept is not None:
            return kept
        unkept_before = getattr(flashinfer, "unkept", 0)
        with reads_recorded() as reads:
            tables = extract(root, mapping, excludes, flashinfer, overrides, index)
        _, covered = self._shapes[(str(root), tuple(excludes))]
        # A file of the tree that changed while it was read: the key no longer
        # says what the reading rests on, so it is not kept.
        steady = all(seen is None or seen == covered[path] for path, seen in reads.items() if path in covered)
        if steady and getattr(flashinfer, "unkept", 0) == unkept_before:
            # The release's place: asking for its `tree` would fetch a wheel removed once answered.
            release_tree = getattr(getattr(flashinfer, "release", None), "location", None)
            rest = {
                path: seen for path, seen in reads.items() if path not in covered and not _under(path, release_tree)
            }
            _store(key, rest, tables)
        return tables

    def _key(
        self,
        root: Path,
        mapping: Mapping,
        excludes: tuple[str, ...],
        flashinfer: FlashinferSource | None,
        overrides: dict[str, str] | None,
    ) -> str | None:
        if not root.is_dir():
            return None  # a single file: read in a moment anyway
        release = None
        if flashinfer is not None:
            identity = getattr(flashinfer, "identity", None)
            if not isinstance(identity, str):
                return None
            release = [identity, flashinfer.version]
        shape = self._shapes.get((str(root), tuple(excludes)))
        if shape is None:
            shape = self._shapes[(str(root), tuple(excludes))] = _tree_digest(root, excludes)
        material = [
            SCHEMA,
            code_digest(),
            list(sys.version_info[:2]),
            str(root),
            shape[0],
            _beside(root),
            repr(mapping),
            list(excludes),
            sorted((overrides or {}).items()),
            release,
        ]
        return hashlib.sha256(repr(material).encode()).hexdigest()


def _tree_digest(root: Path, excludes: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    """(a digest of the tree's shape and Python files, each file's own digest).
    A file is read as the index reads it: up to its size cap, a file past it
    being one that is not parsed, whatever follows. A file whose identity
    (device, inode, size, modification and change times) is the one its
    digest was last taken at is not read again (_StatMemo)."""
    files, names = tree_shape(root, excludes)
    memo = _StatMemo(root, excludes)
    digest = hashlib.blake2b(digest_size=20)
    digest.update("\0".join(names).encode("utf-8", "surrogateescape"))
    each = {}
    for path in files:
        each[path] = memo.digest(path)
        digest.update(b"\1" + path.encode("utf-8", "surrogateescape") + b"\0" + each[path].encode())
    memo.keep()
    return digest.hexdigest(), each


class _StatMemo:
    """Each file's content digest with the identity it was taken at, kept
    per tree. Git's rule for racy entries: a digest is kept only for a file
    whose last change is older than RACY_S when it is taken, so a later write
    (which sets the change time, and no call can set it back) never shares
    the identity it was kept with. Mtimes alone lie (a checkout, an
    extraction set them); the change time and the inode do not."""

    RACY_S = 2.0

    def __init__(self, root: Path, excludes: tuple[str, ...]):
        self.key = f"stat-{content_digest(repr((SCHEMA, str(root), list(excludes))).encode())}"
        loaded = cache.read_kept("readings", self.key)
        # None yet, or damaged: every file is read.
        self.kept: dict[str, list] = loaded if isinstance(loaded, dict) else {}
        self.fresh: dict[str, list] = {}
        self.taken = time.time()

    def digest(self, path: str) -> str:
        try:
            info = os.stat(path)
        except OSError:
            return _prefix_digest(path, MAX_SOURCE_BYTES)
        identity = [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]
        kept = self.kept.get(path)
        if isinstance(kept, list) and len(kept) == 6 and kept[:5] == identity and isinstance(kept[5], str):
            self.fresh[path] = kept
            return kept[5]
        found = _prefix_digest(path, MAX_SOURCE_BYTES)
        if info.st_ctime_ns / 1e9 < self.taken - self.RACY_S and not found.startswith("unreadable"):
            self.fresh[path] = [*identity, found]
        return found

    def keep(self) -> None:
        if self.fresh != self.kept:
            cache.keep("readings", self.key, self.fresh)


def _prefix_digest(path: str, limit: int) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            return content_digest(fh.read(limit + 1))
    except OSError as exc:
        return f"unreadable {exc.errno}"


def _beside(root: Path) -> list[str]:
    """The `.dist-info` folders in and beside the tree (an engine's release
    and METADATA are read from them), each with whether it holds METADATA."""
    out = []
    for folder in (root, root.parent):
        try:
            names = sorted(p.name for p in folder.iterdir() if p.name.lower().endswith(".dist-info"))
        except OSError as exc:
            out.append(f"{folder}: {exc.errno}")
            continue
        out.extend(f"{folder / name}:{(folder / name / 'METADATA').exists()}" for name in names)
    return out


def _under(path: str, tree: Path | None) -> bool:
    return tree is not None and Path(path.removeprefix("exists:")).is_relative_to(tree)


def _unchanged(reads: dict[str, str | None]) -> bool:
    """Whether each file recorded beside the tree still reads as it did."""
    for path, seen in reads.items():
        if path.startswith("exists:"):
            if (Path(path.removeprefix("exists:")).exists()) != (seen is not None):
                return False
            continue
        try:
            now: str | None = content_digest(read_bytes(Path(path), "file", MAX_INPUT_BYTES))
        except Exception:  # noqa: BLE001 - unreadable now: what matters is whether it was then
            now = None
        if now != seen:
            return False
    return True


# Pickled without the modules' parsed trees: a class keeps its name, bases and
# place; the functions a reading names keep their own nodes (a rule's line, its
# span for a patch), their module only its name and path.
class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, ModuleInfo):
            return _hollow_module, (obj.name, obj.path)
        if isinstance(obj, ClassInfo):
            return _hollow_class, (obj.name, obj.node.lineno, obj.module, list(obj.bases), dict(obj.rebound))
        return NotImplemented


def _hollow_module(name: str, path: str) -> ModuleInfo:
    import ast

    return ModuleInfo(name, path, ast.Module(body=[], type_ignores=[]))


def _hollow_class(name: str, line: int, module: ModuleInfo, bases: list[str], rebound: dict[str, str]) -> ClassInfo:
    import ast

    node = ast.ClassDef(name=name, bases=[], keywords=[], body=[], decorator_list=[], lineno=line, col_offset=0)
    return ClassInfo(name, node, module, bases, rebound=rebound)


_ALLOWED = {
    "builtins": {"set", "frozenset", "slice", "complex", "bytearray"},
    "copyreg": {"_reconstructor"},
    "pathlib": {"Path", "PosixPath", "WindowsPath", "PurePosixPath", "PureWindowsPath"},
}
_BUILDERS = {(__name__, "_hollow_module"), (__name__, "_hollow_class"), ("copyreg", "_reconstructor")}


class _Unpickler(pickle.Unpickler):
    """Only classes (hprobe's own, `ast` nodes, `packaging`'s versions and
    specifiers, a few builtins) and the two builders above: a function or
    module attribute could be called by the entry, so one naming any is foreign."""

    def find_class(self, module: str, name: str) -> Any:
        top = module.split(".")[0]
        if (
            (module, name) not in _BUILDERS
            and top not in ("hprobe", "ast", "packaging")
            and name not in _ALLOWED.get(module, ())
        ):
            raise pickle.UnpicklingError(f"{module}.{name} is not a type a reading holds")
        found = super().find_class(module, name)
        if (module, name) not in _BUILDERS and not isinstance(found, type):
            raise pickle.UnpicklingError(f"{module}.{name} is not a class")
        return found


def _path(key: str) -> Path:
    return cache.root() / "readings" / f"{key}.pickle"


def _store(key: str, reads: dict[str, str | None], tables: RepoTables) -> None:
    body = io.BytesIO()
    _Pickler(body, protocol=pickle.HIGHEST_PROTOCOL).dump(replace(tables, index=None, reader=None))
    cache.write_atomically(
        _path(key), pickle.dumps((SCHEMA, key, reads, body.getvalue()), protocol=pickle.HIGHEST_PROTOCOL)
    )


def _load(key: str) -> RepoTables | None:
    path = cache.found("readings", f"{key}.pickle")
    if not path.is_file():
        return None
    try:
        schema, stored_key, reads, body = _Unpickler(io.BytesIO(path.read_bytes())).load()
        if schema != SCHEMA or stored_key != key or not isinstance(reads, dict):
            raise ValueError("foreign entry")
        if not _unchanged(reads):
            return None  # a file beside the tree changed: read again, kept anew
        tables = _Unpickler(io.BytesIO(body)).load()
        if not isinstance(tables, RepoTables):
            raise ValueError("foreign entry")
        return tables
    except Exception:  # noqa: BLE001 - a corrupt or foreign entry is discarded, never trusted
        cache.discard(path)
        return None
