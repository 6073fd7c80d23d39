"""Round four of hostile use, run as a user would: outputs that would replace an
input or each other, streams closed or left non-blocking, a working directory
that is gone, archives no wheel is, and hprobe killed with SIGKILL while its
helpers run. Nothing is lost, nothing hangs, nothing outlives hprobe."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from hprobe.system.fileio import SiteWriter

from .conftest import POST_48047, PRE_48047
from .processes import gone_within
from .test_hostile import HPROBE, run_hprobe


def _installed_tree() -> str:
    spec = importlib.util.find_spec("flashinfer")
    return str(Path(spec.origin).resolve().parent.parent)


def _one_error(proc: subprocess.CompletedProcess[str], needle: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hprobe: error: ") and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_an_output_that_is_an_input_is_refused_before_any_work(tmp_path):
    (tmp_path / "tmp").mkdir()
    table = tmp_path / "t.toml"
    table.write_bytes(POST_48047.read_bytes())
    before = table.read_bytes()
    _one_error(run_hprobe(["check", "--junit", str(table), "--table", str(table)], tmp_path), "is the --table input")
    assert table.read_bytes() == before
    # A hard link or a `..` spelling is the same file.
    os.link(table, tmp_path / "again.toml")
    (tmp_path / "sub").mkdir()
    _one_error(
        run_hprobe(["check", "--junit", str(tmp_path / "sub" / ".." / "again.toml"), "--table", str(table)], tmp_path),
        "is the --table input",
    )
    assert table.read_bytes() == before


def test_the_waivers_file_is_an_input_no_output_replaces(tmp_path):
    """Given by --waivers, or found as ./hprobe-waivers.toml: --junit over it
    is refused before any work, and the file stays as it was."""
    (tmp_path / "tmp").mkdir()
    waivers = tmp_path / "hprobe-waivers.toml"
    waivers.write_text('[[waiver]]\nsm = 120\nreason = "waits for a bump"\nexpires = 2099-01-01\n')
    before = waivers.read_bytes()
    for given in (["--waivers", str(waivers)], []):
        proc = run_hprobe(["check", "--table", str(POST_48047), *given, "--junit", str(waivers)], tmp_path)
        _one_error(proc, "is the --waivers input")
        assert waivers.read_bytes() == before


def test_two_outputs_of_one_run_are_refused(tmp_path):
    (tmp_path / "tmp").mkdir()
    out = tmp_path / "same"
    proc = run_hprobe(
        ["suggest", "--table", str(PRE_48047), "--sm", "100", "-o", str(out), "--diff", str(out)], tmp_path
    )
    _one_error(proc, "is also --output's output")
    assert not out.exists()


def test_a_file_the_repo_reads_is_never_an_output(tmp_path):
    (tmp_path / "tmp").mkdir()
    repo = tmp_path / "repo"
    repo.mkdir()
    rule = repo / "rules.py"
    rule.write_text("class Rule:\n    @classmethod\n    def get_padded_num_q_heads(cls, n):\n        return n\n")
    before = rule.read_bytes()
    _one_error(
        run_hprobe(["table", "extract", "--repo", str(repo), "-o", str(rule), "--force"], tmp_path),
        "is a file of --repo",
    )
    assert rule.read_bytes() == before


def test_closed_stdout_and_stderr_keep_the_exit_code_and_say_no_traceback(tmp_path):
    (tmp_path / "tmp").mkdir()
    env = dict(os.environ, HPROBE_CACHE_DIR=str(tmp_path / "cache"), TMPDIR=str(tmp_path / "tmp"))
    # stdout closed: the verdict is still the exit code; stderr says where the report went.
    proc = subprocess.run(
        f"{HPROBE} check --sm 100 --table {POST_48047} >&-",
        shell=True,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr and "stdout is closed" in proc.stderr
    # stderr closed on an input error: the documented exit code, nothing crashes.
    proc = subprocess.run(
        f"{HPROBE} check --table {tmp_path / 'missing.toml'} 2>&-",
        shell=True,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    # Every stream closed.
    proc = subprocess.run(
        f"{HPROBE} check --table {tmp_path / 'missing.toml'} <&- >&- 2>&-",
        shell=True,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2


def test_a_working_directory_that_is_gone_stops_only_what_needs_it(tmp_path):
    """Absolute paths need no working directory: a check on one runs, cold
    (torch, which cannot load from a removed directory, is imported from an
    empty one of the run's), with no waiver file looked for there; a relative
    output is one input error before anything is probed."""
    env = dict(os.environ, HPROBE_CACHE_DIR=str(tmp_path / "cache"), NO_COLOR="1")

    def gone_then(*args: str) -> subprocess.CompletedProcess[str]:
        gone = tmp_path / "gone"
        gone.mkdir()
        return subprocess.run(
            [str(HPROBE), *args],
            cwd=gone,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            preexec_fn=lambda: os.rmdir(gone),
        )

    proc = gone_then("check", "--no-cache", "--sm", "100", "--table", str(POST_48047))
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1].startswith("pass: "), proc.stderr
    proc = gone_then("report", "-o", "site", "--releases", "0.6.14", "-k", "dsv4-sparse-mla", "--sm", "100")
    _one_error(proc, "the working directory no longer exists, and a relative path needs one")


def test_a_non_blocking_pipe_gets_the_whole_document(tmp_path):
    (tmp_path / "tmp").mkdir()
    read_fd, write_fd = os.pipe()
    flags = fcntl.fcntl(write_fd, fcntl.F_GETFL)
    fcntl.fcntl(write_fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)  # as a parent that left its pipe non-blocking
    env = dict(os.environ, HPROBE_CACHE_DIR=str(tmp_path / "cache"), TMPDIR=str(tmp_path / "tmp"), NO_COLOR="1")
    proc = subprocess.Popen(
        [str(HPROBE), "matrix", "--sm", "90,100,103,120,121", "--json"],
        stdout=write_fd,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
        env=env,
    )
    os.close(write_fd)
    chunks = []
    time.sleep(1.0)  # let the writer fill the pipe before anyone reads
    while True:
        chunk = os.read(read_fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
        time.sleep(0.001)
    os.close(read_fd)
    assert proc.wait(timeout=600) == 0
    data = b"".join(chunks)
    assert len(data) > 1 << 20  # well past any pipe buffer
    assert json.loads(data)["schema"] == "hprobe.matrix/2"


def _mark_encrypted(wheel: Path, name: bytes) -> None:
    """Set the "encrypted" bit of one member in both its headers (zipfile
    itself writes no encrypted members)."""
    data = bytearray(wheel.read_bytes())
    for signature, flag_at, name_at in ((b"PK\x03\x04", 6, 30), (b"PK\x01\x02", 8, 46)):
        at = data.find(signature)
        while at != -1:
            if data[at + name_at : at + name_at + len(name)] == name:
                data[at + flag_at] |= 0x1
            at = data.find(signature, at + 4)
    wheel.write_bytes(bytes(data))


def test_an_encrypted_or_absurdly_deep_member_is_refused(tmp_path):
    (tmp_path / "tmp").mkdir()
    encrypted = tmp_path / "flashinfer_python-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(encrypted, "w") as zf:
        zf.writestr(
            "flashinfer_python-9.9.9.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: flashinfer-python\nVersion: 9.9.9\n",
        )
        zf.writestr("flashinfer/__init__.py", b"x")
    _mark_encrypted(encrypted, b"flashinfer/__init__.py")
    _one_error(
        run_hprobe(["matrix", "--flashinfer", str(encrypted), "--sm", "100", "-k", "dsv4-sparse-mla"], tmp_path),
        "encrypted member",
    )
    deep = tmp_path / "flashinfer_python-9.9.8-py3-none-any.whl"
    with zipfile.ZipFile(deep, "w") as zf:
        zf.writestr(
            "flashinfer_python-9.9.8.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: flashinfer-python\nVersion: 9.9.8\n",
        )
        zf.writestr("flashinfer/__init__.py", b"")
        zf.writestr("/".join(["d"] * 2500) + "/x.py", b"")
    _one_error(
        run_hprobe(["matrix", "--flashinfer", str(deep), "--sm", "100", "-k", "dsv4-sparse-mla"], tmp_path),
        "folders deep",
    )


def test_sigkill_mid_probe_takes_the_worker_with_it(tmp_path):
    (tmp_path / "tmp").mkdir()
    env = dict(os.environ, HPROBE_CACHE_DIR=str(tmp_path / "cache"), TMPDIR=str(tmp_path / "tmp"))
    proc = subprocess.Popen(
        [str(HPROBE), "matrix", "--flashinfer", _installed_tree(), "--no-cache"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
        env=env,
    )
    worker = None
    deadline = time.monotonic() + 120
    while worker is None and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        worker = int(children[0]) if children else None
    assert worker is not None, "no worker started"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert gone_within(worker, 10), f"worker {worker} outlived hprobe"
    # Its scratch directory is left by the kill, and removed by the next run that makes one.
    left = list((tmp_path / "tmp").glob("hprobe-worker-*"))
    assert left
    run_hprobe(
        ["matrix", "--flashinfer", _installed_tree(), "-k", "dsv4-sparse-mla", "--sm", "100", "--no-cache"], tmp_path
    )
    assert not any(p.exists() for p in left)


def test_a_killed_reports_scratch_directory_goes_at_the_next_report(tmp_path):
    dead = 2**22 + 12345  # above any pid this machine hands out
    stale = tmp_path / f".site.hprobe-{dead}-abcd1234"
    stale.mkdir()
    (stale / "index.html").write_text("half written")
    writer = SiteWriter(tmp_path / "site", ("index.html",), "--output", False)
    try:
        assert not stale.exists() and writer.scratch is not None and writer.scratch.exists()
    finally:
        writer.discard()
    assert sys.platform != "win32"


def test_runs_replacing_one_site_put_in_their_files_one_set_at_a_time(tmp_path):
    """Two `report -o DIR --force` at once left matrix.json of one and
    matrix.md of the other: a run puts in its set only while it holds the
    directory's lock, and the temp files a killed writer left go with the next."""
    import fcntl
    import threading

    site = tmp_path / "site"
    site.mkdir()
    names = ("index.html", "matrix.md", "matrix.json")
    for name in names:
        (site / name).write_text("old")
    dead = 2**22 + 12345
    left = site / f".hprobe-site-{dead}-matrix.json.abcd.tmp"
    left.write_text("a killed writer's")
    writer = SiteWriter(site, names, "--output", True)
    holder = os.open(site, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(holder, fcntl.LOCK_EX)  # as another run in the middle of putting in its files
    done = threading.Thread(target=writer.commit, args=({name: "new" for name in names},))
    done.start()
    done.join(0.5)
    assert done.is_alive() and {(site / n).read_text() for n in names} == {"old"}  # waits, touching nothing
    os.close(holder)
    done.join(30)
    assert not done.is_alive() and {(site / n).read_text() for n in names} == {"new"}
    assert not left.exists() and sorted(p.name for p in site.iterdir()) == sorted(names)
