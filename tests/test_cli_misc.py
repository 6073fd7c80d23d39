"""`hprobe env`, `hprobe kernels`, and the installed console script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hprobe.system.envinfo import distribution_version


def test_env_runs_without_gpu(cli_json):
    code, doc, _ = cli_json("env")
    assert code == 0
    assert doc["schema"] == "hprobe.env/1"
    assert doc["gpus"] == [] and doc["cuda_available"] is False
    assert doc["flashinfer_python"] == distribution_version("flashinfer-python")
    assert doc["flashinfer_location"].endswith("flashinfer")
    assert doc["torch"].startswith("2.")


def test_kernels_lists_dsv4(cli_json):
    code, doc, _ = cli_json("kernels")
    assert code == 0
    [dsv4] = [k for k in doc["kernels"] if k["id"] == "dsv4-sparse-mla"]
    assert dsv4["entry_point"] == "flashinfer.mla._core.trtllm_batch_decode_sparse_mla_dsv4"
    assert dsv4["sms"] == [100, 103, 120, 121]
    assert dsv4["installed_flashinfer_has_entry_point"] is True


def test_console_script_exit_codes_and_stderr():
    exe = Path(sys.executable).with_name("hprobe")
    env = dict(os.environ, NO_COLOR="1")
    bad = subprocess.run([str(exe), "matrix", "--sm", "999"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert bad.stderr.strip().startswith("hprobe: error: --sm '999'")
    ok = subprocess.run([str(exe), "matrix", "--sm", "100", "--heads", "64"], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    assert "accepted {64}" in ok.stdout


def test_dash_h_is_help_on_every_command():
    hprobe = Path(sys.executable).with_name("hprobe")
    for args in ([], ["check"], ["matrix"], ["table", "extract"]):
        short = subprocess.run([str(hprobe), *args, "-h"], capture_output=True, text=True, timeout=60)
        long = subprocess.run([str(hprobe), *args, "--help"], capture_output=True, text=True, timeout=60)
        assert short.returncode == 0 and short.stdout == long.stdout and short.stdout.startswith("Usage: hprobe"), (
            args,
            short.stderr,
        )


def test_shell_completion_completes_commands_and_options():
    hprobe = Path(sys.executable).with_name("hprobe")
    script = subprocess.run(
        [str(hprobe), "--show-completion", "bash"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, SHELL="/bin/bash"),
    )
    assert script.returncode == 0 and "_hprobe_completion" in script.stdout
    for words, cword, expected in (("hprobe ch", "1", "check"), ("hprobe check --ta", "2", "--table")):
        env = dict(os.environ, COMP_WORDS=words, COMP_CWORD=cword, _HPROBE_COMPLETE="complete_bash")
        done = subprocess.run([str(hprobe)], capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 0 and done.stdout.split() == [expected], (words, done.stdout, done.stderr)


def test_a_format_a_command_cannot_write_is_refused_before_any_work(cli):
    code, out, err = cli("matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--format", "sarif")
    assert code == 2 and out == ""
    assert err.strip() == "hprobe: error: --format 'sarif': `hprobe matrix` writes text, json, markdown"
