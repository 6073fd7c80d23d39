"""support/cache: several hprobe processes share the cache, so nothing here
replaces or deletes what another may be reading. An entry is published by an
atomic rename, a kept value that is damaged or foreign is discarded (never
trusted), a tree a run uses is not held alone, and leftovers of killed runs
go once they are old."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from hprobe.model.errors import InputError
from hprobe.support import cache

pytestmark = pytest.mark.pure


@pytest.fixture
def root(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    cache._usable.cache_clear()
    yield tmp_path / "cache"
    cache._usable.cache_clear()


def test_a_kept_value_reads_back_and_a_damaged_or_foreign_one_is_discarded(root: Path) -> None:
    assert cache.keep("readings", "k1", {"pin": "==0.6.14"})
    assert cache.read_kept("readings", "k1") == {"pin": "==0.6.14"}
    path = root / "readings" / "k1.json"
    path.write_text("{not json")
    assert cache.read_kept("readings", "k1") is None and not path.exists()
    # Another kind's entry under this name, or another key's: foreign, never trusted.
    path.write_text(json.dumps({"schema": "hprobe.deep/1", "key": "k1", "value": 1}))
    assert cache.read_kept("readings", "k1") is None and not path.exists()
    path.write_text(json.dumps({"schema": "hprobe.readings/1", "key": "k2", "value": 1}))
    assert cache.read_kept("readings", "k1") is None
    assert cache.read_kept("readings", "never-kept") is None


def test_a_write_is_published_whole_or_not_at_all(root: Path) -> None:
    target = root / "results" / "a.json"
    assert cache.write_atomically(target, b"answer")
    assert target.read_bytes() == b"answer"
    assert [p.name for p in target.parent.iterdir()] == ["a.json"]  # no temp name left
    blocked = root / "file"
    blocked.write_text("x")
    assert cache.write_atomically(blocked / "under-a-file.json", b"x") is False  # said, never raised


def test_a_discarded_entry_is_renamed_aside_before_it_goes_and_a_link_s_target_stays(root: Path) -> None:
    entry = root / "trees" / "t"
    (entry / "flashinfer").mkdir(parents=True)
    cache.discard(entry)
    assert not entry.exists() and list((root / "trees").iterdir()) == []
    outside = root.parent / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    link = root / "trees" / "link"
    link.symlink_to(outside)
    cache.discard(link)
    assert not link.is_symlink() and (outside / "keep").exists()
    cache.discard(root / "trees" / "gone")  # already gone: nothing to do


@pytest.mark.slow  # forks a process holding the tree
def test_a_tree_in_use_is_not_held_alone(root: Path) -> None:
    tree = root / "trees" / ("a" * 64 + ".slim")
    tree.mkdir(parents=True)
    assert cache.tree_lock(tree) == cache.tree_lock(tree.with_name("a" * 64))  # a tree and its slim form share one
    with cache.held_alone(tree) as alone:
        assert alone
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child holds the tree as a running probe does
        os.close(read)
        with cache.in_use(tree):
            os.write(write, b"1")
            time.sleep(5)
        os._exit(0)
    try:
        os.close(write)
        assert os.read(read, 1) == b"1"
        with cache.held_alone(tree) as alone:
            assert not alone
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


def test_leftovers_of_killed_runs_go_once_they_are_old(root: Path) -> None:
    wheels = root / "wheels"
    (wheels / ".unpack-old").mkdir(parents=True)
    (wheels / ".unpack-new").mkdir()
    (wheels / ".w.whl.tmp").write_text("x")
    (wheels / "flashinfer_python-0.6.14-py3-none-any.whl").write_text("kept")
    old = time.time() - cache.STALE_AFTER_S - 10
    for name in (".unpack-old", ".w.whl.tmp", "flashinfer_python-0.6.14-py3-none-any.whl"):
        os.utime(wheels / name, (old, old))
    cache.clean_stale(wheels)
    assert sorted(p.name for p in wheels.iterdir()) == [".unpack-new", "flashinfer_python-0.6.14-py3-none-any.whl"]


def test_a_cache_setting_that_names_no_directory_is_one_input_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HPROBE_CACHE_DIR", " ")
    with pytest.raises(InputError, match="HPROBE_CACHE_DIR is set but empty"):
        cache.configured_root()
    a_file = tmp_path / "file"
    a_file.write_text("x")
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(a_file))
    with pytest.raises(InputError, match="not a directory"):
        cache.configured_root()
