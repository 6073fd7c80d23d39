"""Bytecode shared between fetched releases by the content of its source.

A cold probe of a fetched release spends most of its time compiling the
release's Python (0.7.4: about 6 s of a 13 s worker, 570 modules), and
neighbouring releases ship mostly the same files byte for byte. A worker
probing a tree of the cache therefore looks up each module it compiles in a
store keyed by the source's bytes (and the interpreter's bytecode magic and
optimisation level), and compiles only what no release compiled before.

What is loaded is what `compile` makes of those very bytes, marshalled as
the interpreter's own `.pyc` files are; its file name is set to the module's
own path on loading, as the interpreter does for a `.pyc` (tracebacks and
every file:line name this release's file). An entry carries the digest of
its payload: one that does not match (a torn write, a damaged disk) is
compiled again, never loaded.
"""

from __future__ import annotations

import _imp
import hashlib
import marshal
import os
import sys
from collections.abc import Callable
from importlib.abc import PathEntryFinder
from importlib.machinery import (
    BYTECODE_SUFFIXES,
    EXTENSION_SUFFIXES,
    SOURCE_SUFFIXES,
    ExtensionFileLoader,
    FileFinder,
    SourceFileLoader,
    SourcelessFileLoader,
)
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from types import CodeType

from hprobe.support import cache


def share(tree: Path, store: Path) -> None:
    """Modules imported from `tree` from now on in this process compile
    through `store`. Call before anything imports from the tree."""
    root = os.path.join(os.path.abspath(tree), "")

    class SharedLoader(SourceFileLoader):
        # SourceLoader's own signature (typeshed's differs).
        def source_to_code(self, data: bytes, path: str, *, _optimize: int = -1) -> CodeType:  # type: ignore[override]
            return _code(store, data, path, _optimize, super().source_to_code)

        def _cache_bytecode(self, source_path: str, bytecode_path: str, data: bytes) -> None:
            """No `.pyc` beside the tree's sources: the store holds it once for
            every release that ships the file (a tree's own copies were 21 MB
            of 0.7.4's 50)."""

    # The interpreter's own loaders, in its own order, with the source loader
    # swapped for the one above: only for directories inside the tree.
    hook = FileFinder.path_hook(
        (ExtensionFileLoader, EXTENSION_SUFFIXES),
        (SharedLoader, SOURCE_SUFFIXES),
        (SourcelessFileLoader, BYTECODE_SUFFIXES),
    )

    def in_tree(entry: str) -> PathEntryFinder:
        if not os.path.join(os.path.abspath(entry or "."), "").startswith(root):
            raise ImportError("not in the shared tree")  # the next hook answers
        return hook(entry)

    sys.path_hooks.insert(0, in_tree)
    for entry in [e for e in sys.path_importer_cache if os.path.join(os.path.abspath(e), "").startswith(root)]:
        del sys.path_importer_cache[entry]


def _key(data: bytes, optimize: int) -> str:
    level = sys.flags.optimize if optimize == -1 else optimize
    return hashlib.sha256(MAGIC_NUMBER + bytes([level]) + data).hexdigest()


def _code(store: Path, data: bytes, path: str, optimize: int, compile_source: Callable[..., CodeType]) -> CodeType:
    entry = store / MAGIC_NUMBER.hex() / _key(data, optimize)
    try:
        kept = entry.read_bytes()
    except OSError:
        kept = b""
    if len(kept) > 32 and kept[:32] == hashlib.sha256(kept[32:]).digest():
        code = marshal.loads(kept[32:])
        if isinstance(code, CodeType):
            _imp._fix_co_filename(code, path)  # type: ignore[attr-defined]  # as a .pyc's is on loading
            return code
    code = compile_source(data, path, _optimize=optimize)
    payload = marshal.dumps(code)
    # Published with one rename (another worker may write the same entry:
    # either copy is it); a store that cannot be written costs only time.
    cache.write_atomically(entry, hashlib.sha256(payload).digest() + payload)
    return code
