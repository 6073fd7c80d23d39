"""Bytecode shared between fetched releases (support/bytecode.py): a module
whose source bytes another release compiled before is loaded from the store,
named as its own file; anything else, or a damaged entry, is compiled."""

from __future__ import annotations

import hashlib
import importlib
import marshal
import sys
import traceback
from pathlib import Path

import pytest

from hprobe.support.bytecode import share

pytestmark = pytest.mark.pure  # the fast tier: no torch, flashinfer or subprocess

SOURCE = b"def where():\n    raise ValueError('refused')\n\nANSWER = 42\n"


@pytest.fixture
def importer():
    """Import a module from a tree in this process, then forget it all again."""
    hooks, path, cached = list(sys.path_hooks), list(sys.path), dict(sys.path_importer_cache)
    imported: list[str] = []

    def load(tree: Path, name: str, store: Path):
        share(tree, store)
        sys.path.insert(0, str(tree))
        imported.append(name)
        return importlib.import_module(name)

    yield load
    sys.path_hooks[:], sys.path[:] = hooks, path
    sys.path_importer_cache.clear()
    sys.path_importer_cache.update(cached)
    for name in imported:
        sys.modules.pop(name, None)


def _tree(base: Path, name: str, module: str, source: bytes) -> Path:
    tree = base / name
    tree.mkdir()
    (tree / f"{module}.py").write_bytes(source)
    return tree


def _entries(store: Path) -> list[Path]:
    return sorted(p for p in store.rglob("*") if p.is_file())


def test_a_module_compiled_for_one_release_is_loaded_for_the_next_as_its_own_file(tmp_path, importer):
    store = tmp_path / "store"
    first = importer(_tree(tmp_path, "0.6.13", "mod_a", SOURCE), "mod_a", store)
    [entry] = _entries(store)
    # The second release ships the same bytes: its module comes from the entry.
    # Plant a different module's code under the same key to see which is loaded.
    planted = marshal.dumps(compile(SOURCE.replace(b"42", b"7"), "elsewhere.py", "exec"))
    entry.write_bytes(hashlib.sha256(planted).digest() + planted)
    second_tree = _tree(tmp_path, "0.6.14", "mod_b", SOURCE)
    second = importer(second_tree, "mod_b", store)
    assert (first.ANSWER, second.ANSWER) == (42, 7)
    assert _entries(store) == [entry]
    # The store holds the bytecode once: none is written beside either tree's sources.
    assert not list(tmp_path.glob("0.6.1*/**/*.pyc"))
    # Every code object names the release's own file, as a .pyc's does.
    assert second.where.__code__.co_filename == str(second_tree / "mod_b.py")
    with pytest.raises(ValueError) as raised:
        second.where()
    frame = traceback.extract_tb(raised.tb)[-1]
    assert (frame.filename, frame.lineno) == (str(second_tree / "mod_b.py"), 2)


def test_other_bytes_or_a_damaged_entry_are_compiled_from_the_source(tmp_path, importer):
    store = tmp_path / "store"
    importer(_tree(tmp_path, "a", "mod_c", SOURCE), "mod_c", store)
    [entry] = _entries(store)
    changed = importer(_tree(tmp_path, "b", "mod_d", SOURCE.replace(b"42", b"43")), "mod_d", store)
    assert changed.ANSWER == 43 and len(_entries(store)) == 2
    # A torn write: the payload no longer matches its digest. Never loaded.
    kept = entry.read_bytes()
    planted = marshal.dumps(compile(SOURCE.replace(b"42", b"7"), "elsewhere.py", "exec"))
    entry.write_bytes(kept[:32] + planted)
    again = importer(_tree(tmp_path, "c", "mod_e", SOURCE), "mod_e", store)
    assert again.ANSWER == 42
    mended = entry.read_bytes()  # compiled again and published in its place
    assert mended[:32] == hashlib.sha256(mended[32:]).digest() and mended != kept[:32] + planted


def test_only_the_shared_tree_goes_through_the_store(tmp_path, importer):
    store = tmp_path / "store"
    outside = _tree(tmp_path, "user", "mod_f", SOURCE)
    sys.path.insert(0, str(outside))
    importer(_tree(tmp_path, "fetched", "mod_g", SOURCE), "mod_g", store)
    [entry] = _entries(store)
    entry.unlink()
    mod = importer(_tree(tmp_path, "other", "unused", b""), "mod_f", store)  # found on the user's directory
    assert mod.ANSWER == 42 and type(mod.__loader__) is importlib.machinery.SourceFileLoader
    assert _entries(store) == []
