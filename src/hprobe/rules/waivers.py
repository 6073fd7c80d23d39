"""The waiver file: `[[waiver]]` tables in TOML, each read with its file:line.

[[waiver]]
table = "vllm*"          # globs; sm and tp match exactly
sm = 120
release = "0.6.13"
reason = "SM120 decode waits for the 0.6.14 bump (#1234)"
expires = 2027-01-31     # after it, the waiver fails the gate
"""

from __future__ import annotations

import re
from pathlib import Path

from hprobe.model.errors import InputError
from hprobe.model.waiver import WAIVER_FILE, Waiver, parse_ignore, parse_waiver
from hprobe.rules.toml_source import parse_toml
from hprobe.system.fileio import read_text

_HEADER = re.compile(r"^\s*\[\[\s*waiver\s*\]\]")


def load_waivers(path: Path) -> list[Waiver]:
    text = read_text(path, "--waivers")
    doc = parse_toml(text, path)
    unknown = sorted(set(doc) - {"waiver"})
    if unknown:
        raise InputError(f"{path}: unknown key {unknown[0]!r}: a waiver file holds [[waiver]] tables only")
    entries = doc.get("waiver", [])
    if not isinstance(entries, list):
        raise InputError(f"{path}: `waiver` must be an array of tables ([[waiver]])")
    # tomllib keeps no positions: the k-th [[waiver]] header is the k-th entry.
    lines = [number for number, line in enumerate(text.splitlines(), 1) if _HEADER.match(line)]
    return [parse_waiver(entry, f"{path}:{lines[k] if k < len(lines) else '?'}") for k, entry in enumerate(entries)]


def gather_waivers(file: Path | None, ignores: list[str], places: list[Path]) -> list[Waiver]:
    """--waivers FILE, else `hprobe-waivers.toml` in the first of `places` that
    has one (the current directory, the --repo root); then every --ignore."""
    file = waivers_file(file, places)
    waivers = load_waivers(file) if file is not None else []
    return waivers + [parse_ignore(text) for text in ignores]


def waivers_file(file: Path | None, places: list[Path]) -> Path | None:
    """The waivers file a run reads: --waivers FILE, else `hprobe-waivers.toml`
    in the first of `places` that has one (an input no output may replace)."""
    if file is None:
        file = next((p / WAIVER_FILE for p in places if (p / WAIVER_FILE).is_file()), None)
        if file is not None and file.is_symlink() and not file.resolve().is_relative_to(file.parent.resolve()):
            # A tree under review that waives its own findings through a link to
            # a file elsewhere: what it would waive is not in the tree to be seen.
            raise InputError(
                f"{file}: links out of its directory (to {file.resolve()}); not read. Name the file with --waivers to "
                "use it"
            )
    return file
