"""report/formats/json_format: a report as its versioned JSON document, which
reads back equal to the report's own dictionary; a string from outside
hprobe carries no workflow command (`##[` is spelt with an escape that reads
back the same) and the text is ASCII."""

from __future__ import annotations

import json

import pytest

from hprobe.report.drift import DiffReport, KernelChange
from hprobe.report.formats import RenderOptions
from hprobe.report.formats.json_format import render

pytestmark = pytest.mark.pure

HOSTILE = "x\n##[error]injected ::warning::y \u2028"


def _diff() -> DiffReport:
    change = KernelChange(
        "dsv4-sparse-mla", 100, "ok", "ok", (64, 128), (8, 64, 128), (8,), (), (), (), (), {"message": HOSTILE}
    )
    return DiffReport({"version": "0.6.13", "notes": [HOSTILE]}, {"version": "0.6.14"}, (change,))


def test_a_report_reads_back_as_its_own_document_with_no_command_in_it() -> None:
    report = _diff()
    text = render(report, RenderOptions())
    assert json.loads(text) == report.to_dict()
    assert "##[" not in text and "#\\u0023[error]" in text
    assert all(not line.lstrip().startswith("::") for line in text.splitlines())
    assert text.endswith("}\n") and text.count("\n") > 10  # indented for people


def test_json_is_ascii_whatever_the_strings() -> None:
    text = render(_diff(), RenderOptions())
    assert text.isascii() and "\\u2028" in text
