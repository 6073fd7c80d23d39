"""Shared fixtures. Tests run the installed, real flashinfer-python on CPU torch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

# The suite's own cache for this session, whatever HPROBE_CACHE_DIR says: a
# test never reads the user's cached results (which may come from other code)
# and never writes into them. Set before hprobe is imported; every subprocess
# a test starts inherits it unless the test names another.
# Under pytest-xdist the workers share the controller's (the variable below is
# inherited): the cache is safe for concurrent processes, and a release one
# worker fetched and probed is an answer for the others.
_INHERITED = os.environ.get("HPROBE_TEST_SESSION_CACHE")
SESSION_CACHE = Path(_INHERITED or tempfile.mkdtemp(prefix="hprobe-test-cache-"))
os.environ["HPROBE_TEST_SESSION_CACHE"] = str(SESSION_CACHE)
os.environ["HPROBE_CACHE_DIR"] = str(SESSION_CACHE)
# The session's wheels are kept: a run removes the wheels it read once answered,
# and the next test asking a new question of the release would fetch it again
# (tests/support/test_trees.py asks for the removal, in a cache of its own).
os.environ["HPROBE_KEEP_WHEELS"] = "1"
# NVIDIA's artifact store serves the kernel tables of flashinfer 0.6.18 on. Whether
# a test machine reaches it must not change what a test sees: the suite's store is
# a port on this machine nothing listens on (a test that needs a store serves one).
os.environ["FLASHINFER_CUBINS_REPOSITORY"] = "http://127.0.0.1:9/"

from hprobe.cli.app import app  # noqa: E402 - after the cache is chosen

from .engine_wheels import download_engine, pip_download  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MATRICES = ROOT / "matrices"
PRE_48047 = MATRICES / "vllm-dsv4-flashinfer-pre-48047.toml"
POST_48047 = MATRICES / "vllm-dsv4-flashinfer-post-48047.toml"


_ENGINE_TREES: dict[tuple[str, str], Path] = {}


def installed_flashinfer() -> Path:
    """The installed flashinfer package's folder (found, never imported)."""
    import importlib.util

    spec = importlib.util.find_spec("flashinfer")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent


def checkout_copy(dest: Path) -> Path:
    """This checkout copied to `dest` without build outputs, to build a release
    from: setuptools reuses an in-tree build/ and would ship files since
    deleted from the checkout."""
    shutil.copytree(
        ROOT,
        dest,
        ignore=shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "test-artifacts"),
    )
    return dest


def engine_source(where: Path, distribution: str, version: str) -> Path:
    """A serving engine's own source, as its wheel ships it: downloaded with pip
    (bounded in time), only `.py` files and METADATA unpacked, never imported.
    Returns the directory holding the package and its `.dist-info`. Each
    release is downloaded once per session (a wheel is hundreds of MB) and
    shared: tests read it, and copy it before changing anything."""
    key = (distribution, version)
    if key not in _ENGINE_TREES:
        # Per worker: two workers downloading into one directory would race.
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        _ENGINE_TREES[key] = download_engine(
            SESSION_CACHE / "engines" / worker / f"{distribution}-{version}", distribution, version
        )
    return _ENGINE_TREES[key]


@pytest.fixture(scope="session")
def cubin_wheel() -> Path:
    """flashinfer-cubin 0.6.13, the newest on the index: the wheel whose kernel
    package (158f6fa…) flashinfer 0.6.12 – 0.6.17 name, with trtllm-gen's
    kernel table. Downloaded once per session with pip; never unpacked."""
    # Inside the session's cache, so it goes with it (458 MB); per worker, so two never race.
    where = SESSION_CACHE / "cubin" / os.environ.get("PYTEST_XDIST_WORKER", "main")
    wheels = list(where.glob("flashinfer_cubin-*.whl"))
    if not wheels:
        pip_download(where, "flashinfer-cubin==0.6.13")
        wheels = list(where.glob("flashinfer_cubin-*.whl"))
    return wheels[0]


@pytest.fixture
def cli(monkeypatch):
    """Run hprobe in-process; returns (exit code, stdout, stderr)."""
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    runner = CliRunner()

    def invoke(*args: str):
        result = runner.invoke(app, list(args), catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr

    return invoke


@pytest.fixture
def cli_json(cli):
    def invoke(*args: str):
        code, out, err = cli(*args, "--json")
        try:
            doc = json.loads(out)
        except ValueError:
            # What hprobe said instead of a document: the failure names it.
            pytest.fail(
                f"hprobe {' '.join(args)} --json printed no JSON document (exit {code}); stderr: {err!r}; stdout: "
                f"{out[:2000]!r}"
            )
        return code, doc, err

    return invoke


@pytest.fixture
def write_table(tmp_path):
    def write(body: str, name: str = "table.toml") -> Path:
        path = tmp_path / name
        path.write_text(body)
        return path

    return write


V4_PRO_TABLE = """
[table]
name = "fixture"
source = "tests"

[model]
name = "DeepSeek-V4-Pro"
num_q_heads = 128
tp = [1, 2, 4, 8, 16]

[[backend]]
name = "Fixture"
kernel = "dsv4-sparse-mla"
sm = [100]
{rule}
"""


def only_pending_undecided(findings: list[dict]) -> bool:
    """Every inconclusive finding (of a check's JSON) waits on trtllm-gen's
    selection, not evaluated here: the kernel tables of 0.6.18 and later live
    in NVIDIA's artifact store alone, which this machine cannot reach. At
    least one finding is such."""
    inconclusive = [f for f in findings if f["verdict"] == "inconclusive"]
    return bool(inconclusive) and all((f["evidence"] or {}).get("pending") for f in inconclusive)


def pytest_sessionfinish(session, exitstatus):
    # Removed by the process that made it: not by a worker, and not by a pytest
    # a test starts (tests/test_tiers.py), whose session shares the variable.
    if not _INHERITED and not hasattr(session.config, "workerinput"):
        shutil.rmtree(SESSION_CACHE, ignore_errors=True)
    for tree in _ENGINE_TREES.values():
        shutil.rmtree(tree.parent, ignore_errors=True)


@contextmanager
def tmpfs(where: Path, size: str, needs: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted at `where` for the block (a full or read-only
    disk); the test is skipped, saying what `needs` it, where mounting is refused."""
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"{needs} needs a tmpfs mount, refused here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
