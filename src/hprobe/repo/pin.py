"""The consumer's flashinfer requirement, read from its own metadata: a wheel's or an
installed package's METADATA, pyproject.toml, or requirements files."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from ..errors import InputError
from ..fileio import read_text
from ..tables.toml_source import parse_toml

NAMES = {"flashinfer-python", "flashinfer"}


def parse_pin(spec: str) -> SpecifierSet:
    """`flashinfer-python>=0.6.13` or `>=0.6.13` -> its specifier set. A
    requirement on another package is an input error, never silently read."""
    text = spec.strip()
    if not text:
        raise InputError("pin '': empty; expected a requirement such as 'flashinfer-python>=0.6.13'")
    try:
        if text[:1].isalpha():
            req = Requirement(text)
            if canonicalize_name(req.name) not in NAMES:
                raise InputError(f"pin {spec!r}: names {req.name}, not flashinfer-python")
            return req.specifier
        return SpecifierSet(text)
    except (InvalidRequirement, InvalidSpecifier):
        raise InputError(f"pin {spec!r}: not a requirement such as 'flashinfer-python>=0.6.13'") from None


@dataclass(frozen=True)
class RepoPin:
    spec: str  # a PEP 440 specifier set, e.g. "==0.7.2.post1"
    path: Path  # the file it came from
    line: int | None = None  # its line there, where the file has lines to name

    @property
    def source(self) -> str:
        return f"{self.path}:{self.line}" if self.line is not None else str(self.path)


def find_pin(root: Path) -> RepoPin | None:
    """The first flashinfer requirement found, most authoritative source first:
    METADATA beside or inside the tree, pyproject.toml, requirements files."""
    base = root if root.is_dir() else root.parent
    for finder in (_from_metadata, _from_pyproject, _from_requirements, _from_setup_py):
        pin = finder(base)
        if pin is not None:
            return pin
    return None


def _flashinfer(text: str) -> Requirement | None:
    try:
        req = Requirement(text.strip())
    except InvalidRequirement:
        return None
    return req if canonicalize_name(req.name) in NAMES and str(req.specifier) else None


def _from_metadata(base: Path) -> RepoPin | None:
    # An unpacked wheel holds NAME-VERSION.dist-info beside the package; an
    # installed package (site-packages/vllm) has it as a sibling.
    candidates = sorted(base.glob("*.dist-info/METADATA")) + sorted(base.parent.glob(f"{base.name}-*.dist-info/METADATA"))
    for meta in candidates:
        for number, line in enumerate(read_text(meta, "package metadata").splitlines(), 1):
            if line.startswith("Requires-Dist:"):
                req = _flashinfer(line.split(":", 1)[1].split(";")[0])
                if req is not None:
                    return RepoPin(str(req.specifier), meta, number)
    return None


def _from_pyproject(base: Path) -> RepoPin | None:
    path = base / "pyproject.toml"
    if not path.exists():
        return None
    project = parse_toml(read_text(path, "pyproject.toml"), path).get("project", {})
    if not isinstance(project, dict):
        raise InputError(f"{path}: [project] is not a table")
    optional = project.get("optional-dependencies", {})
    lists = [project.get("dependencies", [])] + (list(optional.values()) if isinstance(optional, dict) else [])
    for deps in lists:
        if not isinstance(deps, list):
            raise InputError(f"{path}: [project] dependencies must be lists of requirement strings")
        for dep in deps:
            req = _flashinfer(str(dep).split(";")[0])
            if req is not None:
                return RepoPin(str(req.specifier), path)
    return None


def _from_requirements(base: Path) -> RepoPin | None:
    files = sorted(base.glob("requirements*.txt")) + sorted(base.glob("requirements/*.txt"))
    for path in files:
        for number, line in enumerate(read_text(path, "requirements file").splitlines(), 1):
            line = re.sub(r"\s+#.*$", "", line).strip()
            if not line or line.startswith(("#", "-")):
                continue
            req = _flashinfer(line.split(";")[0])
            if req is not None:
                return RepoPin(str(req.specifier), path, number)
    return None


def _from_setup_py(base: Path) -> RepoPin | None:
    """`install_requires=[...]` written as a literal list of strings in setup.py,
    read with ast (never run)."""
    path = base / "setup.py"
    if not path.is_file():
        return None
    try:
        tree = ast.parse(read_text(path, "setup.py"))
    except (SyntaxError, ValueError):
        return None  # not a requirement source hprobe can read; others were tried first
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "install_requires" and isinstance(node.value, (ast.List, ast.Tuple)):
            for item in node.value.elts:
                if isinstance(item, ast.Constant) and isinstance(item.value, str):
                    req = _flashinfer(item.value.split(";")[0])
                    if req is not None:
                        return RepoPin(str(req.specifier), path, item.lineno)
    return None
