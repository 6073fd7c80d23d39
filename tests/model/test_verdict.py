"""What a padding table does for one count (model/verdict.py): every verdict
explains itself in words of its own, and the outcomes page documents each by
the value outputs carry, with what it does to the CI gate as the code does it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hprobe.model.verdict import Verdict

pytestmark = pytest.mark.pure

OUTCOMES = Path(__file__).resolve().parents[2] / "docs" / "outcomes.md"


def _gate(verdict: Verdict) -> str:
    """The gate in the page's words, from what the verdict does."""
    if verdict.fails(strict=False):
        return "fails (exit 1)"
    words = "undecided (exit 3 where nothing fails)" if verdict.undecided else "passes"
    return words + ("; fails under `--strict`" if verdict.fails(strict=True) else "")


def test_every_verdict_is_a_row_of_the_page_with_its_gate() -> None:
    lines = OUTCOMES.read_text().splitlines()
    start = lines.index("| verdict | meaning | gate |")
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("| `"):
            break
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        rows[cells[0].strip("`")] = cells[-1]
    assert list(rows) == [v.value for v in Verdict]
    assert {v.value: rows[v.value] for v in Verdict} == {v.value: _gate(v) for v in Verdict}


def test_every_verdict_explains_itself_in_words_of_its_own() -> None:
    said = [v.explanation for v in Verdict]
    assert all(said) and len(set(said)) == len(said)
