"""Every verdict and every outcome through every output format, on synthetic
reports (no probing): each format shows each one, in its own words and with
its own escaping, and the machine formats parse."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET

import pytest
from rich.console import Console

from hprobe.model.outcome import Depth, HeadResult, KernelSMResult, Outcome
from hprobe.model.padding import Backend, Model, PaddingTable, PadTo, Where
from hprobe.model.release import FlashinferInfo, ProbedRelease
from hprobe.model.sm import SM
from hprobe.model.targets import Targets
from hprobe.model.verdict import Finding, Verdict
from hprobe.report.formats import FORMATS
from hprobe.report.formats.github import annotation_lines
from hprobe.report.formats.html_site import render_site
from hprobe.report.formats.junit import junit_text
from hprobe.report.formats.text import TextFormatter
from hprobe.report.model import CheckReport, MatrixReport

VERSION = "0.6.14"
HEADS = list(range(1, 13))
# One h_q per outcome: 1-2 accepted, 3-4 rejected, then one stretch each.
OUTCOME_AT = {1: Outcome.ACCEPTED, 2: Outcome.ACCEPTED, 3: Outcome.REJECTED, 4: Outcome.REJECTED, 5: Outcome.INCONCLUSIVE, 6: Outcome.ABSENT,
              7: Outcome.UNSUPPORTED_ARCH, 8: Outcome.UNSUPPORTED_CONFIG, 9: Outcome.ACCEPTED, 10: Outcome.REJECTED, 11: Outcome.REJECTED, 12: Outcome.ACCEPTED}


DEPTH_AT = {100: Depth.VALIDATORS, 103: Depth.DISPATCH, 120: Depth.PARTIAL, 121: Depth.FAKED_DEVICE}


def _result(sm: int, depth: Depth) -> KernelSMResult:
    result = KernelSMResult("dsv4-sparse-mla", sm, VERSION, depth=depth)
    for h, outcome in OUTCOME_AT.items():
        refused = outcome is not Outcome.ACCEPTED
        result.heads[h] = HeadResult(
            h, outcome,
            entry=None if refused else "get_trtllm_gen_fmha_module.trtllm_paged_attention_decode",
            error_type="ValueError" if refused else None,
            message=f"Expected 64 or 128 query heads, got {h}" if refused else None,
            location="flashinfer/decode.py:2131 (check)" if refused else None,
            reason=f"reason for {outcome.value}" if outcome is Outcome.INCONCLUSIVE else None,
        )
    return result


def _release() -> ProbedRelease:
    results = {("dsv4-sparse-mla", sm): _result(sm, depth) for sm, depth in DEPTH_AT.items()}
    return ProbedRelease(VERSION, FlashinferInfo(VERSION, "/site-packages/flashinfer"), results)


def _finding(verdict: Verdict, n: int) -> Finding:
    evidence = HeadResult(n, Outcome.REJECTED if verdict is Verdict.BROKEN else Outcome.INCONCLUSIVE if verdict is Verdict.INCONCLUSIVE else Outcome.ACCEPTED,
                          error_type="ValueError", message="Expected 64 or 128 query heads", location="flashinfer/decode.py:2131 (check)", reason="why not",
                          slow_path="served by the fallback kernel")
    padded = None if verdict is Verdict.TABLE_REFUSES else n + 1
    best = n if verdict in (Verdict.REDUCIBLE, Verdict.TABLE_REFUSES, Verdict.OFF_FAST_PATH) else None
    return Finding("fixture", "t.toml", "model-x", 8, n, "flashinfer-trtllm", "dsv4-sparse-mla", 100, VERSION, padded, verdict,
                   best=best, waste=(padded / n) if verdict is Verdict.REDUCIBLE and padded else None, evidence=evidence,
                   releases=[VERSION], source="t.toml:7", depth=Depth.VALIDATORS)


def _check() -> CheckReport:
    table = PaddingTable("fixture", "tests", "t.toml", None, [Model("model-x", 96, (8,), Where("t.toml", 3))],
                         [Backend("flashinfer-trtllm", "dsv4-sparse-mla", (100,), PadTo((2, 4, 12)), Where("t.toml", 7), key="dsv4-sparse-mla")])
    findings = [_finding(v, n) for n, v in enumerate(Verdict, start=2)]
    return CheckReport([_release()], Targets([SM(10, 0)], "flag"), [table], findings, strict=False)


def _matrix() -> MatrixReport:
    return MatrixReport([_release()], Targets([SM.from_number(sm) for sm in DEPTH_AT], "flag"), HEADS, ["dsv4-sparse-mla"])


def _rendered(name: str, method: str, *args) -> str:
    stream = io.StringIO()
    formatter = TextFormatter(Console(file=stream, width=400, no_color=True)) if name == "text" else FORMATS[name](stream)
    formatter.details = True
    getattr(formatter, method)(*args)
    return stream.getvalue()


def test_every_registered_format_is_exercised_here():
    assert set(FORMATS) == {"text", "json", "markdown"}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_verdict_shows_in_every_format(name):
    out = _rendered(name, "check", _check())
    if name == "json":
        doc = json.loads(out)
        assert [f["verdict"] for f in doc["findings"]] == [v.value for v in Verdict]
        assert doc["summary"] == {v.value: 1 for v in Verdict} and doc["exit_code"] == 1
        return
    for verdict in Verdict:
        assert verdict.value in out, (name, verdict)
    assert "Expected 64 or 128 query heads" in out  # the broken row's evidence


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_outcome_and_depth_shows_in_every_format(name):
    out = _rendered(name, "matrix", _matrix())
    if name == "json":
        doc = json.loads(out)
        cells = {(r["sm"], h["heads"]): h["outcome"] for r in doc["results"] for h in r["heads"]}
        assert {cells[(100, h)] for h in HEADS} == {o.value for o in Outcome}
        assert {r["sm"]: r["depth"] for r in doc["results"]} == {sm: depth.value for sm, depth in DEPTH_AT.items()}
        assert set(DEPTH_AT.values()) == set(Depth)
        return
    # Per SM: its status, the accepted set, and each refusal with its evidence.
    assert "accepted" in out and "{1, 2, 9, 12}" in out
    assert "Expected 64 or 128 query heads, got 3" in out and "flashinfer/decode.py:2131" in out
    assert "partial" in out and "dispatch" in out and "faked" in out


def test_the_grid_marks_every_outcome_and_its_legend_is_generated():
    out = _rendered("text", "matrix", _matrix(), True)
    assert Outcome.legend() in out
    for outcome in Outcome:
        assert f"{outcome.mark} {outcome.value}" in out


def test_junit_and_annotations_carry_every_gate():
    report = _check()
    suites = ET.fromstring(junit_text(report))
    cases = suites.findall(".//testcase")
    assert len(cases) == len(Verdict)
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    errored = {c.get("name") for c in cases if c.find("error") is not None}
    assert len(failed) == sum(v.fails(False) for v in Verdict) and len(errored) == sum(v.undecided for v in Verdict)
    levels = [line.split(" ", 1)[0] for line in annotation_lines(report)]
    assert sorted(levels) == sorted(f"::{v.ci_level(False)}" for v in Verdict if v.ci_level(False))


def test_the_page_shows_every_outcome_and_the_per_release_verdicts():
    page = render_site(_matrix(), _check())
    for outcome in Outcome:
        assert f'class="o-{outcome.value}"><title>' in page, outcome  # a shape of each outcome
        assert f".heatmap .o-{outcome.value} {{ fill: {outcome.colour}; }}" in page  # and its colour
    # Release by release the page judges each count on its own: 96 heads at
    # TP8 is 12, padded to 12, which the synthetic release accepts.
    grid = _check().verdict_grids
    assert [version for version, _ in grid[0].rows] == [VERSION]
    assert [cell.verdict for _, row in grid[0].rows for cell in row if cell] == [Verdict.OK]
    assert 'class="v-ok"' in page


def test_markdown_tables_keep_their_shape():
    from markdown_it import MarkdownIt

    out = _rendered("markdown", "check", _check())
    tokens = MarkdownIt("commonmark").enable("table").parse(out)
    rows = [t for t in tokens if t.type == "tr_open"]
    assert rows, "no table rendered"


def test_runs_give_back_every_h_q_exactly():
    """hprobe.matrix/3 holds runs of h_q answered alike; each h_q's own words come
    back exactly, a message that names its h_q included, and one that already
    holds the template's `{h}` is never templated."""
    result = _result(100, Depth.VALIDATORS)
    for h in (10, 11):
        result.heads[h] = HeadResult(h, Outcome.REJECTED, error_type="ValueError", message=f"got {h} of {{h}} (h={h})", location="x.py:1")
    for h in range(13, 40):
        result.heads[h] = HeadResult(h, Outcome.REJECTED, error_type="ValueError", message=f"Expected 64 or 128 query heads, got {h} (DSv4, 13x)", location="decode.py:7")
    runs = result.head_runs()
    assert len(runs) < len(result.heads) // 3
    templated = next(run for run in runs if run["from"] == 13)
    assert templated["to"] == 39 and templated["count_in"] == ["message"] and templated["message"] == "Expected 64 or 128 query heads, got {h} (DSv4, 13x)"
    assert all("count_in" not in run for run in runs if run["from"] in (10, 11))
    back = KernelSMResult.from_dict(json.loads(json.dumps(result.to_dict(runs=True))))
    assert back.heads == result.heads
    assert MatrixReport([_release()], Targets([SM(10, 0)], "flag"), HEADS, ["dsv4-sparse-mla"]).to_dict(runs=True)["schema"] == "hprobe.matrix/3"


