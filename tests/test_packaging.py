"""hprobe as a package: a wheel built from this checkout, installed into a fresh
venv outside it, answers exactly as the development install does, with the
shipped tables and mapping read from the installed package; the shipped
pre-commit hook passes through `pre-commit try-repo`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from .conftest import ROOT, checkout_copy

pytestmark = pytest.mark.slow
DEV_HPROBE = Path(sys.executable).with_name("hprobe")


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """bin/ of a fresh venv holding the wheel. Its dependencies (torch,
    flashinfer, typer, ...) come from the development venv through a .pth
    line, not a second multi-GB install; hprobe itself only from the wheel."""
    base = tmp_path_factory.mktemp("packaging")
    source = checkout_copy(base / "source")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(base / "dist"),
            str(source),
        ],
        check=True,
        timeout=300,
    )
    [wheel] = (base / "dist").glob("hprobe_mla-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(base / "venv")], check=True, timeout=300)
    py = base / "venv" / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True, timeout=300)
    site = _run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], base, dict(os.environ)
    ).stdout.strip()
    Path(site, "dev-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return base / "venv" / "bin"


def _env(tmp_path: Path, bin_dir: Path | None = None) -> dict[str, str]:
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200", HPROBE_CACHE_DIR=str(tmp_path / "cache"))
    if bin_dir is not None:
        env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return env


def _consumer_repo(tmp_path: Path) -> Path:
    """vLLM after PR #48047, with no pin: judged against the installed flashinfer."""
    repo = tmp_path / "consumer"
    shutil.copytree(ROOT / "tests" / "fixtures" / "repos" / "post48047" / "vllm", repo / "vllm")
    return repo


def test_the_installed_wheel_answers_like_the_checkout(installed, tmp_path):
    loaded = _run(
        [
            str(installed / "python"),
            "-c",
            "import hprobe, hprobe.matrices; print(hprobe.__file__); print(hprobe.matrices.__file__)",
        ],
        tmp_path,
        _env(tmp_path),
    )
    assert str(ROOT) not in loaded.stdout and "site-packages" in loaded.stdout, loaded.stdout
    for args in (
        ["check", "--sm", "100,120", "--json"],
        ["check", "--repo", str(_consumer_repo(tmp_path)), "--sm", "100", "--json"],
    ):
        wheel = _run([str(installed / "hprobe"), *args], tmp_path, _env(tmp_path))
        dev = _run([str(DEV_HPROBE), *args], tmp_path, _env(tmp_path))
        assert wheel.returncode == dev.returncode, wheel.stderr
        assert wheel.returncode in (0, 1, 3), wheel.stderr  # 3: 0.7.2's kernel table is not at hand here
        got, want = _located(json.loads(wheel.stdout)["findings"]), _located(json.loads(dev.stdout)["findings"])
        assert got and got == want


def _located(findings: list[dict]) -> list[dict]:
    """Findings with file paths cut to their names: the tables' directories differ."""
    return [{k: (Path(v).name if isinstance(v, str) and "/" in v else v) for k, v in f.items()} for f in findings]


def test_pre_commit_try_repo_passes_on_a_consumer_repo(installed, tmp_path):
    subprocess.run([str(installed / "python"), "-m", "pip", "install", "-q", "pre-commit"], check=True, timeout=600)
    repo = _consumer_repo(tmp_path)
    env = _env(tmp_path, installed)
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    for cmd in (
        ["git", "init", "-q"],
        ["git", "add", "."],
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "fixture"],
    ):
        subprocess.run(cmd, cwd=repo, check=True, env=env)
    proc = _run([str(installed / "pre-commit"), "try-repo", str(ROOT), "hprobe-check", "--all-files"], repo, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "hprobe check" in proc.stdout and "Passed" in proc.stdout
