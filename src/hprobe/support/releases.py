"""flashinfer releases the user has not installed: fetch one wheel, unpack it into a
per-user cache, and probe it in a subprocess with that tree first on sys.path.

The user's environment is never modified: pip only downloads (`--no-deps`),
with the user's own pip configuration, and the probing process never holds two
flashinfer versions.
"""

from __future__ import annotations

import csv
import errno
import functools
import hashlib
import importlib.util
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

import hprobe
from hprobe import __version__
from hprobe.kernels import get_variant
from hprobe.model.errors import InputError
from hprobe.model.outcome import Cause, HeadResult, KernelSMResult, Outcome
from hprobe.model.release import INSTALLED, Unmet
from hprobe.rules.repo.pin import parse_pin
from hprobe.support import cache
from hprobe.system.bounded import Timeout, run_bounded, setting_from_env
from hprobe.system.envinfo import dist_info_dir, distribution_version
from hprobe.system.fileio import MAX_INPUT_BYTES, current_umask, read_text_or_none
from hprobe.system.lifetime import scratch_dir

DIST = "flashinfer-python"
_WHEEL_PREFIX = "flashinfer_python-"


@dataclass
class Release:
    """One flashinfer tree ready to probe."""

    label: str  # what the user asked for: "0.6.13", a wheel path, a directory
    version: str
    location: Path  # directory that holds the `flashinfer` package, as reported
    wheel_sha256: str | None  # identity for the result cache; None for a directory
    unmet: list[Unmet] = field(default_factory=list)  # Requires-Dist not met here
    # Checking an unpacked tree against its RECORD stats ten thousand files.
    # Answers from the result cache depend on the wheel's digest alone, so the
    # check runs only when something reads the tree (a worker, a rule's import).
    _verify: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    @property
    def tree(self) -> Path:
        """The tree, checked against the wheel's RECORD (and unpacked again if
        it was damaged) before its first use."""
        if self._verify is not None:
            verify, self._verify = self._verify, None
            verify()
        return self.location


def parse_spec(spec: str) -> list[str]:
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts:
        raise InputError("--flashinfer: empty")
    return parts


def resolve(item: str) -> Release:
    """A release number, a wheel file, or an unpacked directory -> a probe-able tree."""
    path = Path(item).expanduser()
    if item.endswith(".whl") or path.is_file():
        if not path.is_file():
            raise InputError(f"--flashinfer {item}: no such wheel file")
        return cache.with_fallback(lambda: _from_wheel(path, label=item))
    if path.is_dir():
        return _from_directory(path, label=item)
    try:
        Version(item)
    except InvalidVersion:
        raise InputError(f"--flashinfer {item!r}: not a release number, wheel file or directory") from None
    return cache.with_fallback(lambda: _from_wheel(fetch_wheel(item), label=item))


# Bounds on the subprocesses hprobe starts, in seconds (README "Releases that are not installed").
PIP_TIMEOUT = ("HPROBE_PIP_TIMEOUT", 300.0)  # one `pip download` / `pip index`
WORKER_TIMEOUT = ("HPROBE_WORKER_TIMEOUT", 900.0)  # probing one release


def run_pip(cmd: list[str], what: str) -> subprocess.CompletedProcess[str]:
    """Run pip with the user's configuration, bounded in time; one line on failure."""
    limit = setting_from_env(PIP_TIMEOUT)
    try:
        return run_bounded(cmd, limit)
    except Timeout:
        raise InputError(f"{what}: pip did not finish within {limit:g} s (is the package index reachable? {PIP_TIMEOUT[0]} sets the limit)") from None


