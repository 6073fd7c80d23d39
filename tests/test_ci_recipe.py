"""The README's GitHub Actions recipe, run as pasted on a consumer repo that
also holds a copy of hprobe's own fixtures (as a checkout inside the tree
would): only the consumer's classes are judged, the step summary holds
markdown only, annotations go to stderr with each row's own evidence, and
piped output is never truncated."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT

BIN = Path(sys.executable).parent


def _recipe_command() -> str:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("GitHub Actions steps", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    [line] = [ln.strip() for ln in block.splitlines() if ln.strip().startswith("hprobe check")]
    return line


def test_the_readme_and_the_ci_page_give_one_recipe():
    """A runner pastes either: they are the same steps, installing the way that works today."""

    def recipe(page: str) -> str:
        return (ROOT / page).read_text().split("GitHub Actions steps", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]

    assert recipe("README.md") == recipe("docs/ci.md")
    assert "scripts/setup" in recipe("README.md") and "pip install -q hprobe-mla" not in recipe("README.md")


def test_the_actions_recipe_judges_only_the_consumers_code(tmp_path):
    consumer = tmp_path / "consumer"
    shutil.copytree(ROOT / "tests" / "fixtures" / "repos" / "pre48047" / "vllm", consumer / "vllm")
    # hprobe's fixtures inside the tree, as when it is checked out there.
    shutil.copytree(ROOT / "tests" / "fixtures", consumer / "third_party" / "hprobe" / "tests" / "fixtures")
    summary = tmp_path / "summary.md"
    env = dict(
        os.environ,
        PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}",
        GITHUB_ACTIONS="true",
        GITHUB_STEP_SUMMARY=str(summary),
        HPROBE_CACHE_DIR=str(tmp_path / "cache"),
    )
    env.pop("COLUMNS", None)
    proc = subprocess.run(
        ["bash", "-c", _recipe_command()], cwd=consumer, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 1, proc.stderr  # --strict: the pre-#48047 padding is reducible on 0.6.14
    markdown = summary.read_text()
    assert markdown.startswith("## hprobe check") and "::" not in markdown
    assert "fixtures" not in markdown and "third_party" not in markdown
    annotations = [ln for ln in proc.stderr.splitlines() if ln.startswith("::")]
    assert annotations and all("third_party" not in a for a in annotations)
    sm100 = next(a for a in annotations if "DeepseekV4FlashInferMLAAttention SM100" in a)
    rows = dict(part.split(": ", 1) for part in sm100.split("::", 2)[2].split("; "))
    assert "2.00× waste" in rows["DeepSeek-V4-Pro TP4 (n=32), DeepSeek-V4-Flash TP2 (n=32)"]
    assert "8.00× waste" in rows["DeepSeek-V4-Pro TP16 (n=8), DeepSeek-V4-Flash TP8 (n=8)"]
    assert (consumer / "hprobe.xml").is_file()


def test_piped_output_is_never_truncated(tmp_path):
    env = dict(os.environ, NO_COLOR="1", HPROBE_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("COLUMNS", None)
    proc = subprocess.run(
        [str(BIN / "hprobe"), "check", "--sm", "100,120", "--details"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 3, proc.stderr  # 0.7.2's trtllm-gen answers wait on its kernel table here
    assert "…" not in proc.stdout
    assert re.search(r"SM120\s+DeepSeek-V4-Flash\s", proc.stdout)  # full model names
    # A long explanation is wrapped whole at the pipe's 100 columns, never cut.
    assert (
        'validators only: trtllm-gen picks a cubin by head count inside compiled code ("Missing TRTLLM-GEN kernel")'
        in " ".join(proc.stdout.split())
    )
    assert max(len(line) for line in proc.stdout.splitlines()) <= 100
