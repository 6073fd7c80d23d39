"""The jobs behind `hprobe matrix` and `hprobe check`: pick the variants and
SMs, probe the releases, and compare tables (or a repo's rules) with what
their validators answered. The CLI parses options; this decides nothing about
output."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from hprobe.judge import check_table
from hprobe.kernels import PROBES, get_probe, get_variant, named_axes
from hprobe.kernels.base import Value
from hprobe.model.errors import InputError
from hprobe.model.outcome import KernelSMResult, Outcome
from hprobe.model.padding import PaddingTable
from hprobe.model.release import INSTALLED, ProbedRelease, Progress, quiet
from hprobe.model.targets import DEFAULT_MAX_HEADS, resolve_targets
from hprobe.model.verdict import Finding, Verdict
from hprobe.report.model import CheckReport, MatrixReport
from hprobe.rules.repo.status import ClassStatus
from hprobe.support.gather import gather
from hprobe.support.releases import parse_spec, pinned_releases

if TYPE_CHECKING:
    from collections.abc import Callable

    from hprobe.advise.suggest import BackendSuggestion
    from hprobe.model.padding import Model
    from hprobe.rules.repo.evaluate import NotEvaluable
    from hprobe.rules.repo.extract import RepoTables


def variant_keys(kernel_ids: list[str], axes: dict[str, list[Value]] | None = None) -> list[str]:
    """Every variant of the named kernels: their sweeps, with `axes` overriding.
    An axis no named kernel has is an input error, not silently ignored."""
    axes = {k: v for k, v in (axes or {}).items() if v}
    pinned = {k: get_variant(k) for k in kernel_ids if "[" in k}  # `trtllm-mla[backend=xqa]`
    probes = [pinned[k].probe if k in pinned else get_probe(k) for k in kernel_ids]
    for name in axes:
        if not any(p.axis(name) for p in probes):
            owners = sorted(p.id for p in _all_probes() if p.axis(name))
            hint = f" (kernels with it: {', '.join(owners)})" if owners else ""
            raise InputError(f"--{name.replace('_', '-')}: none of the kernels probed has this axis{hint}")
    keys: list[str] = []
    for item, probe in zip(kernel_ids, probes, strict=True):
        mine = {k: v for k, v in axes.items() if probe.axis(k)}
        if item in pinned:
            # What the brackets name is fixed; the other axes sweep or follow options.
            named = named_axes(item)
            mine.update({k: [v] for k, v in pinned[item].values.items() if k in named})
        keys.extend(v.key for v in probe.variants(mine))
    return list(dict.fromkeys(keys))


def _all_probes():
    return PROBES.values()


def run_matrix(
    kernel_ids: list[str],
    sm_option: str | None,
    heads: list[int],
    flashinfer_spec: str | None = None,
    use_cache: bool = True,
    progress: Progress = quiet,
    axes: dict[str, list[Value]] | None = None,
) -> MatrixReport:
    keys = variant_keys(kernel_ids, axes)
    fallback = sorted({sm for k in keys for sm in get_variant(k).probe.default_sms})
    targets = resolve_targets(sm_option, fallback, "the kernels are built for")
    labels = parse_spec(flashinfer_spec) if flashinfer_spec else [INSTALLED]
    needed = {key: [sm.number for sm in targets.sms] for key in keys}
    probed = gather(labels, needed, heads, use_cache, progress)
    return MatrixReport([probed[label] for label in labels], targets, heads, keys)


def run_check(
    tables: list[PaddingTable],
    sm_option: str | None,
    strict: bool,
    flashinfer_spec: str | None = None,
    pin: str | None = None,
    use_cache: bool = True,
    progress: Progress = quiet,
) -> CheckReport:
    """`check --table`: each table judged on the releases its pin (or
    --flashinfer) names."""
    return _said_if_nothing_checked(_judge_tables(tables, sm_option, strict, flashinfer_spec, pin, use_cache, progress))


def _said_if_nothing_checked(report: CheckReport) -> CheckReport:
    if not report.findings:
        return replace(report, notes=[*report.notes, "nothing was checked: no backend of the tables runs on the SMs selected"])
    return report


def _judge_tables(
    tables: list[PaddingTable],
    sm_option: str | None,
    strict: bool,
    flashinfer_spec: str | None,
    pin: str | None,
    use_cache: bool,
    progress: Progress,
    fallback_sms: list[int] | None = None,
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
        plan[table.name, table.path], pin_notes = releases_for(table, flashinfer_spec, pin, progress)
        notes.extend(f"{table.name}: {n}" for n in pin_notes)
    # Probe each kernel once per SM and release over 1..max(256, largest padded count).
    needed: dict[str, list[int]] = {}
    ceiling = DEFAULT_MAX_HEADS
    for table in tables:
        for backend in table.backends:
            sms = set(needed.get(backend.variant_key, [])) | {sm for sm in backend.sms if sm in numbers}
            needed[backend.variant_key] = sorted(sms)
            ceiling = max(ceiling, backend.rule.largest(), *(m.num_q_heads for m in table.models))
    needed = {k: v for k, v in needed.items() if v}
    heads = list(range(1, ceiling + 1))
    findings: list[Finding] = []
    probed: dict[str, ProbedRelease] = {}
    if needed:
        all_labels = list(dict.fromkeys(label for labels in plan.values() for label in labels))
        probed = gather(all_labels, needed, heads, use_cache, progress)
        for rel in probed.values():
            notes.extend(rel.notes)
    for table in tables:
        supports = [probed[label].results for label in plan[table.name, table.path]] if needed else []
        table_findings, table_notes = check_table(table, supports, numbers) if needed else ([], [])
        if not flashinfer_spec:
            for f in table_findings:
                f.pin = pin or table.requires_flashinfer
        findings.extend(table_findings)
        notes.extend(table_notes)
    planned = list(dict.fromkeys(label for labels in plan.values() for label in labels))
    return CheckReport(list(probed.values()), targets, tables, findings, strict, notes, planned=planned)


def releases_for(table: PaddingTable, flashinfer_spec: str | None, pin: str | None, progress: Progress = quiet) -> tuple[list[str], list[str]]:
    """(release labels a table is judged on, notes): its own when its rules were
    evaluated against one release, else --flashinfer, else the pin's ends, else
    the installed release."""
    if table.releases:
        return list(table.releases), []
    if flashinfer_spec:
        return parse_spec(flashinfer_spec), []
    if pin or table.requires_flashinfer:
        return pinned_releases(pin or table.requires_flashinfer or "", progress)
    return [INSTALLED], []


def _with_variant_keys(table: PaddingTable) -> PaddingTable:
    """Resolve each backend's kernel and options to a probe variant, or say where
    the table names something unknown."""
    backends = []
    for backend in table.backends:
        try:
            variant = get_variant(backend.kernel, dict(backend.options))
        except InputError as exc:
            raise InputError(f"{backend.where}: backend {backend.name}: {exc.message}") from None
        backends.append(replace(backend, key=variant.key))
    return replace(table, backends=backends)


def run_repo_check(
    repo: RepoTables,
    sm_option: str | None,
    strict: bool,
    flashinfer_spec: str | None = None,
    pin: str | None = None,
    use_cache: bool = True,
    progress: Progress = quiet,
) -> CheckReport:
    """`check --repo`: the table read from the consumer's source, judged like any
    table; classes whose rule could not be evaluated are inconclusive findings,
    and classes hprobe does not probe are listed with their padding."""
    mapped_sms = sorted({sm for c in repo.classes for e in c.entries if e.kernel for sm in e.sms})
    readings = [repo]  # the tree as read: once, or once per release its rules read
    if repo.per_release:
        # The rules read flashinfer's own tables (SGLang reads its SM12x decode
        # dispatch): evaluated once per release judged, each table judged on
        # its release only.
        from hprobe.support.gather import release_reader

        labels, _ = releases_for(repo.table, flashinfer_spec, pin, progress)
        readings = []
        for label in labels:
            progress(f"evaluating the repo's rules against flashinfer {label}")
            readings.append(repo.against(release_reader(label), label))
        repo = readings[-1]  # classes and notes as the newest release reads them
    report = _judge_tables([r.table for r in readings], sm_option, strict, flashinfer_spec, pin, use_cache, progress, fallback_sms=mapped_sms)
    said = f"flashinfer pin {repo.pin.spec} read from {repo.pin.source}" if repo.pin else f"no flashinfer requirement found in {repo.root}'s metadata"
    notes = [said, *report.notes, *repo.notes]
    numbers = [sm.number for sm in report.targets.sms]
    for item in repo.classes:
        rule = item.rule.describe() if item.rule else "; ".join(b.describe() for b in item.bound) or "rule not evaluated"
        why = item.not_probed_because()
        if item.status is ClassStatus.NOT_EVALUABLE:
            # One probed entry makes it an inconclusive finding instead (below).
            if not any(e.kernel for e in item.entries):
                notes.append(f"{item.cls.qualname}: {why}")
        elif why is not None:
            notes.append(f"{item.cls.qualname} ({item.where}): {rule}; {why}")
    # A rule not evaluable on a release is inconclusive there: each reading's own.
    findings = list(report.findings)
    for reading in readings:
        findings.extend(_unevaluated(reading, numbers))
        findings.extend(_unevaluated_paths(reading, numbers))
    report = replace(report, notes=notes, findings=findings, call_paths=[p.record() for p in repo.paths.paths])
    return _said_if_nothing_checked(report)


def _unevaluated_paths(repo: RepoTables, numbers: list[int]) -> list[Finding]:
    """Inconclusive findings, where each runs, for the call paths whose head
    count could not be evaluated in this reading of the tree."""
    out = []
    for problem in repo.paths.problems:
        models = [m for m in repo.table.models if not problem.models or m.name in problem.models]
        for sm in [s for s in problem.sms if s in numbers] or list(problem.sms):
            out.extend(_not_evaluable(repo, models, problem.backend, problem.kernel, sm, problem.problem))
    return out


def _unevaluated(repo: RepoTables, numbers: list[int]) -> list[Finding]:
    """Inconclusive findings, where each entry would run, for the classes whose
    rule could not be evaluated in this reading of the tree."""
    out = []
    for item in repo.classes:
        problem = item.problem
        probed = [e for e in item.entries if e.kernel is not None]
        if item.status is not ClassStatus.NOT_EVALUABLE or problem is None or not probed:
            continue
        for entry in probed:
            for sm in [s for s in entry.sms if s in numbers] or list(entry.sms):
                out.extend(_not_evaluable(repo, repo.table.models, f"{item.cls.qualname}{entry.label}", entry.kernel or "", sm, problem))
    return out


def _not_evaluable(repo: RepoTables, models: list[Model], backend: str, kernel: str, sm: int, problem: NotEvaluable) -> list[Finding]:
    """One inconclusive finding per model and TP: the rule or count that feeds
    `backend` on `sm` could not be read, so nothing about it is judged."""
    return [
        Finding(
            table=repo.table.name, table_path=repo.table.path, model=model.name, tp=tp, n=n, backend=backend, kernel=kernel, sm=sm,
            flashinfer_version="-", padded=None, verdict=Verdict.INCONCLUSIVE, notes=[f"not evaluable: {problem}"],
            source=f"{problem.path}:{problem.line}", rule_unknown=True,
        )
        for model in models
        for tp, n in model.per_rank()
    ]


def search_pins(report: CheckReport, suggestions: list[BackendSuggestion], pin: str | None, use_cache: bool = True, progress: Progress = quiet, start: Version | None = None) -> tuple[list[Version], list[str]]:
    """Fill each suggestion's pin advice: per count of its suggested rule (and
    per count unpadded), the first published release from which every SM of
    the backend accepts it on the fast path. The search starts where the
    kernel's entry point first exists (or at `start`, --since), never at the pin's
    floor, so "safe from X" is the first safe release, not the first one
    looked at. A release is probed once for all counts and backends; releases
    the check probed are not probed again. Returns the published releases."""
    from hprobe.advise.pins import advise
    from hprobe.rules.repo.pin import parse_pin
    from hprobe.support.gather import probe_named
    from hprobe.support.releases import published_versions

    pins = {t.name: pin or t.requires_flashinfer for t in report.tables}
    stranded = [s for s in suggestions if s.suggested is None and s.unsafe and not s.inconclusive]
    todo = [s for s in suggestions if s.suggested is not None and not s.inconclusive]
    if not todo and not stranded:
        return [], []
    progress("listing published flashinfer releases")
    published = [v for v in published_versions() if not v.is_prerelease]
    # Probe each release for every kernel the suggestions name, on the SMs and
    # counts the check probed: the same cache keys, so a warm run probes nothing.
    needed: dict[str, list[int]] = {}
    heads: list[int] = []
    for rel in report.releases:
        for (key, sm), result in rel.results.items():
            needed[key] = sorted(set(needed.get(key, [])) | {sm})
            heads = heads or sorted(result.heads)
    known: dict[str, ProbedRelease] = {rel.info.version: rel for rel in report.releases}

    unreachable: dict[str, str] = {}
    newest_probed = max((Version(v) for v in known if _is_version(v)), default=None)
    tables = {t.name: t for t in report.tables}

    def release(v: Version) -> ProbedRelease | None:
        """None: the release cannot be fetched or unpacked here, so it answers
        nothing (the search steps around it, as around any inconclusive one)."""
        if str(v) not in known and str(v) not in unreachable:
            try:
                known[str(v)] = probe_named(str(v), needed, heads, use_cache, progress)
            except InputError as exc:
                unreachable[str(v)] = exc.message
        return known.get(str(v))

    todo.extend(_routed_ahead(stranded, [v for v in published if newest_probed is None or v > newest_probed], tables, release))
    for s in todo:
        key = s.backend.variant_key

        def safe_at(v: Version, sms: tuple[int, ...], count: int, key: str = key) -> bool | None:
            states: list[bool | None] = []
            probed = release(v)
            for sm in sms:
                result = probed.results.get((key, sm)) if probed is not None else None
                hr = result.heads.get(count) if result is not None else None
                if hr is None or hr.outcome is Outcome.INCONCLUSIVE:
                    states.append(None)
                else:
                    states.append(hr.serves)
            if False in states:
                return False
            return None if None in states else True

        current = pins.get(s.table)
        specifier = parse_pin(current) if current else None
        first = start or entry_since(get_variant(key).probe.entry_point, published, progress)
        versions = [v for v in published if first is None or v >= first]
        if not versions:
            s.pin_note = "no published release to search"
            continue
        admitted = [str(v) for v in published if specifier is None or specifier.contains(v)]
        s.pins = advise(s.sms, s.rule_counts(), s.per_rank(), versions, str(specifier) if specifier is not None else None, safe_at, admitted, start is not None)
    return published, [f"pin search: flashinfer {v} answered nothing: {why}" for v, why in unreachable.items()]


def _routed_ahead(
    stranded: list[BackendSuggestion], ahead: list[Version], tables: dict[str, PaddingTable], release: Callable[[Version], ProbedRelease | None]
) -> list[BackendSuggestion]:
    """The suggestions no release probed can serve (an SM with no route
    there), each now resting on the release after them that brings one."""
    from hprobe.advise.suggest import route_ahead

    routed = []
    for s in stranded:
        key = s.backend.variant_key

        def results_at(v: Version, key: str = key, sms: tuple[int, ...] = s.sms) -> dict[int, KernelSMResult] | None:
            probed = release(v)
            return None if probed is None else {sm: probed.results[(key, sm)] for sm in sms if (key, sm) in probed.results}

        if ahead and route_ahead(s, tables[s.table], ahead, results_at):
            routed.append(s)
    return routed


def _is_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


_ENTRY_SINCE: dict[str, Version | None] = {}


def entry_since(entry: str, published: list[Version], progress: Progress = quiet) -> Version | None:
    """The first published release whose source defines `entry` (None: none
    does, or none could be read): where a search for "safe since" starts.
    Found by a binary search over wheels read with `ast`, never imported; it
    only bounds the search, and every release searched is then probed."""
    from hprobe.advise.history import first_true
    from hprobe.support.presence import entry_point_present
    from hprobe.support.releases import resolve

    if entry not in _ENTRY_SINCE:

        def present(v: Version) -> bool | None:
            progress(f"reading flashinfer {v} for {entry.rsplit('.', 1)[-1]}")
            try:
                release = resolve(str(v))
            except InputError:
                return None
            return entry_point_present(entry, str(release.tree / "flashinfer"))

        _ENTRY_SINCE[entry] = first_true(published, present).first
    return _ENTRY_SINCE[entry]
