"""`check` (and the rule half of `suggest` and `report`): read the requested
padding rules, probe the releases they are judged on, judge them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hprobe.model.errors import InputError
from hprobe.model.release import Progress, quiet

if TYPE_CHECKING:
    from hprobe.commands.drift import Baseline
    from hprobe.commands.request import RuleRequest
    from hprobe.model.padding import PaddingTable
    from hprobe.report.model import CheckReport
    from hprobe.rules.interface import RuleSource
    from hprobe.rules.repo.extract import RepoTables


def collect_rules(request: RuleRequest) -> tuple[list[PaddingTable], RepoTables | None]:
    """(tables, the repo's record or None). The rule source: a repo read with
    ast, the user's own function, or tables. Nothing is probed yet."""
    from hprobe.rules import overridden_models, override_models, override_options, table_sources

    repo_source = None
    picked = None
    if request.models is not None:
        from hprobe.rules.models import pick_models, shipped_models

        picked = pick_models(list(shipped_models()), list(request.models))
    sources: list[RuleSource]
    if request.repo is not None:
        from hprobe.rules.repo.extract import RepoRuleSource
        from hprobe.rules.repo.mapping import load_mapping

        chosen = load_mapping(request.mapping) if request.mapping is not None else None
        heads, tp = request.heads, list(request.tp) if request.tp is not None else None
        models = (lambda found: overridden_models(found, heads, tp, picked)) if heads is not None or tp is not None or picked is not None else None
        repo_source = RepoRuleSource(request.repo, chosen, request.exclude, dict(request.settings), models)
        sources = [repo_source]
    elif request.pad_fn is not None:
        sources = [pad_fn_source(request)]
    else:
        sources = list(table_sources(list(request.tables)))
    tables = [source.collect() for source in sources]
    # A repo's rules and a --pad-fn were evaluated for the overridden models already.
    evaluated = repo_source is not None or request.pad_fn is not None
    tp_list = list(request.tp) if request.tp is not None else None
    tables = [override_options(override_models(t, request.heads, tp_list, evaluated, picked), request.axis_values) for t in tables]
    repo_tables = repo_source.found if repo_source is not None else None
    if repo_tables is not None:
        repo_tables.table = tables[0]  # the table as overridden is the one judged and patched
    return tables, repo_tables


def pad_fn_source(request: RuleRequest) -> RuleSource:
    from hprobe.kernels import get_variant
    from hprobe.model.padding import Model, Where
    from hprobe.model.sm import parse_sm_list
    from hprobe.rules.repo.padfn import PadFnRuleSource

    spec, kernel, sm, heads = request.pad_fn, request.kernel, request.sm, request.heads
    assert spec is not None
    if not kernel or not sm or heads is None:
        raise InputError("--pad-fn needs --kernel (the kernel it feeds), --sm and --heads (the model's total query heads)")
    variant = get_variant(kernel)
    tps = tuple(request.tp or [t for t in (1, 2, 4, 8, 16) if heads % t == 0])
    model = Model(f"{heads} heads", heads, tps, Where("--heads"))
    sms = tuple(s.number for s in parse_sm_list(sm))
    options = tuple((k, v) for k, v in variant.config if v != dict(variant.probe.variant().config)[k])
    return PadFnRuleSource(spec, variant.probe.id, sms, [model], options)


def judge_rules(
    request: RuleRequest,
    tables: list[PaddingTable],
    repo_tables: RepoTables | None,
    strict: bool,
    use_cache: bool,
    progress: Progress = quiet,
    flashinfer: str | None = None,
) -> CheckReport:
    """The collected rules judged on the releases the request names (or
    `flashinfer`, where a command chose them)."""
    from hprobe.commands.check import run_check, run_repo_check

    releases = flashinfer if flashinfer is not None else request.flashinfer
    if repo_tables is not None:
        return run_repo_check(repo_tables, request.sm, strict, releases, request.pin, use_cache, progress)
    return run_check(tables, request.sm, strict, releases, request.pin, use_cache, progress)


def run_check_command(request: RuleRequest, strict: bool, baseline: Baseline | None, use_cache: bool, progress: Progress = quiet) -> CheckReport:
    """`hprobe check`: the rules judged, and with a baseline what changed since it."""
    tables, repo_tables = collect_rules(request)
    report = judge_rules(request, tables, repo_tables, strict, use_cache, progress)
    if baseline is not None:
        from hprobe.commands.drift import baseline_drift
        from hprobe.support.releases import parse_spec

        label = parse_spec(request.flashinfer)[-1] if request.flashinfer else None
        report.drift = baseline_drift(baseline, label, use_cache, progress)
    return report
