"""report/formats/github: workflow commands for a CI step — each annotation's
file, line and column as properties of their own, escaped as the runner
unescapes them, the rule's branch words opening the message; and no more than
GitHub shows a step, the last one saying how many more there are. On the
synthetic reports of tests/report/test_formats.py."""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET

import pytest

from hprobe.commands.conclude import conclude
from hprobe.model.verdict import Verdict
from hprobe.report.formats.github import annotation_lines
from hprobe.report.formats.junit import junit_text

from ..test_formats import _check, _many

pytestmark = pytest.mark.pure


# GitHub's workflow-command grammar: `::level prop=value,prop=value::message`,
# property values escaped (%, CR, LF, ':' and ',').
_WORKFLOW_COMMAND = re.compile(r"::(?P<level>error|warning|notice) (?P<props>[^:]*)::(?P<message>.*)")


@pytest.mark.parametrize(
    ("source", "where"),
    [
        (
            "vllm/v1/attention/backends/mla/flashinfer_mla.py:218 [SM100/SM103, unpadded]",
            ("vllm/v1/attention/backends/mla/flashinfer_mla.py", "218", None),
        ),
        (
            "/a tree/with spaces/flashinfer_sparse.py:209:5 [SM120/SM121, decode]",
            ("/a tree/with spaces/flashinfer_sparse.py", "209", "5"),
        ),
        ("t.toml:7", ("t.toml", "7", None)),
    ],
)
def test_annotations_carry_file_line_and_col_as_properties_of_their_own(source, where):
    findings = [dataclasses.replace(f, source=source) for f in _check().findings]
    report = conclude(dataclasses.replace(_check(), findings=findings))
    lines = annotation_lines(report)
    assert lines
    for line in lines:
        m = _WORKFLOW_COMMAND.fullmatch(line)
        assert m is not None, line
        props = dict(p.split("=", 1) for p in m.group("props").split(","))
        unescaped = {k: v.replace("%2C", ",").replace("%3A", ":").replace("%25", "%") for k, v in props.items()}
        assert (unescaped["file"], unescaped["line"], unescaped.get("col")) == where, line
        # The words after the location open the message.
        rest = source.split(f":{where[1]}" + (f":{where[2]}" if where[2] else ""), 1)[1].strip()
        assert m.group("message").startswith(rest), line
    # JUnit names the file alone too.
    files = {c.get("file") for c in ET.fromstring(junit_text(report)).findall(".//testcase")}
    assert files == {where[0]}


def test_annotations_stay_within_what_github_shows_a_step_and_say_the_rest():
    """GitHub shows 10 annotations of each level per step and drops the rest
    without a word: the tenth says how many more there are."""
    from hprobe.report.formats.github import ANNOTATIONS_PER_LEVEL, annotation_lines

    lines = annotation_lines(_many(Verdict.BROKEN, 25))
    assert len(lines) == ANNOTATIONS_PER_LEVEL and all(line.startswith("::error ") for line in lines)
    assert lines[-1].endswith(
        "::16 more error annotations not shown: GitHub shows 10 of each level per step; every finding is in the "
        "step's log and in --json / --junit"
    )
    assert len(annotation_lines(_many(Verdict.BROKEN, 10))) == 10  # exactly the limit: all shown, none said
