"""report/formats/junit: a check as JUnit XML — a case per finding, broken a
failure, undecided an error, soft verdicts a message (failures under
--strict), a waived one skipped, an expired waiver a failing case of its own;
every count the suites state adds up, and foreign text parses however hostile.
On the synthetic reports of tests/report/test_formats.py."""

from __future__ import annotations

import dataclasses
import datetime as dt
import xml.etree.ElementTree as ET

import pytest

from hprobe.commands.conclude import conclude
from hprobe.model.verdict import Verdict
from hprobe.model.waiver import Waiver, WaiverUse
from hprobe.report.formats.junit import junit_text

from ..test_formats import _check

pytestmark = pytest.mark.pure


def _suites(report) -> ET.Element:
    return ET.fromstring(junit_text(report))


def _outcome(case: ET.Element) -> str:
    for kind in ("failure", "error", "skipped"):
        if case.find(kind) is not None:
            return kind
    return "passed"


def test_each_verdict_is_its_case_kind_and_strict_fails_the_soft_ones():
    relaxed, strict = _check(), conclude(dataclasses.replace(_check(), strict=True))
    for report in (relaxed, strict):
        cases = {c.get("name"): c for c in _suites(report).iter("testcase")}
        by_verdict = {f.verdict: cases[f"SM{f.sm} {f.model} TP{f.tp} n={f.n}"] for f in report.findings}
        for verdict, case in by_verdict.items():
            expected = "failure" if verdict.fails(report.strict) else "error" if verdict.undecided else "passed"
            assert _outcome(case) == expected, (verdict, report.strict)
        assert _outcome(by_verdict[Verdict.BROKEN]) == "failure"
    soft_failures = [v for v in Verdict if v.fails(True) and not v.fails(False)]
    assert soft_failures  # --strict turns some verdict into a failure, and the XML says so


def test_the_suites_counts_add_up():
    root = _suites(_check())
    for suite in root.iter("testsuite"):
        cases = list(suite.iter("testcase"))
        assert int(suite.get("tests", -1)) == len(cases)
        assert int(suite.get("failures", -1)) == sum(_outcome(c) == "failure" for c in cases)
        assert int(suite.get("errors", -1)) == sum(_outcome(c) == "error" for c in cases)
    assert int(root.get("tests", -1)) == len(list(root.iter("testcase")))


def test_a_waived_finding_is_skipped_and_an_expired_waiver_fails_in_a_case_of_its_own():
    waiver = Waiver((("sm", "100"),), "tracked upstream", dt.date(2020, 1, 1), "hprobe-waivers.toml:3")
    report = _check()
    broken = next(f for f in report.findings if f.verdict is Verdict.BROKEN)
    waived = dataclasses.replace(broken, waiver=waiver)
    report = dataclasses.replace(
        report,
        findings=[waived if f is broken else f for f in report.findings],
        waivers=[WaiverUse(waiver, 1, True)],
    )
    root = _suites(report)
    case = next(c for c in root.iter("testcase") if c.get("name") == f"SM100 model-x TP8 n={broken.n}")
    assert _outcome(case) == "skipped"
    [expired] = [s for s in root.iter("testsuite") if s.get("name") == "hprobe waivers"]
    [failure] = expired.iter("failure")
    assert failure.get("type") == "expired-waiver" and "tracked upstream" in (failure.get("message") or "")
    assert next(expired.iter("testcase")).get("file") == "hprobe-waivers.toml"


def test_hostile_text_parses_and_shows_its_controls():
    report = _check()
    hostile = "be\x1bnd\x00<x>&"
    report = dataclasses.replace(report, findings=[dataclasses.replace(f, backend=hostile) for f in report.findings])
    root = _suites(report)  # parses: no control XML forbids reached the file
    assert {c.get("classname") for c in root.iter("testcase")} == {"fixture.be\\x1bnd\\x00<x>&"}
