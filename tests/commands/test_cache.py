"""`hprobe cache`: sizes as `du` counts them, per release; prune frees what it says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import tmpfs

HPROBE = Path(sys.executable).with_name("hprobe")


def _du(path: Path) -> int:
    return int(
        subprocess.run(["du", "-s", "-B1", str(path)], capture_output=True, text=True, check=True).stdout.split()[0]
    )


def _run(cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HPROBE_CACHE_DIR=str(cache), NO_COLOR="1")
    return subprocess.run(
        [str(HPROBE), *args], env=env, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL
    )


@pytest.mark.slow
def test_cache_sizes_match_du_and_prune_frees_what_it_says(tmp_path):
    cache = tmp_path / "cache"
    # Two releases fetched and read (not imported): wheels, trees and bytecode-free entries.
    fetched = _run(cache, "kernels", "--releases", "0.6.13,0.6.14")
    assert fetched.returncode == 0, fetched.stderr
    shown = _run(cache, "cache", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert doc["location"] == str(cache)
    assert doc["total_bytes"] == _du(cache)
    sizes = {r["release"]: r["bytes"] for r in doc["releases"]}
    # Each release's tree (read by range requests: its metadata, the modules read, its directory).
    assert sizes["0.6.13"] > 1_000_000 and sizes["0.6.14"] > 1_000_000
    text = _run(cache, "cache")
    assert "0.6.13" in text.stdout and f"total {_human(doc['total_bytes'])}" in text.stdout

    before = _du(cache)
    pruned = _run(cache, "cache", "prune", "--keep", "==0.6.14", "--format", "json")
    assert pruned.returncode == 0, pruned.stderr
    after_doc = json.loads(pruned.stdout)
    assert after_doc["freed_bytes"] == sizes["0.6.13"] and after_doc["removed_entries"] >= 2
    assert before - _du(cache) == after_doc["freed_bytes"]
    assert {r["release"] for r in after_doc["releases"]} <= {"0.6.14", "shared"}
    assert after_doc["total_bytes"] == _du(cache)

    (cache / "notes.txt").write_text("the user's, in a directory HPROBE_CACHE_DIR shares")
    mine = _du(cache / "notes.txt")
    cleared = _run(cache, "cache", "clear")
    assert cleared.returncode == 0 and "clear: removed" in cleared.stdout
    assert [p.name for p in cache.iterdir()] == ["notes.txt"]  # only what hprobe wrote is removed
    assert f"freed {_human(after_doc['total_bytes'] + mine - _du(cache))}" in cleared.stdout


def test_prune_without_a_choice_is_an_input_error(tmp_path):
    proc = _run(tmp_path / "c", "cache", "prune")
    assert proc.returncode == 2 and "--release, --older-than or --keep" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def _human(size: int) -> str:
    from hprobe.report.formats.text import human_size

    return human_size(size)


def _planted(tmp_path: Path) -> tuple[Path, Path]:
    """A cache whose results/ and trees/ are links to folders outside it, and
    one wheel of its own."""
    cache, outside = tmp_path / "cache", tmp_path / "outside"
    (outside / "results").mkdir(parents=True)
    (outside / "trees" / "mine").mkdir(parents=True)
    (outside / "results" / "notes.json").write_text('{"results": [{"flashinfer_version": "0.6.12"}]}')
    (outside / "trees" / "mine" / "data.txt").write_text("the user's")
    (cache / "wheels").mkdir(parents=True)
    (cache / "wheels" / "flashinfer_python-0.6.12-py3-none-any.whl").write_bytes(b"not a real wheel")
    (cache / "results").symlink_to(outside / "results", target_is_directory=True)
    (cache / "trees").symlink_to(outside / "trees", target_is_directory=True)
    return cache, outside


@pytest.mark.parametrize("choice", [("--older-than", "0"), ("--release", "0.6.12"), ("--keep", ">=0.7")])
def test_prune_never_follows_a_linked_folder_out_of_the_cache(tmp_path, choice):
    cache, outside = _planted(tmp_path)
    there = sorted(p.relative_to(outside) for p in outside.rglob("*"))
    done = _run(cache, "cache", "prune", *choice)
    assert done.returncode == 0, done.stderr
    assert (outside / "results" / "notes.json").is_file() and (outside / "trees" / "mine" / "data.txt").is_file()
    # Nothing written where the links lead either (no lock file beside the user's folders).
    assert sorted(p.relative_to(outside) for p in outside.rglob("*")) == there
    # The wheel of its own is the cache's, and goes.
    assert not (cache / "wheels" / "flashinfer_python-0.6.12-py3-none-any.whl").exists()


def test_clear_leaves_a_link_and_what_it_points_at(tmp_path):
    """hprobe never makes a link where it keeps a folder: one there is not its own."""
    cache, outside = _planted(tmp_path)
    done = _run(cache, "cache", "clear")
    assert done.returncode == 0, done.stderr
    assert (outside / "results" / "notes.json").is_file() and (outside / "trees" / "mine" / "data.txt").is_file()
    assert (cache / "results").is_symlink() and (cache / "trees").is_symlink()
    assert not (cache / "wheels").exists()  # its own wheel went, and the folder with it


def test_a_shared_directory_keeps_the_users_own_folders_of_the_same_names(tmp_path):
    """HPROBE_CACHE_DIR on a folder that already holds a `results/` and a
    `names/` of the user's: prune and clear remove only what hprobe names its
    entries, and a folder that still holds the user's files stays."""
    cache = tmp_path / "shared"
    key = "ab" * 32
    users = [cache / "results" / "report.csv", cache / "names" / "people.txt", cache / "wheels" / "notes.md"]
    ours = [
        cache / "results" / f"{key}.json",
        cache / "names" / f"{key}.json",
        cache / "wheels" / "flashinfer_python-0.6.12-py3-none-any.whl",
    ]
    for path in users + ours:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('{"results": []}')
    before = _du(cache)
    pruned = _run(cache, "cache", "prune", "--older-than", "0", "--format", "json")
    assert pruned.returncode == 0, pruned.stderr
    assert all(p.is_file() for p in users)
    assert not ours[0].exists() and not ours[2].exists()
    freed = json.loads(pruned.stdout)["freed_bytes"]
    assert freed > 0 and freed == before - _du(cache)  # what the disk gave back, the user's files not counted
    cleared = _run(cache, "cache", "clear")
    assert cleared.returncode == 0, cleared.stderr
    assert all(p.is_file() for p in users) and not any(p.exists() for p in ours)
    assert sorted(p.name for p in cache.iterdir()) == ["names", "results", "wheels"]  # each still holds the user's file


