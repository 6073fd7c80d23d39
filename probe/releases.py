"""flashinfer releases the user has not installed: fetch one wheel, unpack it into a
per-user cache, and probe it in a subprocess with that tree first on sys.path.

The user's environment is never modified: pip only downloads (`--no-deps`),
with the user's own pip configuration, and the probing process never holds two
flashinfer versions.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from . import __version__
from .errors import InputError
from .outcome import HeadResult, KernelSMResult, Outcome

DIST = "flashinfer-python"
_WHEEL_PREFIX = "flashinfer_python-"


def cache_root() -> Path:
    override = os.environ.get("HPROBE_CACHE_DIR")
    if override:
        return Path(override)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("hprobe"))


@dataclass
class Release:
    """One flashinfer tree ready to probe."""

    label: str  # what the user asked for: "0.6.13", a wheel path, a directory
    version: str
    tree: Path  # directory that holds the `flashinfer` package
    wheel_sha256: str | None  # identity for the result cache; None for a directory
    unmet: list[str] = field(default_factory=list)  # Requires-Dist not met here


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
        return _from_wheel(path, label=item)
    if path.is_dir():
        return _from_directory(path, label=item)
    try:
        Version(item)
    except InvalidVersion:
        raise InputError(f"--flashinfer {item!r}: not a release number, wheel file or directory") from None
    return _from_wheel(fetch_wheel(item), label=item)


# Bounds on the subprocesses hprobe starts, in seconds (README "Releases that are not installed").
PIP_TIMEOUT = ("HPROBE_PIP_TIMEOUT", 300.0)  # one `pip download` / `pip index`
WORKER_TIMEOUT = ("HPROBE_WORKER_TIMEOUT", 900.0)  # probing one release


def timeout_from_env(setting: tuple[str, float]) -> float:
    name, default = setting
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e6:
        raise InputError(f"{name}={text!r}: expected a number of seconds above 0")
    return value


def _pip(cmd: list[str], what: str) -> subprocess.CompletedProcess[str]:
    """Run pip with the user's configuration, bounded in time; one line on failure."""
    limit = timeout_from_env(PIP_TIMEOUT)
    try:
        return subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=limit)
    except subprocess.TimeoutExpired:
        raise InputError(f"{what}: pip did not finish within {limit:g} s (is the package index reachable? {PIP_TIMEOUT[0]} sets the limit)") from None


def fetch_wheel(version: str) -> Path:
    """The cached wheel of `version`, downloading it once with the user's pip."""
    wheels = cache_root() / "wheels"
    cached = _cached_wheel(wheels, version)
    if cached:
        return cached
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=wheels) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", "-d", tmp, f"{DIST}=={version}"]
        proc = _pip(cmd, f"cannot fetch {DIST}=={version}")
        got = list(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not got:
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "is ignored" not in ln]
            why = lines[-1].strip() if lines else f"pip exited {proc.returncode}"
            raise InputError(f"cannot fetch {DIST}=={version}: {why}")
        target = wheels / got[0].name
        os.replace(got[0], target)
    return target


def _cached_wheel(wheels: Path, version: str) -> Path | None:
    if not wheels.is_dir():
        return None
    for wheel in wheels.glob(f"{_WHEEL_PREFIX}*.whl"):
        if _wheel_version(wheel) == Version(version):
            return wheel
    return None


def _wheel_version(wheel: Path) -> Version | None:
    try:
        return Version(wheel.name[len(_WHEEL_PREFIX):].split("-", 1)[0])
    except InvalidVersion:
        return None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _from_wheel(wheel: Path, label: str) -> Release:
    sha = _sha256(wheel)
    tree = cache_root() / "trees" / sha
    if not (tree / "flashinfer" / "__init__.py").is_file():
        tree.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=tree.parent, prefix=".unpack-"))
        try:
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(tmp)
        except zipfile.BadZipFile:
            shutil.rmtree(tmp, ignore_errors=True)
            raise InputError(f"--flashinfer {label}: {wheel} is not a valid wheel") from None
        if not (tmp / "flashinfer" / "__init__.py").is_file():
            shutil.rmtree(tmp, ignore_errors=True)
            raise InputError(f"--flashinfer {label}: {wheel} holds no flashinfer package")
        shutil.rmtree(tree, ignore_errors=True)
        os.replace(tmp, tree)
    metadata = _metadata(tree)
    version = metadata.get("Version", ["unknown"])[0]
    return Release(label, version, tree, sha, unmet_requirements(metadata))


def _from_directory(path: Path, label: str) -> Release:
    root = path
    if (path / "__init__.py").is_file() and path.name == "flashinfer":
        root = path.parent
    if not (root / "flashinfer" / "__init__.py").is_file():
        raise InputError(f"--flashinfer {label}: no flashinfer package in that directory")
    version = "unknown"
    version_file = root / "flashinfer" / "_build_meta.py"
    for candidate in (version_file, root / "flashinfer" / "version.py"):
        if candidate.is_file():
            m = re.search(r"""__version__\s*=\s*["']([^"']+)""", candidate.read_text(errors="replace"))
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
    fields: dict[str, list[str]] = {}
    for line in found[0].read_text(errors="replace").splitlines():
        if not line.strip():
            break  # headers end at the first blank line
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), []).append(value.strip())
    return fields


