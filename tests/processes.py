"""What the tests of process lifetimes share: whether a process is gone."""

from __future__ import annotations

import os
import time
from pathlib import Path


def gone_within(pid: int, seconds: float) -> bool:
    """Whether `pid` is gone within `seconds`. A killed process whose parent
    is gone is a zombie until init reaps it (in a container, maybe never):
    it runs nothing, and counts as gone; a live one still answers."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        stat = Path(f"/proc/{pid}/stat")
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            state = "X"
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False
