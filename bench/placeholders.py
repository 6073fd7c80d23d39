"""A slim tree's placeholders written beside a busy thread, side by side in
one run: in this process (each file's system calls let go of the GIL and wait
to get it back behind the busy thread) and by the child process
support/slim.py starts for a large tree. Prints both wall times and the ratio.

    .venv/bin/python bench/placeholders.py [--files 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from hprobe.support import slim  # noqa: E402


def _busy(stop: threading.Event) -> None:
    """What a prober thread does meanwhile: Python that holds the GIL."""
    total = 0
    while not stop.is_set():
        for i in range(10_000):
            total += i


def _timed(write, files: list[tuple[str, int]], where: Path) -> float:
    stop = threading.Event()
    busy = threading.Thread(target=_busy, args=(stop,), daemon=True)
    busy.start()
    start = time.perf_counter()
    try:
        write(os.fspath(where), files)
    finally:
        wall = time.perf_counter() - start
        stop.set()
        busy.join()
    return wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    files = [(f"flashinfer/data/csrc/d{i % 40:02d}/k{i:05d}.cu", i) for i in range(args.files)]

    def here(base: str, listed: list[tuple[str, int]]) -> None:
        slim._write_placeholder_files(base, listed, slim.PLACEHOLDER_MTIME_NS)

    def child(base: str, listed: list[tuple[str, int]]) -> None:
        if not slim._written_by_a_child(base, listed):
            raise SystemExit("the child could not write the placeholders")

    work = Path(tempfile.mkdtemp(prefix="hprobe-bench-placeholders-"))
    try:
        for round_ in range(args.rounds):
            walls = {}
            for name, write in (("in this process", here), ("by a child", child)):
                where = work / f"{round_}-{name.split()[-1]}"
                walls[name] = _timed(write, files, where)
            ratio = walls["in this process"] / walls["by a child"]
            print(
                f"{args.files} placeholders beside a busy thread: in this process {walls['in this process']:6.2f} s, "
                f"by a child {walls['by a child']:5.2f} s  ({ratio:,.0f}x)"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
