"""What the package index publishes: the releases of flashinfer-python the
user's pip sees, and the releases a pin admits."""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable

from packaging.version import InvalidVersion, Version

from hprobe.model.errors import IndexUnlisted, InputError, PinUnserved
from hprobe.model.pins import exact_release, parse_pin
from hprobe.model.release import INSTALLED, Progress, quiet
from hprobe.support.trees import DIST, kept_without_wheel, parse_spec, pip_reason, resolve, run_pip
from hprobe.system.envinfo import distribution_version


def published_versions(dist: str = DIST) -> list[Version]:
    """Releases of `dist` (flashinfer-python unless said) the user's pip can
    see, oldest first. Asked of the index once per process: `suggest` needs the
    list for the pin's ends and again for its pin search (keyed by pip's
    settings, which choose the index)."""
    return list(_published_versions(tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("PIP_"))), dist))


def listed_or_none(dist: str) -> list[Version] | None:
    """The releases of `dist` on the index, or None when it cannot be listed
    now (a companion's pin then moves as the flashinfer pin does)."""
    try:
        return published_versions(dist)
    except IndexUnlisted:
        return None


def final_releases() -> list[Version]:
    """The published releases that are not pre-releases, oldest first: what
    a search for a first safe release walks, and where it ends."""
    return [v for v in published_versions() if not v.is_prerelease]


@functools.lru_cache(maxsize=8)
def _published_versions(_pip_settings: tuple[tuple[str, str], ...], dist: str = DIST) -> tuple[Version, ...]:
    cmd = [sys.executable, "-m", "pip", "index", "versions", dist, "--disable-pip-version-check"]
    try:
        proc = run_pip(cmd, f"cannot list {dist} releases")
    except InputError as exc:  # pip's time ran out
        raise IndexUnlisted(exc.message) from None
    m = re.search(r"Available versions:\s*(.+)", proc.stdout)
    if proc.returncode != 0 or not m:
        raise IndexUnlisted(f"cannot list {dist} releases: {pip_reason(proc)}")
    versions = []
    for text in m.group(1).split(","):
        try:
            versions.append(Version(text.strip()))
        except InvalidVersion:
            continue
    return tuple(sorted(versions))


def pinned_releases(spec: str, progress: Callable[[str], None] = lambda _message: None) -> tuple[list[str], list[str]]:
    """The lowest and highest published releases a pin admits, plus the installed
    release if the pin admits it. Returns (labels, notes)."""
    specifier = parse_pin(spec)
    exact = exact_release(spec)
    if exact is not None:
        # An exact pin names its one release: nothing to list (a release that
        # does not exist is said when it is fetched).
        admitted = [Version(exact)]
    else:
        progress("listing published flashinfer releases")
        admitted = [v for v in published_versions() if specifier.contains(v)]
    if not admitted:
        raise InputError(f"pin {spec!r}: no published flashinfer-python release satisfies it")
    labels = list(dict.fromkeys([str(admitted[0]), str(admitted[-1])]))
    if len(admitted) == 1:
        notes = [f"pin {spec} admits one release: {labels[0]}"]
    else:
        notes = [f"pin {spec} admits {len(admitted)} releases; probing the lowest and highest: {', '.join(labels)}"]
    installed = distribution_version("flashinfer-python")
    if exact is not None and not _is(installed, exact):
        _fetchable(spec, exact)
    if installed:
        try:
            if specifier.contains(Version(installed), prereleases=True):
                # The installed release is probed here, in this process: when the
                # pin's ends include it, it is not fetched and probed a second time.
                labels = [label for label in labels if Version(label) != Version(installed)] + [INSTALLED]
            else:
                notes.append(
                    f"the installed flashinfer {installed} does not satisfy the pin {spec}: this environment does not "
                    "match the repo's pin"
                )
        except InvalidVersion:
            pass
    return labels, notes


def _is(installed: str | None, version: str) -> bool:
    try:
        return installed is not None and Version(installed) == Version(version)
    except InvalidVersion:
        return False


def _fetchable(spec: str, version: str) -> None:
    """Fetch the one release an exact pin names (into the cache, where its
    probe finds it), or raise PinUnserved saying why and which published
    releases are nearest."""
    if kept_without_wheel(version) is not None:
        return  # answered before from the cache's tree: its wheel is fetched only for a new question
    try:
        # As any release number is had: read by ranges from the index (whole only
        # where ranges are refused or HPROBE_WHOLE_WHEELS asks), kept for the probe.
        resolve(version)
    except InputError as exc:
        raise PinUnserved(
            f"flashinfer {version}, the pin {spec}, cannot be fetched: {exc.message}{_nearest(version)}"
        ) from None


def _nearest(version: str) -> str:
    """ "; nearest published: A, B — ..." or "" when the index cannot be listed."""
    try:
        published = final_releases()
    except IndexUnlisted:
        return ""
    target = Version(version)
    below = [v for v in published if v < target][-1:]
    above = [v for v in published if v > target][:1]
    near = [str(v) for v in (*below, *above)]
    if not near:
        return ""
    return f"; nearest published: {', '.join(near)} (--flashinfer one of them, or a wheel or directory of {version})"


def parse_release_range(text: str | None, option: str = "--range") -> tuple[Version | None, Version | None]:
    """`LO..HI` (either end may be left out): the two release numbers, or None for an open end."""
    if not text:
        return None, None
    lo_text, sep, hi_text = text.partition("..")
    if not sep:
        raise InputError(f"{option} {text!r}: expected LO..HI, e.g. 0.6.10..0.6.16")
    try:
        lo = Version(lo_text) if lo_text.strip() else None
        hi = Version(hi_text) if hi_text.strip() else None
    except InvalidVersion:
        raise InputError(f"{option} {text!r}: not release numbers") from None
    if lo and hi and lo > hi:
        raise InputError(f"{option} {text!r}: runs backwards")
    return lo, hi


def release_labels(spec: str, progress: Progress = quiet) -> list[str]:
    """`LO..HI`: every published release in the range, oldest first; otherwise a
    comma list of releases, wheels or directories as given."""
    if ".." not in spec:
        return parse_spec(spec)
    lo, hi = parse_release_range(spec, "--releases")
    progress("listing published flashinfer releases")
    versions = [str(v) for v in published_versions() if (lo is None or v >= lo) and (hi is None or v <= hi)]
    if not versions:
        raise InputError(f"--releases {spec}: no published flashinfer-python release in it")
    return versions
