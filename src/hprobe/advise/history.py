"""When something became true across published releases: the binary search that
`hprobe bisect` and `hprobe suggest`'s pin advice share.

A state is True (holds), False (does not) or None (inconclusive: the release
could not answer). The search assumes a monotonic history, which it cannot
prove; every state it saw is returned, so callers report the regressions it
happened to see instead of hiding them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

V = TypeVar("V")


@dataclass(frozen=True)
class FirstTrue(Generic[V]):
    first: V | None  # the earliest release seen holding, after one that does not (or at the start)
    last_false: V | None  # the release just before it that does not hold (None: holds from the start)
    adjacent: bool  # no unprobed release lies between last_false and first: the boundary is exact
    seen: tuple[tuple[V, bool | None], ...]  # every state probed, oldest first
    regressions: tuple[tuple[V, V], ...]  # (held in, then not in a later one)


def first_true(versions: Sequence[V], state: Callable[[V], bool | None], exhaustive: bool = False) -> FirstTrue[V]:
    """The first of `versions` (oldest first) from which `state` holds. `state`
    is called at most about log2(len) + (inconclusive neighbours) times, once
    per release; with `exhaustive`, once for each."""
    memo: dict[int, bool | None] = {}

    def at(i: int) -> bool | None:
        if i not in memo:
            memo[i] = state(versions[i])
        return memo[i]

    def conclusive_near(i: int, lo: int, hi: int) -> int | None:
        """The nearest index in (lo, hi) to i whose state is conclusive."""
        for step in range(0, hi - lo):
            for j in (i + step, i - step):
                if lo < j < hi and at(j) is not None:
                    return j
        return None

    if versions and exhaustive:
        for i in range(len(versions)):
            at(i)
    elif versions and at(0) is not True and at(len(versions) - 1) is True:
        lo, hi = 0, len(versions) - 1  # invariant: lo does not hold (or is unknown), hi holds
        while hi - lo > 1:
            mid = conclusive_near((lo + hi) // 2, lo, hi)
            if mid is None:
                break
            if at(mid):
                hi = mid
            else:
                lo = mid
    seen = sorted(memo.items())
    conclusive = [(i, s) for i, s in seen if s is not None]
    regressions = tuple(
        (versions[a], versions[b]) for k, (a, sa) in enumerate(conclusive) for b, sb in conclusive[k + 1 :] if sa and not sb
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


def _last_flip(conclusive: Sequence[tuple[int, bool | None]]) -> tuple[int | None, int | None]:
    """(the index from which the state last turned true, the index just before
    it that was false; None where it held from the start or never held)."""
    first = last_false = None
    for k, (i, s) in enumerate(conclusive):
        if s and (k == 0 or not conclusive[k - 1][1]):
            first = i
            last_false = conclusive[k - 1][0] if k > 0 else None
    return first, last_false
