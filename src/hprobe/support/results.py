"""Probe answers kept in the cache: keyed by the release's content (a wheel's
digest, or the installed distribution's RECORD and its requirements'
versions), the probe, hprobe's own code and what was asked; read through
(`probe_release`), corrupt or foreign entries discarded, never trusted."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import hprobe
from hprobe import __version__
from hprobe.model.outcome import KernelSMResult
from hprobe.support import cache
from hprobe.support.requirements import parse_requirements
from hprobe.support.trees import DIST, WORKER_TIMEOUT, Release, _metadata_fields
from hprobe.support.workers import _inconclusive, _run_worker
from hprobe.system.bounded import setting_from_env
from hprobe.system.envinfo import dist_info_dir, distribution_version
from hprobe.system.fileio import MAX_INPUT_BYTES, read_text_or_none
from hprobe.system.once import Once


@Once
def code_digest() -> str:
    """A digest of hprobe's own source and shipped data (the tables, mappings
    and models a reading and its verdicts rest on): results from other code or
    data (another version, a local edit) are never reused. Contents, not stats:
    a CI runner clones hprobe afresh each run, and its cached answers must still
    be found. Taken once per process: a release read in a thread beside the
    installed one waits for the first caller's digest instead of hashing
    alongside it."""
    package = os.path.dirname(os.path.realpath(hprobe.__file__))
    paths = sorted(
        os.path.relpath(os.path.join(folder, name), package)
        for folder, _dirs, files in os.walk(package)
        for name in files
        if name.endswith(".py")
    )
    digest = hashlib.sha256()
    for path in paths:
        with open(os.path.join(package, path), "rb") as source:
            digest.update(f"{path}\0".encode() + source.read() + b"\0")
    # The data lies outside the package's folder in a checkout (matrices/) and
    # inside it in a wheel: hashed by its own relative names either way.
    data = shipped_data_root()
    for toml in sorted(data.rglob("*.toml")):
        digest.update(f"data:{toml.relative_to(data).as_posix()}\0".encode() + toml.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def shipped_data_root() -> Path:
    """The folder of package `hprobe.matrices`, wherever it is installed."""
    from importlib.resources import files

    return Path(str(files("hprobe.matrices")))


def _cache_key(identity: str, kernel_id: str, sms: list[int], heads: list[int]) -> str:
    # The code digest stands for every probe's inputs: a probe changed is code changed.
    material = json.dumps([identity, kernel_id, __version__, code_digest(), sms, heads])
    return hashlib.sha256(material.encode()).hexdigest()


_COMPILED_SOURCES = (".h", ".cuh", ".hpp", ".cu", ".inl", ".cpp", ".cc", ".c")


def installed_identity() -> str | None:
    """What the results for the installed flashinfer depend on, as a digest:
    its RECORD's package files (each with the hash pip checked), the versions of torch
    and of flashinfer's own requirements, and Python's. None when it cannot be
    known without importing: no RECORD (a source checkout on sys.path, an
    editable install), files whose sizes no longer match it, or a `flashinfer`
    on sys.path that is not the installed distribution's."""
    installed = _installed_distribution()
    if installed is None:
        return None
    record, base, requires = installed
    try:
        spec = importlib.util.find_spec("flashinfer")  # a top-level find imports nothing
    except (ValueError, ImportError):
        return None
    if spec is None or spec.origin is None:
        return None
    if Path(spec.origin).resolve() != Path(base, "flashinfer", "__init__.py").resolve():
        return None
    # The package's rows only: RECORD also lists the console scripts, whose
    # first line names the environment's python, so a new venv at another path
    # (a CI runner's) would not find the answers of an identical install.
    package = sorted(line for line in record.splitlines() if line.startswith(("flashinfer/", '"flashinfer/')))
    # A row is path,hash,size; only a path holding a comma or a quote is quoted,
    # so the others split from the right (the csv module took 20 ms here).
    rows = [row.rsplit(",", 2) if not row.startswith('"') else next(csv.reader([row])) for row in package]
    if not any(len(row) == 3 and row[0] == "flashinfer/__init__.py" for row in rows):
        return None
    # Every file a probe can run or read against its RECORD size: os.stat on a
    # joined path (Path costs 4x). CUDA and C++ sources, four in five of the
    # files, are left out: a probe stops before anything compiles them, so an
    # edit there cannot change an answer.
    for path, _digest, size in (row for row in rows if len(row) == 3):
        if size.isdigit() and not path.endswith(_COMPILED_SOURCES):
            try:
                if os.stat(os.path.join(base, path)).st_size != int(size):
                    return None
            except OSError:
                return None
    versions = []
    for name in (parsed.name for parsed in parse_requirements([*requires, "torch"]) if parsed is not None):
        have = distribution_version(name)
        if have is not None:
            versions.append(f"{name}=={have}")
    material = json.dumps([hashlib.sha256("\n".join(package).encode()).hexdigest(), sorted(set(versions)), sys.version])
    return "installed:" + hashlib.sha256(material.encode()).hexdigest()


def _installed_distribution() -> tuple[str, str, list[str]] | None:
    """The installed flashinfer-python's RECORD, the directory its paths are
    relative to, and its Requires-Dist; None when it is not installed or has
    no RECORD. Read from the `.dist-info` directory the version listing found,
    as importlib.metadata would find it; from importlib.metadata where that
    listing cannot tell."""
    info = dist_info_dir(DIST)
    if info is not None:
        record = read_text_or_none(info / "RECORD", MAX_INPUT_BYTES)
        metadata = read_text_or_none(info / "METADATA", MAX_INPUT_BYTES)
        if not record or metadata is None:
            return None
        return record, str(info.parent), _metadata_fields(metadata).get("Requires-Dist", [])
    import importlib.metadata as md

    try:
        dist = md.distribution(DIST)
        record = dist.read_text("RECORD")
    except (md.PackageNotFoundError, ValueError):
        return None
    if not record:
        return None
    return record, str(dist.locate_file("")), list(dist.requires or [])


