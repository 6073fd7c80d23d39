"""report/formats/markdown: a check as Markdown for a PR body or a step summary
— tables that keep their shape under a CommonMark parser, no account pinged by
a quoted message, and a summary cut short of GitHub's 1 MiB with every block it
opened closed and the cut said. On the synthetic reports of tests/report/test_formats.py."""

from __future__ import annotations

import io
import re

import pytest

from hprobe.model.verdict import Verdict
from hprobe.report.formats import render

from ..test_formats import _check, _hostile_check, _many, _rendered

pytestmark = pytest.mark.pure


def test_markdown_tables_keep_their_shape():
    from markdown_it import MarkdownIt

    out = _rendered("markdown", _check())
    tokens = MarkdownIt("commonmark").enable("table").parse(out)
    rows = [t for t in tokens if t.type == "tr_open"]
    assert rows, "no table rendered"


def test_markdown_pings_no_one_named_in_a_message():
    """A release's message quoted in a PR body or comment (the upgrade
    proposal posts suggest's markdown) must not mention the account it names."""
    from hprobe.system.escaping import md_text

    assert md_text("ask @octocat (a@b.c)") == "ask &#64;octocat (a&#64;b.c)"
    report = _hostile_check()
    report.notes.append("note: contact @octocat")
    out = render("markdown", report)
    assert "@octocat" not in out and "&#64;octocat" in out


def test_a_step_summary_stops_short_of_its_limit_closes_what_it_opened_and_says_what_was_cut():
    """GitHub refuses a step summary over 1 MiB (vLLM 0.34.0's was 2.3 MB)."""
    from hprobe.report.formats.markdown import MarkdownFormatter

    report = _many(Verdict.OK, 400)  # the ok rows go in a <details> table
    whole = io.StringIO()
    MarkdownFormatter(whole).check(report)
    budget = 4096 + len(whole.getvalue().encode()) // 2
    cut = io.StringIO()
    formatter = MarkdownFormatter(cut, budget=budget)
    formatter.check(report)
    text = cut.getvalue() + formatter.cut_note()
    assert len(text.encode()) <= budget
    assert text.count("<details>") == text.count("</details>")
    assert re.search(r"_\d+ more lines not shown: GitHub takes at most 1 MiB of step summary", text)
    assert formatter.cut_note() and not MarkdownFormatter(io.StringIO()).cut_note()
