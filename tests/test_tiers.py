"""The fast tier is what it says: every test marked `pure` passes with torch,
flashinfer and subprocesses made unavailable (tests/tier_guard.py), and the
tier is most of the unit tests, not a token few."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from .conftest import ROOT


def test_the_pure_tier_needs_no_torch_flashinfer_or_subprocess():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tests"))
    env.pop("HPROBE_TEST_SESSION_CACHE", None)  # a session of its own, which it removes
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "tier_guard",
            "-m",
            "pure and not slow",
            "--continue-on-collection-errors",
            "-rf",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    tail = proc.stdout[-3000:]
    passed = re.search(r"(\d+) passed", tail)
    assert passed and int(passed.group(1)) >= 150, tail
    assert " failed" not in tail.splitlines()[-1], tail
