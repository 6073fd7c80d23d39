"""`hprobe cache`: what the cache holds per release, and pruning or clearing it."""

from __future__ import annotations

import math

from hprobe.model.errors import InputError
from hprobe.report.cache import CacheReport
from hprobe.support.cache_usage import HPROBE_ENTRIES, SHARED, Entry, Usage, empty_of_ours, remove, select, usage


def show_cache() -> CacheReport:
    return CacheReport(usage())


def prune_cache(releases: list[str] | None, older_than_days: float | None, keep: str | None) -> CacheReport:
    if releases is None and older_than_days is None and keep is None:
        raise InputError(
            "cache prune: name what to remove: --release, --older-than or --keep (or `hprobe cache clear`)"
        )
    if older_than_days is not None and not (math.isfinite(older_than_days) and older_than_days >= 0):
        raise InputError(f"--older-than {older_than_days!r}: expected a number of days, 0 or more")
    before = usage()
    kept = _kept(keep, before) if keep is not None else None
    chosen = select(before, releases, older_than_days, kept)
    in_use = remove(chosen)
    after = usage()
    # What the disk gave back, as du counts it: an entry that could not be
    # removed (a read-only cache) or a user's file left in a shared folder frees nothing.
    removed, left = _counted(chosen, in_use)
    return CacheReport(after, removed, max(0, before.total - after.total), "prune", len(in_use), left)


def clear_cache() -> CacheReport:
    """Everything hprobe wrote in the cache's directory, and the folders that
    held it once empty; nothing else there (the directory may be shared: a
    `results/` of the user's own keeps their files, a link is left as it is)."""
    before = usage()
    tops = [p for p in before.root.iterdir() if p.name in HPROBE_ENTRIES] if before.root.is_dir() else []
    # Trees a running hprobe probes from, and their wheels, stay (prune's rule); the rest goes.
    in_use = remove([e for e in before.entries if e.kind in ("tree", "wheel")])
    kept = {e.path for e in in_use}
    for top in tops:
        empty_of_ours(top, keep=kept)
    after = usage()
    removed, left = _counted([e for e in before.entries if e.kind != "other"], in_use)
    return CacheReport(after, removed, max(0, before.total - after.total), "clear", len(in_use), left)


def _counted(chosen: list[Entry], in_use: list[Entry]) -> tuple[int, int]:
    """Of the entries chosen and not in use, those gone and those still there
    (a read-only cache, a folder that keeps a user's file): a count said is
    what the disk shows, never what was asked."""
    held = {e.path for e in in_use}
    tried = [e for e in chosen if e.path not in held]
    # A shared folder keeps what is not hprobe's (a user's file): its own went.
    left = sum(1 for e in tried if not e.folder and (e.path.exists() or e.path.is_symlink()))
    return len(tried) - left, left


def _kept(keep: str, found: Usage) -> list[str]:
    """--keep: releases (a comma list) or a pin (`>=0.6.13,<0.7`, `==0.7.2`):
    the cached releases it admits are kept."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    text = keep.strip().removeprefix("flashinfer-python").strip()
    if not text:
        raise InputError(f"--keep {keep!r}: name the releases to keep, or a pin such as '>=0.6.14'")
    if text[:1] in "<>=!~":
        try:
            spec = SpecifierSet(text)
        except InvalidSpecifier:
            raise InputError(f"--keep {keep!r}: not a version specifier") from None
        admitted = []
        for release in found.by_release():
            if release == SHARED:
                continue
            try:
                if Version(release) in spec:
                    admitted.append(release)
            except InvalidVersion:
                continue
        return admitted
    named = [r.strip() for r in text.split(",")]
    cached = set(found.by_release()) - {SHARED}
    for release in named:
        try:
            canonical = str(Version(release))
        except InvalidVersion:
            raise InputError(
                f"--keep {keep!r}: {release!r} is neither a flashinfer release nor a version specifier"
            ) from None
        if canonical != release:
            raise InputError(f"--keep {keep!r}: write the release as {canonical}")
        if release not in cached:
            held = ", ".join(sorted(cached)) or "none"
            raise InputError(f"--keep {keep!r}: the cache holds no flashinfer {release} (it holds: {held})")
    return named
