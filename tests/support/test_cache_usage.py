"""support/cache_usage: what the cache holds per flashinfer release, and a
prune that removes only what hprobe wrote: an entry named otherwise (the
user's own files in a HPROBE_CACHE_DIR they share) is counted and never
removed; a link is removed, never what it points at."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hprobe.support import cache_usage
from hprobe.support.cache_usage import SHARED, ours, remove, select, usage

pytestmark = pytest.mark.pure

TREE = "a" * 64


def _cache(root: Path, outside: Path) -> Path:
    (root / "wheels").mkdir(parents=True)
    (root / "wheels" / "flashinfer_python-0.6.14-py3-none-any.whl").write_bytes(b"w" * 5000)
    (root / "wheels" / "my-notes.txt").write_text("the user's")
    tree = root / "trees" / f"{TREE}.slim"
    (tree / "flashinfer_python-0.6.14.dist-info").mkdir(parents=True)
    (tree / "flashinfer").mkdir()
    (tree / "flashinfer" / "x.py").write_text("x = 1\n")
    (root / "results").mkdir()
    answer = {"results": [{"flashinfer_version": "0.7.4"}, {"flashinfer_version": "0.7.4"}]}
    (root / "results" / f"{'b' * 64}.json").write_text(json.dumps(answer))
    (root / "kernel-tables" / ("c" * 64)).mkdir(parents=True)
    (root / "kernel-tables" / ("c" * 64) / "checksums.txt").write_text("x")
    (root / "kernel-tables" / "README").write_text("the user's")
    (root / "readings").symlink_to(outside)  # a link where hprobe keeps a folder
    (root / "photos").mkdir()  # not hprobe's at all
    return root


def test_each_entry_belongs_to_the_release_it_was_made_from(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    found = usage(_cache(tmp_path / "cache", outside))
    kinds = {(e.path.name, e.kind, e.release) for e in found.entries}
    assert ("flashinfer_python-0.6.14-py3-none-any.whl", "wheel", "0.6.14") in kinds
    assert (f"{TREE}.slim", "tree", "0.6.14") in kinds  # by the dist-info inside it
    assert (f"{'b' * 64}.json", "results", "0.7.4") in kinds  # by the answers it holds
    assert ("my-notes.txt", "other", SHARED) in kinds
    assert ("kernel-tables", "kernel-table", SHARED) in kinds
    assert ("readings", "other", SHARED) in kinds and ("photos", "other", SHARED) in kinds
    assert list(found.by_release()) == ["0.6.14", "0.7.4", SHARED]  # releases in version order
    assert found.total >= sum(e.size for e in found.entries) > 0
    document = found.to_dict()
    assert document["schema"] == "hprobe.cache/1" and document["total_bytes"] == found.total


def test_a_prune_removes_what_hprobe_wrote_and_nothing_of_the_user_s(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the cache's")
    root = _cache(tmp_path / "cache", outside)
    found = usage(root)
    chosen = select(found, releases=["0.6.14"])
    assert {e.path.name for e in chosen} == {"flashinfer_python-0.6.14-py3-none-any.whl", f"{TREE}.slim"}
    assert remove(chosen) == []
    assert not (root / "wheels" / "flashinfer_python-0.6.14-py3-none-any.whl").exists()
    assert not (root / "trees" / f"{TREE}.slim").exists()
    # Everything but the other entries (a clear): shared folders lose only what hprobe wrote.
    everything = select(usage(root))
    assert all(e.kind != "other" for e in everything)
    remove(everything)
    assert (root / "wheels" / "my-notes.txt").read_text() == "the user's"
    assert (root / "kernel-tables" / "README").read_text() == "the user's"
    assert not (root / "kernel-tables" / ("c" * 64)).exists()
    assert (outside / "keep.txt").exists() and (root / "photos").is_dir()


@pytest.mark.parametrize(
    ("folder", "name", "mine"),
    [
        ("wheels", "flashinfer_python-0.7.4-py3-none-any.whl", True),
        ("wheels", "flashinfer_cubin-0.6.13-py3-none-any.whl.sha256", True),
        ("wheels", "numpy-2.0-cp311.whl", False),
        ("trees", "a" * 64, True),
        ("trees", "mine", False),
        ("results", "b" * 64 + ".json", True),
        ("readings", "stat-" + "d" * 16 + ".json", True),
        ("readings", ".x.tmp", True),  # a write in progress
        ("readings", "notes.json", False),
        ("kernel-tables", "cubin-listings.json", True),  # what cubin wheels read whole hold
        ("kernel-tables", "listings.json", False),
        ("pycache", "anything", True),  # it mirrors the paths compiled
        ("photos", "a" * 64, False),
    ],
)
def test_only_names_hprobe_gives_are_hprobe_s(folder, name, mine) -> None:
    assert ours(folder, name) is mine


def test_an_answer_file_that_is_not_one_belongs_to_no_release(tmp_path: Path) -> None:
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"results": [{"flashinfer_version": "0.6.13"}, {"flashinfer_version": "0.7.4"}]}))
    assert cache_usage._result_release(odd) == SHARED  # two releases: no one owns it
    odd.write_text("not json")
    assert cache_usage._result_release(odd) == SHARED