# Answers are kept per kernel variant and SM: one SM's answer does not depend
# on which others a run asked for (tests/support/test_results.py holds it), so a run for
# SM100 alone reads what an every-SM run kept.


def cached_per_sm(identity: str, kernel_id: str, sms: list[int], heads: list[int]) -> dict[int, KernelSMResult]:
    """The SMs of `sms` whose answer for `kernel_id` over `heads` is kept."""
    found: dict[int, KernelSMResult] = {}
    for sm in sms:
        hit = _read_cache(_cache_key(identity, kernel_id, [sm], heads), kernel_id, [sm], heads)
        if hit is not None:
            found[sm] = hit[0]
    return found


def cache_per_sm(identity: str, kernel_id: str, heads: list[int], results: list[KernelSMResult]) -> None:
    for result in results:
        # A failed write loses only the entry.
        _write_cache(_cache_key(identity, kernel_id, [result.sm], heads), [result])


def probe_release(
    release: Release,
    kernel_ids: list[str],
    sms: list[int],
    heads: list[int],
    use_cache: bool = True,
    on_probe: Callable[[list[str]], None] | None = None,
) -> list[KernelSMResult]:
    """Results for every kernel variant x SM x h_q on `release`, from the cache or a worker.
    `kernel_ids` are variant keys (`trtllm-mla[backend=xqa]`); `on_probe` is
    told which of them a worker is about to probe (none: every answer was cached)."""
    identity = release.wheel_sha256 if use_cache else None

    def cached_now() -> tuple[dict[str, dict[int, KernelSMResult]], list[str]]:
        kept = {
            kernel_id: cached_per_sm(identity, kernel_id, sms, heads) if identity else {} for kernel_id in kernel_ids
        }
        return kept, [kernel_id for kernel_id in kernel_ids if len(kept[kernel_id]) < len(set(sms))]

    cached, missing = cached_now()
    fresh: dict[str, dict[int, KernelSMResult]] = {}
    with _probing(identity, missing, sms, heads) as waited:
        if waited:
            cached, missing = cached_now()  # what the process that held the lock kept
        if missing:
            if on_probe is not None:
                on_probe(missing)
            # The SMs any of them lacks, for all of them: one worker, one import.
            wanted = sorted({sm for kernel_id in missing for sm in sms if sm not in cached[kernel_id]})
            for result in _run_worker(release, missing, wanted, heads):
                fresh.setdefault(result.key, {})[result.sm] = result
            for kernel_id, by_sm in fresh.items():
                # Environment failures depend on this machine, not the wheel: never cached.
                if release.wheel_sha256 is not None and not any(r.unanswered for r in by_sm.values()):
                    cache_per_sm(release.wheel_sha256, kernel_id, heads, list(by_sm.values()))
    results: list[KernelSMResult] = []
    for kernel_id in kernel_ids:
        for sm in sms:  # in the order asked; never a silent hole in the answer
            got = cached[kernel_id].get(sm) or fresh.get(kernel_id, {}).get(sm)
            results.append(
                got
                or _inconclusive(kernel_id, sm, release.version, heads, "the probe worker returned no result for it")
            )
    return results


@contextlib.contextmanager
def _probing(identity: str | None, missing: list[str], sms: list[int], heads: list[int]) -> Iterator[bool]:
    """Held while this process probes what the cache lacks, so that runs
    sharing a cache (CI jobs on one runner, a check beside a suggest, a test
    suite's workers) probe a release once: one probes, the others wait and
    read what it kept. Yields whether it waited on another holder (then the
    cache is read again); without the lock each process probes for itself.
    The lock's file goes as its holder lets go, so that a cache asked many
    questions keeps no file per question; a run that locks a new file
    meanwhile has read the cache or reads it again, so the worst a race costs
    is a probe made twice."""
    if identity is None or not missing:
        yield False
        return
    material = json.dumps([identity, sorted(missing), sorted(set(sms)), heads, code_digest()])
    folder = cache.root() / "results"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        yield False
        return
    lock_file = folder / f".{hashlib.sha256(material.encode()).hexdigest()[:32]}.lock"
    with cache.exclusive(lock_file, setting_from_env(WORKER_TIMEOUT), remove=True) as waited:
        yield bool(waited)


def _cache_file(key: str) -> Path:
    return cache.root() / "results" / f"{key}.json"


def _read_cache(key: str, kernel_id: str, sms: list[int], heads: list[int]) -> list[KernelSMResult] | None:
    """The cached results, only when they cover every SM and h_q the key
    stands for; anything less (or corrupt, or foreign) is discarded."""
    path = cache.found("results", f"{key}.json")
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
        if doc.get("schema") != "hprobe.cache/1" or doc.get("key") != key:
            raise ValueError("foreign cache entry")
        results = [KernelSMResult.from_dict(r) for r in doc["results"]]
        covered = sorted(r.sm for r in results) == sorted(sms) and all(
            r.key == kernel_id and sorted(r.heads) == sorted(heads) for r in results
        )
        if not covered:
            raise ValueError("incomplete cache entry")
        return results
    except Exception:  # noqa: BLE001 - a corrupt or foreign entry is discarded, never trusted
        cache.discard(path)
        return None


def _write_cache(key: str, results: list[KernelSMResult]) -> bool:
    doc = {"schema": "hprobe.cache/1", "key": key, "results": [r.to_dict() for r in results]}
    return cache.write_atomically(_cache_file(key), json.dumps(doc).encode())
