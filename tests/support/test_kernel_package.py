"""support/kernel_package: the kernel package a release's artifacts.py names,
read with ast (never imported), refused where it is not a digest and a
relative path; and the remembered miss of a table search, per release, kept
for MISS_TTL and in the same words."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hprobe.support import kernel_package as kp

pytestmark = pytest.mark.pure

DIGEST = "a" * 64
PATH = "158f6fa" + "0" * 33 + "/fmha/trtllm-gen/"


def _artifacts(path: str, digest: str) -> str:
    return (
        f'class ArtifactPath:\n    TRTLLM_GEN_FMHA = "{path}"\nclass CheckSumHash:\n    TRTLLM_GEN_FMHA = "{digest}"\n'
    )


def _release(tmp_path: Path, body: str) -> Path:
    package = tmp_path / "flashinfer"
    package.mkdir(parents=True, exist_ok=True)
    (package / "artifacts.py").write_text(body)
    return package


def test_the_package_is_read_from_the_two_classes_annotated_or_not(tmp_path):
    body = _artifacts(PATH, DIGEST).replace("TRTLLM_GEN_FMHA =", "TRTLLM_GEN_FMHA: str =", 1)
    package = kp.package_of(_release(tmp_path, body))
    assert package == kp.Package(PATH, DIGEST) and package.short == "158f6fa"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ('class ArtifactPath:\n    TRTLLM_GEN_FMHA = "x/"\n', "names no trtllm-gen FMHA kernel package"),
        (_artifacts("../../etc/", DIGEST), "hprobe cannot use"),
        (_artifacts(PATH, "not-a-digest"), "hprobe cannot use"),
        ("def broken(:\n", "could not be read (SyntaxError)"),
    ],
)
def test_what_is_not_a_digest_and_a_relative_path_is_refused_with_why(tmp_path, body, said):
    got = kp.package_of(_release(tmp_path, body))
    assert isinstance(got, str) and said in got


def test_a_release_without_artifacts_py_says_so(tmp_path):
    (tmp_path / "flashinfer").mkdir()
    assert "could not be read (FileNotFoundError)" in str(kp.package_of(tmp_path / "flashinfer"))


def test_a_miss_is_remembered_per_release_in_its_words_until_it_expires(tmp_path, monkeypatch):
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    package = kp.Package(PATH, DIGEST)
    assert kp.recent_miss(package, "0.6.18") is None
    kp.remember_miss(package, "0.6.18", "not on the index")
    assert kp.recent_miss(package, "0.6.18") == "not on the index"
    assert kp.recent_miss(package, "0.6.18.post1") is None  # another release sharing the package asks for itself
    assert kp.miss_file("0.7.0+cu/x") == "missing-0.7.0+cu_x.json"
    record = tmp_path / "cache" / "kernel-tables" / DIGEST / kp.miss_file("0.6.18")
    stale = {"at": time.time() - kp.MISS_TTL - 1, "why": "not on the index"}
    record.write_text(json.dumps(stale))
    assert kp.recent_miss(package, "0.6.18") is None


def test_a_miss_kept_with_a_shorter_ttl_expires_with_it(tmp_path, monkeypatch):
    """A search that did not reach its source is no answer about the table:
    kept for UNREACHED_MISS_TTL, not the twelve hours of an index that said no."""
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    package = kp.Package(PATH, DIGEST)
    kp.remember_miss(package, "0.6.14", "could not be reached", kp.UNREACHED_MISS_TTL)
    assert kp.recent_miss(package, "0.6.14") == "could not be reached"
    record = tmp_path / "cache" / "kernel-tables" / DIGEST / kp.miss_file("0.6.14")
    kept = json.loads(record.read_text())
    assert kept["ttl"] == kp.UNREACHED_MISS_TTL < kp.MISS_TTL
    record.write_text(json.dumps(dict(kept, at=time.time() - kp.UNREACHED_MISS_TTL - 1)))
    assert kp.recent_miss(package, "0.6.14") is None
    # A record claiming more than MISS_TTL is held to MISS_TTL.
    record.write_text(json.dumps({"at": time.time() - kp.MISS_TTL - 1, "why": "w", "ttl": 10 * kp.MISS_TTL}))
    assert kp.recent_miss(package, "0.6.14") is None
