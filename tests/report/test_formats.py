"""Every verdict and every outcome through every output format, on synthetic
reports (no probing): each format shows each one, in its own words and with
its own escaping, and the machine formats parse."""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import re
import xml.etree.ElementTree as ET

import pytest
from rich.console import Console

from hprobe.commands.conclude import conclude
from hprobe.model.outcome import Depth, HeadResult, KernelSMResult, Outcome
from hprobe.model.padding import Backend, Model, PaddingTable, PadTo, Where
from hprobe.model.release import FlashinferInfo, ProbedRelease
from hprobe.model.sm import SM
from hprobe.model.targets import Targets
from hprobe.model.verdict import Finding, Verdict
from hprobe.report.catalogue import SiteReport
from hprobe.report.formats import CHOICES, FORMATS, NotRendered, RenderOptions, render
from hprobe.report.formats.github import annotation_lines
from hprobe.report.formats.html_site import render_site
from hprobe.report.formats.junit import junit_text
from hprobe.report.formats.text import TextFormatter
from hprobe.report.model import CheckReport, MatrixReport

# Pure: runs without torch, flashinfer or a subprocess (the fast tier, `-m "pure and not slow"`).
pytestmark = pytest.mark.pure

VERSION = "0.6.14"
HEADS = list(range(1, 13))
# One h_q per outcome: 1-2 accepted, 3-4 rejected, then one stretch each.
OUTCOME_AT = {
    1: Outcome.ACCEPTED,
    2: Outcome.ACCEPTED,
    3: Outcome.REJECTED,
    4: Outcome.REJECTED,
    5: Outcome.INCONCLUSIVE,
    6: Outcome.ABSENT,
    7: Outcome.UNSUPPORTED_ARCH,
    8: Outcome.UNSUPPORTED_CONFIG,
    9: Outcome.ACCEPTED,
    10: Outcome.REJECTED,
    11: Outcome.REJECTED,
    12: Outcome.ACCEPTED,
}


DEPTH_AT = {100: Depth.VALIDATORS, 103: Depth.DISPATCH, 120: Depth.PARTIAL, 121: Depth.FAKED_DEVICE, 90: Depth.COMPILED}


