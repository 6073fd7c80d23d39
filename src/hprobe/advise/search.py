"""The first safe release: for each suggested rule, the pin it needs, searched
over published releases (probed or answered from the cache) from the floor of
the question (the pin's, else the release judged), or from where the kernel's
entry point first exists (`--since first`)."""

from __future__ import annotations

import functools
import zipfile
from collections.abc import Callable
from dataclasses import replace

from packaging.version import InvalidVersion, Version

from hprobe.advise.suggest import BackendSuggestion
from hprobe.kernels import get_variant
from hprobe.model.call import CallForm, bound_to
from hprobe.model.errors import IndexUnlisted, InputError
from hprobe.model.outcome import KernelSMResult, Outcome
from hprobe.model.padding import PaddingTable
from hprobe.model.release import ProbedRelease, Progress, quiet
from hprobe.system.progress import Statement


def search_pins(
    tables: list[PaddingTable],
    releases: list[ProbedRelease],
    suggestions: list[BackendSuggestion],
    pin: str | None,
    use_cache: bool = True,
    progress: Progress = quiet,
    start: Version | str | None = None,
) -> tuple[list[BackendSuggestion], list[Version], list[str], bool, HoldsAt]:
    """The suggestions with their pin advice: per count of its suggested rule (and
    per count unpadded), the first published release from which every SM of
    the backend accepts it on the fast path. The search starts at what the
    question needs: the pin's floor, else the oldest release the check judged
    (never below where the kernel's entry point first exists); at `start`
    (--since RELEASE), or where the entry point first exists (--since first,
    SINCE_FIRST), so that "safe from X" is then the first safe release of
    all. A release is probed once for all counts and backends; releases the
    check probed are not probed again. Returns the suggestions (new
    objects where a pin was searched), the published releases, notes on
    releases that answered nothing, whether the index could be listed
    (False: no pin was searched), and whether a suggestion's counts are safe
    at a release (asked of the release a patch would pin: a release the
    search stepped past may be undecided for another path)."""
    from hprobe.advise.pins import advise
    from hprobe.model.pins import parse_pin
    from hprobe.support.gather import alongside, search_width
    from hprobe.support.published import final_releases

    pins = {t.name: pin or t.requires_flashinfer for t in tables}
    stranded = [s for s in suggestions if s.suggested is None and s.unsafe and not s.inconclusive]
    todo = [s for s in suggestions if s.suggested is not None and not s.inconclusive]
    if not todo and not stranded:
        return suggestions, [], [], True, _unknown
    progress("listing published flashinfer releases")
    try:
        published = final_releases()
    except IndexUnlisted as exc:
        # The index cannot be listed now (the network, pip's index-url): no
        # pin is searched, so no rule is adopted without the floor it needs,
        # and the run is inconclusive with pip's reason, never an input error.
        why = f"not searched: {exc.message}"
        unsearched = {id(s) for s in todo + stranded}
        return (
            [replace(s, pin_note=why) if id(s) in unsearched else s for s in suggestions],
            [],
            [f"pin search: {exc.message}"],
            False,
            _unknown,
        )
    prober = _Prober(releases, use_cache, progress)
    # Said before the search starts (it may fetch tens of releases): how many
    # it may ask and how many of those are not in the cache yet.
    from hprobe.support.trees import fetched_versions

    have = fetched_versions()  # a wheel, or a tree kept once its wheel was removed
    # Where each search begins (before the entry point's own first release
    # bounds it): the releases below the lowest of them are never read.
    asked = [Version(r.info.version) for r in releases if _is_version(r.info.version)]
    floors = {id(s): _question_floor(start, pins.get(s.table), published, asked) for s in todo + stranded}
    lowest = [f for f, _ in floors.values()]
    scope = [v for v in published if None in lowest or v >= min(f for f in lowest if f is not None)]
    missing = sum(1 for v in scope if v not in have and str(v) not in prober.known)
    from hprobe.support.remote_wheel import whole_wheels

    # 0.6.14 read 2.2 MiB and 0.7.4 8.3 MiB of their wheels by range requests in a cold check here.
    each = "each 7 to 35 MiB into the cache" if whole_wheels() else "each about 2 to 9 MiB read from the index"
    progress(
        Statement(
            f"pin search over flashinfer {scope[0]}..{scope[-1]} ({len(scope)} releases): a binary search "
            f"asks some of them; {missing} not fetched yet ({each}, once)"
            if scope
            else "pin search: no published release"
        )
    )
    newest_probed = max((Version(v) for v in prober.known if _is_version(v)), default=None)
    width = search_width()
    ahead = [v for v in published if newest_probed is None or v > newest_probed]
    # Where each kernel's entry point first exists is read from wheels, which
    # waits on the index more than on the cores: read while the route-ahead
    # search probes.
    entries = (
        []
        if isinstance(start, Version)
        else list(dict.fromkeys(get_variant(s.backend.variant_key).probe.entry_point for s in todo + stranded))
    )
    with alongside(lambda: [entry_since(entry, scope, progress, width) for entry in entries]) as since:
        todo.extend(_routed_ahead(stranded, ahead, {t.name: t for t in tables}, prober, width))
        firsts = dict(zip(entries, since.result(), strict=True))
    searches = []
    searched: dict[int, BackendSuggestion] = {}
    for s in todo:
        entry_first = (
            None if isinstance(start, Version) else firsts[get_variant(s.backend.variant_key).probe.entry_point]
        )
        floor = floors.get(id(s)) or _question_floor(start, pins.get(s.table), published, asked)
        first, started = _search_start(floor, entry_first)
        versions = [v for v in published if first is None or v >= first]
        if versions:
            searches.append((s, versions, started))
        else:
            searched[id(s)] = replace(s, pin_note="no published release to search")
    # Every search asks its two ends first when it asks more than one release
    # a round: one round for all of them, not one per backend.
    ends = [
        v
        for v in dict.fromkeys(v for _, versions, _ in searches for v in (versions[0], versions[-1]))
        if not prober.answered(v)
    ]
    for at in range(0, len(ends) if width > 1 else 0, width):
        prober.prepare(ends[at : at + width])
    for s, versions, started in searches:
        current = pins.get(s.table)
        specifier = parse_pin(current) if current else None
        admitted = [str(v) for v in published if specifier is None or specifier.contains(v)]
        safe_at = functools.partial(_safe_at, prober, s.backend.variant_key, calls=s.backend.calls)
        advice = advise(
            s.sms,
            s.rule_counts(),
            s.per_rank(),
            versions,
            str(specifier) if specifier is not None else None,
            safe_at,
            admitted,
            started,
            width,
            prober.prepare,
            prober.answered,
        )
        seen = {v for pin in (*advice.rule_counts.values(), *advice.no_padding.values()) for v, _ in pin.found.seen}
        for release in seen | {v for v in (advice.needs, advice.no_padding_needs) if v is not None}:
            caveat = _validators_only(prober, s.backend.variant_key, release, s.sms)
            if caveat is not None:
                advice.shallow[str(release)] = caveat
        searched[id(s)] = replace(s, pins=advice)
    notes = [f"pin search: flashinfer {v} answered nothing: {why}" for v, why in prober.unreachable.items()]

    def holds(s: BackendSuggestion, counts: frozenset[int], v: Version) -> bool | None:
        states = [_safe_at(prober, s.backend.variant_key, v, s.sms, c, calls=s.backend.calls) for c in sorted(counts)]
        return False if False in states else None if None in states else True

    return [searched.get(id(s), s) for s in suggestions], published, notes, True, holds


