"""model/waiver: a waiver as written (a `[[waiver]]` table or `--ignore`),
parsed to what it matches, why and until when — each way of writing one
wrong refused with one line naming what is wrong; its expiry a UTC day."""

from __future__ import annotations

import datetime as dt

import pytest

from hprobe.model.errors import InputError
from hprobe.model.waiver import Waiver, WaiverUse, parse_ignore, parse_waiver, utc_today

pytestmark = pytest.mark.pure


def test_ignore_keys_in_any_order_each_once():
    early = parse_ignore("reason=tracked in #12, see the PR,expires=2027-03-01,sm=120")
    assert (
        early.reason == "tracked in #12, see the PR"
        and str(early.expires) == "2027-03-01"
        and early.match == (("sm", "120"),)
    )
    assert parse_ignore("sm=120,reason=a,b").reason == "a,b"
    for text, needle in (
        ("sm=100,sm=120", "sm is given twice"),
        ("nmae=x", "expected KEY=VALUE"),
        ("", "expected KEY=VALUE"),
    ):
        with pytest.raises(InputError, match=needle):
            parse_ignore(text)


def test_an_ignore_without_a_reason_says_where_it_came_from():
    waiver = parse_ignore(" table = vllm* , tp=8")
    assert waiver.match == (("table", "vllm*"), ("tp", "8")) and waiver.reason == "--ignore on the command line"
    assert waiver.origin == "--ignore  table = vllm* , tp=8"


def test_an_expiry_with_an_offset_expires_by_its_utc_moment():
    # 2027-03-01T00:00+14:00 is 2027-02-28T10:00Z: on 2027-02-28 (UTC) it has passed.
    waiver = parse_waiver(
        {"sm": "120", "reason": "r", "expires": dt.datetime(2027, 3, 1, tzinfo=dt.timezone(dt.timedelta(hours=14)))},
        "test",
    )
    assert waiver.expired(dt.date(2027, 2, 28))


def test_a_waiver_holds_through_its_day_and_none_never_expires():
    dated = parse_waiver({"kernel": "trtllm-mla", "reason": "r", "expires": "2027-03-01"}, "w.toml:3")
    assert not dated.expired(dt.date(2027, 3, 1)) and dated.expired(dt.date(2027, 3, 2))
    assert not parse_waiver({"sm": 90, "reason": "r"}, "w.toml:9").expired(dt.date.max)


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"sm": 120, "reason": "r", "colour": "red"}, "unknown waiver key 'colour'"),
        ({"reason": "r"}, "a waiver must name what it matches"),
        ({"sm": 120}, "a waiver must give its reason"),
        ({"sm": 120, "reason": "  "}, "a waiver must give its reason"),
        ({"sm": True, "reason": "r"}, "waiver key 'sm' must be a string or a number"),
        ({"sm": [120], "reason": "r"}, "waiver key 'sm' must be a string or a number"),
        ({"sm": 120, "reason": "r", "expires": "next week"}, "expires 'next week': expected a date, YYYY-MM-DD"),
        ({"sm": 120, "reason": "r", "expires": 20270301}, "expected a date"),
    ],
)
def test_each_way_of_writing_a_waiver_wrong_is_one_line_with_its_place(entry, said):
    with pytest.raises(InputError, match=said) as refused:
        parse_waiver(entry, "hprobe-waivers.toml:4")
    assert str(refused.value).startswith("hprobe-waivers.toml:4: ") and "\n" not in str(refused.value)


def test_a_waiver_describes_itself_and_its_use():
    waiver = Waiver((("table", "vllm*"), ("sm", "120")), "tracked", dt.date(2027, 3, 1), "w.toml:2")
    assert waiver.describe == "table=vllm*, sm=120 until 2027-03-01 (w.toml:2)"
    assert waiver.to_dict() == {
        "match": {"table": "vllm*", "sm": "120"},
        "reason": "tracked",
        "expires": "2027-03-01",
        "origin": "w.toml:2",
    }
    unused = WaiverUse(waiver, 0, False)
    assert unused.unmatched and unused.to_dict()["matched"] == 0
    assert not WaiverUse(waiver, 3, True).unmatched


def test_the_gate_reads_today_in_utc():
    """A waiver expiring today holds through today in UTC, whatever day the
    runner's time zone says it is: at 23:00 UTC on 1 March it is 2 March in
    UTC+14, and the day the gate compares with is still 1 March."""
    moment = dt.datetime(2027, 3, 1, 23, 0, tzinfo=dt.UTC)
    local = moment.astimezone(dt.timezone(dt.timedelta(hours=14)))
    assert local.date() == dt.date(2027, 3, 2)
    assert utc_today(lambda tz: local.astimezone(tz)) == dt.date(2027, 3, 1)
