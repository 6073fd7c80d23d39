"""Whether a flashinfer tree defines an entry point, read from source without importing it."""

from __future__ import annotations

import ast
from pathlib import Path

from hprobe.model.errors import InputError
from hprobe.support.published import published_versions
from hprobe.support.trees import resolve
from hprobe.system.envinfo import flashinfer_origin


def entry_point_present(dotted: str, root: str | None = None) -> bool | None:
    """True/False for the flashinfer package at `root` (default: the installed one);
    None when there is no flashinfer to look at. Read with `ast`, never imported:
    a name counts when the module defines, assigns or imports (re-exports) it."""
    root = root or flashinfer_origin()
    if root is None:
        return None
    module, _, name = dotted.rpartition(".")
    parts = module.split(".")[1:]  # drop the leading "flashinfer"
    base = Path(root).joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return name in _defined_names(candidate)
    return False


def _defined_names(path: Path, depth: int = 0) -> set[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names) and node.level and depth < 4:
            # `from ._core import *`: the public names of that module.
            base = path.parent
            for _ in range(node.level - 1):
                base = base.parent
            target = base.joinpath(*(node.module or "").split("."))
            for candidate in (target.with_suffix(".py"), target / "__init__.py"):
                if candidate.is_file():
                    names.update(n for n in _defined_names(candidate, depth + 1) if not n.startswith("_"))
                    break
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.ImportFrom, ast.Import)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Try):  # optional imports in try/except blocks
            for inner in node.body:
                if isinstance(inner, (ast.ImportFrom, ast.Import)):
                    names.update((a.asname or a.name).split(".")[0] for a in inner.names)
    return names


def releases_with_entry_points(spec: str, entry_points: list[str], progress=lambda _m: None) -> dict[str, dict[str, bool]]:
    """For each entry point, which releases in `spec` (comma list or LO..HI over
    published releases) define it. Wheels are fetched and unpacked, never imported."""
    from packaging.version import InvalidVersion, Version

    if ".." in spec:
        lo_text, _, hi_text = spec.partition("..")
        try:
            lo = Version(lo_text) if lo_text.strip() else None
            hi = Version(hi_text) if hi_text.strip() else None
        except InvalidVersion:
            raise InputError(f"--releases {spec!r}: not release numbers") from None
        versions = [str(v) for v in published_versions() if (lo is None or v >= lo) and (hi is None or v <= hi)]
        if not versions:
            raise InputError(f"--releases {spec!r}: no published release in that range")
    else:
        versions = [v.strip() for v in spec.split(",") if v.strip()]
    out: dict[str, dict[str, bool]] = {e: {} for e in entry_points}
    for version in versions:
        progress(f"reading flashinfer {version}")
        release = resolve(version)
        root = str(release.tree / "flashinfer")
        for entry in entry_points:
            out[entry][release.version] = bool(entry_point_present(entry, root))
    return out
