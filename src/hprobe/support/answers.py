"""The answers step of every command that judges padding rules: which
releases each table is judged on, on which SMs, which probe variants and head
counts to ask, and their answers, from the cache or by probing. Nothing here
judges: `judge.judge_answers` turns what is gathered into verdicts."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from hprobe.kernels import get_variant
from hprobe.model.errors import IndexUnlisted, InputError
from hprobe.model.release import INSTALLED, ProbedRelease, Progress, quiet
from hprobe.model.targets import DEFAULT_MAX_HEADS, Targets, resolve_targets
from hprobe.support.gather import gather
from hprobe.support.published import pinned_releases

if TYPE_CHECKING:
    from hprobe.model.outcome import KernelSMResult
    from hprobe.model.padding import Backend, PaddingTable
    from hprobe.rules.repo.extract import RepoTables


@dataclass(frozen=True)
class Answers:
    """What a set of tables is judged on. `flashinfer` and `pin` are the
    releases the request named (--flashinfer's labels, --pin), kept so the
    verdicts say which pin each finding rests on."""

    tables: list[PaddingTable]  # each backend resolved to its probe variant
    targets: Targets
    plan: dict[tuple[str, str], list[str]]  # (table name, path) -> release labels it is judged on
    questions: dict[str, list[int]]  # probe variant -> SMs asked; empty when no backend runs on the SMs asked
    probed: dict[str, ProbedRelease]  # label -> answers: every label of the plan, when there are questions
    notes: list[str]  # the SMs' note, what the rule sources and the pins said, what each release said
    flashinfer: list[str] | None
    pin: str | None
    # --repo: the tree as read, once or once per release its rules read (the last: the newest)
    readings: list[RepoTables] = field(default_factory=list)

    @property
    def planned(self) -> list[str]:
        """Every release label asked for, probed or not, in order."""
        return list(dict.fromkeys(label for labels in self.plan.values() for label in labels))

    def supports(self, table: PaddingTable) -> list[dict[tuple[str, int], KernelSMResult]]:
        """The answers of the releases `table` is judged on, in order."""
        return [self.probed[label].results for label in self.plan[table.name, table.path]]


def gather_answers(
    tables: list[PaddingTable],
    repo: RepoTables | None,
    sm_option: str | None,
    flashinfer: list[str] | None,
    pin: str | None,
    use_cache: bool = True,
    progress: Progress = quiet,
    ahead: tuple[str, ...] = (),
) -> Answers:
    """The answers `tables` (or, with `repo`, the tree's own table) are judged
    on: --sm's SMs, else those the tables name; --flashinfer's releases, else
    each table's pin's ends; `ahead`, releases a later step will ask, probed
    alongside (support/gather.py)."""
    readings: list[RepoTables] = []
    fallback_sms: list[int] = []
    if repo is not None:
        readings = _readings(repo, flashinfer, pin, progress)
        tables = [r.table for r in readings]
        fallback_sms = sorted({sm for c in repo.classes for e in c.entries if e.kernel for sm in e.sms})
    tables = [_with_variant_keys(t) for t in tables]
    fallback = sorted({sm for t in tables for b in t.backends for sm in b.sms}) or fallback_sms
    targets = resolve_targets(sm_option, fallback, "the tables name")
    numbers = [sm.number for sm in targets.sms]
    notes: list[str] = [targets.note] if targets.note else []
    notes.extend(note for table in tables for note in table.notes)  # what the rule source said
    plan: dict[tuple[str, str], list[str]] = {}
    for table in tables:
        plan[table.name, table.path], pin_notes = releases_for(table, flashinfer, pin, progress)
        notes.extend(f"{table.name}: {n}" for n in pin_notes)
    needed, heads = _questions(tables, numbers)
    probed: dict[str, ProbedRelease] = {}
    if needed:
        all_labels = list(dict.fromkeys(label for labels in plan.values() for label in labels))
        probed = gather(all_labels, needed, heads, use_cache, progress, ahead)
        for rel in probed.values():
            notes.extend(rel.notes)
    return Answers(tables, targets, plan, needed, probed, notes, flashinfer, pin, readings)


def _questions(tables: list[PaddingTable], numbers: list[int]) -> tuple[dict[str, list[int]], list[int]]:
    """(variant key -> SMs to probe, head counts to ask). Each kernel is probed
    once per SM and release over 1..max(256, largest padded count), and at
    each regrouped count past that: a fold (k draft tokens times the heads) is
    judged as it is, so no count between is asked."""
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
    return needed, sorted(set(range(1, ceiling + 1)) | regrouped)


def _readings(repo: RepoTables, flashinfer: list[str] | None, pin: str | None, progress: Progress) -> list[RepoTables]:
    """The tree as read: once, or, where its rules read flashinfer's own
    tables (SGLang reads its SM12x decode dispatch), once per release judged,
    each table then judged on its release only."""
    if not repo.per_release:
        return [repo]
    from hprobe.support.gather import release_reader

    labels, _ = releases_for(repo.table, flashinfer, pin, progress)
    readings = []
    for label in labels:
        progress(f"evaluating the repo's rules against flashinfer {label}")
        readings.append(repo.against(release_reader(label), label))
    return readings


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