def test_a_fifo_in_the_cache_does_not_hang_the_listing(tmp_path):
    cache = tmp_path / "cache"
    (cache / "results").mkdir(parents=True)
    os.mkfifo(cache / "results" / "answer.json")
    # A wheel's digest file as a FIFO: read to find the tree that holds the wheel, never opened.
    (cache / "wheels").mkdir()
    (cache / "wheels" / "flashinfer_python-0.6.12-py3-none-any.whl").write_bytes(b"a wheel")
    os.mkfifo(cache / "wheels" / "flashinfer_python-0.6.12-py3-none-any.whl.sha256")
    shown = _run(cache, "cache", "--format", "json")  # bounded by _run's timeout: a hang fails it
    assert shown.returncode == 0, shown.stderr
    pruned = _run(cache, "cache", "prune", "--older-than", "0")
    assert pruned.returncode == 0, pruned.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--older-than", "nan"), "--older-than nan: expected a number of days, 0 or more"),
        (("--older-than", "-1"), "--older-than -1.0: expected a number of days, 0 or more"),
        (("--keep", "torch>=2.4"), "'torch>=2.4' is neither a flashinfer release nor a version specifier"),
        (("--keep", ""), "name the releases to keep"),
        (("--keep", "9.9.9"), "the cache holds no flashinfer 9.9.9"),
        (("--keep", "v0.6.12"), "write the release as 0.6.12"),
    ],
)
def test_prune_options_are_checked_before_anything_is_removed(tmp_path, args, needle):
    cache = tmp_path / "cache"
    wheel = cache / "wheels" / "flashinfer_python-0.6.12-py3-none-any.whl"
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"not a real wheel")
    done = _run(cache, "cache", "prune", *args)
    assert done.returncode == 2 and needle in done.stderr, (done.returncode, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1
    assert wheel.exists()


def test_a_cache_dir_that_is_a_file_is_one_input_error(tmp_path):
    where = tmp_path / "a-file"
    where.write_text("mine")
    done = _run(where, "cache")
    assert done.returncode == 2 and done.stderr.strip() == f"hprobe: error: HPROBE_CACHE_DIR={where}: not a directory"
    assert where.read_text() == "mine"


def test_a_tree_a_running_probe_uses_is_left_by_prune_and_clear(tmp_path):
    """A worker probing from a cached tree holds it (cache.in_use): a prune or
    clear meanwhile leaves it, says so, and removes it once it is free."""
    from hprobe.support import cache as cache_module

    cache = tmp_path / "cache"
    tree = cache / "trees" / ("cd" * 32)
    (tree / "flashinfer_python-0.6.12.dist-info").mkdir(parents=True)
    (tree / "flashinfer").mkdir()
    (tree / "flashinfer" / "__init__.py").write_text("")
    # A slim tree reads its files out of its wheel: the wheel is held with it.
    wheel = cache / "wheels" / "flashinfer_python-0.6.12-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"a wheel")
    wheel.with_name(wheel.name + ".sha256").write_text("cd" * 32 + "\n7 0\n")
    held_entries = (tree, wheel, wheel.with_name(wheel.name + ".sha256"))
    for action in (("prune", "--older-than", "0"), ("clear",)):
        with cache_module.in_use(tree):
            held = _run(cache, "cache", *action, "--format", "json")
            assert held.returncode == 0, held.stderr
            assert all(p.exists() for p in held_entries) and json.loads(held.stdout)["in_use_entries"] == 3
            text = _run(cache, "cache", *action)
            assert "3 in use by a running hprobe, kept" in text.stdout
    freed = _run(cache, "cache", "prune", "--older-than", "0", "--format", "json")
    assert (
        freed.returncode == 0
        and not any(p.exists() for p in held_entries)
        and json.loads(freed.stdout)["in_use_entries"] == 0
    )


def test_a_prune_that_could_not_remove_says_so_and_counts_nothing(tmp_path):
    """A read-only cache: the count is what the disk shows (0 removed, the
    entries said left), never what was asked."""
    with tmpfs(tmp_path / "ro", "1m", "a read-only cache") as mount:
        cache = mount / "cache"
        (cache / "wheels").mkdir(parents=True)
        for version in ("0.6.12", "0.6.13"):
            (cache / "wheels" / f"flashinfer_python-{version}-py3-none-any.whl").write_bytes(b"not a real wheel")
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        done = _run(cache, "cache", "prune", "--older-than", "0", "--format", "json")
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        assert (doc["removed_entries"], doc["left_entries"], doc["freed_bytes"]) == (0, 2, 0)
        said = " ".join(_run(cache, "cache", "prune", "--older-than", "0").stdout.split())  # wrapped to the page
        assert "prune: removed 0 entries, freed 0 B; 2 could not be removed (is the cache read-only?)" in said
