""".github/workflows/release.yml: a tag builds the sdist and the wheel, checks
them with scripts/release-check (twine, the tag against the version built, the
wheel installed into a fresh venv and run) and publishes them with trusted
publishing. Run here up to the upload: the build and the check as the
workflow runs them, on a copy of this checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT, checkout_copy

pytestmark = pytest.mark.slow
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def test_a_tag_builds_checks_then_publishes_with_trusted_publishing():
    doc = _workflow()
    on = doc[True] if True in doc else doc["on"]  # YAML 1.1 reads the key `on` as true
    assert on == {"push": {"tags": ["v*"]}}
    build, publish = doc["jobs"]["build"], doc["jobs"]["publish"]
    runs = [s.get("run", "") for s in build["steps"]]
    assert any("python -m build" in r for r in runs) and any(r.strip() == "scripts/release-check dist" for r in runs)
    assert publish["needs"] == "build" and publish["environment"] == "pypi"
    assert publish["permissions"] == {"id-token": "write"}
    assert publish["steps"][-1]["uses"].startswith("pypa/gh-action-pypi-publish@")
    assert "with" not in publish["steps"][-1] and "secrets" not in WORKFLOW.read_text()  # no token: trusted publishing
    for step in build["steps"]:
        if "run" in step:
            subprocess.run(["bash", "-n"], input=step["run"], text=True, check=True)


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The workflow's build step, run on a copy of the checkout without build outputs."""
    source = checkout_copy(tmp_path_factory.mktemp("release") / "source")
    build = next(s["run"] for s in _workflow()["jobs"]["build"]["steps"] if "python -m build" in s.get("run", ""))
    # The venv's python first: `python` in the step is the one setup-python puts on PATH.
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(["bash", "-c", build], cwd=source, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return source / "dist"


def _check(dist: Path, tag: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        PYTHON=sys.executable,  # a test's own; left out, the checkout's .venv (test below)
        GITHUB_REF_NAME=tag,
        HPROBE_SMOKE_DEPS=sysconfig.get_paths()["purelib"],  # the dev venv's packages, not a second install
    )
    env.update(extra or {})
    return subprocess.run(
        [str(ROOT / "scripts" / "release-check"), str(dist)], env=env, capture_output=True, text=True, timeout=900
    )


def test_the_release_built_passes_its_check_for_its_own_tag(dist):
    from hprobe import __version__

    assert sorted(p.name for p in dist.iterdir()) == [
        f"hprobe_mla-{__version__}-py3-none-any.whl",
        f"hprobe_mla-{__version__}.tar.gz",
    ]
    done = _check(dist, f"v{__version__}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"release-check: hprobe-mla {__version__}: twine check passed, the installed wheel runs" in done.stdout
    assert "PASSED" in done.stdout  # twine's own verdict on both files


def test_a_tag_that_names_another_version_stops_before_anything_is_published(dist):
    from hprobe import __version__

    done = _check(dist, "v9.9.9")
    assert done.returncode == 1
    assert done.stderr.strip().endswith(
        f"tag v9.9.9 does not name the version built ({__version__}): publish v{__version__}, or set the version in "
        "pyproject.toml"
    )


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("TMPDIR", "/tmp/$(touch {marker})"),
        ("TMPDIR", "/tmp/`touch {marker}`"),
        ("HPROBE_SMOKE_DEPS", "/tmp\nimport pathlib; pathlib.Path('{marker}').touch()"),
        ("HPROBE_SMOKE_DEPS", "import pathlib; pathlib.Path('{marker}').touch()"),
    ],
)
def test_the_environment_is_never_run_as_code(dist, tmp_path, variable, value):
    """A TMPDIR ends up in the venv's console-script launchers (a shell
    trampoline where the path needs quoting); HPROBE_SMOKE_DEPS in a .pth
    file, whose `import` lines Python runs. Either holding code is refused,
    exit 2, and the code never runs."""
    from hprobe import __version__

    marker = tmp_path / "ran"
    done = _check(dist, f"v{__version__}", {variable: value.format(marker=marker)})
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().startswith(f"release-check: {variable} must be")
    assert not marker.exists()


def test_the_check_finds_the_checkout_s_own_venv(dist):
    """Without PYTHON the script runs twine from the checkout's .venv (which
    scripts/setup makes), not a system python3 that may lack it."""
    from hprobe import __version__

    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("no .venv in this checkout (scripts/setup makes it)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHON"}
    env.update(GITHUB_REF_NAME=f"v{__version__}", HPROBE_SMOKE_DEPS=sysconfig.get_paths()["purelib"])
    env["PATH"] = "/usr/bin:/bin"  # no venv on the way: only the checkout's own can have twine
    done = subprocess.run(
        [str(ROOT / "scripts" / "release-check"), str(dist)], env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "twine check passed, the installed wheel runs" in done.stdout
