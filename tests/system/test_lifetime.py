"""system/lifetime: nothing hprobe starts outlives it, and a scratch
directory whose owner is gone is removed the next time one of its stem is
made there, never one of a live process or of another stem."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hprobe.system.lifetime import dies_with_us, scratch_dir

from ..processes import gone_within


def _dead_pid() -> int:
    """A pid no process has (one just reaped)."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(proc.stdout)


@pytest.mark.slow  # starts a process to find a pid no one holds
def test_a_scratch_directory_of_a_gone_owner_is_removed_and_no_other(tmp_path: Path) -> None:
    gone = _dead_pid()
    orphan = tmp_path / f"hprobe-flashinfer-{gone}-abc"
    (orphan / "sub").mkdir(parents=True)
    stray_file = tmp_path / f"hprobe-flashinfer-{gone}-tmpfile"
    stray_file.write_text("half written")
    live = tmp_path / f"hprobe-flashinfer-{os.getppid()}-abc"  # the test runner's parent: alive
    live.mkdir()
    other_stem = tmp_path / f"hprobe-cwd-{gone}-abc"
    other_stem.mkdir()
    not_ours = tmp_path / "hprobe-flashinfer-notapid-abc"
    not_ours.mkdir()
    made = scratch_dir(tmp_path, "hprobe-flashinfer")
    assert made.is_dir() and made.name.startswith(f"hprobe-flashinfer-{os.getpid()}-")
    assert not orphan.exists() and not stray_file.exists()
    assert live.is_dir() and other_stem.is_dir() and not_ours.is_dir()


@pytest.mark.slow  # starts processes
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_helper_started_through_the_guard_dies_with_its_parent(tmp_path: Path) -> None:
    """A parent killed by SIGKILL runs no cleanup: the helper it started
    through `dies_with_us` is killed by the kernel all the same."""
    pidfile = tmp_path / "helper.pid"
    helper_code = tmp_path / "helper.py"
    helper_code.write_text(f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n")
    parent_code = (
        "import subprocess, sys, time\n"
        "from hprobe.system.lifetime import dies_with_us\n"
        f"subprocess.Popen(dies_with_us([sys.executable, {str(helper_code)!r}]))\n"
        "time.sleep(60)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    parent = subprocess.Popen([sys.executable, "-c", parent_code], env=env)
    try:
        deadline = time.monotonic() + 30
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        helper = int(pidfile.read_text())
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        if not gone_within(helper, 10):
            os.kill(helper, signal.SIGKILL)
            pytest.fail("the helper outlived its parent")
    finally:
        parent.kill()


def test_a_command_not_named_by_its_path_is_started_as_it_is() -> None:
    assert dies_with_us(["pip", "download"]) == ["pip", "download"]
    assert dies_with_us([]) == []
    guarded = dies_with_us([sys.executable, "-c", "pass"])
    if sys.platform.startswith("linux"):
        assert guarded[:3] == [sys.executable, "-I", "-S"] and guarded[-3:] == [sys.executable, "-c", "pass"]
        assert str(os.getpid()) in guarded
