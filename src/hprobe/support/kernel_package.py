"""The trtllm-gen kernel package a release names, and what the last search for
its table found: all a warm run asks of compiled depth (support/gather.py keys
its kept conclusions on it) without the fetching and parsing in
support/kernel_tables.py."""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path

from hprobe.compiled.files import TABLE_SETTING
from hprobe.model.errors import InputError
from hprobe.support import cache
from hprobe.system.fileio import read_bytes
from hprobe.system.parsing import parse_module


@dataclass(frozen=True)
class Package:
    """A release's kernel package, as its artifacts.py names it."""

    path: str  # "158f6fa…/fmha/trtllm-gen/"
    checksums_sha256: str

    @property
    def short(self) -> str:
        return self.path.split("/", 1)[0][:7]


def package_of(flashinfer: Path) -> Package | str:
    """The trtllm-gen FMHA kernel package `flashinfer/artifacts.py` names, read with ast."""
    path = flashinfer / "artifacts.py"
    try:
        tree = parse_module(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError) as exc:
        return f"flashinfer/artifacts.py could not be read ({type(exc).__name__})"
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in ("ArtifactPath", "CheckSumHash"):
            for item in node.body:
                target = (
                    item.target
                    if isinstance(item, ast.AnnAssign)
                    else item.targets[0]
                    if isinstance(item, ast.Assign) and len(item.targets) == 1
                    else None
                )
                value = item.value if isinstance(item, (ast.AnnAssign, ast.Assign)) else None
                if (
                    isinstance(target, ast.Name)
                    and target.id == "TRTLLM_GEN_FMHA"
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                ):
                    found[node.name] = value.value
    if len(found) < 2:
        return (
            "flashinfer/artifacts.py names no trtllm-gen FMHA kernel package "
            "(ArtifactPath/CheckSumHash.TRTLLM_GEN_FMHA)"
        )
    # Both become parts of paths and URLs: a digest and a relative path, nothing else.
    if (
        not re.fullmatch(r"[0-9a-f]{64}", found["CheckSumHash"])
        or not re.fullmatch(r"[0-9a-f]{40}/[\w./-]+/", found["ArtifactPath"])
        or ".." in found["ArtifactPath"]
    ):
        return (
            "flashinfer/artifacts.py names a trtllm-gen FMHA kernel package hprobe cannot use (not a digest and a "
            "relative path)"
        )
    return Package(found["ArtifactPath"], found["CheckSumHash"])


MISS_PREFIX = "missing-"  # `missing-<release>.json` in the package's folder
MISS_TTL = 12 * 3600  # seconds a search that found nothing is taken as the answer
# The same where a source was not reached (a network failure, not an answer):
# long enough that a run asking release after release pays the attempt once,
# short enough that a passing failure does not leave answers undecided for hours.
UNREACHED_MISS_TTL = 600


def miss_file(version: str) -> str:
    """The record of a search that found nothing, per release: releases that
    share a kernel package search the index for their own cubin wheel
    (`==version`, `<=version`), so one's miss is neither another's answer nor
    in its words."""
    return MISS_PREFIX + re.sub(r"[^A-Za-z0-9.+_-]", "_", version) + ".json"


def miss_settled(flashinfer: Path, version: str) -> str:
    """When a search for this release's table last found nothing, if that is still
    the answer (MISS_TTL); "" otherwise. Conclusions drawn without the table may be
    kept under it: they hold until the next search."""
    package = package_of(flashinfer)
    if isinstance(package, str) or os.environ.get(TABLE_SETTING, "").strip():
        return ""
    seen = last_miss(package, version)
    return repr(seen[0]) if seen is not None else ""


def last_miss(package: Package, version: str) -> tuple[float, str] | None:
    import json
    import time

    try:
        where = cache.found("kernel-tables", package.checksums_sha256) / miss_file(version)
        seen = json.loads(read_bytes(where, "record", 65536))
        at, why, ttl = float(seen["at"]), str(seen["why"]), float(seen.get("ttl", MISS_TTL))
    except (OSError, InputError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return (at, why) if 0 <= time.time() - at < min(ttl, MISS_TTL) else None


def recent_miss(package: Package, version: str) -> str | None:
    """Why this release's last search found nothing, if it was less than
    MISS_TTL ago: said in the same words as then, so that a report does not
    depend on whether this run searched or remembered."""
    seen = last_miss(package, version)
    return seen[1] if seen is not None else None


def remember_miss(package: Package, version: str, why: str, ttl: float = MISS_TTL) -> None:
    """Keep why this release's search found nothing, taken as the answer for `ttl` seconds."""
    import json
    import time

    try:
        where = cache.directory("kernel-tables") / package.checksums_sha256
        where.mkdir(parents=True, exist_ok=True)
        record = {"at": time.time(), "why": why, "ttl": ttl}
        cache.write_atomically(where / miss_file(version), json.dumps(record).encode())
    except OSError:
        pass
