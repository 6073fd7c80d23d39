"""Pin arithmetic, in one place for every layer that reads or writes a
flashinfer requirement: parse one, name the one release an exact pin admits,
raise one to a release."""

from __future__ import annotations

from packaging.specifiers import Specifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from hprobe.model.errors import InputError

NAMES = {"flashinfer-python", "flashinfer"}
# `suggest --since first`: the pin search from where the kernel's entry point
# first exists, not from the floor of the question.
SINCE_FIRST = "first"


def parse_pin(spec: str) -> SpecifierSet:
    """`flashinfer-python>=0.6.13` or `>=0.6.13` -> its specifier set. A
    requirement on another package is an input error, never silently read."""
    text = spec.strip()
    if not text:
        raise InputError("pin '': empty; expected a requirement such as 'flashinfer-python>=0.6.13'")
    try:
        specifier = _named_pin(spec, text) if text[:1].isalpha() else SpecifierSet(text)
    except ValueError:  # packaging's InvalidSpecifier and InvalidRequirement
        raise InputError(f"pin {spec!r}: not a requirement such as 'flashinfer-python>=0.6.13'") from None
    for clause in specifier:
        # `===foo` parses as a specifier but names no release: an input
        # error here, not an exception later when versions are compared.
        if clause.operator == "===":
            raise InputError(f"pin {spec!r}: arbitrary equality (===) compares strings, not releases; use ==")
        if not _comparable(clause.version):
            raise InputError(f"pin {spec!r}: {clause} does not name a release number")
    return specifier


def _named_pin(spec: str, text: str) -> SpecifierSet:
    """The specifier of a pin that names its package (`flashinfer-python>=0.6.13`).
    Its parser (markers, tags, logging: 30 ms) is imported only here: a
    table's `==0.7.2` never needs it."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    req = Requirement(text)
    if canonicalize_name(req.name) not in NAMES:
        raise InputError(f"pin {spec!r}: names {req.name}, not flashinfer-python")
    return req.specifier


def _comparable(version: str) -> bool:
    try:
        Version(version.rstrip(".*").rstrip("."))
    except InvalidVersion:
        return False
    return True


def exact_release(spec: str | None) -> str | None:
    """The one release a pin names (`==0.7.2`), or None."""
    clauses = list(parse_pin(spec)) if spec else []
    if len(clauses) == 1 and clauses[0].operator in ("==", "===") and "*" not in clauses[0].version:
        return clauses[0].version
    return None


def raised_pin(current: str | None, needs: Version) -> str | None:
    """`current` with every lower bound replaced by `>=needs`, and an exact pin
    moved to exactly `needs` (an exact pin stays exact); None where a clause
    cannot be raised mechanically (`~=`, `===`, a wildcard)."""
    if current is None:
        return f">={needs}"
    clauses = list(SpecifierSet(current))
    exact = [c for c in clauses if c.operator == "==" and not c.version.endswith(".*")]
    if exact:
        others = [c for c in clauses if c not in exact]
        return f"=={needs}" if all(c.contains(needs, prereleases=True) for c in others) and not others else None
    kept: list[str] = []
    for clause in clauses:
        op, version = clause.operator, clause.version
        if op in (">=", ">"):
            continue
        if op in ("<", "<=", "!="):
            if op != "!=" and not Specifier(f"{op}{version}").contains(needs):
                return None  # the pin's upper bound excludes every safe release
            kept.append(str(clause))
            continue
        return None
    return ",".join([f">={needs}", *sorted(kept)])