# Whether every count of a suggestion is safe at a release (None: not known there).
HoldsAt = Callable[[BackendSuggestion, frozenset[int], Version], "bool | None"]


def _unknown(_s: BackendSuggestion, _counts: frozenset[int], _v: Version) -> bool | None:
    return None


class _Prober:
    """The releases a search asks, each probed once for every kernel the
    suggestions name, on the SMs and counts the check probed (the same cache
    keys, so a warm run probes nothing); the check's own releases are not
    probed again."""

    def __init__(self, releases: list[ProbedRelease], use_cache: bool, progress: Progress):
        self.needed: dict[str, list[int]] = {}
        self.heads: list[int] = []
        for rel in releases:
            for (key, sm), result in rel.results.items():
                self.needed[key] = sorted(set(self.needed.get(key, [])) | {sm})
                self.heads = self.heads or sorted(result.heads)
        self.known: dict[str, ProbedRelease] = {rel.info.version: rel for rel in releases}
        self.unreachable: dict[str, str] = {}
        self.use_cache, self.progress = use_cache, progress

    def release(self, v: Version) -> ProbedRelease | None:
        """None: the release cannot be fetched or unpacked here, so it answers
        nothing (the search steps around it, as around any inconclusive one)."""
        from hprobe.support.gather import probe_named

        if not self.answered(v):
            try:
                self.known[str(v)] = probe_named(str(v), self.needed, self.heads, self.use_cache, self.progress)
            except InputError as exc:
                self.unreachable[str(v)] = exc.message
        return self.known.get(str(v))

    def prepare(self, batch: list[Version]) -> None:
        """Probe a round of the search at once: one release per core."""
        from hprobe.support.gather import each_at_once

        each_at_once([str(v) for v in batch], self._probe)

    def _probe(self, version: str) -> None:
        self.release(Version(version))

    def answered(self, v: Version) -> bool:
        return str(v) in self.known or str(v) in self.unreachable


