"""model/advice: advice as data. The scope says for which releases the
advice holds, in the words the summary prints; a count change's saving is a
saving only where the suggested count is smaller, and every document
carries what it was made from."""

from __future__ import annotations

import pytest

from hprobe.model.advice import Advice, CountChange, TableAdvice

pytestmark = pytest.mark.pure


def _table(**kwargs) -> TableAdvice:
    return TableAdvice("t", kwargs.pop("releases", ("0.6.13", "0.7.4")), kwargs.pop("pin", None), (), **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "scope"),
    [
        ({}, "on flashinfer 0.6.13, 0.7.4 only: no pin"),
        ({"pin": ">=0.6.13"}, "on flashinfer 0.6.13, 0.7.4, the ends of pin >=0.6.13"),
        (
            {"pin": ">=0.6.13", "given": True},
            "on flashinfer 0.6.13, 0.7.4, given by --flashinfer (the pin >=0.6.13 was not judged)",
        ),
        # Given without a pin: nothing was left unjudged.
        ({"given": True}, "on flashinfer 0.6.13, 0.7.4 only: no pin"),
        # The rules read the release's own tables: whatever the pin says.
        (
            {"pin": ">=0.6.13", "own_release": True, "releases": ("0.6.14",)},
            "on flashinfer 0.6.14: the rules read its own tables",
        ),
        ({"releases": ()}, "on no release only: no pin"),
    ],
    ids=["no pin", "pin", "given", "given without pin", "own release", "none"],
)
def test_the_scope_says_which_releases_the_advice_holds_for(kwargs, scope) -> None:
    assert _table(**kwargs).scope == scope


def test_a_table_document_carries_its_scope_and_backends() -> None:
    advice = Advice("t", "b", "trtllm-mla", (100, 103), {"ok": 3, "broken": 1}, "pad to 64")
    table = TableAdvice("t", ("0.7.4",), ">=0.7.4", (advice,))
    assert table.to_dict() == {
        "table": "t",
        "releases": ["0.7.4"],
        "pin": ">=0.7.4",
        "scope": "on flashinfer 0.7.4, the ends of pin >=0.7.4",
        "backends": [
            {
                "table": "t",
                "backend": "b",
                "kernel": "trtllm-mla",
                "sms": [100, 103],
                "counts": {"ok": 3, "broken": 1},
                "action": "pad to 64",
            }
        ],
    }


@pytest.mark.parametrize(
    ("current", "suggested", "saving"),
    [
        (64, 32, 2.0),
        (128, 8, 16.0),
        (64, 64, None),  # the same count: nothing saved
        (32, 64, None),  # more padding is a cost, never a negative saving
        (None, 32, None),  # the current rule raises for n
        (64, None, None),  # no safe count
    ],
)
def test_a_saving_is_the_ratio_only_where_the_suggested_count_is_smaller(current, suggested, saving) -> None:
    change = CountChange("DSv4", 4, 32, current, suggested)
    assert change.saving == saving
    assert change.to_dict() == {
        "model": "DSv4",
        "tp": 4,
        "n": 32,
        "current": current,
        "suggested": suggested,
        "saving": saving,
    }
