"""Shared fixtures. Tests run the installed, real flashinfer-python on CPU torch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hprobe.cli import app

ROOT = Path(__file__).resolve().parent.parent
MATRICES = ROOT / "matrices"
PRE_48047 = MATRICES / "vllm-dsv4-flashinfer-pre-48047.toml"
POST_48047 = MATRICES / "vllm-dsv4-flashinfer-post-48047.toml"


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
        return code, json.loads(out), err

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