def unmet_requirements(metadata: dict[str, list[str]]) -> list[str]:
    """Requires-Dist entries this environment does not satisfy, each with a fix."""
    import importlib.metadata as md

    unmet = []
    for raw in metadata.get("Requires-Dist", []):
        try:
            req = Requirement(raw)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        try:
            have = md.version(req.name)
        except md.PackageNotFoundError:
            unmet.append(f"{req} (not installed; try `pip install '{req}'` in a separate venv)")
            continue
        if req.specifier and not req.specifier.contains(have, prereleases=True):
            unmet.append(f"{req} (installed {req.name} {have}; try a separate venv with `pip install '{req}'`)")
    return unmet


# -- probing in a subprocess ---------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """A digest of hprobe's own source: results from other code (another
    version, a local edit) are never reused."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def result_cache_key(release: Release, kernel_id: str, probe_version: int, sms: list[int], heads: list[int]) -> str | None:
    if release.wheel_sha256 is None:
        return None
    material = json.dumps([release.wheel_sha256, kernel_id, probe_version, __version__, code_digest(), sms, heads])
    return hashlib.sha256(material.encode()).hexdigest()


def probe_release(
    release: Release, kernel_ids: list[str], sms: list[int], heads: list[int], use_cache: bool = True
) -> list[KernelSMResult]:
    """Results for every kernel variant x SM x h_q on `release`, from the cache or a worker.
    `kernel_ids` are variant keys (`trtllm-mla[backend=xqa]`)."""
    from .kernels import get_variant

    results: list[KernelSMResult] = []
    missing: list[str] = []
    cached: dict[str, list[KernelSMResult]] = {}
    for kernel_id in kernel_ids:
        key = result_cache_key(release, kernel_id, get_variant(kernel_id).probe.probe_version, sms, heads)
        hit = _read_cache(key) if (use_cache and key) else None
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
            if key and not any("worker:" in n for r in kernel_results for n in r.notes):
                _write_cache(key, kernel_results)
    for kernel_id in kernel_ids:
        results.extend(cached.get(kernel_id) or fresh.get(kernel_id) or [])
    return results


def _cache_file(key: str) -> Path:
    return cache_root() / "results" / f"{key}.json"


def _read_cache(key: str) -> list[KernelSMResult] | None:
    path = _cache_file(key)
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
        if doc.get("schema") != "hprobe.cache/1" or doc.get("key") != key:
            raise ValueError("foreign cache entry")
        return [KernelSMResult.from_dict(r) for r in doc["results"]]
    except Exception:  # noqa: BLE001 - a corrupt or foreign entry is discarded, never trusted
        path.unlink(missing_ok=True)
        return None


def _write_cache(key: str, results: list[KernelSMResult]) -> None:
    path = _cache_file(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"schema": "hprobe.cache/1", "key": key, "results": [r.to_dict() for r in results]}))
    os.replace(tmp, path)


def _run_worker(release: Release, kernel_ids: list[str], sms: list[int], heads: list[int]) -> list[KernelSMResult]:
    request = {"tree": str(release.tree), "kernels": kernel_ids, "sms": sms, "heads": heads}
    # An isolated interpreter (-I: no current directory, no user site, no
    # PYTHON* variables) in a directory of its own, importing this very
    # package by path: a `probe/` in the user's working tree is never run.
    package_root = str(Path(__file__).resolve().parent.parent)
    bootstrap = f"import sys; sys.path.insert(0, {package_root!r}); from {__package__}.worker import main; sys.exit(main())"
    limit = timeout_from_env(WORKER_TIMEOUT)
    with tempfile.TemporaryDirectory(prefix="hprobe-worker-") as workdir:
        try:
            proc = subprocess.run(
                [sys.executable, "-I", "-c", bootstrap],
                input=json.dumps(request),
                capture_output=True,
                text=True,
                cwd=workdir,
                timeout=limit,
            )
        except subprocess.TimeoutExpired:
            reason = f"flashinfer {release.version} could not be probed here: the probe worker did not finish within {limit:g} s ({WORKER_TIMEOUT[0]} sets the limit)"
            return [_inconclusive(k, sm, release.version, heads, reason) for k in kernel_ids for sm in sms]
    try:
        doc = json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        tail = " ".join(proc.stderr.split())[-300:]
        doc = {"error": f"probe worker exited {proc.returncode}: {tail}"}
    if "error" in doc:
        reason = f"flashinfer {release.version} could not be probed here: {doc['error']}"
        if release.unmet:
            reason += "; unmet requirements: " + "; ".join(release.unmet)
        return [_inconclusive(k, sm, release.version, heads, reason) for k in kernel_ids for sm in sms]
    return [KernelSMResult.from_dict(r) for r in doc["results"]]


def _inconclusive(key: str, sm: int, version: str, heads: list[int], reason: str) -> KernelSMResult:
    from .kernels import get_variant

    variant = get_variant(key)
    result = KernelSMResult(variant.probe.id, sm, version, notes=[f"worker: {reason}"], config=variant.values, key=variant.key)
    for h in heads:
        result.heads[h] = HeadResult(h, Outcome.INCONCLUSIVE, reason=reason)
    return result


def published_versions() -> list[Version]:
    """Releases of flashinfer-python the user's pip can see, oldest first."""
    cmd = [sys.executable, "-m", "pip", "index", "versions", DIST, "--disable-pip-version-check"]
    proc = _pip(cmd, f"cannot list {DIST} releases")
    m = re.search(r"Available versions:\s*(.+)", proc.stdout)
    if proc.returncode != 0 or not m:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "is ignored" not in ln and "experimental" not in ln]
        raise InputError(f"cannot list {DIST} releases: {lines[-1].strip() if lines else 'pip index failed'}")
    versions = []
    for text in m.group(1).split(","):
        try:
            versions.append(Version(text.strip()))
        except InvalidVersion:
            continue
    return sorted(versions)
