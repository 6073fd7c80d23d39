"""Why an `assumed` finding is undecided (model/assumption.py): every member
says so in its own words, the summary's, and the outcomes page documents each
by the value JSON and SARIF carry."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hprobe.model.assumption import Assumption

pytestmark = pytest.mark.pure

OUTCOMES = Path(__file__).resolve().parents[2] / "docs" / "outcomes.md"


def test_every_assumption_explains_itself_in_words_of_its_own() -> None:
    words = {member: member.undecided for member in Assumption}
    assert all(text and text[0].islower() and not text.endswith(".") for text in words.values()), words
    assert len(set(words.values())) == len(words), "two assumptions say the same"


def test_every_assumption_is_documented_by_the_value_outputs_carry() -> None:
    [row] = [line for line in OUTCOMES.read_text().splitlines() if line.startswith("| `assumed` |")]
    documented = set(re.findall(r"`([a-z]+)`, ", row))
    assert {member.value for member in Assumption} <= documented, documented
