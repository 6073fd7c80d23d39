"""system/bounded: every subprocess hprobe starts runs in its own group with
a wall-clock limit, and on a timeout or a stop the whole group is killed; a
bound read from the environment is a positive number or one input error."""

from __future__ import annotations

import sys
import time

import pytest

from hprobe.model.errors import InputError
from hprobe.system.bounded import Timeout, kill_running, resume, run_bounded, setting_from_env, stream_bounded

from ..processes import gone_within

SETTING = ("HPROBE_TEST_BOUND", 30.0)


@pytest.mark.pure
@pytest.mark.parametrize(("text", "value"), [(None, 30.0), ("", 30.0), (" ", 30.0), ("2.5", 2.5), ("900", 900.0)])
def test_a_bound_is_its_setting_or_its_default(monkeypatch, text, value) -> None:
    if text is None:
        monkeypatch.delenv(SETTING[0], raising=False)
    else:
        monkeypatch.setenv(SETTING[0], text)
    assert setting_from_env(SETTING) == value


@pytest.mark.pure
@pytest.mark.parametrize("text", ["0", "-3", "soon", "inf", "nan", "1e9"])
def test_a_bound_that_is_not_a_positive_number_is_one_input_error(monkeypatch, text) -> None:
    monkeypatch.setenv(SETTING[0], text)
    with pytest.raises(InputError, match=f"HPROBE_TEST_BOUND={text!r}: expected a number of seconds above 0"):
        setting_from_env(SETTING)


@pytest.mark.slow  # starts processes
def test_a_command_past_its_limit_is_killed_with_its_grandchildren(tmp_path) -> None:
    """The grandchild a command forks holds its pipes: killed with the group,
    the run ends at its limit instead of when the grandchild would."""
    pidfile = tmp_path / "grandchild.pid"
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    start = time.monotonic()
    with pytest.raises(Timeout):
        run_bounded([sys.executable, "-c", script], 3)
    assert time.monotonic() - start < 30  # a bound on the kill, not a timing: the sleep is 60 s
    assert gone_within(int(pidfile.read_text()), 10), "the grandchild outlived the group's kill"


@pytest.mark.slow  # starts processes
def test_nothing_new_starts_while_hprobe_stops() -> None:
    try:
        kill_running()
        with pytest.raises(Timeout):
            run_bounded([sys.executable, "-c", "pass"], 10)
    finally:
        resume()
    assert run_bounded([sys.executable, "-c", "print(2)"], 10).stdout.strip() == "2"


@pytest.mark.slow  # starts processes
def test_streamed_lines_arrive_before_the_command_ends():
    """The first wheel of a batch is probed while the next downloads: each line
    is handed over as it is written, not when the helper exits."""
    seen: list[tuple[str, float]] = []
    start = time.monotonic()
    script = "import sys, time; print('first', flush=True); time.sleep(2); print('second', flush=True)"
    done = stream_bounded(
        [sys.executable, "-c", script], 30, "", lambda line: seen.append((line.strip(), time.monotonic() - start))
    )
    assert done.returncode == 0
    assert [line for line, _ in seen] == ["first", "second"]
    assert seen[1][1] - seen[0][1] > 1.5  # the first came two seconds before the second


@pytest.mark.slow  # starts processes
def test_a_streamed_command_past_its_limit_is_killed():
    with pytest.raises(Timeout):
        stream_bounded([sys.executable, "-c", "import time; time.sleep(60)"], 1, "", lambda _line: None)
    assert run_bounded([sys.executable, "-c", "print(1)"], 10).stdout.strip() == "1"  # nothing left stopped
