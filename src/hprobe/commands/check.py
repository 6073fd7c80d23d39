"""`hprobe check`: the padding rules judged on the releases they run on. One
pass down the layers: the rules (rules/sources.py), their answers
(support/answers.py), the verdicts (judge.py), the report, waivers and a
baseline's drift applied, then concluded (commands/conclude.py). The CLI
parses options; this decides nothing about output."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from hprobe.model.release import Progress, quiet

if TYPE_CHECKING:
    from hprobe.commands.drift import Baseline
    from hprobe.commands.request import RuleRequest
    from hprobe.model.waiver import Waiver
    from hprobe.report.model import CheckReport


def run_check(
    request: RuleRequest,
    strict: bool,
    baseline: Baseline | None,
    use_cache: bool,
    progress: Progress = quiet,
    waivers: list[Waiver] | None = None,
    trust: bool = False,
) -> CheckReport:
    """The rules judged, waivers applied, and with a baseline what changed
    since it; `trust`: --trust-validators."""
    from hprobe.commands.conclude import conclude
    from hprobe.judge import judge_answers, waive
    from hprobe.model.waiver import utc_today
    from hprobe.report.model import CheckReport
    from hprobe.rules.sources import collect_rules
    from hprobe.support.answers import gather_answers

    tables, repo = collect_rules(request.rule_inputs(use_cache), request.axis_values)
    answers = gather_answers(tables, repo, request.sm, request.releases, request.pin, use_cache, progress)
    report = CheckReport.judged(answers, judge_answers(answers, trust), strict, trust)
    if waivers:
        findings, uses = waive(report.findings, waivers, utc_today())
        report = replace(report, findings=findings, waivers=uses)
    if baseline is not None:
        from hprobe.commands.drift import baseline_drift

        label = request.releases[-1] if request.releases else None
        report = replace(report, drift=baseline_drift(baseline, label, use_cache, progress))
    return conclude(report)
