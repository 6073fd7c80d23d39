"""Slim trees against full ones, side by side in one run: every default probe
over eight releases x five SMs x h_q 1..256, once on trees unpacked whole
(HPROBE_SLIM_TREES=0) and once on slim trees, each in a cache of its own.
Prints whether the answers are the same (the JSON documents, with the cache's
path and the "added to the cache" sizes set aside), each release's tree on
disk after probing (blocks, as du counts them), and both wall times.

    .venv/bin/python bench/slim_trees.py [--releases 0.6.12,...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RELEASES = "0.6.12,0.6.13,0.6.14,0.6.18,0.7.0,0.7.1,0.7.2,0.7.4"
SMS = "90,100,103,120,121"


def probe(cache: Path, releases: str, slim: bool) -> tuple[dict, float]:
    env = dict(os.environ, NO_COLOR="1", HPROBE_CACHE_DIR=str(cache), HPROBE_SLIM_TREES="1" if slim else "0")
    start = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hprobe",
            "matrix",
            "--sm",
            SMS,
            "--heads",
            "1-256",
            "--flashinfer",
            releases,
            "--format",
            "json",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=7200,
    )
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 3):
        raise SystemExit(f"hprobe matrix exited {proc.returncode}: {proc.stderr[-2000:]}")
    doc = json.loads(proc.stdout.replace(str(cache), "CACHE").replace(".slim", ""))
    for release in doc["releases"]:
        release["notes"] = [n for n in release["notes"] if "fetched into the cache" not in n]
    return doc, wall


def on_disk(tree: Path) -> int:
    seen: set[tuple[int, int]] = set()
    total = 0
    for folder, _, files in os.walk(tree):
        for name in files:
            info = os.lstat(os.path.join(folder, name))
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total


def tree_sizes(cache: Path) -> dict[str, int]:
    out = {}
    for tree in (cache / "trees").iterdir():
        infos = list(tree.glob("flashinfer_python-*.dist-info"))
        if tree.is_dir() and infos:
            out[infos[0].name.removeprefix("flashinfer_python-").removesuffix(".dist-info")] = on_disk(tree)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--releases", default=RELEASES)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hprobe-bench-slim-"))
    try:
        full_doc, full_wall = probe(work / "full", args.releases, slim=False)
        slim_doc, slim_wall = probe(work / "slim", args.releases, slim=True)
        cells = sum(len(r["heads"]) for r in slim_doc["results"])
        same = full_doc == slim_doc
        print(
            f"{args.releases} x SM{SMS} x h_q 1..256, every default probe: {len(slim_doc['results'])} results, "
            f"{cells:,} answers"
        )
        print(f"answers: {'the same' if same else 'DIFFERENT'} on slim and full trees")
        print(f"{'wall, cold (fetch, unpack, probe)':<36} full {full_wall:7.1f} s   slim {slim_wall:7.1f} s")
        full_sizes, slim_sizes = tree_sizes(work / "full"), tree_sizes(work / "slim")
        print(f"{'release':<12} {'full tree MB':>13} {'slim tree MB':>13} {'slim/full':>10}")
        for version in sorted(
            full_sizes, key=lambda v: [int(x) if x.isdigit() else x for x in v.replace("post", ".").split(".")]
        ):
            f, s = full_sizes[version], slim_sizes.get(version, 0)
            print(f"{version:<12} {f / 2**20:>13.1f} {s / 2**20:>13.1f} {s / f:>9.1%}")
        if not same:
            raise SystemExit(1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
