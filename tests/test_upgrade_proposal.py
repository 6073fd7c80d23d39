"""docs/upgrade-proposal.yml: a valid workflow whose proposing step, run as
written on a real vLLM release's tree, branches, applies hprobe's patch,
commits, pushes and opens a pull request with the evidence as its body. The
index query, the push target and `gh` are the only stand-ins: a local bare
repository is `origin`, and `pip index` / `gh` are scripts that answer as
they would."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT, engine_source
from .engine_wheels import as_checkout

WORKFLOW = ROOT / "docs" / "upgrade-proposal.yml"
BIN = Path(sys.executable).parent


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def test_the_workflow_is_valid_and_scheduled():
    doc = _workflow()
    on = doc[True] if True in doc else doc["on"]  # YAML 1.1 reads the key `on` as true
    assert on["schedule"][0]["cron"] and "workflow_dispatch" in on
    assert doc["permissions"] == {"contents": "write", "pull-requests": "write"}
    steps = doc["jobs"]["propose"]["steps"]
    assert [s.get("uses", s.get("name")) for s in steps] == [
        "actions/checkout@v4",
        "actions/setup-python@v5",
        "Install hprobe (CPU torch)",
        "Propose",
    ]
    # The install the README's CI recipe uses (hprobe is not on PyPI yet): a clone and scripts/setup, a CPU torch.
    assert steps[2]["env"]["HPROBE_TORCH_INDEX"] == "https://download.pytorch.org/whl/cpu"
    assert '"$RUNNER_TEMP/hprobe/scripts/setup"' in steps[2]["run"] and "pip install" not in steps[2]["run"]
    for step in steps:
        if "run" in step:
            subprocess.run(["bash", "-n"], input=step["run"], text=True, check=True)


def _stub(path: Path, body: str) -> None:
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(0o755)


@pytest.mark.slow
def test_the_proposing_step_opens_a_pull_request_with_the_patch_and_the_evidence(tmp_path):
    repo = as_checkout(engine_source(tmp_path / "src", "vllm", "0.25.0"), tmp_path / "repo")
    origin = tmp_path / "origin.git"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    for cmd in (
        ["init", "-q", "-b", "main"],
        ["add", "."],
        ["commit", "-qm", "vllm 0.25.0"],
        ["remote", "add", "origin", str(origin)],
        ["push", "-q", "origin", "main"],
    ):
        subprocess.run([*git, *cmd], cwd=repo, check=True)
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    _stub(
        stubs / "pip",
        'if [ "$1 $2" = "index versions" ]; then echo "flashinfer-python (0.6.14)"; echo "Available versions: 0.6.14, '
        '0.6.13"; exit 0; fi\nexit 1\n',
    )
    _stub(stubs / "gh", _GH.format(log=tmp_path / "gh-args", made=tmp_path / "gh-pr", fail=tmp_path / "gh-fails"))
    runner_temp = tmp_path / "runner"
    runner_temp.mkdir()
    env = dict(
        os.environ,
        PATH=f"{stubs}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}",
        RUNNER_TEMP=str(runner_temp),
        GH_TOKEN="x",
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@t",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@t",
    )
    script = _workflow()["jobs"]["propose"]["steps"][3]["run"]
    proc = subprocess.run(["bash", "-c", script], cwd=repo, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pushed = subprocess.run(
        ["git", "--git-dir", str(origin), "show", "hprobe/flashinfer-0.6.14", "--", "requirements/cuda.txt", "vllm"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # The rule and the pin in one change: the pin to the first release on which
    # every path judged is safe (the sparse calls' 4 heads need more than 0.6.14).
    assert "-flashinfer-python==0.6.13" in pushed and "-        return 64 if num_heads <= 64 else 128" in pushed
    assert re.search(r"^\+flashinfer-python==0\.(6\.1[4-9]|7\.)", pushed, re.M), pushed
    args = (tmp_path / "gh-args").read_text().splitlines()
    assert args[:2] == ["pr", "create"] and "hprobe/flashinfer-0.6.14" in args
    (tmp_path / "gh-args").unlink()
    body = (runner_temp / "body.md").read_text()
    assert (
        body.startswith("## hprobe suggest — flashinfer 0.6.14")
        and "### The current rules on flashinfer 0.6.14" in body
    )
    assert "reducible" in body and "flashinfer_sparse.py" in body
    # A second run finds the branch proposed already and does nothing.
    again = subprocess.run(["bash", "-c", script], cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "proposed already" in again.stdout
    assert (tmp_path / "gh-args").read_text().splitlines()[:2] == ["pr", "list"]


# `gh` as GitHub answers: `pr list` names the pull request `pr create` made
# (none before); `pr create` fails while the file `fail` exists.
_GH = """printf "%s\\n" "$@" >> {log}
if [ "$1 $2" = "pr list" ]; then [ -f {made} ] && echo 7; exit 0; fi
if [ "$1 $2" = "pr create" ]; then [ -f {fail} ] && exit 1; touch {made}; fi
exit 0
"""


def _propose(
    tmp_path: Path, *, pip: str, hprobe_rc: int, origin_ok: bool = True
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The proposing step on a one-file repository, with `pip`, `hprobe` and `gh`
    as scripts that answer as told."""
    repo, origin = tmp_path / "repo", tmp_path / "origin.git"
    repo.mkdir()
    (repo / "requirements.txt").write_text("flashinfer-python==0.6.13\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    remote = str(origin) if origin_ok else str(tmp_path / "no-such-origin.git")
    for cmd in (
        ["init", "-q", "-b", "main"],
        ["add", "."],
        ["commit", "-qm", "x"],
        ["remote", "add", "origin", remote],
    ):
        subprocess.run([*git, *cmd], cwd=repo, check=True)
    stubs, runner_temp = tmp_path / "stubs", tmp_path / "runner"
    stubs.mkdir()
    runner_temp.mkdir()
    _stub(stubs / "pip", pip)
    _stub(stubs / "hprobe", f'echo "## hprobe suggest — flashinfer 0.7.4"\nexit {hprobe_rc}\n')
    _stub(stubs / "gh", f'printf "%s\\n" "$@" >> {tmp_path}/gh-args\n')
    env = dict(os.environ, PATH=f"{stubs}{os.pathsep}{os.environ['PATH']}", RUNNER_TEMP=str(runner_temp), GH_TOKEN="x")
    script = _workflow()["jobs"]["propose"]["steps"][3]["run"]
    return subprocess.run(
        ["bash", "-c", script], cwd=repo, env=env, capture_output=True, text=True, timeout=120
    ), tmp_path / "gh-args"


LISTED = 'echo "flashinfer-python (0.7.4)"; echo "Available versions: 0.7.4"\n'


def test_an_index_that_cannot_be_listed_fails_the_job_saying_why(tmp_path):
    proc, _ = _propose(tmp_path, pip='echo "ERROR: connection refused" >&2\nexit 1\n', hprobe_rc=0)
    assert (
        proc.returncode == 1
        and "::error::pip index versions flashinfer-python failed: ERROR: connection refused" in proc.stdout
    )


def test_a_remote_that_cannot_be_read_is_not_taken_for_no_branch_yet(tmp_path):
    proc, gh = _propose(tmp_path, pip=LISTED, hprobe_rc=0, origin_ok=False)
    assert proc.returncode == 1 and "::error::git ls-remote origin failed (exit 128)" in proc.stdout
    assert not gh.exists()


def test_a_break_hprobe_cannot_patch_opens_an_issue_with_the_evidence(tmp_path):
    proc, gh = _propose(tmp_path, pip=LISTED, hprobe_rc=1)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = gh.read_text().splitlines()
    assert calls[:2] == ["issue", "list"] and "create" in calls
    created = calls[calls.index("create") - 1 :]
    assert created[:4] == ["issue", "create", "--title", "flashinfer 0.7.4 breaks a padding rule hprobe cannot rewrite"]
    assert (tmp_path / "runner" / "body.md").read_text().startswith("## hprobe suggest — flashinfer 0.7.4")
    assert "::warning::flashinfer 0.7.4 breaks a rule hprobe cannot rewrite: issue opened" in proc.stdout


def test_nothing_to_change_opens_nothing(tmp_path):
    proc, gh = _propose(tmp_path, pip=LISTED, hprobe_rc=0)
    assert proc.returncode == 0 and "flashinfer 0.7.4: nothing to change" in proc.stdout and not gh.exists()


# hprobe as `suggest --diff PATH` leaves it when the pin moves (PATH is the 7th argument).
_PATCHING = """cat > "$7" <<'DIFF'
--- a/requirements.txt
+++ b/requirements.txt
@@ -1 +1 @@
-flashinfer-python==0.6.13
+flashinfer-python==0.7.4
DIFF
echo "## hprobe suggest — flashinfer 0.7.4"
"""


def test_a_pull_request_that_could_not_be_opened_is_opened_by_the_next_run(tmp_path):
    """The branch is pushed before `gh pr create`; where that fails, the branch
    alone is no proposal: the next run opens the pull request (without pushing
    again), and only then is the release proposed already."""
    proc, gh = _propose(tmp_path, pip=LISTED, hprobe_rc=0)  # a repository, origin and stubs to reuse
    stubs, runner = tmp_path / "stubs", tmp_path / "runner"
    _stub(stubs / "hprobe", _PATCHING)
    _stub(stubs / "gh", _GH.format(log=gh, made=tmp_path / "gh-pr", fail=tmp_path / "gh-fails"))
    (tmp_path / "gh-fails").touch()
    env = dict(os.environ, PATH=f"{stubs}{os.pathsep}{os.environ['PATH']}", RUNNER_TEMP=str(runner), GH_TOKEN="x")
    script = _workflow()["jobs"]["propose"]["steps"][3]["run"]

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", script], cwd=tmp_path / "repo", env=env, capture_output=True, text=True, timeout=120
        )

    failed = run()
    assert failed.returncode != 0 and not (tmp_path / "gh-pr").exists()
    pushed = ["git", "--git-dir", str(tmp_path / "origin.git"), "rev-parse", "hprobe/flashinfer-0.7.4"]
    head = subprocess.run(pushed, capture_output=True, text=True, check=True).stdout
    (tmp_path / "gh-fails").unlink()
    subprocess.run(["git", "switch", "-q", "main"], cwd=tmp_path / "repo", check=True)
    retried = run()
    assert retried.returncode == 0, retried.stdout + retried.stderr
    assert (tmp_path / "gh-pr").exists() and "proposed already" not in retried.stdout
    assert subprocess.run(pushed, capture_output=True, text=True, check=True).stdout == head  # not pushed again
    again = run()
    assert again.returncode == 0 and "flashinfer 0.7.4: proposed already" in again.stdout
