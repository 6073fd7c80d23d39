"""Fetching releases together (support/fetch_batch.py, support/pip_download.py):
one pip process for every wheel a run needs, and a kernel table read out of
flashinfer-cubin on the index without downloading the wheel. Only a faster
road: the files are pip's own, and whatever it cannot fetch goes the plain
way, whose messages are the ones users see."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from hprobe.model.errors import InputError
from hprobe.support import cache, fetch_batch, kernel_package, kernel_tables, trees
from hprobe.support.kernel_package import package_of

pytestmark = pytest.mark.slow


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _pip_download(spec: str, where: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(where), spec],
        check=True,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )
    [wheel] = where.glob("*.whl")
    return wheel


def test_a_batch_fetches_the_wheels_pip_download_fetches(tmp_path, monkeypatch):
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HPROBE_WHOLE_WHEELS", "1")  # the route of whole wheels (remote_wheel has its own tests)
    started: list[list[str]] = []
    real_start = fetch_batch.start
    monkeypatch.setattr(
        fetch_batch,
        "start",
        lambda dist, versions, *a: (started.append(list(versions)), real_start(dist, versions, *a)),
    )
    plain: list[list[str]] = []
    real_run_pip = trees.run_pip
    monkeypatch.setattr(trees, "run_pip", lambda cmd, what: (plain.append(cmd), real_run_pip(cmd, what))[1])

    trees.prefetch(["0.6.13", "0.6.14", "/no/such/dir", "installed"])
    fetched = {v: trees.fetch_wheel(v) for v in ("0.6.13", "0.6.14")}

    assert started == [["0.6.13", "0.6.14"]]  # release numbers only
    assert plain == []  # pip download was never started: the batch fetched both
    for version, wheel in fetched.items():
        assert _sha(wheel) == _sha(_pip_download(f"flashinfer-python=={version}", tmp_path / version))
        assert trees._cached_wheel(wheel.parent, version) == wheel  # recorded as a plain fetch records it


def test_a_release_with_no_wheel_is_refused_in_pip_download_s_own_words(tmp_path, monkeypatch):
    """A release the index has no wheel of (0.2.0.post1 is listed with no
    wheel; 0.0.999 does not exist): the batch's finder says so, in the words
    plain `pip download` ends with, and pip is never started for it."""
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "plain"))
    monkeypatch.setenv("HPROBE_WHOLE_WHEELS", "1")
    plain_words = {}
    for version in ("0.2.0.post1", "0.0.999"):
        with pytest.raises(InputError) as by_pip:
            trees.fetch_wheel(version)  # no batch: plain pip download
        plain_words[version] = str(by_pip.value)
    assert "No matching distribution found for flashinfer-python==0.0.999" in plain_words["0.0.999"]

    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "batched"))
    started: list[list[str]] = []
    monkeypatch.setattr(trees, "run_pip", lambda cmd, what: started.append(cmd))
    trees.prefetch(["0.6.13", "0.2.0.post1", "0.0.999"])
    assert trees.fetch_wheel("0.6.13").is_file()
    for version in ("0.2.0.post1", "0.0.999"):
        for _asked in range(2):  # and asked again in the same run: the same words
            with pytest.raises(InputError) as batched:
                trees.fetch_wheel(version)
            assert str(batched.value) == plain_words[version]
    assert started == []


def test_an_index_that_cannot_be_reached_is_not_a_release_without_wheels(tmp_path, monkeypatch):
    """pip's finder only warns when the index does not answer and finds
    nothing: the batch must not take that for "no wheel of it". Plain pip
    download is asked, and its message says the index could not be reached."""
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no mirror, no find-links
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple/")  # nothing listens there
    monkeypatch.setenv("PIP_RETRIES", "1")  # pip warns of a refused connection only when it retries
    monkeypatch.setenv("PIP_TIMEOUT", "5")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    trees.prefetch(["0.6.13", "0.6.14"])
    with pytest.raises(InputError) as raised:
        trees.fetch_wheel("0.6.13")
    assert "could not be reached" in str(raised.value)


def test_a_helper_that_cannot_use_pip_costs_only_time(tmp_path, monkeypatch):
    """pip's internals differ (a newer pip): the helper says so, and every
    release is fetched by plain pip download."""
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    broken = [
        sys.executable,
        "-c",
        "import json, sys; sys.stdin.read(); print(json.dumps({'error': 'ImportError: pip._internal'})); sys.exit(3)",
    ]
    monkeypatch.setattr(fetch_batch, "_helper_command", lambda: broken)
    trees.prefetch(["0.6.13", "0.6.14"])
    wheels = [trees.fetch_wheel(v) for v in ("0.6.13", "0.6.14")]
    assert [trees._wheel_version(w) is not None and str(trees._wheel_version(w)) for w in wheels] == [
        "0.6.13",
        "0.6.14",
    ]
    assert not list((tmp_path / "cache" / "wheels").glob(".download-*"))  # nothing left behind


def test_the_kernel_table_read_from_the_index_is_the_one_in_the_wheel(tmp_path, monkeypatch, cubin_wheel):
    """0.6.13's table out of flashinfer-cubin on the index, read through range
    requests, equals the table read from the whole wheel pip downloads."""
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    package = package_of(trees.resolve("0.6.13").tree / "flashinfer")
    assert not isinstance(package, str)
    plain: list[list[str]] = []
    monkeypatch.setattr(kernel_tables, "run_pip", lambda cmd, what: plain.append(cmd))
    monkeypatch.setattr(cache, "_received", {})
    from_index = kernel_tables._from_index(package, "0.6.13", lambda _m: None)
    # The range requests' bytes are counted: the two members and the zip
    # directory around them, not the wheel (hundreds of MB).
    with zipfile.ZipFile(cubin_wheel) as wheel:
        members = sum(
            i.compress_size
            for i in wheel.infolist()
            if i.filename.startswith(f"flashinfer_cubin/cubins/{package.path}")
            and i.filename.endswith(("checksums.txt", "flashInferMetaInfo.h"))
        )
    received = cache._received["kernel tables"]
    assert members <= received < members + 8 * 2**20 < cubin_wheel.stat().st_size / 10
    from_wheel = kernel_tables._from_wheel(cubin_wheel, package, cubin_wheel.name)
    assert plain == []  # not downloaded whole
    assert isinstance(from_index, kernel_tables.KernelTable) and isinstance(from_wheel, kernel_tables.KernelTable)
    assert (from_index.sha256, from_index.rows, from_index.origin, from_index.checksums) == (
        from_wheel.sha256,
        from_wheel.rows,
        from_wheel.origin,
        from_wheel.checksums,
    )


def test_a_kernel_package_no_cubin_holds_is_said_as_before(tmp_path, monkeypatch):
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    package = kernel_package.Package("0" * 40 + "/fmha/trtllm-gen/", "0" * 64)
    why = kernel_tables._from_index(package, "0.6.13", lambda _m: None)
    assert why == (
        "flashinfer_cubin-0.6.13-py3-none-any.whl holds no kernel package 0000000; "
        "flashinfer_cubin-0.6.13-py3-none-any.whl holds no kernel package 0000000"
    )