def fetch_wheel(version: str) -> Path:
    """The cached wheel of `version`, downloading it once with the user's pip."""
    wheels = cache.directory("wheels")
    cached = _cached_wheel(wheels, version)
    if cached:
        return cached
    cache.clean_stale(wheels)
    # A temp dir of this process's own, then an atomic rename: concurrent
    # fetches of one release publish identical files, whichever lands last.
    with tempfile.TemporaryDirectory(dir=wheels, prefix=".download-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", "-d", tmp, f"{DIST}=={version}"]
        proc = run_pip(cmd, f"cannot fetch {DIST}=={version}")
        got = list(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 and ("[Errno 28]" in proc.stderr or "No space left" in proc.stderr):
            raise OSError(errno.ENOSPC, f"no space left in {wheels}")  # the cache's disk, not the index
        if proc.returncode != 0 or not got:
            raise InputError(f"cannot fetch {DIST}=={version}: {_pip_reason(proc)}")
        target = wheels / got[0].name
        # pip checked the index's hash while downloading; record the digest so
        # later runs can tell a damaged cached wheel from a good one.
        _record_digest(got[0], _digest_file(target))
        os.replace(got[0], target)  # a rename keeps the size and mtime the record was stamped with
        cache.record_added(version, target.stat().st_size)
    return target


def _pip_reason(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip() and "is ignored" not in ln and "experimental" not in ln]
    why = lines[-1] if lines else f"pip exited {proc.returncode}"
    unreachable = ("NewConnectionError", "Connection refused", "Max retries exceeded", "Failed to establish", "ReadTimeoutError", "Name or service not known", "Temporary failure in name resolution")
    if any(marker in proc.stderr for marker in unreachable):
        why += " (the package index could not be reached; check the network or pip's index-url)"
    return why


def _digest_file(wheel: Path) -> Path:
    return wheel.with_name(wheel.name + ".sha256")


def _stamp(info: os.stat_result) -> str:
    return f"{info.st_size} {info.st_mtime_ns}"


def _record_digest(wheel: Path, record: Path) -> None:
    """The wheel's digest, stamped with the size and mtime it was computed at:
    while both hold, later runs take the digest without hashing 100 MB again."""
    info = wheel.stat()
    cache.write_atomically(record, f"{_sha256(wheel)}\n{_stamp(info)}\n".encode())


def _cached_wheel(wheels: Path, version: str) -> Path | None:
    """A cached wheel of `version` whose digest matches the one recorded when it
    was fetched; a damaged one is discarded, so the caller fetches it again. A
    wheel whose size and mtime are those the record was stamped with is not
    hashed again (a write that truncates or replaces it changes both)."""
    for wheel in wheels.glob(f"{_WHEEL_PREFIX}*.whl"):
        if _wheel_version(wheel) != Version(version):
            continue
        try:
            recorded, _, stamp = _digest_file(wheel).read_text().strip().partition("\n")
            info = wheel.stat()
        except OSError:
            recorded, stamp, info = "", "", None
        if info is not None and recorded and stamp.strip() == _stamp(info):
            _DIGESTS[(str(wheel), info.st_size, info.st_mtime_ns)] = recorded
            return wheel
        if not recorded and _zip_intact(wheel):
            # Fetched before digests were recorded: check it once, then record.
            _record_digest(wheel, _digest_file(wheel))
            return wheel
        if recorded and _sha256(wheel) == recorded:
            _record_digest(wheel, _digest_file(wheel))  # stamped, as records written before stamps were not
            return wheel
        cache.discard(wheel)
        cache.discard(_digest_file(wheel))
    return None


def _zip_intact(wheel: Path) -> bool:
    try:
        with zipfile.ZipFile(wheel) as zf:
            return zf.testzip() is None
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        return False


def _wheel_version(wheel: Path) -> Version | None:
    """The version a wheel's file name gives, when it is a wheel name at all."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        return parse_wheel_filename(wheel.name)[1]
    except (InvalidWheelFilename, InvalidVersion):
        return None


_DIGESTS: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256


def _sha256(path: Path) -> str:
    """The file's digest, computed once per state of the file: the cached-wheel
    check and the tree lookup both ask for it, and a wheel is 100 MB."""
    info = path.stat()
    key = (str(path), info.st_size, info.st_mtime_ns)
    if key not in _DIGESTS:
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


# Bounds on unpacking a wheel (README "Releases that are not installed"). The
# largest real release, 0.7.4, is 101 MB unpacking to 682 MiB in 14,705 members.
MAX_UNPACK_MB = ("HPROBE_MAX_UNPACK_MB", 4096.0)
MAX_MEMBERS = 100_000
MAX_RATIO = 100  # unpacked / packed size; flashinfer's wheels are about 7


def _from_wheel(wheel: Path, label: str) -> Release:
    sha = _sha256(wheel)
    tree = cache.directory("trees") / sha
    verified = False
    if not _published(tree):
        _unpack_once(wheel, tree, sha, label)
        verified = True
    metadata = _metadata(tree)
    named = _wheel_version(wheel)
    version = metadata.get("Version", ["unknown"])[0]
    if not verified and named is not None and not _same_version(named, version):
        # A damaged METADATA, not yet a verdict on the wheel: check the tree first.
        _ensure_intact(wheel, tree, sha, label)
        verified = True
        metadata = _metadata(tree)
        version = metadata.get("Version", ["unknown"])[0]
    if named is not None and not _same_version(named, version):
        raise InputError(f"--flashinfer {label}: the wheel's file name says {named} but its METADATA says {version}; which release it is cannot be told, so it is not probed")
    verify = None if verified else functools.partial(_ensure_intact, wheel, tree, sha, label)
    return Release(label, version, tree, sha, unmet_requirements(metadata), verify)


def _ensure_intact(wheel: Path, tree: Path, sha: str, label: str) -> None:
    if not _tree_intact(tree):
        _unpack_once(wheel, tree, sha, label)


def _unpack_once(wheel: Path, tree: Path, sha: str, label: str) -> None:
    """Unpack `wheel` into `tree` unless another process has just done it."""
    from filelock import FileLock, Timeout

    trees = tree.parent
    # One process unpacks, the others wait for it and find the tree
    # published. Without the lock (timeout, a filesystem without locks)
    # unpacking is still safe, only done twice.
    lock: FileLock | None = FileLock(str(trees / f".{sha}.lock"))
    try:
        lock.acquire(timeout=setting_from_env(WORKER_TIMEOUT))  # type: ignore[union-attr]
    except (Timeout, OSError):
        lock = None
    try:
        if not _tree_intact(tree):
            cache.clean_stale(trees)
            _unpack(wheel, tree, label)
    finally:
        if lock is not None:
            lock.release()


def _same_version(named: Version, written: str) -> bool:
    try:
        return Version(written) == named
    except InvalidVersion:
        return False


_COMPLETE = ".hprobe-unpacked"  # written last into a tree before it is published


def _published(tree: Path) -> bool:
    """Unpacked completely once (what a cached answer needs of a tree)."""
    return (tree / _COMPLETE).is_file() and (tree / "flashinfer" / "__init__.py").is_file()


def _tree_intact(tree: Path) -> bool:
    """Published completely, and every file the wheel's RECORD lists has the
    size RECORD gives (an emptied or truncated file sends it back to unpacking)."""
    if not _published(tree):
        if tree.exists():
            cache.discard(tree)
        return False
    records = sorted(tree.glob("flashinfer_python-*.dist-info/RECORD"))
    try:
        lines = records[0].read_text(encoding="utf-8").splitlines() if records else []
        base = str(tree)
        for row in csv.reader(lines):
            # os.stat on joined strings: ten thousand files, every run (pathlib is 3x slower here)
            if len(row) == 3 and row[2].isdigit() and os.stat(os.path.join(base, row[0])).st_size != int(row[2]):
                raise OSError(f"{row[0]} differs from RECORD")
    except (OSError, csv.Error, UnicodeDecodeError):
        cache.discard(tree)
        return False
    return True


def _unpack(wheel: Path, tree: Path, label: str) -> None:
    limit_mb = setting_from_env(MAX_UNPACK_MB, "MiB")
    try:
        with zipfile.ZipFile(wheel) as zf:
            members = zf.infolist()
            _check_members(members, wheel.stat().st_size, limit_mb, label, wheel)
            tmp = Path(tempfile.mkdtemp(dir=tree.parent, prefix=".unpack-"))
            try:
                zf.extractall(tmp)
                if not (tmp / "flashinfer" / "__init__.py").is_file():
                    raise InputError(f"--flashinfer {label}: {wheel} holds no flashinfer package")
                (tmp / _COMPLETE).write_text(wheel.name)
                os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp's 0700 would hide a shared cache from other users
                try:
                    os.rename(tmp, tree)
                    cache.record_added(label, sum(m.file_size for m in members))
                except OSError:
                    # Another process published the same tree first: keep theirs.
                    if not _tree_intact(tree):
                        raise
                    shutil.rmtree(tmp, ignore_errors=True)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
    except (zipfile.BadZipFile, EOFError, zipfile.LargeZipFile, NotImplementedError, ValueError, RuntimeError) as exc:
        raise InputError(f"--flashinfer {label}: {wheel} is not a valid wheel ({type(exc).__name__}: {exc})") from None
    except OSError as exc:
        if exc.errno in cache.UNWRITABLE:
            raise  # the cache's own failure: the caller moves to a temporary one
        raise InputError(f"--flashinfer {label}: cannot unpack {wheel} into {tree.parent}: {exc.strerror or exc}") from None


# Folders in one member's path: flashinfer's deepest is about 12; thousands
# made extraction recurse until Python's stack ran out.
MAX_MEMBER_DEPTH = 64


def _check_members(members: list[zipfile.ZipInfo], packed: int, limit_mb: float, label: str, wheel: Path) -> None:
    if len(members) > MAX_MEMBERS:
        raise InputError(f"--flashinfer {label}: {wheel} has {len(members)} members, more than {MAX_MEMBERS}; not unpacked")
    total = 0
    for info in members:
        name = info.filename
        if info.flag_bits & 0x1:
            raise InputError(f"--flashinfer {label}: {wheel} has an encrypted member ({name!r}), which no wheel holds; not unpacked")
        if name.count("/") > MAX_MEMBER_DEPTH:
            raise InputError(f"--flashinfer {label}: {wheel} has a member {name.count('/')} folders deep, more than {MAX_MEMBER_DEPTH}; not unpacked")
        if name.startswith(("/", "\\")) or ".." in Path(name).parts or ":" in name.split("/")[0]:
            raise InputError(f"--flashinfer {label}: {wheel} has a member outside the tree ({name!r}); not unpacked")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise InputError(f"--flashinfer {label}: {wheel} has a symlink member ({name!r}), which no wheel may hold; not unpacked")
        total += info.file_size
    if total > limit_mb * (1 << 20) or total > MAX_RATIO * max(packed, 1):
        raise InputError(
            f"--flashinfer {label}: {wheel} would unpack to {total >> 20} MiB from {packed >> 20} MiB; "
            f"more than {limit_mb:g} MiB or {MAX_RATIO}x ({MAX_UNPACK_MB[0]} sets the size limit)"
        )


def _from_directory(path: Path, label: str) -> Release:
    root = path
    if (path / "__init__.py").is_file() and path.name == "flashinfer":
        root = path.parent
    if not (root / "flashinfer" / "__init__.py").is_file():
        raise InputError(f"--flashinfer {label}: no flashinfer package in that directory")
    version = "unknown"
    version_file = root / "flashinfer" / "_build_meta.py"
    for candidate in (version_file, root / "flashinfer" / "version.py"):
        text = read_text_or_none(candidate, MAX_INPUT_BYTES)
        if text is not None:
            m = re.search(r"""__version__\s*=\s*["']([^"']+)""", text)
            if m:
                version = m.group(1)
                break
    metadata = _metadata(root)
    if version == "unknown" and "Version" in metadata:
        version = metadata["Version"][0]
    return Release(label, version, root, None, unmet_requirements(metadata))


def _metadata(tree: Path) -> dict[str, list[str]]:
    found = sorted(tree.glob("flashinfer_python-*.dist-info/METADATA"))
    if not found:
        return {}
    text = read_text_or_none(found[0], MAX_INPUT_BYTES)
    if text is None:
        raise InputError(f"{found[0]}: not a regular file of at most {MAX_INPUT_BYTES >> 20} MiB, so not read as package metadata")
    return _metadata_fields(text)


def _metadata_fields(text: str) -> dict[str, list[str]]:
    """A METADATA file's headers, each name with its values in order."""
    fields: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # headers end at the first blank line
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), []).append(value.strip())
    return fields


