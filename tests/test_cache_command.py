"""`hprobe cache`: sizes as `du` counts them, per release; prune frees what it says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HPROBE = Path(sys.executable).with_name("hprobe")


def _du(path: Path) -> int:
    return int(subprocess.run(["du", "-s", "-B1", str(path)], capture_output=True, text=True, check=True).stdout.split()[0])


def _run(cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HPROBE_CACHE_DIR=str(cache), NO_COLOR="1")
    return subprocess.run([str(HPROBE), *args], env=env, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)


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
    assert sizes["0.6.13"] > 10_000_000 and sizes["0.6.14"] > 10_000_000
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
