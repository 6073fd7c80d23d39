"""JUnit XML for CI test reports: one test case per backend x SM x per-rank count.

broken = failure; inconclusive = error; reducible, table-refuses and
off-fast-path pass with a message (failure under --strict); ok passes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from hprobe.model.verdict import Verdict
from hprobe.report.formats.base import NotRendered, RenderOptions, source_location
from hprobe.system.escaping import xml

if TYPE_CHECKING:
    from hprobe.model.verdict import Finding
    from hprobe.report.model import CheckReport


def junit_xml(report: CheckReport) -> ET.ElementTree:
    suites = ET.Element("testsuites", name="hprobe check")
    by_table: dict[str, list[Finding]] = {}
    for f in report.findings:
        by_table.setdefault(f.table, []).append(f)
    for table, findings in by_table.items():
        suite = ET.SubElement(suites, "testsuite", name=table)
        failures = errors = skipped = 0
        for f in findings:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"{f.table}.{f.backend}",
                name=f"SM{f.sm} {f.model} TP{f.tp} n={f.n}",
                file=source_location(f.source).path if f.source else "",
            )
            message = f"{f.label}: padded {f.padded_text}; {f.explain()}".strip("; ")
            detail = f"flashinfer {f.flashinfer_version}; kernel {f.kernel}; rule at {f.source}"
            if f.waiver is not None and f.verdict is not Verdict.OK:
                skipped += 1
                ET.SubElement(case, "skipped", message=message)
            elif f.fails(report.strict):
                failures += 1
                ET.SubElement(case, "failure", message=message, type=f.verdict.value).text = detail
            elif f.undecided:
                errors += 1
                ET.SubElement(case, "error", message=message, type=f.verdict.value).text = detail
            elif f.verdict.soft:
                ET.SubElement(case, "system-out").text = message
        suite.set("tests", str(len(findings)))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
        suite.set("skipped", str(skipped))
    expired = [u for u in report.waivers if u.expired]
    if expired:
        # An expired waiver fails the gate on its own: a case of its own says why.
        suite = ET.SubElement(
            suites,
            "testsuite",
            name="hprobe waivers",
            tests=str(len(expired)),
            failures=str(len(expired)),
            errors="0",
            skipped="0",
        )
        for u in expired:
            case = ET.SubElement(
                suite,
                "testcase",
                classname="waivers",
                name=u.waiver.describe,
                file=source_location(u.waiver.origin).path,
            )
            ET.SubElement(
                case,
                "failure",
                message=f"waiver expired on {u.waiver.expires}: {u.waiver.reason}",
                type="expired-waiver",
            )
    total = len(report.findings) + len(expired)
    suites.set("tests", str(total))
    suites.set("failures", str(sum(int(s.get("failures", 0)) for s in suites)))
    suites.set("errors", str(sum(int(s.get("errors", 0)) for s in suites)))
    # Every text and attribute, in one pass over the finished tree: a field
    # added above cannot skip it.
    for element in suites.iter():
        element.attrib = {key: xml(value) for key, value in element.attrib.items()}
        if element.text:
            element.text = xml(element.text)
    return ET.ElementTree(suites)


def junit_text(report: CheckReport) -> str:
    tree = junit_xml(report)
    ET.indent(tree)
    root = tree.getroot()
    assert root is not None
    return "<?xml version='1.0' encoding='utf-8'?>\n" + ET.tostring(root, encoding="unicode") + "\n"


def render(report: object, options: RenderOptions) -> str:
    """`--junit FILE`: check reports (and a suggest's check)."""
    from hprobe.report.model import CheckReport
    from hprobe.report.suggest import SuggestReport

    if isinstance(report, SuggestReport):
        report = report.check
    if not isinstance(report, CheckReport):
        raise NotRendered(f"junit renders check reports, not {type(report).__name__}")
    return junit_text(report)
