"""`check` (and the rule half of `suggest` and `report`): read the requested
padding rules, probe the releases they are judged on, judge them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from hprobe.model.release import Progress, quiet

if TYPE_CHECKING:
    from hprobe.commands.drift import Baseline
    from hprobe.commands.request import RuleRequest
    from hprobe.model.padding import PaddingTable
    from hprobe.model.waiver import Waiver
    from hprobe.report.model import CheckReport
    from hprobe.rules.interface import RuleSource
    from hprobe.rules.repo.extract import RepoTables


def collect_rules(request: RuleRequest, use_cache: bool = True) -> tuple[list[PaddingTable], RepoTables | None]:
    """(tables, the repo's record or None). The rule source is the first kind
    the request names (rules/sources.py); nothing is probed yet. A tree is read
    through the cache (support/readings.py) unless `use_cache` is off."""
    from hprobe.rules import override_models, override_options
    from hprobe.rules.interface import RuleInputs
    from hprobe.rules.sources import rule_sources

    picked = None
    if request.models is not None:
        from hprobe.rules.models import pick_models, shipped_models

        picked = pick_models(list(shipped_models()), list(request.models))
    inputs = RuleInputs(
        tables=request.tables,
        repo=request.repo,
        mapping=request.mapping,
        exclude=request.exclude,
        settings=request.settings,
        pad_fn=request.pad_fn,
        kernel=request.kernel,
        sm=request.sm,
        heads=request.heads,
        tp=request.tp,
        picked=tuple(picked) if picked is not None else None,
        read_tree=_tree_reader(use_cache) if request.repo is not None else None,
    )
    sources = rule_sources(inputs)
    repo_tables: RepoTables | None = None
    tables = []
    for source in sources:
        record = _repo_record(source) if request.repo is not None else None
        if record is not None:
            repo_tables = record
            tables.append(record.table)
        else:
            tables.append(source.collect())
    # A repo's rules and a --pad-fn were evaluated for the overridden models already.
    evaluated = repo_tables is not None or request.pad_fn is not None
    tp_list = list(request.tp) if request.tp is not None else None
    tables = [
        override_options(override_models(t, request.heads, tp_list, evaluated, picked), request.axis_values)
        for t in tables
    ]
    if repo_tables is not None:
        repo_tables = replace(repo_tables, table=tables[0])  # the table as overridden is the one judged and patched
    return tables, repo_tables


def _tree_reader(use_cache: bool) -> Callable[..., RepoTables]:
    from hprobe.support.readings import KeptReadings

    return KeptReadings(use_cache).extract


def _repo_record(source: RuleSource) -> RepoTables | None:
    """A repo's full record (classes, call paths, pin); None for other sources.
    Imported only where a repo is read: the extractor is 40 ms of imports."""
    from hprobe.rules.repo.extract import RepoRuleSource

    return source.read() if isinstance(source, RepoRuleSource) else None


def judge_rules(
    request: RuleRequest,
    tables: list[PaddingTable],
    repo_tables: RepoTables | None,
    strict: bool,
    use_cache: bool,
    progress: Progress = quiet,
    flashinfer: list[str] | None = None,
    ahead: tuple[str, ...] = (),
    trust: bool = False,
) -> CheckReport:
    """The collected rules judged on the releases the request names (or
    `flashinfer`, release labels a command chose); `ahead`: releases a later
    step will ask, probed alongside (support/gather.py); `trust`: a pending
    compiled selection taken on the validators' word (--trust-validators)."""
    from hprobe.commands.check import run_check, run_repo_check
    from hprobe.support.trees import parse_spec

    releases = (
        flashinfer if flashinfer is not None else (parse_spec(request.flashinfer) if request.flashinfer else None)
    )
    if repo_tables is not None:
        return run_repo_check(repo_tables, request.sm, strict, releases, request.pin, use_cache, progress, ahead, trust)
    return run_check(tables, request.sm, strict, releases, request.pin, use_cache, progress, ahead, trust)


def run_check_command(
    request: RuleRequest,
    strict: bool,
    baseline: Baseline | None,
    use_cache: bool,
    progress: Progress = quiet,
    waivers: list[Waiver] | None = None,
    trust: bool = False,
) -> CheckReport:
    """`hprobe check`: the rules judged, waivers applied, and with a baseline
    what changed since it; `trust`: --trust-validators."""

    from hprobe.commands.conclude import conclude
    from hprobe.judge import waive
    from hprobe.model.waiver import utc_today

    tables, repo_tables = collect_rules(request, use_cache)
    report = judge_rules(request, tables, repo_tables, strict, use_cache, progress, trust=trust)
    if waivers:
        findings, uses = waive(report.findings, waivers, utc_today())
        report = replace(report, findings=findings, waivers=uses)
    if baseline is not None:
        from hprobe.commands.drift import baseline_drift
        from hprobe.support.trees import parse_spec

        label = parse_spec(request.flashinfer)[-1] if request.flashinfer else None
        report = replace(report, drift=baseline_drift(baseline, label, use_cache, progress))
    return conclude(report)