def test_a_head_result_writes_every_field():
    from dataclasses import fields

    from hprobe.model.outcome import _TEXT_FIELDS

    # In order: from_dict passes the text fields by position.
    assert [f.name for f in fields(HeadResult)] == ["heads", "outcome", *_TEXT_FIELDS]
    full = HeadResult(7, Outcome.INCONCLUSIVE, **{name: f"{name} 7" for name in _TEXT_FIELDS})
    assert HeadResult.from_dict(full.to_dict()) == full


def _rich_lines(columns, rows, width=4000) -> str:
    from hprobe.report.formats.text import rich_table

    out = io.StringIO()
    Console(file=out, width=width, color_system=None, highlight=False, emoji=False).print(rich_table(columns, rows))
    return out.getvalue()


def test_plain_tables_are_laid_out_as_rich_lays_them_out():
    """Where no colour is written, tables are laid out without rich's table
    layout; line for line, they are what rich writes for the same table:
    every justification, sections, wide and combining characters, empty
    cells, headers wider than their cells."""
    import random

    from rich.text import Text

    from hprobe.report.formats.text import plain_table_lines

    words = ["", "a", "SM100", "reducible (validators only)", "模型名", "e\u0301t\u00e9", "✓", "🙂x", "  padded  ", "[bold]x[/bold]", "\\x1b"]
    rng = random.Random(7)
    for _ in range(300):
        k = rng.randint(1, 5)
        columns = [(rng.choice(words[1:]), rng.choice(["left", "right", "center"])) for _ in range(k)]
        rows = []
        for _ in range(rng.randint(0, 6)):
            if rows and rng.random() < 0.2:
                rows.append(None)
            rows.append([Text(rng.choice(words), style=rng.choice(["", "red", "dim"])) for _ in range(k)])
        lines = plain_table_lines(columns, rows, 4000)
        assert lines is not None
        assert "\n".join(lines) + "\n" == _rich_lines(columns, rows), (columns, rows)
    # Where rich would wrap or fold, rich lays it out.
    wide = [("evidence", "left")]
    assert plain_table_lines(wide, [[Text("x" * 50)]], 40) is None
    assert plain_table_lines(wide, [[Text("two\nlines")]], 4000) is None


def test_a_piped_report_prints_the_plain_table(monkeypatch):
    """The text format takes the plain layout on a console without colour,
    and rich's (which wraps) where the table does not fit."""
    from hprobe.report.formats import text as text_format

    calls = []
    original = text_format.rich_table
    monkeypatch.setattr(text_format, "rich_table", lambda *a: calls.append(a) or original(*a))
    report = _check()
    for width, expect_rich in ((4000, False), (60, True)):
        calls.clear()
        out = io.StringIO()
        TextFormatter(Console(file=out, width=width, color_system=None, highlight=False, emoji=False)).check(report)
        assert bool(calls) is expect_rich
        assert "reducible" in out.getvalue() and "SM100" in out.getvalue()
