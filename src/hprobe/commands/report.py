"""`hprobe report`: the support matrix across a range of releases and, with
rules, each table judged release by release. The rules are read first, so a
bad table costs no probing; then the matrix, then the rules' pass down the
layers as `check` makes it (rules → answers → verdicts → report)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hprobe.model.release import Progress, quiet

if TYPE_CHECKING:
    from hprobe.commands.request import RuleRequest
    from hprobe.kernels.base import Value
    from hprobe.report.catalogue import SiteReport


def run_report(
    releases: str,
    kernels: list[str],
    sm: str | None,
    heads: list[int],
    axes: dict[str, list[Value]],
    request: RuleRequest | None,
    use_cache: bool,
    progress: Progress = quiet,
) -> SiteReport:
    """`request`: the rules to judge on every release of the range, or None."""
    from hprobe.commands.conclude import conclude
    from hprobe.commands.matrix import run_matrix
    from hprobe.judge import judge_answers
    from hprobe.report.catalogue import SiteReport
    from hprobe.report.model import CheckReport
    from hprobe.rules.sources import collect_rules
    from hprobe.support.answers import gather_answers
    from hprobe.support.published import release_labels

    rules = collect_rules(request.rule_inputs(use_cache), request.axis_values) if request is not None else None
    labels = release_labels(releases, progress)
    matrix = run_matrix(kernels, sm, heads, labels, use_cache, progress, axes)
    if request is None or rules is None:
        return SiteReport(matrix)
    tables, repo = rules
    answers = gather_answers(tables, repo, request.sm, labels, request.pin, use_cache, progress)
    return SiteReport(matrix, conclude(CheckReport.judged(answers, judge_answers(answers), False)))