def unmet_requirements(metadata: dict[str, list[str]]) -> list[Unmet]:
    """Requires-Dist entries this environment does not satisfy."""
    unmet = []
    for raw in metadata.get("Requires-Dist", []):
        try:
            req = Requirement(raw)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        have = distribution_version(req.name)
        if have is None:
            unmet.append(Unmet(str(req), req.name))
            continue
        if req.specifier and not req.specifier.contains(have, prereleases=True):
            unmet.append(Unmet(str(req), req.name, have))
    return unmet


# -- probing in a subprocess ---------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """A digest of hprobe's own source: results from other code (another
    version, a local edit) are never reused. Contents, not stats: a CI runner
    clones hprobe afresh each run, and its cached answers must still be found."""
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
    return digest.hexdigest()[:16]


def result_cache_key(release: Release, kernel_id: str, probe_version: int, sms: list[int], heads: list[int]) -> str | None:
    if release.wheel_sha256 is None:
        return None
    return _cache_key(release.wheel_sha256, kernel_id, probe_version, sms, heads)


def _cache_key(identity: str, kernel_id: str, probe_version: int, sms: list[int], heads: list[int]) -> str:
    material = json.dumps([identity, kernel_id, probe_version, __version__, code_digest(), sms, heads])
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
    for raw in [*requires, "torch"]:
        try:
            name = Requirement(raw).name
        except InvalidRequirement:
            continue
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


def cached_installed(identity: str, kernel_id: str, probe_version: int, sms: list[int], heads: list[int]) -> list[KernelSMResult] | None:
    return _read_cache(_cache_key(identity, kernel_id, probe_version, sms, heads), kernel_id, sms, heads)


def cache_installed(identity: str, kernel_id: str, probe_version: int, sms: list[int], heads: list[int], results: list[KernelSMResult]) -> None:
    _write_cache(_cache_key(identity, kernel_id, probe_version, sms, heads), results)


def probe_release(
    release: Release, kernel_ids: list[str], sms: list[int], heads: list[int], use_cache: bool = True
) -> list[KernelSMResult]:
    """Results for every kernel variant x SM x h_q on `release`, from the cache or a worker.
    `kernel_ids` are variant keys (`trtllm-mla[backend=xqa]`)."""
    results: list[KernelSMResult] = []
    missing: list[str] = []
    cached: dict[str, list[KernelSMResult]] = {}
    for kernel_id in kernel_ids:
        key = result_cache_key(release, kernel_id, get_variant(kernel_id).probe.probe_version, sms, heads)
        hit = _read_cache(key, kernel_id, sms, heads) if (use_cache and key) else None
        if hit is None:
            missing.append(kernel_id)
        else:
            cached[kernel_id] = hit
    fresh: dict[str, list[KernelSMResult]] = {}
    if missing:
        for result in _run_worker(release, missing, sms, heads):
            fresh.setdefault(result.key, []).append(result)
        for kernel_id, kernel_results in fresh.items():
            key = result_cache_key(release, kernel_id, get_variant(kernel_id).probe.probe_version, sms, heads)
            # Environment failures depend on this machine, not the wheel: never cached.
            if key and not any(r.unanswered for r in kernel_results):
                _write_cache(key, kernel_results)  # a failed write loses only the cache entry, never the answer
    for kernel_id in kernel_ids:
        got = cached.get(kernel_id) or fresh.get(kernel_id) or []
        results.extend(got)
        for sm in sorted(set(sms) - {r.sm for r in got}):  # never a silent hole in the answer
            results.append(_inconclusive(kernel_id, sm, release.version, heads, "the probe worker returned no result for it"))
    return results


def _cache_file(key: str) -> Path:
    return cache.root() / "results" / f"{key}.json"


def _read_cache(key: str, kernel_id: str, sms: list[int], heads: list[int]) -> list[KernelSMResult] | None:
    """The cached results, only when they cover every SM and h_q the key
    stands for; anything less (or corrupt, or foreign) is discarded."""
    path = _cache_file(key)
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


def _run_worker(release: Release, kernel_ids: list[str], sms: list[int], heads: list[int]) -> list[KernelSMResult]:
    request = {"tree": str(release.tree), "kernels": kernel_ids, "sms": sms, "heads": heads}
    proc = _worker(request)
    if isinstance(proc, str):
        reason = f"flashinfer {release.version} could not be probed here: {proc}"
        return [_inconclusive(k, sm, release.version, heads, reason) for k in kernel_ids for sm in sms]
    doc = proc
    if "error" in doc:
        reason = f"flashinfer {release.version} could not be probed here: {doc['error']}"
        if release.unmet:
            reason += "; unmet requirements: " + "; ".join(map(str, release.unmet))
        return [_inconclusive(k, sm, release.version, heads, reason) for k in kernel_ids for sm in sms]
    return [KernelSMResult.from_dict(r) for r in doc["results"]]


def installed_release() -> Release:
    """The flashinfer importable here, as a tree a worker can import from (found
    without importing it)."""
    spec = importlib.util.find_spec("flashinfer")
    if spec is None or not spec.submodule_search_locations:
        raise InputError("flashinfer is not installed here: name a release with --flashinfer")
    package = Path(list(spec.submodule_search_locations)[0])
    return Release(INSTALLED, distribution_version("flashinfer-python") or "installed", package.parent, None)


def read_in_worker(release: Release, module: str, names: list[str], sm: int) -> dict:
    """Names of a flashinfer module, imported in a worker from the release's tree
    on a faked `sm` (see worker._read): {"values": {...}}, {"import_error": ...}
    or {"error": ...}."""
    doc = _worker({"tree": str(release.tree), "read": {"module": module, "names": names}, "sm": sm})
    return {"error": doc} if isinstance(doc, str) else doc


def _worker(request: dict) -> dict | str:
    """Run the worker on one request: its JSON answer, or why there is none."""
    # An isolated interpreter (-I: no current directory, no user site, no
    # PYTHON* variables) in a directory of its own, importing this very
    # package by path: a `probe/` in the user's working tree is never run.
    package_root = str(Path(hprobe.__file__).resolve().parent.parent)
    bootstrap = f"import sys; sys.path.insert(0, {package_root!r}); from hprobe.support.worker import main; sys.exit(main())"
    # Compiled bytecode goes to hprobe's cache, never beside a tree the user
    # named (`--flashinfer DIR`); the worker's temp files go to its own
    # directory, removed with it however the worker ends.
    pycache = str(cache.root() / "pycache")
    bootstrap = f"import sys; sys.pycache_prefix = {pycache!r}; " + bootstrap
    limit = setting_from_env(WORKER_TIMEOUT)
    workdir = scratch_dir(None, "hprobe-worker")  # named by its owner: a killed run's is removed later
    try:
        env = dict(os.environ, TMPDIR=str(workdir))
        try:
            proc = run_bounded([sys.executable, "-I", "-c", bootstrap], limit, json.dumps(request), cwd=workdir, env=env)
        except Timeout:
            return f"the probe worker did not finish within {limit:g} s ({WORKER_TIMEOUT[0]} sets the limit)"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    try:
        return dict(json.loads(proc.stdout.strip().splitlines()[-1]))
    except (json.JSONDecodeError, IndexError):
        tail = " ".join(proc.stderr.split())[-300:]
        return {"error": f"probe worker exited {proc.returncode}: {tail}"}


def _inconclusive(key: str, sm: int, version: str, heads: list[int], reason: str) -> KernelSMResult:
    variant = get_variant(key)
    result = KernelSMResult(variant.probe.id, sm, version, notes=[f"worker: {reason}"], config=variant.values, key=variant.key, unanswered=True)
    for h in heads:
        result.heads[h] = HeadResult(h, Outcome.INCONCLUSIVE, reason=reason, cause=Cause.ENVIRONMENT.value)  # the release could not run here
    return result


def published_versions() -> list[Version]:
    """Releases of flashinfer-python the user's pip can see, oldest first. Asked
    of the index once per process: `suggest` needs the list for the pin's ends
    and again for its pin search (keyed by pip's settings, which choose the index)."""
    return list(_published_versions(tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("PIP_")))))


