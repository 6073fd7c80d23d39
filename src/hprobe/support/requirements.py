"""Requires-Dist lines as packaging parses them, kept in the cache.

A warm check reads the same METADATA on every run (the installed release's
for its identity, a fetched release's for what this environment lacks), and
importing packaging.requirements (markers, tags, logging) cost it 20 ms of
some 430. The parse is kept by the lines' digest and by every input of the
marker environment packaging evaluates against, so a warm run imports only
what compares versions, and a change of interpreter or machine parses again."""

from __future__ import annotations

import json
import os
import platform
import sys
from typing import NamedTuple

from hprobe.model.errors import InputError
from hprobe.support import cache
from hprobe.system.fileio import content_digest

SCHEMA = "hprobe.requirements/1"


class Parsed(NamedTuple):
    text: str  # as packaging writes the requirement back
    name: str
    specifier: str  # "" when it admits every version
    applies: bool  # its marker holds here, with no extra asked for


def parse_requirements(lines: list[str]) -> list[Parsed | None]:
    """Each line parsed (None: not a requirement packaging reads)."""
    key = f"requires-{content_digest(json.dumps([SCHEMA, lines, _marker_inputs()]).encode())}"
    try:
        kept = _valid(cache.read_kept("readings", key), len(lines))
    except InputError:
        kept = None  # no usable cache: parse
    if kept is not None:
        return kept
    parsed = [_parse(line) for line in lines]
    try:
        cache.keep("readings", key, parsed)
    except InputError:
        pass  # no usable cache: parsed again next time
    return parsed


def _parse(line: str) -> Parsed | None:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(line)
    except InvalidRequirement:
        return None
    applies = req.marker is None or req.marker.evaluate({"extra": ""})
    return Parsed(str(req), req.name, str(req.specifier), applies)


def _marker_inputs() -> list[object]:
    """What packaging's default marker environment is computed from: the
    interpreter (versions, implementation) and the machine (os, platform,
    kernel release and version, architecture), the host's name left out."""
    # Field by field, as packaging reads them: iterating uname() would ask
    # for the processor too, which runs `uname -p` in a subprocess.
    return [
        sys.version,
        sys.implementation.name,
        list(sys.implementation.version),
        os.name,
        sys.platform,
        platform.system(),
        platform.release(),
        platform.version(),
        platform.machine(),
    ]


def _valid(kept: object, count: int) -> list[Parsed | None] | None:
    if not isinstance(kept, list) or len(kept) != count:
        return None
    parsed: list[Parsed | None] = []
    for row in kept:
        if row is None:
            parsed.append(None)
        elif (
            isinstance(row, list)
            and len(row) == 4
            and all(isinstance(v, str) for v in row[:3])
            and isinstance(row[3], bool)
        ):
            parsed.append(Parsed(*row))
        else:
            return None
    return parsed
