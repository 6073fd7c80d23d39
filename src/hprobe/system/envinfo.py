"""What `hprobe env` reports. Works on a machine with no GPU and imports no flashinfer."""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import platform
import re
import sys
from pathlib import Path

from hprobe import __version__
from hprobe.model.release import FlashinferInfo
from hprobe.model.sm import detect_gpus


def distribution_version(name: str) -> str | None:
    """The installed version of a distribution, None when it is not installed."""
    listed = _listed_versions().get(_canonical(name))
    if listed is not None:
        return listed
    try:  # not in a wheel-style directory name (an egg, a duplicate): ask the metadata
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503


@functools.cache
def _listed_versions() -> dict[str, str]:
    """Name -> version of the distributions on sys.path, from their
    `{name}-{version}.dist-info` directory names: one listing per path entry,
    where a metadata lookup parses a METADATA file per question (a warm check
    asks some thirty). The first entry on sys.path wins, as for imports; a name
    listed twice in one directory is left to the metadata lookup."""
    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        here: dict[str, str] = {}
        twice: set[str] = set()
        for item in names:
            if not item.endswith(".dist-info"):
                continue
            name, sep, version = item[: -len(".dist-info")].partition("-")
            key = _canonical(name)
            if sep and version:
                if key in here:
                    twice.add(key)
                here[key] = version
        for key, version in here.items():
            if key not in twice:
                found.setdefault(key, version)
    return found


def flashinfer_origin() -> str | None:
    """Where `import flashinfer` would load from, found without importing it."""
    try:
        spec = importlib.util.find_spec("flashinfer")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    return str(Path(spec.origin).resolve().parent)


def collect() -> dict:
    info: dict = {
        "hprobe": __version__,
        "python": f"{platform.python_version()} ({sys.executable})",
        "torch": None,
        "torch_cuda": None,
        "cuda_available": False,
        "driver": None,
        "gpus": [],
        "flashinfer_python": distribution_version("flashinfer-python"),
        "flashinfer_cubin": distribution_version("flashinfer-cubin"),
        "flashinfer_jit_cache": distribution_version("flashinfer-jit-cache"),
        "flashinfer_location": flashinfer_origin(),
    }
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - reported, not raised: env must always answer
        info["torch"] = f"not importable ({type(exc).__name__}: {exc})"
        return info
    info["torch"] = torch.__version__
    info["torch_cuda"] = torch.version.cuda
    try:
        info["cuda_available"] = bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        info["cuda_available"] = False
    if info["cuda_available"]:
        try:
            raw = torch._C._cuda_getDriverVersion()  # type: ignore[attr-defined]  # e.g. 12080 for CUDA 12.8
            info["driver"] = f"CUDA {raw // 1000}.{(raw % 1000) // 10}"
        except Exception:  # noqa: BLE001 - private API; absent in some builds
            info["driver"] = None
    info["gpus"] = [{"index": g.index, "name": g.name, "sm": g.sm.number} for g in detect_gpus()]
    return info


def installed_flashinfer_info() -> FlashinferInfo:
    return FlashinferInfo(distribution_version("flashinfer-python") or "not installed", flashinfer_origin() or "")
