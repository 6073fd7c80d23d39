"""Slim trees (support/slim.py): a fetched release unpacked as sparse
placeholders, each file written from the wheel when something opens it. The
answers are the full tree's; a file the wheel cannot give is a fault that
makes answers inconclusive, never a different answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from hprobe.support import slim
from hprobe.support.trees import resolve

from ..conftest import ROOT

pytestmark = pytest.mark.slow

RELEASE = "0.6.14"
ARGS = [
    "matrix",
    "-k",
    "dsv4-sparse-mla,trtllm-mla",
    "--sm",
    "100,120",
    "--heads",
    "1-128",
    "--flashinfer",
    RELEASE,
    "--format",
    "json",
]


def _hprobe(args: list[str], cache: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hprobe", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "NO_COLOR": "1", "HPROBE_CACHE_DIR": str(cache), **env},
    )


def _answers(stdout: str, cache: Path) -> dict:
    doc = json.loads(stdout.replace(str(cache), "CACHE").replace(".slim", ""))
    for release in doc["releases"]:
        release["notes"] = [
            n for n in release["notes"] if "fetched into the cache" not in n
        ]  # the sizes differ, by design
    return doc


def test_a_slim_tree_answers_as_the_full_one_at_a_fraction_of_its_size(tmp_path):
    full, thin = tmp_path / "full", tmp_path / "slim"
    whole = _hprobe(ARGS, full, HPROBE_SLIM_TREES="0")
    lean = _hprobe(ARGS, thin)
    assert whole.returncode == lean.returncode == 0, lean.stderr[-2000:]
    assert _answers(lean.stdout, thin) == _answers(whole.stdout, full)
    [full_tree] = (full / "trees").glob("*/flashinfer")
    [slim_tree] = (thin / "trees").glob("*.slim/flashinfer")

    def wheel_files(tree: Path) -> list[Path]:
        # The wheel's files: the bytecode the imports wrote beside them is
        # in both trees alike (it lived in the cache's pycache before).
        return [
            p for p in tree.rglob("*") if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".part")
        ]

    def on_disk(tree: Path) -> int:
        return sum(p.stat().st_blocks * 512 for p in wheel_files(tree))

    assert on_disk(slim_tree) < 0.15 * on_disk(full_tree)
    # Every file is there by name and size: listing and stat answer as on the full tree.
    names = {p.relative_to(full_tree): p.stat().st_size for p in wheel_files(full_tree)}
    assert {p.relative_to(slim_tree): p.stat().st_size for p in wheel_files(slim_tree)} == names


def test_what_is_opened_is_the_wheels_own_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HPROBE_WHOLE_WHEELS", "1")  # served from the wheel (a tree read by ranges: test_remote_wheel)
    release = resolve(RELEASE)
    tree = release.tree
    assert tree.name.endswith(".slim") and (tree / slim.MARKER).is_file()
    wheel = Path((tree / slim.MARKER).read_text())
    with zipfile.ZipFile(wheel) as zf:
        member = next(i for i in zf.infolist() if i.filename.startswith("flashinfer/data/") and i.file_size > 4096)
        expected = zf.read(member)
    path = tree / member.filename
    assert path.stat().st_blocks == 0 and path.stat().st_mtime_ns == slim.PLACEHOLDER_MTIME_NS  # a placeholder
    # Opened in another process, as a probe worker would: the hook writes it first.
    code = (
        f"from pathlib import Path; from hprobe.support.slim import watch; watch(Path({str(tree)!r})); "
        f"print(open({str(path)!r}, 'rb').read().hex())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout.strip()
    assert bytes.fromhex(out) == expected
    assert path.read_bytes() == expected and path.stat().st_mtime_ns == slim.MATERIALISED_MTIME_NS


def test_a_file_the_wheel_cannot_give_is_a_fault_never_an_answer(tmp_path):
    """The wheel gone from under a slim tree: a worker that opens a placeholder
    ends at once, and what it would have answered is inconclusive."""
    cache_dir = tmp_path / "cache"
    first = _hprobe(ARGS, cache_dir, HPROBE_WHOLE_WHEELS="1")
    assert first.returncode == 0, first.stderr[-2000:]
    [tree] = (cache_dir / "trees").glob("*.slim")
    wheel = Path((tree / slim.MARKER).read_text())
    damaged = tmp_path / "damaged.whl"
    with zipfile.ZipFile(wheel) as zf, zipfile.ZipFile(damaged, "w") as out:
        for info in zf.infolist():
            if info.filename.endswith(".py") and not slim.eager(info.filename):
                continue  # every Python file but the eager ones is gone from it
            out.writestr(info, zf.read(info))
    (tree / slim.MARKER).write_text(str(damaged))
    # Every Python file but the eager ones back to a placeholder (what a fresh
    # slim tree holds), its bytecode and the cached answers gone.
    for path in (tree / "flashinfer").rglob("*.py"):
        if not slim.eager(path.relative_to(tree).as_posix()):
            size = path.stat().st_size
            with open(path, "wb") as fh:
                fh.truncate(size)
            os.utime(path, ns=(slim.PLACEHOLDER_MTIME_NS, slim.PLACEHOLDER_MTIME_NS))
    for compiled in list(tree.rglob("__pycache__")):
        shutil.rmtree(compiled)
    shutil.rmtree(cache_dir / "results", ignore_errors=True)
    again = _hprobe(ARGS, cache_dir, HPROBE_WHOLE_WHEELS="1")
    doc = json.loads(again.stdout)
    cells = [h for r in doc["results"] for h in r["heads"]]
    assert cells and {h["outcome"] for h in cells} == {"inconclusive"}
    assert all("could not be written from" in h["reason"] for h in cells)


def test_an_entry_point_read_from_the_wheel_is_the_one_read_from_the_tree(tmp_path, monkeypatch):
    """The first-safe-release search reads each release's source straight from
    its wheel; the answer is the unpacked tree's, for every probe's entry point
    on two releases on either side of DSv4's arrival."""
    from hprobe.kernels import PROBES
    from hprobe.support.presence import entry_point_in_wheel, entry_point_present
    from hprobe.support.trees import fetch_wheel

    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    seen = {}
    for version in ("0.6.11", RELEASE):
        tree = resolve(version).tree / "flashinfer"
        wheel = fetch_wheel(version)
        for probe in PROBES.values():
            from_tree = entry_point_present(probe.entry_point, str(tree))
            assert entry_point_in_wheel(probe.entry_point, wheel) == from_tree, (version, probe.entry_point)
            seen[version, probe.id] = from_tree
    assert seen["0.6.11", "dsv4-sparse-mla"] is False and seen[RELEASE, "dsv4-sparse-mla"] is True


