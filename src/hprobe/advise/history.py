"""When something became true across published releases: the binary search that
`hprobe bisect` and `hprobe suggest`'s pin advice share.

A state is True (holds), False (does not) or None (inconclusive: the release
could not answer). The search assumes a monotonic history, which it cannot
prove; every state it saw is returned, so callers report the regressions it
happened to see instead of hiding them."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Generic, TypeVar

V = TypeVar("V")


@dataclass(frozen=True)
class FirstTrue(Generic[V]):
    first: V | None  # the earliest release from which every one seen holds (None: the newest seen does not)
    last_false: V | None  # the newest release seen that does not hold, just before `first` (None: holds from the start)
    adjacent: bool  # no unprobed release lies between last_false and first: the boundary is exact
    seen: tuple[tuple[V, bool | None], ...]  # every state probed, oldest first
    regressions: tuple[tuple[V, V], ...]  # (held in, then not in a later one)


def first_true(
    versions: Sequence[V],
    state: Callable[[V], bool | None],
    exhaustive: bool = False,
    parallel: int = 1,
    prepare: Callable[[list[V]], None] | None = None,
    answered: Callable[[V], bool] | None = None,
) -> FirstTrue[V]:
    """The first of `versions` (oldest first) from which `state` holds. `state`
    is called at most about log2(len) + (inconclusive neighbours) times, once
    per release; with `exhaustive`, once for each.

    With `parallel` k > 1 and `prepare` (which readies the states of a batch of
    releases at once, so that `state` then answers from what it kept), each
    round asks k releases together, splitting the range into k + 1 parts: the
    same answer in log_(k+1) rounds instead of log_2, for about (k / log2(k+1))
    times the releases. `answered` says which releases `state` answers from
    what it already holds: a round asks k releases besides those."""
    memo: dict[int, bool | None] = {}

    def at(i: int) -> bool | None:
        if i not in memo:
            memo[i] = state(versions[i])
        return memo[i]

    k = max(1, parallel) if prepare is not None else 1

    def ready(indices: list[int]) -> None:
        todo = [i for i in dict.fromkeys(indices) if i not in memo]
        if prepare is not None and k > 1 and len(todo) > 1:
            prepare([versions[i] for i in todo])

    def conclusive_near(i: int, lo: int, hi: int) -> int | None:
        """The nearest index in (lo, hi) to i whose state is conclusive."""
        for step in range(0, hi - lo):
            for j in (i + step, i - step):
                if lo < j < hi and at(j) is not None:
                    return j
        return None

    asked = functools.partial(_asked, memo, versions, answered)
    if versions and exhaustive:
        for start in range(0, len(versions), k):
            ready(list(range(start, min(start + k, len(versions)))))
        for i in range(len(versions)):
            at(i)
    elif versions:
        found = _flip_range(versions, memo, at, ready, answered)
        if found is not None:
            _narrow(*found, k, at, ready, conclusive_near, asked)
        # Every release answered already (the check's own, another count's) is
        # weighed too: they cost nothing, and "holds from X" must hold on each
        # of them from X on, not only on those the search happened to ask.
        for i in _answered_indices(versions, answered, memo):
            at(i)
    seen = sorted(memo.items())
    conclusive = [(i, s) for i, s in seen if s is not None]
    regressions = tuple(
        (versions[a], versions[b])
        for m, (a, sa) in enumerate(conclusive)
        for b, sb in conclusive[m + 1 :]
        if sa and not sb
    )
    first, last_false = _last_flip(conclusive)
    adjacent = first is not None and last_false is not None and first - last_false == 1
    return FirstTrue(
        first=versions[first] if first is not None else None,
        last_false=versions[last_false] if last_false is not None else None,
        adjacent=adjacent,
        seen=tuple((versions[i], s) for i, s in seen),
        regressions=regressions,
    )


def _asked(memo: dict[int, bool | None], versions: Sequence[V], answered: Callable[[V], bool] | None, i: int) -> bool:
    return i in memo or (answered is not None and answered(versions[i]))


def _flip_range(
    versions: Sequence[V],
    memo: dict[int, bool | None],
    at: Callable[[int], bool | None],
    ready: Callable[[list[int]], None],
    answered: Callable[[V], bool] | None,
) -> tuple[int, int] | None:
    """The range the flip is searched in, after asking both ends (None: no
    flip to search: the newest does not hold, or nothing says it ever failed).
    Where the newest is undecided (its answers wait on what is not at hand),
    the newest release answered already that holds bounds the range above, so
    the flip below it is still found, and nothing is said above it."""
    ready([0, len(versions) - 1])
    oldest, newest = at(0), at(len(versions) - 1)  # both asked: both ends bound the answer
    hi = len(versions) - 1
    if newest is None:
        for i in _answered_indices(versions, answered, memo):
            at(i)
        held = [i for i, s in memo.items() if s is True]
        if not held:
            return None
        hi = max(held)
        if any(s is False for i, s in memo.items() if i > hi):
            return None  # refused after it: a regression, reported from what was seen
    elif newest is not True:
        return None
    if oldest is not True:
        return 0, hi
    # Held at both ends: where a release answered already (free) does not
    # hold between them, the history regressed and recovered, and the
    # recovery is searched from the last such refusal on.
    for i in _answered_indices(versions, answered, memo):
        at(i)
    lo = max((i for i, s in memo.items() if s is False and i < hi), default=None)
    return (lo, hi) if lo is not None else None


def _answered_indices(
    versions: Sequence[V], answered: Callable[[V], bool] | None, memo: dict[int, bool | None]
) -> list[int]:
    return [] if answered is None else [i for i, v in enumerate(versions) if i not in memo and answered(v)]


def _round(lo: int, hi: int, k: int, asked: Callable[[int], bool]) -> list[int]:
    """The points of one round in (lo, hi): the range split evenly in k + 1
    parts. A round that probes some of them while others were asked already
    (a release the check probed comes free) splits the widest gaps again
    until k points are new: no core idles in a round that waits anyway. A
    round asking nothing new stays free (the searches of a suggestion's
    other counts mostly land on releases probed for the first)."""
    points = {lo + (hi - lo) * j // (k + 1) for j in range(1, k + 1)} - {lo, hi}
    while 0 < sum(not asked(p) for p in points) < k and len(points) < hi - lo - 1:
        edges = sorted(points | {lo, hi})
        a, b = max(pairwise(edges), key=lambda gap: gap[1] - gap[0])
        points.add((a + b) // 2)
    return sorted(points)


def _narrow(
    lo: int,
    hi: int,
    k: int,
    at: Callable[[int], bool | None],
    ready: Callable[[list[int]], None],
    conclusive_near: Callable[[int, int, int], int | None],
    asked: Callable[[int], bool],
) -> None:
    """Close in on the flip between `lo` (does not hold, or unknown) and `hi`
    (holds): k releases a round where k > 1, else the middle one. A round
    whose new releases all lie where releases answered already (the check's,
    an earlier count's or backend's) rule the flip out is not probed: the
    range closes on those answers instead."""
    while hi - lo > 1:
        in_rounds = k > 1 and hi - lo > 2
        points = _round(lo, hi, k, asked) if in_rounds else [(lo + hi) // 2]
        known = _bounds([(p, at(p)) for p in range(lo + 1, hi) if asked(p)], lo, hi)
        if known != (lo, hi) and not any(known[0] < p < known[1] for p in points if not asked(p)):
            lo, hi = known
            continue
        if in_rounds:
            ready(points)
            states = [(p, at(p)) for p in points]
            if any(s is not None for _, s in states):
                lo, hi = _bounds(states, lo, hi)
                continue
        mid = conclusive_near((lo + hi) // 2, lo, hi)
        if mid is None:
            return
        if at(mid):
            hi = mid
        else:
            lo = mid


def _bounds(states: Sequence[tuple[int, bool | None]], lo: int, hi: int) -> tuple[int, int]:
    """The range left by `states` (ascending): the first that holds bounds it
    above; the last before that which does not, below (a later one that does
    not is a regression, reported from what was seen)."""
    hi = next((p for p, s in states if s is True), hi)
    return max((p for p, s in states if s is False and p < hi), default=lo), hi


def _last_flip(conclusive: Sequence[tuple[int, bool | None]]) -> tuple[int | None, int | None]:
    """(the index from which the state last turned true, the index just before
    it that was false; None where it held from the start or never held)."""
    first = last_false = None
    for k, (i, s) in enumerate(conclusive):
        if s and (k == 0 or not conclusive[k - 1][1]):
            first = i
            last_false = conclusive[k - 1][0] if k > 0 else None
        elif not s:
            # Refused again after holding: it does not hold from any release
            # before this one (the regression is reported beside).
            first, last_false = None, i
    return first, last_false
