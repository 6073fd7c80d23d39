"""The summary's advice lines (advise/summary.py): a traced call's answers
that are undecided alike are said once, counted; an answer with a verdict of
its own keeps its line."""

from __future__ import annotations

import pytest

from hprobe.advise.summary import summarize
from hprobe.model.assumption import Assumption
from hprobe.model.padding import Backend, NoPadding, PaddingTable, Where
from hprobe.model.verdict import Finding, Verdict

pytestmark = pytest.mark.pure

CALL = "engine.draft.draft_decode:20"


def _rows(backend: str, verdict: Verdict, assumed: Assumption | None = None) -> list[Finding]:
    return [
        Finding(
            table="tree",
            table_path="/tree",
            model="Kimi-96",
            tp=tp,
            n=96 // tp,
            backend=backend,
            kernel="trtllm-mla",
            sm=100,
            flashinfer_version="0.7.4",
            padded=96 // tp,
            verdict=verdict,
            assumed=assumed,
            on_assumption=Verdict.OK if verdict is Verdict.ASSUMED else None,
        )
        for tp in (1, 2)
    ]


def _answers(*names: str) -> PaddingTable:
    """The table the traced call's backends are in, each an answer of CALL."""
    backends = [Backend(n, "trtllm-mla", (100,), NoPadding(), Where("draft.py", 20), answer_of=CALL) for n in names]
    return PaddingTable("tree", "/tree", "/tree", None, [], backends)


def test_a_traced_calls_answers_undecided_alike_are_one_line_counted() -> None:
    names = [
        f"{CALL} [traced, k=2, lse=False]",
        f"{CALL} [traced, k=3, lse=False]",
        f"{CALL} [traced, lse=True]",
        f"{CALL} [assumed, from forward (draft.py:32)]",
    ]
    findings = [
        *_rows(names[0], Verdict.ASSUMED, Assumption.DTYPE),
        *_rows(names[1], Verdict.ASSUMED, Assumption.DTYPE),
        *_rows(names[2], Verdict.OK),
        *_rows(names[3], Verdict.ASSUMED, Assumption.HEADS),
    ]
    [table] = summarize(findings, [_answers(*names)])
    lines = {a.backend: (a.counts, a.action) for a in table.backends}
    assert lines.keys() == {
        f"{CALL} [2 answers]",
        f"{CALL} [traced, lse=True]",
        f"{CALL} [assumed, from forward (draft.py:32)]",
    }
    counts, action = lines[f"{CALL} [2 answers]"]
    assert counts == {"assumed": 4} and action.startswith(f"undecided: {Assumption.DTYPE.undecided}")
    # A decided answer, and one undecided for another reason, keep lines of their own.
    assert lines[f"{CALL} [traced, lse=True]"][0] == {"ok": 2}
    assert lines[f"{CALL} [assumed, from forward (draft.py:32)]"][1].startswith(
        f"undecided: {Assumption.HEADS.undecided}"
    )


def test_a_traced_calls_answers_ok_alike_are_one_line_counted() -> None:
    names = [f"{CALL} [traced, k=2, lse=True]", f"{CALL} [traced, k=3, lse=True]", f"{CALL} [traced, lse=False]"]
    findings = [
        *_rows(names[0], Verdict.OK),
        *_rows(names[1], Verdict.OK),
        *_rows(names[2], Verdict.ASSUMED, Assumption.REACH),
    ]
    [table] = summarize(findings, [_answers(*names)])
    lines = {a.backend: (a.counts, a.action) for a in table.backends}
    assert lines.keys() == {f"{CALL} [2 answers]", f"{CALL} [traced, lse=False]"}
    assert lines[f"{CALL} [2 answers]"] == ({"ok": 4}, "ok: every count runs as padded")
    assert lines[f"{CALL} [traced, lse=False]"][1].startswith(f"undecided: {Assumption.REACH.undecided}")
