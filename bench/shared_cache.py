"""Runs that share a cache, side by side in one run: one cold `matrix` alone
on an empty cache, then two of the same started together on another. Prints
each wall time, the CPU time the runs and their probe workers spent, and
whether every run printed the same answers. Two runs that probe each release
once between them spend about one run's CPU; two that each probe it, two.

    .venv/bin/python bench/shared_cache.py [--releases 0.6.13,0.6.14] [--sms 100,120]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def command(releases: str, sms: str) -> list[str]:
    return [sys.executable, "-m", "hprobe", "matrix", "--sm", sms, "--flashinfer", releases, "--format", "json"]


def answers(stdout: str, cache: Path) -> list:
    doc = json.loads(stdout.replace(str(cache), "CACHE"))
    return doc["results"]


def run_together(count: int, argv: list[str], cache: Path) -> tuple[float, float, list[list]]:
    """`count` runs of `argv` started at once on the empty `cache`: wall
    time, CPU seconds of the runs and their children, the answers of each."""
    env = dict(os.environ, NO_COLOR="1", HPROBE_CACHE_DIR=str(cache))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    procs = [
        subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(count)
    ]
    outs = [p.communicate(timeout=3600) for p in procs]
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    for proc, (_, err) in zip(procs, outs, strict=True):
        if proc.returncode not in (0, 3):
            raise SystemExit(f"hprobe matrix exited {proc.returncode}: {err[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, [answers(out, cache) for out, _ in outs]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--releases", default="0.6.13,0.6.14")
    parser.add_argument("--sms", default="100,120")
    args = parser.parse_args()
    argv = command(args.releases, args.sms)
    with tempfile.TemporaryDirectory(prefix="hprobe-bench-shared-") as work:
        base = Path(work)
        alone_wall, alone_cpu, alone = run_together(1, argv, base / "alone")
        pair_wall, pair_cpu, pair = run_together(2, argv, base / "pair")
        same = all(doc == alone[0] for doc in pair)
        print(f"matrix --flashinfer {args.releases} --sm {args.sms}, cold (an empty cache each setup)")
        print(f"one run alone        wall {alone_wall:6.1f} s   cpu {alone_cpu:6.1f} s")
        print(
            f"two runs at once     wall {pair_wall:6.1f} s   cpu {pair_cpu:6.1f} s   "
            f"{pair_cpu / alone_cpu:.2f}x the CPU of one"
        )
        print(f"same answers: {'yes' if same else 'NO'}")
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