@functools.lru_cache(maxsize=4)
def _published_versions(_pip_settings: tuple[tuple[str, str], ...]) -> tuple[Version, ...]:
    cmd = [sys.executable, "-m", "pip", "index", "versions", DIST, "--disable-pip-version-check"]
    proc = run_pip(cmd, f"cannot list {DIST} releases")
    m = re.search(r"Available versions:\s*(.+)", proc.stdout)
    if proc.returncode != 0 or not m:
        raise InputError(f"cannot list {DIST} releases: {_pip_reason(proc)}")
    versions = []
    for text in m.group(1).split(","):
        try:
            versions.append(Version(text.strip()))
        except InvalidVersion:
            continue
    return tuple(sorted(versions))


def exact_release(spec: str | None) -> str | None:
    """The one release a pin names (`==0.7.2`), or None."""
    clauses = list(parse_pin(spec)) if spec else []
    if len(clauses) == 1 and clauses[0].operator in ("==", "===") and "*" not in clauses[0].version:
        return clauses[0].version
    return None


def pinned_releases(spec: str, progress: Callable[[str], None] = lambda _message: None) -> tuple[list[str], list[str]]:
    """The lowest and highest published releases a pin admits, plus the installed
    release if the pin admits it. Returns (labels, notes)."""
    specifier = parse_pin(spec)
    exact = exact_release(spec)
    if exact is not None:
        # An exact pin names its one release: nothing to list (a release that
        # does not exist is said when it is fetched).
        admitted = [Version(exact)]
    else:
        progress("listing published flashinfer releases")
        admitted = [v for v in published_versions() if specifier.contains(v)]
    if not admitted:
        raise InputError(f"pin {spec!r}: no published flashinfer-python release satisfies it")
    labels = list(dict.fromkeys([str(admitted[0]), str(admitted[-1])]))
    if len(admitted) == 1:
        notes = [f"pin {spec} admits one release: {labels[0]}"]
    else:
        notes = [f"pin {spec} admits {len(admitted)} releases; probing the lowest and highest: {', '.join(labels)}"]
    installed = distribution_version("flashinfer-python")
    if installed:
        try:
            if specifier.contains(Version(installed), prereleases=True):
                # The installed release is probed here, in this process: when the
                # pin's ends include it, it is not fetched and probed a second time.
                labels = [label for label in labels if Version(label) != Version(installed)] + [INSTALLED]
            else:
                notes.append(f"the installed flashinfer {installed} does not satisfy the pin {spec}: this environment does not match the repo's pin")
        except InvalidVersion:
            pass
    return labels, notes