def _safe_at(
    prober: _Prober, key: str, v: Version, sms: tuple[int, ...], count: int, *, calls: tuple[CallForm, ...] = ()
) -> bool | None:
    """Whether every SM of `sms` serves `count` heads on kernel `key` at `v`,
    called as `calls` (the engine's own calls) call it (None: some SM could
    not answer, and none refused)."""
    states: list[bool | None] = []
    for result in _results_at(prober, key, v, sms, calls):
        hr = result.heads.get(count) if result is not None else None
        # A count whose compiled selection is pending is neither safe nor
        # refused there: no floor rests on it.
        if hr is None or hr.outcome is Outcome.INCONCLUSIVE or hr.pending is not None:
            states.append(None)
        else:
            states.append(hr.serves)
    if False in states:
        return False
    return None if None in states else True


def _validators_only(prober: _Prober, key: str, v: Version, sms: tuple[int, ...]) -> str | None:
    """What the compiled code at `v` checks that the answers there did not see
    (the first such caveat), where the kernel's answers rest on its validators
    only; None where they reached as deep as the kernel checks."""
    for result in _results_at(prober, key, v, sms):
        if result is not None and result.unchecked:
            return result.unchecked[0]
    return None


def _results_at(
    prober: _Prober, key: str, v: Version, sms: tuple[int, ...], calls: tuple[CallForm, ...] = ()
) -> list[KernelSMResult | None]:
    """Kernel `key`'s result at `v` on each SM as `calls` meet it (None: that
    release or SM answered nothing)."""
    probed = prober.release(v)
    found = [probed.results.get((key, sm)) if probed is not None else None for sm in sms]
    return [bound_to(calls, r) if r is not None else None for r in found]


def _routed_ahead(
    stranded: list[BackendSuggestion],
    ahead: list[Version],
    tables: dict[str, PaddingTable],
    prober: _Prober,
    width: int,
) -> list[BackendSuggestion]:
    """The suggestions no release probed can serve (an SM with no route
    there), each now resting on the release after them that brings one. Each
    round of the search probes `width` releases at once, as the pin search does."""
    from hprobe.advise.suggest import route_ahead

    routed = []
    for s in stranded:
        key = s.backend.variant_key

        def results_at(
            v: Version, key: str = key, sms: tuple[int, ...] = s.sms, calls: tuple[CallForm, ...] = s.backend.calls
        ) -> dict[int, KernelSMResult] | None:
            probed = prober.release(v)
            return (
                None
                if probed is None
                else {sm: bound_to(calls, probed.results[(key, sm)]) for sm in sms if (key, sm) in probed.results}
            )

        if ahead and route_ahead(s, tables[s.table], ahead, results_at, width, prober.prepare, prober.answered):
            routed.append(s)
    return routed


