"""A probe's answer for one h_q (model/outcome.py): every outcome, cause and
depth a JSON document can carry is documented by that value, so a reader of
`hprobe.matrix` or `hprobe.check` output can look each one up."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hprobe.model.outcome import Cause, Depth, HeadResult, KernelSMResult, Outcome

pytestmark = pytest.mark.pure

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_outcome_is_documented_by_its_value() -> None:
    text = (DOCS / "outcomes.md").read_text()
    assert [o.value for o in Outcome if f"`{o.value}`" not in text] == []


def test_every_depth_has_its_own_entry_and_qualifier() -> None:
    section = (DOCS / "outcomes.md").read_text().split("### Depth", 1)[1].split("\n### ", 1)[0]
    entries = re.findall(r"^- \*\*([a-z-]+)\*\*:", section, re.M)
    assert entries == [d.value for d in Depth]
    said = [d.qualifier(unchecked=True) for d in Depth]
    assert len(set(said)) == len(said), said


def test_every_cause_is_documented_where_json_documents_cause() -> None:
    text = (DOCS / "ci.md").read_text()
    sentence = text.split("`cause` types an", 1)[1].split("\n- ", 1)[0]
    assert [c.value for c in Cause if f"`{c.value}`" not in sentence] == []


def test_a_result_reads_back_what_it_wrote() -> None:
    full = HeadResult(
        96,
        Outcome.INCONCLUSIVE,
        entry="m.f",
        error_type="E",
        message="m",
        location="f.py:1",
        reason="r",
        slow_path="s",
        cause=Cause.RUNTIME.value,
        shapes="x",
        pending="p",
        launch="l",
    )
    assert HeadResult.from_dict(full.to_dict()) == full
    bare = HeadResult(8, Outcome.ACCEPTED)
    assert bare.to_dict() == {"heads": 8, "outcome": "accepted"} and HeadResult.from_dict(bare.to_dict()) == bare


def test_why_compiled_depth_was_not_evaluated_is_one_note_found_again() -> None:
    """The note a deeper check leaves where it was not evaluated is found
    again by its beginning (the advice quotes it), the first one only."""
    from hprobe.model.outcome import NOT_DEEPENED, KernelSMResult

    result = KernelSMResult("trtllm-mla", 100, "0.6.14", notes=["capability metadata could not be read"])
    assert result.why_not_deepened() is None
    result.not_deepened("no kernel table for trtllm-gen kernel package 158f6fa could be had")
    result.not_deepened("a second reason")
    assert (
        result.why_not_deepened()
        == f"{NOT_DEEPENED}: no kernel table for trtllm-gen kernel package 158f6fa could be had"
    )
    assert result.notes[0] == "capability metadata could not be read" and len(result.notes) == 3


def test_the_counts_a_port_evaluates_are_the_accepted_ones_at_its_entry() -> None:
    heads = {
        1: HeadResult(1, Outcome.ACCEPTED, entry="get_fmha_module.run"),
        2: HeadResult(2, Outcome.ACCEPTED, entry="get_batch_prefill_module.ragged_run"),
        3: HeadResult(3, Outcome.REJECTED, entry="get_fmha_module.run"),
        4: HeadResult(4, Outcome.ACCEPTED, entry="get_fmha_module.run"),
    }
    result = KernelSMResult("ragged-prefill", 100, "0.6.14", Depth.VALIDATORS, heads)
    assert result.accepted_at(lambda entry: entry == "get_fmha_module.run") == [(1, heads[1]), (4, heads[4])]