@pytest.mark.parametrize("child_fails", [False, True], ids=["child", "child fails"])
def test_placeholders_are_written_by_a_child_or_else_here_the_same(tmp_path, monkeypatch, child_fails):
    """A large tree's placeholders are written by a child process (here each
    file's system calls would wait on the GIL behind any busy thread); where
    the child cannot, this process writes them: the tree is the same, every
    file a sparse placeholder of its size and time, the eager members real."""
    wheel = tmp_path / "w.whl"
    names = [f"flashinfer/data/csrc/k{i:04d}.cu" for i in range(slim.CHILD_WRITES_FROM + 5)]
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("flashinfer/__init__.py", "x = 1\n")
        archive.writestr("flashinfer_python-9.9.dist-info/METADATA", "Name: flashinfer-python\nVersion: 9.9\n")
        for i, name in enumerate(names):
            archive.writestr(name, "y" * i)
    children: list[tuple[int, bool]] = []
    real = slim._written_by_a_child

    def counted(base, files):
        written = False if child_fails else real(base, files)
        children.append((len(files), written))
        return written

    monkeypatch.setattr(slim, "_written_by_a_child", counted)
    root = tmp_path / "tree"
    with zipfile.ZipFile(wheel) as archive:
        slim.write_placeholders(archive, archive.infolist(), root, wheel)
    assert children == [(len(names), not child_fails)]  # the child wrote them all, or none and this process did
    assert (root / "flashinfer" / "__init__.py").read_text() == "x = 1\n"
    for i, name in enumerate(names):
        info = os.stat(root / name)
        assert info.st_size == i and info.st_mtime_ns == slim.PLACEHOLDER_MTIME_NS, name
        assert slim.placeholder(os.fspath(root / name))
    assert (root / slim.MARKER).read_text() == str(wheel.resolve())


def test_a_child_that_cannot_run_leaves_the_writing_here(tmp_path, monkeypatch):
    monkeypatch.setattr(slim.sys, "executable", str(tmp_path / "no-such-python"))
    assert slim._written_by_a_child(os.fspath(tmp_path), [("a.py", 3)]) is False
