"""The release worker: an isolated interpreter that never runs the user's code,
bounded in time. Flashinfer trees made here (no network, no real release)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

HPROBE = Path(sys.executable).with_name("hprobe")


def _tree(root: Path, init: str) -> Path:
    (root / "flashinfer").mkdir(parents=True)
    (root / "flashinfer" / "__init__.py").write_text(init)
    return root


def _run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, NO_COLOR="1", HPROBE_CACHE_DIR=str(cwd / ".hprobe-cache"), **env)
    return subprocess.run([str(HPROBE), *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=120)


def test_a_hanging_release_is_inconclusive_after_the_worker_timeout(tmp_path):
    tree = _tree(tmp_path / "hangs", "import time\ntime.sleep(600)\n")
    start = time.monotonic()
    proc = _run(
        ["matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "8", "--flashinfer", str(tree), "--json"],
        tmp_path,
        HPROBE_WORKER_TIMEOUT="3",
    )
    assert time.monotonic() - start < 60
    assert proc.returncode == 3, proc.stderr  # a matrix with no answer at all is inconclusive, not a pass
    [result] = json.loads(proc.stdout)["results"]
    assert result["heads"][0]["outcome"] == "inconclusive"
    assert "did not finish within 3 s" in result["heads"][0]["reason"]


def test_a_bad_timeout_setting_is_one_line_exit_2(tmp_path):
    tree = _tree(tmp_path / "empty", "")
    proc = _run(
        ["matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "8", "--flashinfer", str(tree)],
        tmp_path,
        HPROBE_WORKER_TIMEOUT="soon",
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "hprobe: error: HPROBE_WORKER_TIMEOUT='soon': expected a number of seconds above 0"
    ]


def test_the_worker_never_imports_a_probe_package_from_the_working_directory(tmp_path):
    marker = tmp_path / "ran"
    for name in ("probe", "hprobe"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write({name!r})\n")
        (tmp_path / name / "worker.py").write_text(f"open({str(marker)!r}, 'w').write('worker')\n")
    tree = _tree(tmp_path / "release", "")
    proc = _run(
        ["matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "8", "--flashinfer", str(tree), "--json"],
        tmp_path,
    )
    assert not marker.exists(), marker.read_text()
    # The tree has no such entry point: absent, probed by hprobe's own worker.
    [result] = json.loads(proc.stdout)["results"]
    assert result["heads"][0]["outcome"] == "absent"


def test_a_module_that_fails_to_import_is_inconclusive_never_absent(tmp_path):
    """The entry point's module exists but an import inside it fails (a missing
    optional dependency): the environment, not the kernel."""
    tree = _tree(tmp_path / "broken", "")
    (tree / "flashinfer" / "mla").mkdir()
    (tree / "flashinfer" / "mla" / "__init__.py").write_text("import hprobe_test_missing_dependency\n")
    proc = _run(
        ["matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "8", "--flashinfer", str(tree), "--json"],
        tmp_path,
    )
    [result] = json.loads(proc.stdout)["results"]
    head = result["heads"][0]
    assert head["outcome"] == "inconclusive"
    assert "failed to import" in head["reason"] and "hprobe_test_missing_dependency" in head["reason"]
