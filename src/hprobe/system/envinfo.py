"""What `hprobe env` reports. Works on a machine with no GPU and imports no flashinfer."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import platform
import sys
from pathlib import Path
from typing import NamedTuple

from hprobe import __version__
from hprobe.model.release import FlashinferInfo
from hprobe.model.sm import detect_gpus
from hprobe.system.once import Once


def distribution_version(name: str) -> str | None:
    """The installed version of a distribution, None when it is not installed."""
    key = _canonical(name)
    listing = _listed()
    if key in listing.found:
        return listing.found[key][0]
    if not listing.partial and key not in listing.unclear:
        return None  # every place importlib.metadata would look was listed: not installed
    import importlib.metadata  # here: only a name the listing cannot decide pays for it

    try:  # not in a wheel-style directory name (an egg, a duplicate): ask the metadata
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def dist_info_dir(name: str) -> Path | None:
    """The `.dist-info` directory the installed distribution's metadata is read
    from, as importlib.metadata finds it; None where the listing cannot tell
    (not installed, an egg, a name held twice): ask importlib.metadata then."""
    listed = _listed().found.get(_canonical(name))
    return None if listed is None else Path(listed[1])


def _canonical(name: str) -> str:
    from packaging.utils import canonicalize_name

    return canonicalize_name(name)


class _Listing(NamedTuple):
    found: dict[str, tuple[str, str]]  # name -> (version, .dist-info path)
    unclear: set[str]  # seen, but left to importlib.metadata: an egg, a name held twice
    partial: bool  # some place importlib.metadata also looks was not listed


@Once
def _listed() -> _Listing:
    """Name -> (version, `.dist-info` path) of the distributions on sys.path,
    from their `{name}-{version}.dist-info` directory names: one listing per
    path entry, where a metadata lookup parses a METADATA file per question (a
    warm check asks some thirty) and importing importlib.metadata alone cost
    a warm check some 35 ms here. The first entry on sys.path that holds a
    name decides, as for imports; where that entry holds it twice or as an
    egg, the name is left to the metadata lookup, and no later entry answers
    for it.

    A name found nowhere is not installed, unless the listing is partial: some
    place importlib.metadata also looks was not listed (a zip or an egg on
    sys.path, an unreadable folder, a finder of its own on sys.meta_path)."""
    found: dict[str, tuple[str, str]] = {}
    decided: set[str] = set()
    left: set[str] = set()
    partial = any(
        hasattr(finder, "find_distributions") and finder is not importlib.machinery.PathFinder
        for finder in sys.meta_path
    )
    for entry in sys.path:
        if entry.lower().endswith(".egg"):
            partial = True  # an egg's EGG-INFO, which importlib.metadata reads and no listing names
            continue
        try:
            names = os.listdir(entry or ".")
        except FileNotFoundError:
            continue  # nothing there for anyone to find
        except OSError:
            partial = True
            continue
        here: dict[str, tuple[str, str]] = {}
        unclear: set[str] = set()
        for item in names:
            stem, dot, kind = item.rpartition(".")
            kind = kind.lower()  # as importlib.metadata matches them
            if not dot or kind not in ("dist-info", "egg-info"):
                continue
            name, sep, version = stem.partition("-")
            key = _canonical(name)
            if kind == "egg-info" or not (sep and version) or key in here:
                unclear.add(key)
            else:
                here[key] = (version, os.path.join(entry or ".", item))
        for key, listed in here.items():
            if key not in decided and key not in unclear:
                found[key] = listed
        left |= unclear - decided
        decided |= here.keys() | unclear
    return _Listing(found, left, partial)


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
