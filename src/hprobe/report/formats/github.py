"""GitHub Actions workflow-command annotations, pointing at the padding rule's file and line.

Printed only when GITHUB_ACTIONS=true (set by the Actions runner), and always on
stderr: stdout carries the report alone, so `--format markdown >>
"$GITHUB_STEP_SUMMARY"` and `--json` stay clean (the runner reads workflow
commands from both streams)."""

from __future__ import annotations

import os
from collections import Counter
from typing import TYPE_CHECKING

from hprobe.report.formats.base import NotRendered, RenderOptions, source_location
from hprobe.system.escaping import gha_data, gha_property

if TYPE_CHECKING:
    from hprobe.model.verdict import Finding
    from hprobe.report.model import CheckReport


def in_github_actions() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


def annotation_lines(report: CheckReport) -> list[str]:
    """One annotation per backend x SM x verdict (not per model and TP: a
    padding function is one line of code)."""
    grouped: dict[tuple[str, str, str, int, str], list[Finding]] = {}
    for f in report.findings:
        level = f.ci_level(report.strict)
        if level is None:
            continue
        grouped.setdefault((level, f.source, f.backend, f.sm, f.label), []).append(f)
    lines: list[tuple[str, str]] = []  # (level, annotation)
    for (level, source, backend, sm, label), findings in grouped.items():
        where = source_location(source)
        # Rows share an annotation, never an explanation: each row's own
        # evidence (waste factor, validator message) is kept, rows that say
        # the same thing listed together.
        by_explanation: dict[str, list[str]] = {}
        for f in findings:
            by_explanation.setdefault(f.explain(), []).append(f"{f.model} TP{f.tp} (n={f.n})")
        # file, line and col are properties of their own (GitHub attaches the
        # annotation only so); what the source says after them is message.
        props = [f"file={gha_property(where.path)}"]
        props += [f"line={where.line}"] if where.line else []
        props += [f"col={where.col}"] if where.col else []
        props.append(f"title={gha_property(f'hprobe: {backend} SM{sm} {label}')}")
        message = "; ".join(f"{', '.join(cases)}: {explanation}" for explanation, cases in by_explanation.items())
        if where.rest:
            message = f"{where.rest} {message}"
        lines.append((level, f"::{level} {','.join(props)}::{gha_data(message)}"))
    return _within_step_limits(lines)


# GitHub shows at most 10 annotations of each level per step (and drops the
# rest without a word): the last one shown says how many more there are.
ANNOTATIONS_PER_LEVEL = 10


def _within_step_limits(lines: list[tuple[str, str]]) -> list[str]:
    """The annotations in their order, at most ANNOTATIONS_PER_LEVEL of a
    level, the last of those saying how many more there are."""
    total = Counter(level for level, _ in lines)
    shown: dict[str, int] = {}
    kept = []
    for level, line in lines:
        shown[level] = shown.get(level, 0) + 1
        if total[level] <= ANNOTATIONS_PER_LEVEL or shown[level] < ANNOTATIONS_PER_LEVEL:
            kept.append(line)
        elif shown[level] == ANNOTATIONS_PER_LEVEL:
            rest = total[level] - (ANNOTATIONS_PER_LEVEL - 1)
            kept.append(
                f"::{level} title={gha_property('hprobe: more annotations')}::"
                + gha_data(
                    f"{rest} more {level} annotations not shown: GitHub shows {ANNOTATIONS_PER_LEVEL} of each level "
                    "per step; every finding is in the step's log and in --json / --junit"
                )
            )
    return kept


def render(report: object, options: RenderOptions) -> str:
    """The annotations of a check, a line each (the CLI writes them to stderr
    inside GitHub Actions)."""
    from hprobe.report.model import CheckReport

    if not isinstance(report, CheckReport):
        raise NotRendered(f"github annotations render check reports, not {type(report).__name__}")
    return "".join(line + "\n" for line in annotation_lines(report))
