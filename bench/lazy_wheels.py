"""Releases read by range requests against whole wheels, side by side in one
run: cold `suggest --repo TREE --sm 100` on engine trees and cold `check`
on single releases, each once with the default route and once with
HPROBE_WHOLE_WHEELS=1, each in an empty cache of its own, interleaved.
Prints whether the reports are the same byte for byte (the cache's path set
aside), both wall times and what each run fetched by hprobe's own count.

    .venv/bin/python bench/lazy_wheels.py [--engines vllm-0.30.0,...] [--releases 0.6.14,...]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ENGINES = "vllm-0.30.0,vllm-0.33.0,vllm-0.34.0,sglang-0.5.23"
RELEASES = "0.6.12,0.6.14,0.6.18,0.7.2,0.7.4"
FETCHED = re.compile(r"fetched ([\d,.]+) MiB this run \(([^)]*)\)")


def run(argv: list[str], cache: Path, whole: bool) -> tuple[float, str, str, int]:
    env = dict(os.environ, NO_COLOR="1", HPROBE_CACHE_DIR=str(cache), HPROBE_WHOLE_WHEELS="1" if whole else "0")
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "hprobe", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        stdin=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1, 3):
        raise SystemExit(f"hprobe {' '.join(argv)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    found = FETCHED.search(proc.stderr)
    fetched = f"{found.group(1)} MiB ({found.group(2)})" if found else "nothing"
    return wall, proc.stdout.replace(str(cache), "CACHE"), fetched, proc.returncode


def side_by_side(label: str, argv: list[str], work: Path) -> bool:
    lazy_wall, lazy_out, lazy_fetched, lazy_rc = run(argv, work / "lazy", whole=False)
    whole_wall, whole_out, whole_fetched, whole_rc = run(argv, work / "whole", whole=True)
    same = lazy_out == whole_out and lazy_rc == whole_rc
    print(f"{label}")
    print(f"  ranges {lazy_wall:7.1f} s  fetched {lazy_fetched}")
    print(f"  whole  {whole_wall:7.1f} s  fetched {whole_fetched}")
    print(
        f"  ranges/whole {lazy_wall / whole_wall:.2f}x; report {'the same' if same else 'DIFFERENT'} (exit {lazy_rc})"
    )
    for name in ("lazy", "whole"):
        shutil.rmtree(work / name, ignore_errors=True)
    return same


def engine_tree(spec: str, work: Path) -> Path:
    """An engine release's source: a folder, or `vllm-0.30.0` downloaded (never imported)."""
    if Path(spec).is_dir():
        return Path(spec)
    from tests.engine_wheels import download_engine

    distribution, _, version = spec.partition("-")
    return download_engine(work / "engines" / spec, distribution, version)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engines", default=ENGINES, help="engine releases (vllm-0.30.0) or folders; '' for none")
    parser.add_argument("--releases", default=RELEASES, help="releases for cold check; '' for none")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hprobe-bench-lazy-"))
    same = True
    try:
        for release in filter(None, args.releases.split(",")):
            same &= side_by_side(
                f"check --flashinfer {release} --sm 100, cold", ["check", "--flashinfer", release, "--sm", "100"], work
            )
        for spec in filter(None, args.engines.split(",")):
            tree = engine_tree(spec, work)
            same &= side_by_side(
                f"suggest --repo {spec} --sm 100, cold", ["suggest", "--repo", str(tree), "--sm", "100"], work
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