def _question_floor(
    start: Version | str | None, pin: str | None, published: list[Version], asked: list[Version]
) -> tuple[Version | None, str]:
    """Where one search would begin, and why in words, before the entry
    point's first release bounds it: --since's release; none for --since
    first; else the release just below the floor of the question (the pin's
    lowest published release, or the oldest release judged), so that a count
    refused there and accepted at the floor has its first safe release shown."""
    from hprobe.advise.pins import ENTRY_START
    from hprobe.model.pins import SINCE_FIRST, parse_pin

    if isinstance(start, Version):
        return start, f"--since {start}"
    if start == SINCE_FIRST:
        return None, ENTRY_START
    specifier = parse_pin(pin) if pin else None
    admitted = [v for v in published if specifier is not None and specifier.contains(v)]
    if admitted:
        floor, said = admitted[0], f"your pin's floor ({pin})"
    elif asked:
        floor, said = min(asked), f"the release judged ({min(asked)})"
    else:
        return None, ENTRY_START
    below = [v for v in published if v < floor]
    return (below[-1], f"the release below {said}") if below else (floor, said)


def _search_start(floor: tuple[Version | None, str], entry_first: Version | None) -> tuple[Version | None, str]:
    """The search's first release: the question's floor, unless the kernel's
    entry point first exists later (read over the releases from the lowest
    floor: where it exists at the floor, whether it does below is not asked)."""
    from hprobe.advise.pins import ENTRY_START

    start, said = floor
    if start is None or (entry_first is not None and start < entry_first):
        return entry_first, ENTRY_START
    return start, said


def _is_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


_ENTRY_SINCE: dict[tuple[str, str], Version | None] = {}


def entry_since(entry: str, published: list[Version], progress: Progress = quiet, width: int = 1) -> Version | None:
    """The first published release whose source defines `entry` (None: none
    does, or none could be read): where a search for "safe since" starts.
    Found by a binary search over wheels read with `ast`, never imported; it
    only bounds the search, and every release searched is then probed."""
    from hprobe.advise.history import first_true
    from hprobe.support.gather import each_at_once
    from hprobe.support.presence import entry_point_in_kept_tree
    from hprobe.support.trees import kept_without_wheel

    answered: dict[str, bool] = {}  # read while a round was fetched

    # Per scope: a search from a pin's floor reads only the releases from there.
    key = (entry, str(published[0]) if published else "")
    if key not in _ENTRY_SINCE:

        def present(v: Version) -> bool | None:
            progress(f"reading flashinfer {v} for {entry.rsplit('.', 1)[-1]}")
            kept = kept_without_wheel(str(v))
            found = entry_point_in_kept_tree(entry, kept) if kept is not None else None
            if found is not None:
                return found  # read from the tree kept after its wheel was removed: nothing fetched
            return answered[str(v)] if str(v) in answered else _entry_in_release(entry, str(v))

        def fetch(batch: list[Version]) -> None:
            """A round's releases read at once (the network's wait, not the
            cores': more than one per core)."""

            def one(v: str) -> None:
                if kept_without_wheel(v) is not None:
                    return  # read from its kept tree, or fetched then if that cannot answer
                found = _entry_in_release(entry, v)
                if found is not None:
                    answered[v] = found

            each_at_once([str(v) for v in batch], one)

        # Fetching waits on the index, so a round asks more releases than there are cores.
        _ENTRY_SINCE[key] = first_true(published, present, parallel=max(width, 4), prepare=fetch).first
    return _ENTRY_SINCE[key]


def _entry_in_release(entry: str, version: str) -> bool | None:
    """Whether release `version` defines `entry`; None where it cannot be read
    here (not fetchable, not readable: the search steps around it). Read by
    range requests, the modules the question opens come from the index with
    no tree made (a tree writes a placeholder for each of ~15,000 members),
    or from the release's tree where the index cannot be read so; the whole
    wheel is downloaded only on the whole-wheel route."""
    from hprobe.support.presence import entry_point_in_index, entry_point_in_wheel, entry_point_present
    from hprobe.support.remote_wheel import whole_wheels
    from hprobe.support.slim import TreeUnreadable
    from hprobe.support.trees import fetch_wheel, resolve, slim_trees

    try:
        if not slim_trees() or whole_wheels():
            return entry_point_in_wheel(entry, fetch_wheel(version))
        try:
            found = entry_point_in_index(entry, version)
        except (OSError, ValueError, zipfile.BadZipFile, EOFError):
            found = None  # a request or a member that failed: the tree is read instead
        if found is not None:
            return found
        return entry_point_present(entry, str(resolve(version).tree / "flashinfer"))
    except (InputError, OSError, zipfile.BadZipFile, TreeUnreadable):
        return None
