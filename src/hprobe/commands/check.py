"""The job behind `hprobe check`: probe the releases each table (or a repo's
rules) is judged on and compare it with what their validators answered. The
CLI parses options; this decides nothing about output."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import TYPE_CHECKING

from hprobe.judge import check_table, on_unread_pin
from hprobe.kernels import get_variant
from hprobe.model.errors import IndexUnlisted, InputError
from hprobe.model.padding import Backend, PaddingTable
from hprobe.model.release import INSTALLED, ProbedRelease, Progress, quiet
from hprobe.model.targets import DEFAULT_MAX_HEADS, resolve_targets
from hprobe.model.verdict import Finding, Verdict
from hprobe.report.model import CheckReport
from hprobe.rules.repo.tree.status import ClassStatus
from hprobe.support.gather import gather
from hprobe.support.published import pinned_releases

if TYPE_CHECKING:
    from hprobe.model.padding import Model
    from hprobe.rules.repo.extract import RepoTables
    from hprobe.rules.repo.interpreter.evaluate import NotEvaluable


def run_check(
    tables: list[PaddingTable],
    sm_option: str | None,
    strict: bool,
    flashinfer: list[str] | None = None,
    pin: str | None = None,
    use_cache: bool = True,
    progress: Progress = quiet,
    ahead: tuple[str, ...] = (),
    trust: bool = False,
) -> CheckReport:
    """`check --table`: each table judged on the releases its pin (or
    --flashinfer, its release labels) names; `ahead` is gather's; `trust`:
    --trust-validators (judge.judge)."""
    return _said_if_nothing_checked(
        _judge_tables(tables, sm_option, strict, flashinfer, pin, use_cache, progress, ahead=ahead, trust=trust)
    )


def _said_if_nothing_checked(report: CheckReport) -> CheckReport:
    if not report.findings:
        return replace(
            report, notes=[*report.notes, "nothing was checked: no backend of the tables runs on the SMs selected"]
        )
    return report


def _judge_tables(
    tables: list[PaddingTable],
    sm_option: str | None,
    strict: bool,
    flashinfer: list[str] | None,
    pin: str | None,
    use_cache: bool,
    progress: Progress,
    fallback_sms: list[int] | None = None,
    ahead: tuple[str, ...] = (),
    trust: bool = False,
) -> CheckReport:
    tables = [_with_variant_keys(t) for t in tables]
    fallback = sorted({sm for t in tables for b in t.backends for sm in b.sms}) or list(fallback_sms or [])
    targets = resolve_targets(sm_option, fallback, "the tables name")
    numbers = [sm.number for sm in targets.sms]
    notes: list[str] = [targets.note] if targets.note else []
    notes.extend(note for table in tables for note in table.notes)  # what the rule source said
    # Which releases each table is judged on.
    plan: dict[tuple[str, str], list[str]] = {}
    for table in tables:
        plan[table.name, table.path], pin_notes = releases_for(table, flashinfer, pin, progress)
        notes.extend(f"{table.name}: {n}" for n in pin_notes)
    # Probe each kernel once per SM and release over 1..max(256, largest padded
    # count), and at each regrouped count past that: a fold (k draft tokens
    # times the heads) is judged as it is, so no count between is asked.
    needed: dict[str, list[int]] = {}
    ceiling = DEFAULT_MAX_HEADS
    regrouped: set[int] = set()
    for table in tables:
        for backend in table.backends:
            for key in (backend.variant_key, *backend.alternatives):
                sms = set(needed.get(key, [])) | {sm for sm in backend.sms if sm in numbers}
                needed[key] = sorted(sms)
            if backend.regrouped:
                regrouped.update(p for _, _, n in backend.cases(table.models) if (p := backend.rule.pad(n)))
            else:
                ceiling = max(ceiling, backend.rule.largest())
            ceiling = max(ceiling, *(m.num_q_heads for m in table.models))
    needed = {k: v for k, v in needed.items() if v}
    heads = sorted(set(range(1, ceiling + 1)) | regrouped)
    findings: list[Finding] = []
    probed: dict[str, ProbedRelease] = {}
    if needed:
        all_labels = list(dict.fromkeys(label for labels in plan.values() for label in labels))
        probed = gather(all_labels, needed, heads, use_cache, progress, ahead)
        for rel in probed.values():
            notes.extend(rel.notes)
    for table in tables:
        supports = [probed[label].results for label in plan[table.name, table.path]] if needed else []
        table_findings, table_notes = check_table(table, supports, numbers, trust) if needed else ([], [])
        if not flashinfer:
            for f in table_findings:
                f.pin = pin or table.requires_flashinfer
        findings.extend(table_findings)
        notes.extend(table_notes)
    planned = list(dict.fromkeys(label for labels in plan.values() for label in labels))
    return CheckReport(
        list(probed.values()), targets, tables, findings, strict, notes, planned=planned, trust_validators=trust
    )


def releases_for(
    table: PaddingTable, flashinfer: list[str] | None, pin: str | None, progress: Progress = quiet
) -> tuple[list[str], list[str]]:
    """(release labels a table is judged on, notes): its own when its rules were
    evaluated against one release, else --flashinfer, else the pin's ends, else
    the installed release."""
    if table.releases:
        return list(table.releases), []
    if flashinfer:
        return list(flashinfer), []
    if pin or table.requires_flashinfer:
        spec = pin or table.requires_flashinfer or ""
        try:
            return pinned_releases(spec, progress)
        except IndexUnlisted as exc:
            # The pin's ends are unknown, so no release stands for them: the
            # table is judged on none (inconclusive), never on another.
            return [], [
                f"pin {spec}: {exc.message}; judged on no release"
                if type(exc) is IndexUnlisted
                else f"{exc.message}; judged on no release"
            ]
    return [INSTALLED], []


def _with_variant_keys(table: PaddingTable) -> PaddingTable:
    """Resolve each backend's kernel and options to a probe variant, or say where
    the table names something unknown."""
    backends = []
    for backend in table.backends:
        try:
            variant = get_variant(backend.kernel, dict(backend.options))
            others = [
                get_variant(backend.kernel, {**dict(backend.options), **values}).key
                for values in _unread_values(backend)
            ]
        except InputError as exc:
            raise InputError(f"{backend.where}: backend {backend.name}: {exc.message}") from None
        alternatives = tuple(k for k in dict.fromkeys(others) if k != variant.key)
        backends.append(replace(backend, key=variant.key, alternatives=alternatives))
    return replace(table, backends=backends)


def _unread_values(backend: Backend) -> list[dict[str, str | int]]:
    """Every combination of the values of the axes the engine sets unread."""
    if not backend.unread:
        return []
    names = [name for name, _ in backend.unread]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(v for _, v in backend.unread))]


def run_repo_check(
    repo: RepoTables,
    sm_option: str | None,
    strict: bool,
    flashinfer: list[str] | None = None,
    pin: str | None = None,
    use_cache: bool = True,
    progress: Progress = quiet,
    ahead: tuple[str, ...] = (),
    trust: bool = False,
) -> CheckReport:
    """`check --repo`: the table read from the consumer's source, judged like any
    table; classes whose rule could not be evaluated are inconclusive findings,
    and classes hprobe does not probe are listed with their padding. `ahead`
    is gather's."""
    mapped_sms = sorted({sm for c in repo.classes for e in c.entries if e.kernel for sm in e.sms})
    readings = [repo]  # the tree as read: once, or once per release its rules read
    if repo.per_release:
        # The rules read flashinfer's own tables (SGLang reads its SM12x decode
        # dispatch): evaluated once per release judged, each table judged on
        # its release only.
        from hprobe.support.gather import release_reader

        labels, _ = releases_for(repo.table, flashinfer, pin, progress)
        readings = []
        for label in labels:
            progress(f"evaluating the repo's rules against flashinfer {label}")
            readings.append(repo.against(release_reader(label), label))
        repo = readings[-1]  # classes and notes as the newest release reads them
    report = _judge_tables(
        [r.table for r in readings],
        sm_option,
        strict,
        flashinfer,
        pin,
        use_cache,
        progress,
        fallback_sms=mapped_sms,
        ahead=ahead,
        trust=trust,
    )
    said = (
        f"flashinfer pin {repo.pin.spec} read from {repo.pin.source}"
        if repo.pin
        else f"no flashinfer requirement found in {repo.root}'s metadata"
    )
    findings = list(report.findings)
    if repo.pin is None and repo.pin_unread and not flashinfer and pin is None:
        # Judged on the installed release only because no pin was read: not
        # the tree's answer. Shown, never concluded (exit 3 unless a finding fails).
        said = (
            f"the flashinfer requirement cannot be read ({repo.pin_unread[0]}): judged on flashinfer "
            f"{report.releases_judged}, which the tree may not install; every verdict is undecided until "
            "--pin or --flashinfer names the release"
        )
        findings = on_unread_pin(findings, said)
    notes = [said, *report.notes, *repo.notes]
    numbers = [sm.number for sm in report.targets.sms]
    asked = report.targets.source == "flag"  # --sm: no row of another SM
    for item in repo.classes:
        rule = (
            item.rule.describe() if item.rule else "; ".join(b.describe() for b in item.bound) or "rule not evaluated"
        )
        why = item.not_probed_because()
        if item.status is ClassStatus.NOT_EVALUABLE:
            # One probed entry makes it an inconclusive finding instead (below).
            if not any(e.kernel for e in item.entries):
                notes.append(f"{item.cls.qualname}: {why}")
        elif why is not None:
            notes.append(f"{item.cls.qualname} ({item.where}): {rule}; {why}")
    # A rule not evaluable on a release is inconclusive there: each reading's own.
    for reading in readings:
        findings.extend(_unevaluated(reading, numbers, asked))
        findings.extend(_unevaluated_paths(reading, numbers, asked))
    report = replace(report, notes=notes, findings=findings, call_paths=[p.record() for p in repo.paths.paths])
    return _said_if_nothing_checked(report)


