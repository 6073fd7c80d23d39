"""advise/pins.py: the pin a rule needs, and how a count's history across
releases is told (runs seen safe, with the depth each rests on)."""

from __future__ import annotations

import pytest
from packaging.version import Version

from hprobe.advise.history import first_true
from hprobe.advise.pins import CountPin, PinAdvice

pytestmark = pytest.mark.pure

RELEASES = [Version(v) for v in ("0.6.0", "0.6.8", "0.6.12", "0.6.13", "0.6.14", "0.7.0", "0.7.4")]


def _pin(count: int, safe: dict[str, bool | None]) -> CountPin:
    return CountPin(count, first_true(RELEASES, lambda v: safe[str(v)], exhaustive=True))


def test_a_count_safe_refused_and_safe_again_is_told_run_by_run_with_its_depth():
    # Safe on the old releases at their validators only, refused at 0.6.12 - 0.6.13
    # (compiled depth found no kernel), safe again from 0.6.14.
    states = {"0.6.0": True, "0.6.8": True, "0.6.12": False, "0.6.13": None, "0.6.14": True, "0.7.0": True}
    pin = _pin(24, {**states, "0.7.4": True})
    assert pin.safe_ranges() == [(Version("0.6.0"), Version("0.6.8")), (Version("0.6.14"), None)]
    assert pin.since == Version("0.6.14")
    advice = PinAdvice((100,), ("0.6.0", "0.7.4"), "==0.6.14", rule_counts={24: pin})
    advice.shallow = {"0.6.0": "trtllm-gen's kernel existence", "0.6.8": "…", "0.7.4": "…"}
    lines = advice.words()
    assert (
        "SM100: the suggested rule, n=24: safe on 0.6.0..0.6.8 (validators only; 2 seen); "
        "0.6.14 and later (validators only at 0.7.4; 3 seen)"
    ) in lines
    assert "SM100: history is not monotonic: 24 accepted in 0.6.0, 0.6.8, then refused in 0.6.12" in lines
    assert advice.to_dict()["rule_counts"][0]["safe_ranges"] == [
        {"from": "0.6.0", "to": "0.6.8"},
        {"from": "0.6.14", "to": None},
    ]


def test_a_count_that_only_became_safe_has_no_holes_to_tell():
    pin = _pin(
        32,
        {
            "0.6.0": False,
            "0.6.8": False,
            "0.6.12": False,
            "0.6.13": False,
            "0.6.14": True,
            "0.7.0": True,
            "0.7.4": True,
        },
    )
    assert pin.safe_ranges() == [(Version("0.6.14"), None)]
    advice = PinAdvice((100,), ("0.6.0", "0.7.4"), None, rule_counts={32: pin})
    assert not any("safe on" in line for line in advice.words())
    # A run ending before a refusal at the newest release is closed at its last safe one.
    gone = _pin(
        8, {"0.6.0": True, "0.6.8": True, "0.6.12": True, "0.6.13": True, "0.6.14": True, "0.7.0": True, "0.7.4": False}
    )
    assert gone.safe_ranges() == [(Version("0.6.0"), Version("0.7.0"))] and gone.since is None


def test_counts_with_one_history_share_one_line_of_it():
    """Two counts accepted by three releases and refused by the two after: one
    line naming both and each side once, not a line per pair of releases."""
    releases = [Version(v) for v in ("0.6.14", "0.6.15", "0.6.16.post3", "0.6.16.post4", "0.6.18", "0.6.18.post1")]
    states = {"0.6.14": True, "0.6.15": True, "0.6.16.post3": True, "0.6.16.post4": True}

    def pin(count: int) -> CountPin:
        return CountPin(count, first_true(releases, lambda v: states.get(str(v), False), exhaustive=True))

    advice = PinAdvice((120,), ("0.6.14", "0.6.18.post1"), None, rule_counts={12: pin(12), 24: pin(24)})
    told = [line for line in advice.words() if "not monotonic" in line]
    assert told == [
        "SM120: history is not monotonic: n={12, 24} accepted in 0.6.14..0.6.16.post4 (4 releases seen), "
        "then refused in 0.6.18, 0.6.18.post1"
    ]
    assert advice.to_dict()["non_monotonic"] == [told[0].removeprefix("SM120: history is not monotonic: ")]


def test_a_search_from_the_question_s_floor_says_where_it_began_and_what_it_did_not_ask():
    """From the release below the pin's floor: a count refused there and safe
    at the floor has its first safe release shown; one safe already where the
    search began is said to be, with how to ask the older releases."""
    from hprobe.advise.search import _question_floor, _search_start

    published = RELEASES
    pinned = _search_start(_question_floor(None, "==0.7.0", published, [Version("0.7.4")]), Version("0.6.8"))
    assert pinned == (Version("0.6.14"), "the release below your pin's floor (==0.7.0)")
    judged = _question_floor(None, None, published, [Version("0.6.13")])
    assert _search_start(judged, Version("0.6.8")) == (
        Version("0.6.12"),
        "the release below the release judged (0.6.13)",
    )
    # Never below where the entry point first exists; --since first and --since X as asked.
    assert _search_start(_question_floor(None, "==0.6.13", published, []), Version("0.6.13")) == (
        Version("0.6.13"),
        "where the entry point first exists",
    )
    assert _search_start(_question_floor("first", "==0.7.0", published, []), Version("0.6.8")) == (
        Version("0.6.8"),
        "where the entry point first exists",
    )
    since = _question_floor(Version("0.6.12"), "==0.7.0", published, [])
    assert _search_start(since, None) == (Version("0.6.12"), "--since 0.6.12")

    searched = RELEASES[4:]
    already = CountPin(8, first_true(searched, lambda v: True, exhaustive=True))
    advice = PinAdvice((100,), ("0.6.14", "0.7.4"), "==0.7.0", rule_counts={8: already}, started=pinned[1])
    assert advice.words()[0] == (
        "SM100: the suggested rule is safe from flashinfer 0.6.14 (safe from where the search began; "
        "`--since first` asks the older releases; searched 0.6.14..0.7.4, from the release below your pin's floor "
        "(==0.7.0))"
    )
    became = CountPin(8, first_true(searched, lambda v: v >= Version("0.7.0"), exhaustive=True))
    advice = PinAdvice((100,), ("0.6.14", "0.7.4"), "==0.7.0", rule_counts={8: became}, started=pinned[1])
    assert advice.words()[0].startswith("SM100: the suggested rule is safe from flashinfer 0.7.0 (first safe release;")
