"""first_true (advise/history.py): the first release from which a count is
accepted, asking as few releases as a bisection does, and never a later one
than the answers seen show."""

from __future__ import annotations

import pytest

from hprobe.advise.history import first_true

pytestmark = pytest.mark.pure

# Accepted at 0 (an old kernel took it), refused at 1..5, accepted again from 6.
REGRESSED = [True, False, False, False, False, False, True, True, True, True]


def _asking(states):
    asked: list[int] = []

    def state(i: int) -> bool | None:
        asked.append(i)
        return states[i]

    return asked, state


def test_a_recovery_after_a_regression_is_searched_from_the_last_refusal_seen():
    """Held at both ends, refused at releases answered already (the check's
    own): the release it is safe from again is the first of the recovery, found
    by bisecting after the last refusal, not the newest end."""
    asked, state = _asking(REGRESSED)
    found = first_true(list(range(10)), state, answered=lambda i: i in (2, 3))
    assert (found.first, found.last_false, found.adjacent) == (6, 5, True)
    assert (0, 2) in found.regressions
    assert len(set(asked)) <= 7  # both ends, the two free answers, and a bisection of 4..9


def test_without_a_refusal_seen_a_range_held_at_both_ends_holds_from_the_first():
    asked, state = _asking(REGRESSED)
    found = first_true(list(range(10)), state)
    assert found.first == 0 and found.last_false is None
    assert sorted(set(asked)) == [0, 9]  # nothing said there was a refusal between: two asks


def test_a_plain_flip_is_bisected_to_the_adjacent_pair():
    states = [False] * 4 + [True] * 6
    asked, state = _asking(states)
    found = first_true(list(range(10)), state)
    assert (found.first, found.last_false, found.adjacent) == (4, 3, True)
    assert len(set(asked)) <= 6


def test_inconclusive_releases_between_leave_the_answer_inexact():
    states: list[bool | None] = [False, None, None, None, True]
    _, state = _asking(states)
    found = first_true(list(range(5)), state)
    assert (found.first, found.last_false, found.adjacent) == (4, 0, False)


def test_an_undecided_newest_release_still_finds_the_flip_below_the_newest_that_holds():
    """The newest releases answer nothing decided (their trtllm-gen answers wait
    on a kernel table not at hand): the newest release answered already that
    holds bounds the search, and the first release it holds from is found
    exactly, not taken as that answered release."""
    states = {v: (None if v >= 6 else v >= 3) for v in range(10)}
    asked: list[int] = []

    def state(v: int) -> bool | None:
        asked.append(v)
        return states[v]

    found = first_true(list(range(10)), state, answered=lambda v: v == 5)
    assert (found.first, found.last_false, found.adjacent) == (3, 2, True)
    assert not found.regressions
    assert max(asked) == 9 and all(states[v] is not None for v in asked if v != 9)
