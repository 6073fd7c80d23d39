"""Whether a flashinfer tree defines an entry point, read from source without importing it."""

from __future__ import annotations

import ast
import functools
import posixpath
import zipfile
from collections.abc import Callable
from pathlib import Path

from hprobe.model.errors import InputError
from hprobe.support.published import published_versions
from hprobe.support.trees import resolve
from hprobe.system.envinfo import flashinfer_origin
from hprobe.system.parsing import parse_module


def entry_point_present(dotted: str, root: str | None = None) -> bool | None:
    """True/False for the flashinfer package at `root` (default: the installed one);
    None when there is no flashinfer to look at. Read with `ast`, never imported:
    a name counts when the module defines, assigns or imports (re-exports) it."""
    root = root or flashinfer_origin()
    if root is None:
        return None
    base = Path(root)

    def read(rel: str) -> str | None:
        path = base.joinpath(*rel.split("/"))
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None

    return _present(dotted, read)


def entry_point_in_wheel(dotted: str, wheel: Path) -> bool:
    """The same question asked of a wheel's own files, read from the archive:
    a search over releases need not unpack each one it looks at."""
    with zipfile.ZipFile(wheel) as zf:
        members = set(zf.namelist())

        def read(rel: str) -> str | None:
            name = f"flashinfer/{rel}"
            return zf.read(name).decode("utf-8", errors="replace") if name in members else None

        return _present(dotted, read)


class _Unwritten(Exception):
    """A file of a kept tree not yet written from its (removed) wheel."""


def entry_point_in_kept_tree(dotted: str, tree: Path) -> bool | None:
    """The same question asked of a release's kept slim tree (its wheel removed
    once answered), where every file it reads was written from the wheel
    before; None where one was not (the wheel is then needed to answer)."""
    from hprobe.support.slim import unwritten

    base = tree / "flashinfer"

    def read(rel: str) -> str | None:
        path = base.joinpath(*rel.split("/"))
        if not path.is_file():
            return None
        if unwritten([path]):
            raise _Unwritten(rel)
        return path.read_text(encoding="utf-8", errors="replace")

    try:
        return _present(dotted, read)
    except _Unwritten:
        return None


def entry_point_in_index(dotted: str, version: str) -> bool | None:
    """The same question asked of release `version` on the index, read by range
    requests with no tree made: the wheel's directory and RECORD, then the
    modules the question opens, each checked against RECORD before it is read.
    None where the release is not read by ranges here (its wheel or tree
    answers then). A failed request or a member unlike RECORD raises (OSError,
    ValueError)."""
    from hprobe.support import cache, remote_wheel
    from hprobe.support.trees import remote_of

    remote = remote_of(version)
    if remote is None:
        return None
    wheel = remote_wheel.open_wheel(remote)
    try:
        record = remote_wheel.wheel_record(wheel)

        def read(rel: str) -> str | None:
            name = f"flashinfer/{rel}"
            if name not in wheel.spans:
                return None
            data = wheel.read([name])[name]
            remote_wheel.check(name, data, record)
            return data.decode("utf-8", errors="replace")

        return _present(dotted, read)
    finally:
        cache.record_received("wheel members", wheel.file.received)


Reader = Callable[[str], "str | None"]  # a path inside the package, `/`-separated -> its text, or None


def _present(dotted: str, read: Reader) -> bool:
    module, _, name = dotted.rpartition(".")
    base = "/".join(module.split(".")[1:])  # drop the leading "flashinfer"
    for candidate in (f"{base}.py", f"{base}/__init__.py" if base else "__init__.py"):
        text = read(candidate)
        if text is not None:
            return name in _defined_names(candidate, text, read)
    return False


def _defined_names(path: str, text: str, read: Reader, depth: int = 0) -> set[str]:
    tree = _parsed(text)
    if tree is None:
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names) and node.level and depth < 4:
            # `from ._core import *`: the public names of that module.
            folder = posixpath.dirname(path)
            for _ in range(node.level - 1):
                folder = posixpath.dirname(folder)
            target = posixpath.join(folder, *(node.module or "").split("."))
            for candidate in (f"{target}.py", f"{target}/__init__.py"):
                inner = read(candidate)
                if inner is not None:
                    names.update(n for n in _defined_names(candidate, inner, read, depth + 1) if not n.startswith("_"))
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
            for inner_node in node.body:
                if isinstance(inner_node, (ast.ImportFrom, ast.Import)):
                    names.update((a.asname or a.name).split(".")[0] for a in inner_node.names)
    return names


@functools.lru_cache(maxsize=4)
def _parsed(text: str) -> ast.Module | None:
    """A module's syntax tree, parsed once for the entry points it holds or
    re-exports (`from ._core import *` is read for each name asked of it);
    the last few only, as a search over releases reads one module after another."""
    try:
        return parse_module(text)
    except SyntaxError:
        return None


def releases_with_entry_points(
    spec: str, entry_points: list[str], progress=lambda _m: None
) -> dict[str, dict[str, bool]]:
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
        for entry in entry_points:
            # A tree kept without its wheel answers from the files written before; else the tree is read (and a
            # removed wheel fetched again first).
            kept = entry_point_in_kept_tree(entry, release.location) if release.wheel_sha256 else None
            found = kept if kept is not None else entry_point_present(entry, str(release.tree / "flashinfer"))
            out[entry][release.version] = bool(found)
    return out
