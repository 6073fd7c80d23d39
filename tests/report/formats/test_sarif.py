"""report/formats/sarif: a check as one SARIF 2.1.0 log — a reporting rule per
verdict with its own explanation, a result per rule x SM x verdict at the rule's
file and line (a URI code scanning accepts: no branch words, spaces quoted), the
rest of the place in the message. On the synthetic reports of tests/report/test_formats.py."""

from __future__ import annotations

import dataclasses
import json

import pytest

from hprobe.model.verdict import Verdict
from hprobe.report.formats.sarif import SCHEMA, sarif_log

from ..test_formats import _check, _rendered

pytestmark = pytest.mark.pure


def test_sarif_is_a_log_with_a_rule_per_verdict_and_each_result_at_its_line():
    doc = json.loads(_rendered("sarif", _check()))
    assert doc["version"] == "2.1.0" and doc["$schema"].endswith("sarif-2.1.0.json")
    [run] = doc["runs"]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert list(rules) == [v.value for v in Verdict]
    assert all(rules[v.value]["fullDescription"]["text"] == v.explanation for v in Verdict)
    results = run["results"]
    assert [r["ruleId"] for r in results] == [v.value for v in Verdict if v.ci_level(False)]
    levels = {"error": "error", "warning": "warning", "notice": "note"}
    for r in results:
        verdict = Verdict(r["ruleId"])
        assert r["level"] == levels[verdict.ci_level(False)]
        place = r["locations"][0]["physicalLocation"]
        assert place == {"artifactLocation": {"uri": "t.toml"}, "region": {"startLine": 7}}
        assert r["properties"]["counts"][0]["model"] == "model-x"
    broken = next(r for r in results if r["ruleId"] == "broken")
    assert broken["level"] == "error" and "Expected 64 or 128 query heads" in broken["message"]["text"]
    assert run["properties"]["exit_code"] == 1


@pytest.mark.parametrize(
    ("source", "location", "branch"),
    [
        (
            "/src/vllm/attention.py:495 [SM100/SM103, unpadded]",
            {"artifactLocation": {"uri": "file:///src/vllm/attention.py"}, "region": {"startLine": 495}},
            "[SM100/SM103, unpadded]",
        ),
        (
            "vllm/a b.py:12:4",
            {"artifactLocation": {"uri": "vllm/a%20b.py"}, "region": {"startLine": 12, "startColumn": 4}},
            "",
        ),
        ("vllm/attention.py [SM100, decode]", {"artifactLocation": {"uri": "vllm/attention.py"}}, "[SM100, decode]"),
    ],
)
def test_sarif_locations_are_a_path_and_a_line_and_the_rest_goes_to_the_message(source, location, branch):
    """Code scanning refuses a file URI that carries the rule's branch ("…:495
    [SM100/SM103, unpadded]" was one on vLLM 0.34.0): the path and the line
    are the location, the words after them join the message."""
    report = _check()
    report = dataclasses.replace(report, findings=[dataclasses.replace(f, source=source) for f in report.findings])
    results = json.loads(_rendered("sarif", report))["runs"][0]["results"]
    assert results and all(r["locations"] == [{"physicalLocation": location}] for r in results)
    said = f" (the rule's branch: {branch})"
    assert all(r["message"]["text"].endswith(said) == bool(branch) for r in results)


def test_every_string_from_outside_is_json_and_no_runner_reads_a_command_in_it():
    """A finding's message holding `##[group]` and a quote: the log parses, the
    text reads back the same, and the bytes hold no `##[` a runner would act on."""
    report = _check()
    hostile = 'x ##[group]"quoted"'
    report = dataclasses.replace(report, findings=[dataclasses.replace(f, backend=hostile) for f in report.findings])
    written = _rendered("sarif", report)
    assert "##[" not in written
    results = json.loads(written)["runs"][0]["results"]
    assert results and all(r["message"]["text"].startswith(hostile) for r in results)


def test_the_log_names_its_schema_tool_and_what_was_judged():
    log = sarif_log(_check())
    assert log["$schema"] == SCHEMA and log["version"] == "2.1.0"
    [run] = log["runs"]
    assert run["tool"]["driver"]["name"] == "hprobe"
    assert run["properties"]["releases"] and run["properties"]["sms"]