def _sms_shown(where: list[int], numbers: list[int], asked: bool) -> list[int]:
    """The SMs of `where` checked; where none is, all of them unless --sm asked
    for others (an unevaluable call is not hidden by the SMs a table names)."""
    return [s for s in where if s in numbers] or ([] if asked else list(where))


def _unevaluated_paths(repo: RepoTables, numbers: list[int], asked: bool) -> list[Finding]:
    """Inconclusive findings, where each runs, for the call paths whose head
    count could not be evaluated in this reading of the tree."""
    out = []
    for problem in repo.paths.problems:
        models = [m for m in repo.table.models if not problem.models or m.name in problem.models]
        for sm in _sms_shown(list(problem.sms), numbers, asked):
            out.extend(_not_evaluable(repo, models, problem.backend, problem.kernel, sm, problem.problem))
    return out


def _unevaluated(repo: RepoTables, numbers: list[int], asked: bool) -> list[Finding]:
    """Inconclusive findings, where each entry would run, for the classes whose
    rule could not be evaluated in this reading of the tree."""
    out = []
    for item in repo.classes:
        problem = item.problem
        probed = [e for e in item.entries if e.kernel is not None]
        if item.status is not ClassStatus.NOT_EVALUABLE or problem is None or not probed:
            continue
        for entry in probed:
            for sm in _sms_shown(list(entry.sms), numbers, asked):
                out.extend(
                    _not_evaluable(
                        repo, repo.table.models, f"{item.cls.qualname}{entry.label}", entry.kernel or "", sm, problem
                    )
                )
    return out


def _not_evaluable(
    repo: RepoTables, models: list[Model], backend: str, kernel: str, sm: int, problem: NotEvaluable
) -> list[Finding]:
    """One inconclusive finding per model and TP: the rule or count that feeds
    `backend` on `sm` could not be read, so nothing about it is judged."""
    return [
        Finding(
            table=repo.table.name,
            table_path=repo.table.path,
            model=model.name,
            tp=tp,
            n=n,
            backend=backend,
            kernel=kernel,
            sm=sm,
            flashinfer_version="-",
            padded=None,
            verdict=Verdict.INCONCLUSIVE,
            notes=[f"not evaluable: {problem}"],
            source=f"{problem.path}:{problem.line}",
            rule_unknown=True,
        )
        for model in models
        for tp, n in model.per_rank()
    ]