def _result(sm: int, depth: Depth) -> KernelSMResult:
    result = KernelSMResult("dsv4-sparse-mla", sm, VERSION, depth=depth)
    for h, outcome in OUTCOME_AT.items():
        refused = outcome is not Outcome.ACCEPTED
        result.heads[h] = HeadResult(
            h,
            outcome,
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
    evidence = HeadResult(
        n,
        Outcome.REJECTED
        if verdict is Verdict.BROKEN
        else Outcome.INCONCLUSIVE
        if verdict is Verdict.INCONCLUSIVE
        else Outcome.ACCEPTED,
        error_type="ValueError",
        message="Expected 64 or 128 query heads",
        location="flashinfer/decode.py:2131 (check)",
        reason="why not",
        slow_path="served by the fallback kernel",
    )
    padded = None if verdict is Verdict.TABLE_REFUSES else n + 1
    best = n if verdict in (Verdict.REDUCIBLE, Verdict.TABLE_REFUSES, Verdict.OFF_FAST_PATH) else None
    return Finding(
        "fixture",
        "t.toml",
        "model-x",
        8,
        n,
        "flashinfer-trtllm",
        "dsv4-sparse-mla",
        100,
        VERSION,
        padded,
        verdict,
        best=best,
        waste=(padded / n) if verdict is Verdict.REDUCIBLE and padded else None,
        evidence=evidence,
        releases=[VERSION],
        source="t.toml:7",
        depth=Depth.VALIDATORS,
    )


def _check() -> CheckReport:
    table = PaddingTable(
        "fixture",
        "tests",
        "t.toml",
        None,
        [Model("model-x", 96, (8,), Where("t.toml", 3))],
        [
            Backend(
                "flashinfer-trtllm",
                "dsv4-sparse-mla",
                (100,),
                PadTo((2, 4, 12)),
                Where("t.toml", 7),
                key="dsv4-sparse-mla",
            )
        ],
    )
    findings = [_finding(v, n) for n, v in enumerate(Verdict, start=2)]
    return conclude(CheckReport([_release()], Targets([SM(10, 0)], "flag"), [table], findings, strict=False))


def _matrix() -> MatrixReport:
    return MatrixReport(
        [_release()], Targets([SM.from_number(sm) for sm in DEPTH_AT], "flag"), HEADS, ["dsv4-sparse-mla"]
    )


@pytest.fixture(autouse=True)
def _no_terminal_settings(monkeypatch):
    """Renderings for a pipe, whatever the session's COLUMNS or colour settings."""
    for name in ("COLUMNS", "TTY_COMPATIBLE", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)


def _rendered(name: str, report: object, **options) -> str:
    """What format `name` renders for `report`, as the CLI gets it (for a pipe)."""
    return render(name, report, RenderOptions(like=io.StringIO(), **options))


def _rendering(command: str) -> list[str]:
    return [name for name, f in FORMATS.items() if f.renders(command)]


def test_every_registered_format_is_exercised_here():
    assert set(FORMATS) == {"text", "json", "markdown", "sarif", "junit", "github", "page"}
    assert CHOICES == ("text", "json", "markdown", "sarif")  # --format; the rest by options of their own
    assert set(_rendering("check")) == {"text", "json", "markdown", "sarif", "junit", "github"}
    assert set(_rendering("matrix")) == {"text", "json", "markdown", "page"}


@pytest.mark.parametrize("name", _rendering("check"))
def test_every_verdict_shows_in_every_format(name):
    out = _rendered(name, _check())
    if name == "json":
        doc = json.loads(out)
        assert [f["verdict"] for f in doc["findings"]] == [v.value for v in Verdict]
        assert doc["summary"] == {v.value: 1 for v in Verdict} and doc["exit_code"] == 1
        return
    # Annotations are for what a reader must see: every verdict that has a level.
    shown = [v for v in Verdict if v.ci_level(False)] if name == "github" else list(Verdict)
    for verdict in shown:
        assert verdict.value in out, (name, verdict)
    assert "Expected 64 or 128 query heads" in " ".join(out.split())  # the broken row's evidence
    if name == "text":
        # For a pipe: 100 columns, long cells wrapped inside their column.
        assert max(len(line) for line in out.splitlines()) <= 100


def test_a_format_refuses_a_report_it_has_no_rendering_of():
    for name in ("sarif", "junit", "github"):
        with pytest.raises(NotRendered, match=name if name != "github" else "annotations"):
            _rendered(name, _matrix())
    with pytest.raises(NotRendered):
        _rendered("page", _check())


@pytest.mark.parametrize("name", ["text", "json", "markdown"])
def test_every_outcome_and_depth_shows_in_every_format(name):
    out = _rendered(name, _matrix())
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
    assert "partial" in out and "dispatch" in out and "faked" in out and "compiled" in out


def test_the_grid_marks_every_outcome_and_its_legend_is_generated():
    out = _rendered("text", _matrix(), grid=True)
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
        # and its colour, under a texture for those a one-cell shape could not tell by shade
        fill = re.search(rf"\.heatmap \.o-{outcome.value} \{{ fill: ([^;]+); \}}", page)
        assert fill is not None and fill.group(1).split()[-1] == outcome.colour, outcome
    # Release by release the page judges each count on its own: 96 heads at
    # TP8 is 12, padded to 12, which the synthetic release accepts.
    grid = _check().verdict_grids
    assert [version for version, _ in grid[0].rows] == [VERSION]
    assert [cell.verdict for _, row in grid[0].rows for cell in row if cell] == [Verdict.OK]
    assert 'class="v-ok"' in page


def test_runs_give_back_every_h_q_exactly():
    """hprobe.matrix/3 holds runs of h_q answered alike; each h_q's own words come
    back exactly, a message that names its h_q included, and one that already
    holds the template's `{h}` is never templated."""
    result = _result(100, Depth.VALIDATORS)
    for h in (10, 11):
        result.heads[h] = HeadResult(
            h, Outcome.REJECTED, error_type="ValueError", message=f"got {h} of {{h}} (h={h})", location="x.py:1"
        )
    for h in range(13, 40):
        result.heads[h] = HeadResult(
            h,
            Outcome.REJECTED,
            error_type="ValueError",
            message=f"Expected 64 or 128 query heads, got {h} (DSv4, 13x)",
            location="decode.py:7",
        )
    runs = result.head_runs()
    assert len(runs) < len(result.heads) // 3
    templated = next(run for run in runs if run["from"] == 13)
    assert (
        templated["to"] == 39
        and templated["count_in"] == ["message"]
        and templated["message"] == "Expected 64 or 128 query heads, got {h} (DSv4, 13x)"
    )
    assert all("count_in" not in run for run in runs if run["from"] in (10, 11))
    back = KernelSMResult.from_dict(json.loads(json.dumps(result.to_dict(runs=True))))
    assert back.heads == result.heads
    assert (
        MatrixReport([_release()], Targets([SM(10, 0)], "flag"), HEADS, ["dsv4-sparse-mla"]).to_dict(runs=True)[
            "schema"
        ]
        == "hprobe.matrix/3"
    )


def test_a_head_result_writes_every_field():
    from dataclasses import fields

    from hprobe.model.outcome import _TEXT_FIELDS

    # In order: from_dict passes the text fields by position.
    assert [f.name for f in fields(HeadResult)] == ["heads", "outcome", *_TEXT_FIELDS]
    full = HeadResult(7, Outcome.INCONCLUSIVE, **{name: f"{name} 7" for name in _TEXT_FIELDS})
    assert HeadResult.from_dict(full.to_dict()) == full


HOSTILE = "[bold]x[/bold] \\[dim] :warning: [/]"


def _hostile_check() -> CheckReport:
    report = _check()
    report.notes.append(f"note {HOSTILE}")
    for f in report.findings:
        f.model = f"model {HOSTILE}"
    return report


def _every_text_rendering(make) -> dict[str, str]:
    """Every TextFormatter method on synthetic reports, each with the writer `make` gives."""
    from hprobe.report.catalogue import KernelsReport
    from hprobe.report.drift import BisectReport, BisectStep, DiffReport, KernelChange

    def change(**fields):
        base = dict(
            kernel=f"k {HOSTILE}",
            sm=100,
            old_status="rejected",
            new_status="accepted",
            old_accepted=(),
            new_accepted=(8,),
            became_accepted=(),
            became_rejected=(),
            unknown=(),
            appeared=(),
            vanished=(),
            new_refusal=None,
        )
        return KernelChange(**{**base, **fields})

    changes = (
        change(),
        change(became_accepted=(8, 16)),
        change(
            became_rejected=(4,), new_refusal={"error_type": "ValueError", "message": HOSTILE, "location": "f.py:1"}
        ),
        change(appeared=(2,), unknown=(3,)),
        change(vanished=(5,)),
    )
    diff = DiffReport({"version": "0.6.13"}, {"version": f"0.6.14 {HOSTILE}"}, changes)
    steps = (
        BisectStep("0.6.13", "rejected", None, "ValueError", HOSTILE, None),
        BisectStep("0.6.14", "accepted", "entry", None, None, None),
        BisectStep("0.6.15", "inconclusive", None, None, None, HOSTILE),
    )
    bisect = BisectReport(
        f"k {HOSTILE}",
        100,
        32,
        ("0.6.13", "0.6.15"),
        3,
        "binary search",
        "0.6.14",
        "0.6.13",
        False,
        (("0.6.14", "0.6.15"),),
        steps,
        0,
    )
    renderings = {}
    jobs = {
        "check": lambda t: t.check(_hostile_check()),
        "matrix": lambda t: t.matrix(_matrix()),
        "releases": lambda t: t.matrix(
            MatrixReport([_release(), _release()], _matrix().targets, HEADS, ["dsv4-sparse-mla"])
        ),
        "grid": lambda t: t.matrix(_matrix(), grid=True),
        "pivot": lambda t: t.matrix(_matrix(), pivot=("heads", "sm")),
        "diff": lambda t: t.diff(diff),
        "bisect": lambda t: t.bisect(bisect),
        "kernels": lambda t: t.kernels(
            KernelsReport(
                [
                    {
                        "id": f"k {HOSTILE}",
                        "entry_point": "e",
                        "summary": "s",
                        "sms": [100],
                        "installed_flashinfer_has_entry_point": True,
                        "axes": [{"name": "a", "default": 1, "choices": [1, 2], "sweep": True}],
                        "releases": "0.6.14",
                        "releases_without": ["0.5.0"],
                    }
                ]
            )
        ),
        "data": lambda t: t.data({"key": HOSTILE}, "title"),
    }
    for details in (False, True):
        for name, job in jobs.items():
            stream = io.StringIO()
            formatter = make(stream)
            formatter.details = details
            job(formatter)
            renderings[f"{name} details={details}"] = stream.getvalue()
    return renderings


def test_piped_text_is_what_rich_writes_without_colour():
    """Piped output skips rich; for every text rendering it is byte for byte
    what rich writes on a console without colour, and text from outside that
    looks like markup is written as it came."""
    from hprobe.report.formats.text import PlainWriter

    def plain(stream, width):
        formatter = TextFormatter(Console(file=io.StringIO()))
        formatter.out = PlainWriter(stream, width)
        return formatter

    def rich(stream, width):
        return TextFormatter(Console(file=stream, width=width, color_system=None, highlight=False, emoji=False))

    # As wide as a log may be, and as a pipe gets (100): lines wrapped alike.
    for width in (4000, 100):
        _same_as_rich(functools.partial(plain, width=width), functools.partial(rich, width=width))


def _same_as_rich(plain, rich):
    plain_out, rich_out = _every_text_rendering(plain), _every_text_rendering(rich)
    for name, text in plain_out.items():
        assert text == rich_out[name], name
        assert text.strip(), name
    assert HOSTILE in plain_out["check details=True"] and HOSTILE in plain_out["data details=False"]


def test_a_table_that_does_not_fit_is_laid_out_by_rich(monkeypatch):
    """On a console without colour, the plain layout where the table fits and
    rich's (which wraps) where it does not."""
    from hprobe.report.formats import terminal

    calls = []
    original = terminal.rich_table
    monkeypatch.setattr(terminal, "rich_table", lambda *a: calls.append(a) or original(*a))
    report = _check()
    for width, expect_rich in ((4000, False), (60, True)):
        calls.clear()
        out = io.StringIO()
        TextFormatter(Console(file=out, width=width, color_system=None, highlight=False, emoji=False)).check(report)
        assert bool(calls) is expect_rich
        assert "reducible" in out.getvalue() and "SM100" in out.getvalue()


def test_formats_only_render_a_finished_report(monkeypatch):
    """No format decides anything: with judge's and advise's deciders made to
    raise, every format still renders the concluded report, byte for byte."""
    report = _check()
    before = {fmt: _rendered(fmt, report) for fmt in _rendering("check")}
    page = _rendered("page", SiteReport(_matrix(), report))
    import hprobe.advise.summary
    import hprobe.judge

    def refuse(*_args, **_kwargs):
        raise AssertionError("a format decided something")

    for module, name in (
        (hprobe.judge, "judge"),
        (hprobe.judge, "judge_across"),
        (hprobe.judge, "exit_code"),
        (hprobe.judge, "verdict_grids"),
        (hprobe.advise.summary, "summarize"),
    ):
        monkeypatch.setattr(module, name, refuse)
    after = {fmt: _rendered(fmt, report) for fmt in _rendering("check")}
    assert after == before and set(after) == set(_rendering("check"))
    assert _rendered("page", SiteReport(_matrix(), report)) == page


def test_a_requirement_no_answer_depended_on_asks_nothing_of_the_summary():
    """`check` ended on "flashinfer 0.7.2 requires cuda-python…, not installed
    here" though every answer was conclusive: the summary says a release's
    missing requirements only where an answer is inconclusive for them, on one
    line with the command that fixes it; --details keeps each."""
    from hprobe.model.outcome import Cause
    from hprobe.model.release import Unmet

    report = _check()
    release = report.releases[0]
    release.unmet = [Unmet("cuda-python>=12.0", "cuda-python"), Unmet("nccl4py>=0.4.1", "nccl4py")]
    report.notes.extend(u.note(VERSION) for u in release.unmet)
    summary = _rendered("text", report, details=False)
    assert "cuda-python" not in summary and "nccl4py" not in summary
    assert "cuda-python" in _rendered("text", report, details=True)
    result = next(iter(release.results.values()))
    some = next(iter(result.heads))
    result.heads[some] = HeadResult(
        some, Outcome.INCONCLUSIVE, reason="ModuleNotFoundError: cuda", cause=Cause.ENVIRONMENT.value
    )
    said = " ".join(_rendered("text", report, details=False).split())  # the note, wherever it wrapped
    assert (
        f"flashinfer {VERSION} requires cuda-python>=12.0, nccl4py>=0.4.1, not installed here: 1 answer is "
        "inconclusive for it "
        "(`pip install 'cuda-python>=12.0' 'nccl4py>=0.4.1'` in a separate venv; --details for each)"
    ) in said


def test_counts_take_their_nouns_singular_at_one():
    from hprobe.report.formats.text import counted

    assert [counted(n, "more note") for n in (0, 1, 2)] == ["0 more notes", "1 more note", "2 more notes"]
    report = _check()
    report.notes.extend(f"note {i}" for i in range(40))  # more than the summary shows
    summary = _rendered("text", report, details=False)
    assert re.search(r"\b\d+ more notes?: --details", summary) and "1 more notes" not in summary


def test_the_registry_answers_what_the_command_line_asks(monkeypatch):
    """The CLI names no format (tests/test_layers.py): the registry says which
    format an option names, which files a site holds, and what the environment
    wants on stderr."""
    from hprobe.model.errors import InputError
    from hprobe.report.formats import JSON, SITE_FILES, chosen, site_documents, wanted_lines, written_by

    assert chosen(" Markdown ", False, "check").name == "markdown"
    assert chosen("text", True, "check").name == JSON  # --json wins over --format's default
    with pytest.raises(InputError, match=r"`hprobe matrix` writes text, json, markdown$"):
        chosen("sarif", False, "matrix")
    assert written_by("--junit").name == "junit"
    # The page first: it is what `report -o` is for.
    assert SITE_FILES == ("index.html", "matrix.json", "matrix.md")
    site = SiteReport(matrix=_matrix(), tables=_check())
    documents = site_documents(site)
    assert set(documents) == set(SITE_FILES)
    assert json.loads(documents["matrix.json"]) == json.loads(render("json", site))
    assert documents["index.html"].startswith("<!DOCTYPE html>")
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    assert wanted_lines("check", _check()) == []
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert wanted_lines("check", _check()) == annotation_lines(_check()) != []
    assert wanted_lines("matrix", _matrix()) == []  # annotations are a check's


def _many(verdict: Verdict, count: int) -> CheckReport:
    """`count` findings of one verdict, each on a rule of its own (a source line each)."""
    report = _check()
    findings = [
        dataclasses.replace(_finding(verdict, 8), source=f"engine/rule_{k}.py:{k + 1}", backend=f"backend-{k}")
        for k in range(count)
    ]
    return dataclasses.replace(report, findings=findings)
