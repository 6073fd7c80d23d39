"""The README is short and true: at most 250 lines, every link in it and in
docs/ resolves, and every command it shows runs (on vLLM 0.25.0's own source
for `~/vllm`) and ends with an exit code the README documents."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from .conftest import ROOT, engine_source
from .engine_wheels import as_checkout

# Pure: runs without torch, flashinfer or a subprocess (the fast tier, `-m "pure and not slow"`).
pytestmark = pytest.mark.pure

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
BIN = Path(sys.executable).parent
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(line.lstrip("#")) for line in path.read_text().splitlines() if line.startswith("#")}


def test_the_readme_fits_250_lines():
    assert len(README.read_text().splitlines()) <= 250


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: p.name)
def test_every_link_resolves(page):
    text = page.read_text()
    links = [a or b for a, b in LINK.findall(text)]
    for link in links:
        if link.startswith(("http://", "https://", "mailto:")):
            continue
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        assert path.exists(), f"{page.name}: {link}"
        if anchor:
            assert anchor in _anchors(path), f"{page.name}: {link}"
    if page == README:
        assert {link.partition("#")[0] for link in links} >= {f"docs/{d.name}" for d in DOCS}  # every doc is reachable


def _readme_commands() -> list[str]:
    """The lines of the README's `sh` blocks, in order."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_the_readme_shows_the_upgrade_recipe_first():
    commands = _readme_commands()
    recipe = [c for c in commands if "~/vllm" in c]
    assert [c.split()[1] for c in recipe] == ["check", "suggest", "-C"]
    assert commands.index(recipe[0]) <= 1  # after the set-up line only


# The contract's own commands are what CI runs (`.ci/run` calls ./scripts/test,
# which runs ./scripts/setup), and the fast tier is run by tests/test_tiers.py:
# not run again from inside this test.
_CONTRACT = ("./scripts/setup", "./scripts/test", ".venv/bin/python -m pytest")
_EXPECTED = {
    "check": {1},
    "suggest": {0},
    "matrix": {0},
    "diff": {1},
    "bisect": {0},
    "report": {0},
    "cache": {0},
    "apply": {0},
}


@pytest.mark.slow
def test_every_readme_command_runs(tmp_path):
    vllm = as_checkout(engine_source(tmp_path / "src", "vllm", "0.25.0"), tmp_path / "vllm")
    subprocess.run(["git", "init", "-q"], cwd=vllm, check=True)
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", HOME=str(tmp_path), NO_COLOR="1")
    ran = []
    for command in _readme_commands():
        if command.startswith(_CONTRACT):
            assert all((ROOT / part).is_file() for part in re.findall(r"\./(scripts/\w+)", command))
            assert "-m pytest" not in command or "pure and not slow" in command  # the tier tests/test_tiers.py runs
            continue
        run_env = env
        if command.startswith("hprobe cache"):
            # Its own cache: pruning must not take releases from under the other tests.
            run_env = dict(env, HPROBE_CACHE_DIR=str(tmp_path / "cache-for-prune"))
            subprocess.run(
                [str(BIN / "hprobe"), "kernels", "--releases", "0.6.13,0.6.14"],
                env=run_env,
                capture_output=True,
                check=True,
                timeout=900,
            )
        proc = subprocess.run(
            ["bash", "-c", command],
            cwd=work,
            env=run_env,
            capture_output=True,
            text=True,
            timeout=1800,
            stdin=subprocess.DEVNULL,
        )
        words = shlex.split(command)
        verb = "apply" if words[0] == "git" else words[1]
        assert proc.returncode in _EXPECTED[verb], (
            f"{command}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )
        assert (proc.stdout + proc.stderr).strip() or verb == "apply", command  # report says what it wrote on stderr
        ran.append(verb)
    assert {"check", "suggest", "apply", "matrix", "report", "cache"} <= set(ran)
    # The patch was applied: the pin moved to where the rewritten rule is safe
    # (no further: later releases' answers for the sparse calls' 4 heads rest on a
    # selection whose kernel table the store alone serves, undecided here).
    moved = re.match(r"flashinfer-python==(\S+)\n", (vllm / "requirements" / "cuda.txt").read_text())
    assert moved and Version(moved.group(1)) >= Version("0.6.14"), moved
    assert (work / "site" / "index.html").is_file()


def test_the_bounds_table_says_the_bounds_the_code_keeps():
    """Each figure of docs/reference.md's Bounds table that names a constant is
    that constant (the nesting bound said 500 where the parser stops at 120)."""
    from hprobe.rules.repo.tree.scan import MAX_NESTING
    from hprobe.support.kernel_tables import MAX_CHECKSUMS_BYTES, MAX_TABLE_BYTES

    bounds = (ROOT / "docs" / "reference.md").read_text().split("## Bounds", 1)[1].split("\n## ", 1)[0]
    assert f"{MAX_NESTING} levels of nesting" in bounds
    assert f"{MAX_TABLE_BYTES // 2**20} MiB and {MAX_CHECKSUMS_BYTES // 2**20} MiB" in bounds
