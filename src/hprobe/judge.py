"""The only place verdicts are decided: a padding table against probed support,
per release and across releases. Nothing here probes or prints."""

from __future__ import annotations

import datetime as dt
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from fnmatch import fnmatchcase
from itertools import chain, takewhile
from typing import TYPE_CHECKING

from hprobe.model.assumption import Assumption
from hprobe.model.call import CallForm, bound_to
from hprobe.model.errors import EXIT_FINDINGS, EXIT_INCONCLUSIVE, EXIT_OK
from hprobe.model.heads import compact_set
from hprobe.model.outcome import Depth, HeadResult, KernelSMResult, Outcome
from hprobe.model.padding import Backend, Model, PaddingTable
from hprobe.model.release import ProbedRelease, releases_judged
from hprobe.model.verdict import TRUSTED_NOTE, Finding, Verdict, VerdictCell, VerdictGrid, Verdicts
from hprobe.model.waiver import Waiver, WaiverUse
from hprobe.rules.repo.tree.status import ClassStatus

if TYPE_CHECKING:
    from hprobe.rules.repo.extract import RepoTables
    from hprobe.rules.repo.interpreter.evaluate import NotEvaluable
    from hprobe.support.answers import Answers

# (verdict, the smallest accepted count >= n, padded / that count, the kernel's
# answer the verdict rests on, notes)
Judgement = tuple[Verdict, int | None, float | None, HeadResult | None, list[str]]


def _serves(head: HeadResult, trust: bool) -> bool:
    """A count worth padding to; with `trust`, one whose compiled selection is
    pending serves as the validators say (`check --trust-validators`)."""
    return head.serves or (trust and head.pending is not None and replace(head, pending=None).serves)


def judge(n: int, padded: int | None, support: KernelSMResult, trust: bool = False) -> Judgement:
    """The verdict for one per-rank count n padded to `padded` against probed
    support. `trust`: a count the validators accept whose compiled selection
    is pending is judged on the validators' answer (else it is inconclusive)."""
    notes: list[str] = []
    heads = support.heads
    # The probed counts >= n in order; scanned lazily, since a check judges each
    # of a table's counts against every SM and release it covers.
    ordered = sorted(heads)
    above = ordered[bisect_left(ordered, n) :]
    accepted_above: Iterator[int] = (h for h in above if heads[h].outcome is Outcome.ACCEPTED)
    best = next(accepted_above, None)
    if padded is None:
        if not above:
            return Verdict.INCONCLUSIVE, None, None, None, [f"no count >= {n} was probed"]
        if best is not None:
            return Verdict.TABLE_REFUSES, best, None, heads[best], notes
        unclear = next((h for h in above if heads[h].outcome is Outcome.INCONCLUSIVE), None)
        if unclear is not None:
            return Verdict.INCONCLUSIVE, None, None, heads[unclear], notes
        notes.append(f"the table raises for {n}; the kernel accepts no count in {n}..{ordered[-1]} either")
        return Verdict.OK, None, None, None, notes
    result = heads.get(padded)
    if result is None:
        return Verdict.INCONCLUSIVE, best, None, None, [f"{padded} was not probed"]
    if best is not None:
        accepted_above = chain((best,), accepted_above)
    if result.outcome is Outcome.ACCEPTED:
        return _judge_accepted(n, padded, result, heads, accepted_above, notes, trust)
    if result.outcome in (Outcome.REJECTED, Outcome.UNSUPPORTED_ARCH, Outcome.UNSUPPORTED_CONFIG, Outcome.ABSENT):
        return Verdict.BROKEN, best, None, result, notes
    return Verdict.INCONCLUSIVE, best, None, result, notes


def _judge_accepted(
    n: int,
    padded: int,
    result: HeadResult,
    heads: dict[int, HeadResult],
    accepted_above: Iterator[int],
    notes: list[str],
    trust: bool,
) -> Judgement:
    """`judge` where the padded count is accepted: what it rests on, and
    whether a smaller count serves (`accepted_above`: the accepted counts >= n)."""
    if result.pending:
        if not trust:
            # The validators let it through and a compiled check that decides
            # it follows, not evaluated here: neither ok nor broken.
            return Verdict.INCONCLUSIVE, None, None, result, notes
        notes.append(f"{TRUSTED_NOTE}{result.pending}")
    if result.shapes:
        whole = next((h for h in accepted_above if _serves(heads[h], trust)), None)
        return Verdict.SOME_SHAPES, whole, None, result, notes + [result.shapes]
    if result.slow_path:
        fast = next((h for h in accepted_above if _serves(heads[h], trust)), None)
        if fast is not None:
            notes.append(f"{fast} reaches {heads[fast].entry}")
        return Verdict.OFF_FAST_PATH, fast, None, result, notes + [result.slow_path]
    # Only counts on the fast path are worth padding to instead; the counts
    # ascend, so none at or past the padded one is looked at.
    smaller = next((h for h in takewhile(lambda h: h < padded, accepted_above) if _serves(heads[h], trust)), None)
    unclear_between = [h for h in range(n, padded) if h in heads and heads[h].outcome is Outcome.INCONCLUSIVE]
    if unclear_between:
        notes.append(f"counts {compact_set(unclear_between)} between n and the padded count were inconclusive")
    if smaller is not None:
        return Verdict.REDUCIBLE, smaller, padded / smaller, result, notes
    return Verdict.OK, padded, None, result, notes


def judge_across(n: int, padded: int | None, supports: list[KernelSMResult], trust: bool = False) -> Judgement:
    """`_across`, with the word of every release whose answer was taken on the
    validators' word (`trust`) kept, whichever release's notes the verdict cites."""
    per = [(s.flashinfer_version, judge(n, padded, s, trust)) for s in supports]
    verdict, best, waste, evidence, notes = _across(n, padded, supports, per, trust)
    trusted = [note for _, j in per for note in j[4] if note.startswith(TRUSTED_NOTE) and note not in notes]
    return verdict, best, waste, evidence, [*notes, *dict.fromkeys(trusted)]


def _across(
    n: int,
    padded: int | None,
    supports: list[KernelSMResult],
    per: list[tuple[str, Judgement]],
    trust: bool,
) -> Judgement:
    """A verdict that holds for every release in `supports` (`per`: each one's own).

    broken if any release refuses the padded count; reducible only if a smaller
    count is accepted by all of them, so that advice to remove padding is safe
    for every release the consumer allows.
    """
    if not supports:
        return Verdict.INCONCLUSIVE, None, None, None, ["judged on no release (the notes say why)"]
    if len(per) == 1:
        return per[0][1]
    broken = [(v, j) for v, j in per if j[0] is Verdict.BROKEN]
    if broken:
        _, (_, best, _, evidence, notes) = broken[0]
        names = ", ".join(v for v, _ in broken)
        return Verdict.BROKEN, best, None, evidence, [f"broken on flashinfer {names}"] + notes
    unclear = [(v, j) for v, j in per if j[0] is Verdict.INCONCLUSIVE]
    if unclear:
        _, (_, best, _, evidence, notes) = unclear[0]
        return (
            Verdict.INCONCLUSIVE,
            best,
            None,
            evidence,
            [f"inconclusive on flashinfer {', '.join(v for v, _ in unclear)}"] + notes,
        )
    shaped = [(v, j) for v, j in per if j[0] is Verdict.SOME_SHAPES]
    if shaped:
        _, (_, best, _, evidence, notes) = shaped[0]
        return (
            Verdict.SOME_SHAPES,
            best,
            None,
            evidence,
            [f"a kernel only at some shapes on flashinfer {', '.join(v for v, _ in shaped)}"] + notes,
        )
    slow = [(v, j) for v, j in per if j[0] is Verdict.OFF_FAST_PATH]
    if slow:
        _, (_, best, _, evidence, notes) = slow[0]
        return (
            Verdict.OFF_FAST_PATH,
            best,
            None,
            evidence,
            [f"off the fast path on flashinfer {', '.join(v for v, _ in slow)}"] + notes,
        )
    accepted_by_all = set.intersection(*({h for h in s.accepted() if _serves(s.heads[h], trust)} for s in supports))
    evidence = per[-1][1][3]
    if padded is None:
        common = sorted(h for h in accepted_by_all if h >= n)
        if common:
            return Verdict.TABLE_REFUSES, common[0], None, supports[-1].heads[common[0]], []
        return Verdict.OK, None, None, None, [f"the table raises for {n}; no count >= {n} is accepted by every release"]
    smaller = sorted(h for h in accepted_by_all if n <= h < padded)
    if smaller:
        return Verdict.REDUCIBLE, smaller[0], padded / smaller[0], evidence, []
    notes = [f"reducible on flashinfer {v} alone, not on every release" for v, j in per if j[0] is Verdict.REDUCIBLE]
    return Verdict.OK, padded, None, evidence, notes


def check_table(
    table: PaddingTable,
    supports: list[dict[tuple[str, int], KernelSMResult]],
    sms: list[int],
    trust: bool = False,
) -> tuple[list[Finding], list[str]]:
    """Every backend x SM (among `sms`) x model x TP of a table, judged across releases.

    Each element of `supports` maps (kernel id, SM) to one release's results
    covering 1..max padded. `trust`: judge's (`--trust-validators`).
    """
    findings: list[Finding] = []
    notes: list[str] = []
    # Backends that share a variant judge the same counts against the same
    # results (a traced call's answers, one per run-time value): once each.
    memo = _Memo(trust)
    for backend in table.backends:
        targets = [sm for sm in backend.sms if sm in sms]
        if not targets:
            notes.append(
                f"{table.name}: backend {backend.name} runs on SM{'/'.join(map(str, backend.sms))}, "
                "none of the SMs checked"
            )
            continue
        for sm in targets:
            # Each release's answer as the engine's own calls meet it (a keyword
            # the release's signature lacks refuses every count).
            probed = [bound_to(backend.calls, support[(backend.variant_key, sm)]) for support in supports]
            alternates = [
                (key, [_bound(backend, support.get((key, sm))) for support in supports]) for key in backend.alternatives
            ]
            findings.extend(_judge_cases(table, backend, sm, probed, alternates, memo))
    return findings, notes


def _bound(backend: Backend, result: KernelSMResult | None) -> KernelSMResult | None:
    return bound_to(backend.calls, result) if result is not None else None


class _Memo(dict[tuple[str, tuple[CallForm, ...], int, int, int | None], Judgement]):
    """The judgements of one check, by (variant, SM, count, padded), and
    whether a pending compiled selection is taken on the validators' word."""

    def __init__(self, trust: bool = False) -> None:
        super().__init__()
        self.trust = trust


def _judged(
    memo: _Memo,
    key: str,
    sm: int,
    n: int,
    padded: int | None,
    results: Sequence[KernelSMResult],
    calls: tuple[CallForm, ...] = (),
) -> Judgement:
    """`judge_across` for one variant (as `calls` meet it) on one SM, once per count."""
    found = memo.get((key, calls, sm, n, padded))
    if found is None:
        found = memo[key, calls, sm, n, padded] = judge_across(n, padded, list(results), memo.trust)
    verdict, best, waste, evidence, notes = found
    return verdict, best, waste, evidence, list(notes)


def _judge_cases(
    table: PaddingTable,
    backend: Backend,
    sm: int,
    probed: list[KernelSMResult],
    alternates: Sequence[tuple[str, list[KernelSMResult | None]]] = (),
    memo: _Memo | None = None,
) -> list[Finding]:
    out = []
    memo = _Memo() if memo is None else memo
    versions = [p.flashinfer_version for p in probed]
    extra_notes = list(dict.fromkeys(n for p in probed for n in p.notes))
    for model, tp, n in backend.cases(table.models):
        padded = backend.rule.pad(n)
        needed = backend.judged_as(n, padded)
        verdict, best, waste, evidence, notes = _judged(
            memo, backend.variant_key, sm, needed, padded, probed, backend.calls
        )
        on_assumption, assumed = None, None
        if alternates:
            differing, notes = _unread_axes(backend, verdict, sm, needed, padded, alternates, notes, memo)
            if differing:
                on_assumption, verdict, best, waste, assumed = verdict, Verdict.ASSUMED, None, None, Assumption.DTYPE
        if _unread_arch(backend, verdict, evidence):
            notes = [
                f"the kernel refuses SM{sm} whatever h_q is; whether the engine takes this path on SM{sm} is not "
                "read (no mapping entry places the call)",
                *notes,
            ]
            on_assumption, verdict, best, waste, assumed = verdict, Verdict.ASSUMED, None, None, Assumption.ARCH
        if backend.assumed is not None:
            # What the kernel says of a count the engine may not hand it is
            # shown, never concluded: the gate reads it as undecided.
            notes = [backend.assumed, *notes]
            on_assumption = on_assumption or verdict
            verdict, best, waste = Verdict.ASSUMED, None, None
            assumed = backend.assumption or Assumption.HEADS
        crash = backend.crash(model.name, n)
        if backend.unsure_reach and (crash is not None or verdict not in (Verdict.OK, Verdict.INCONCLUSIVE)):
            # The call may never run with this count: what the kernel (or the
            # engine on the way) does to it there is shown, not concluded. An
            # accepted count is ok whether or not the call runs.
            notes = [f"assumed: {backend.unsure_reach}", *([crash] if crash is not None else []), *notes]
            on_assumption = Verdict.BROKEN if crash is not None else (on_assumption or verdict)
            verdict, best, waste, crash = Verdict.ASSUMED, None, None, None
            assumed = assumed or Assumption.REACH
        if crash is not None:
            # The engine's code raises before it reaches FlashInfer: no kernel
            # answer matters, and no padding mends it.
            verdict, best, waste, evidence, on_assumption, assumed = Verdict.BROKEN, None, None, None, None, None
            padded = None  # nothing is launched: another model's rows may give the map this count
            notes = [crash]  # what the kernel would say (its depth, its table) does not bear on it
        out.append(
            Finding(
                table=table.name,
                table_path=table.path,
                model=model.name,
                tp=tp,
                n=n,
                backend=backend.name,
                kernel=backend.variant_key,
                sm=sm,
                flashinfer_version=", ".join(versions),
                padded=padded,
                verdict=verdict,
                best=best,
                waste=waste,
                evidence=evidence,
                notes=notes + (extra_notes if crash is None else []),
                releases=versions,
                source=backend.source_for(model.name, n),
                depth=_weakest_depth(probed),
                unchecked=list(dict.fromkeys(u for p in probed for u in p.unchecked)),
                reach=backend.reach,
                guard=backend.guard,
                on_assumption=on_assumption,
                assumed=assumed,
                crash=crash,
            )
        )
    return out


def on_unread_pin(findings: list[Finding], why: str) -> list[Finding]:
    """Findings judged on a release the tree may not install: its flashinfer
    requirement is there but cannot be read. What the release probed says is
    shown, never concluded (an inconclusive or assumed finding stays as it is)."""
    out = []
    for f in findings:
        if f.verdict in (Verdict.INCONCLUSIVE, Verdict.ASSUMED):
            out.append(replace(f, notes=[why, *f.notes]))
            continue
        out.append(
            replace(
                f,
                verdict=Verdict.ASSUMED,
                on_assumption=f.verdict,
                assumed=Assumption.RELEASE,
                best=None,
                waste=None,
                notes=[why, *f.notes],
            )
        )
    return out


def _weakest_depth(probed: list[KernelSMResult]) -> Depth:
    depths = {p.depth for p in probed}
    if Depth.PARTIAL in depths:
        return Depth.PARTIAL
    if Depth.FAKED_DEVICE in depths:
        return Depth.FAKED_DEVICE
    if depths == {Depth.COMPILED}:
        return Depth.COMPILED  # every release's answer went past the validators
    return Depth.DISPATCH if depths == {Depth.DISPATCH} else Depth.VALIDATORS


def waive(findings: list[Finding], waivers: list[Waiver], today: dt.date) -> tuple[list[Finding], list[WaiverUse]]:
    """Findings with the first unexpired waiver that matches each one that is
    not ok, and how each waiver was used. An expired waiver waives nothing."""
    matched = [0] * len(waivers)
    out = []
    for f in findings:
        if f.verdict is not Verdict.OK:
            for k, w in enumerate(waivers):
                if all(_field_matches(f, key, pattern) for key, pattern in w.match):
                    matched[k] += 1
                    if not w.expired(today) and f.waiver is None:
                        f = replace(f, waiver=w)
        out.append(f)
    return out, [WaiverUse(w, matched[k], w.expired(today)) for k, w in enumerate(waivers)]


def exit_code(
    findings: list[Finding],
    strict: bool,
    waivers: list[WaiverUse] | None = None,
    drift_code: int | None = None,
    unjudged: int = 0,
) -> int:
    """1 when a finding no waiver accepts fails the gate, or a waiver has
    expired; 3 when something is undecided or nothing was checked; else 0.
    With a baseline (`drift_code`, a DiffReport's), a drift of 1 fails the
    gate and an undecided drift makes a passing gate undecided. `unjudged`:
    calls of FlashInfer the engine makes that nothing judged (listed with
    why): a gate cannot pass over them, and --strict fails on them."""
    if any(f.fails(strict) for f in findings) or any(u.expired for u in waivers or []) or (strict and unjudged):
        code = EXIT_FINDINGS
    elif any(f.undecided for f in findings) or not findings or unjudged:
        code = EXIT_INCONCLUSIVE
    else:
        code = EXIT_OK
    if (
        drift_code is not None
        and code != EXIT_FINDINGS
        and (drift_code == EXIT_FINDINGS or (drift_code == EXIT_INCONCLUSIVE and code == EXIT_OK))
    ):
        code = drift_code
    return code


def _unread_arch(backend: Backend, verdict: Verdict, evidence: HeadResult | None) -> bool:
    """Whether a broken verdict rests only on an architecture refusal on an SM
    the engine was not read to take the path on."""
    return (
        not backend.sms_read
        and verdict is Verdict.BROKEN
        and evidence is not None
        and evidence.outcome is Outcome.UNSUPPORTED_ARCH
    )


def _unread_axes(
    backend: Backend,
    verdict: Verdict,
    sm: int,
    n: int,
    padded: int | None,
    alternates: Sequence[tuple[str, list[KernelSMResult | None]]],
    notes: list[str],
    memo: _Memo,
) -> tuple[bool, list[str]]:
    """Whether the verdict changes with what the engine sets unread (the
    query's dtype), and the notes that say so either way."""
    axes = " and ".join(f"the {name}" for name, _ in backend.unread)
    seen = []
    for key, results in alternates:
        known = [r for r in results if r is not None]
        other = (
            _judged(memo, key, sm, n, padded, known, backend.calls)[0]
            if len(known) == len(results)
            else Verdict.INCONCLUSIVE
        )
        seen.append((key, other))
    differing = [(key, other) for key, other in seen if other is not verdict]
    if differing:
        return True, [
            f"the verdict depends on {axes}, which hprobe does not read from the engine: {verdict.value} at "
            f"{backend.variant_key}, " + ", ".join(f"{other.value} at {key}" for key, other in seen),
            *notes,
        ]
    return False, [*notes, f"the same at {', '.join(key for key, _ in seen)}: {axes} is not read from the engine"]


def verdict_grids(
    tables: list[PaddingTable], releases: list[ProbedRelease], sms: list[int], trust: bool = False
) -> list[VerdictGrid]:
    """Per table x backend x SM, each model x TP judged on each release on its
    own (the page's release-by-release view; findings hold the verdicts
    across releases). `trust`: judge's."""
    grids = []
    # One release's results judged once per count, whichever backends share them.
    memo: dict[tuple[int, int, int | None], Judgement] = {}
    held: list[KernelSMResult] = []  # keeps every result judged alive, so no id is reused

    def judged(result: KernelSMResult, n: int, padded: int | None) -> Judgement:
        found = memo.get((id(result), n, padded))
        if found is None:
            held.append(result)
            found = memo[id(result), n, padded] = judge(n, padded, result, trust)
        return found

    for table in tables:
        for backend in table.backends:
            for sm in [s for s in sms if s in backend.sms]:
                cases = tuple((m.name, tp, n, backend.rule.pad(n)) for m, tp, n in backend.cases(table.models))
                rows = []
                for rel in releases:
                    result = _bound(backend, rel.results.get((backend.variant_key, sm)))
                    others = [_bound(backend, rel.results.get((key, sm))) for key in backend.alternatives]
                    cells = tuple(
                        None
                        if result is None
                        else VerdictCell(Verdict.BROKEN, None, None)
                        if backend.crash(model, n) is not None  # the engine's code raises before the call
                        else _cell(backend, result, others, n, padded, judged)
                        for model, _tp, n, padded in cases
                    )
                    rows.append((rel.info.version, cells))
                grids.append(VerdictGrid(table, backend, sm, cases, tuple(rows)))
    return grids


def _cell(
    backend: Backend,
    result: KernelSMResult,
    others: list[KernelSMResult | None],
    n: int,
    padded: int | None,
    judged: Callable[[KernelSMResult, int, int | None], Judgement],
) -> VerdictCell:
    """One release's verdict for a case; assumed where the backend rests on an
    assumption or the answer changes with what the engine sets unread."""
    needed = backend.judged_as(n, padded)
    verdict, best, _waste, evidence, _notes = judged(result, needed, padded)
    changes = any(other is None or judged(other, needed, padded)[0] is not verdict for other in others)
    if backend.assumed is not None or changes or _unread_arch(backend, verdict, evidence):
        return VerdictCell(Verdict.ASSUMED, None, evidence)
    return VerdictCell(verdict, best, evidence)


def _field_matches(finding: Finding, key: str, pattern: str) -> bool:
    match key:
        case "sm":
            return str(finding.sm) == pattern.removeprefix("SM").removeprefix("sm")
        case "tp":
            return str(finding.tp) == pattern
        case "release":
            # Every release the verdict rests on: a waiver for 0.6.13 never
            # accepts a finding that may be broken on another release too.
            return all(fnmatchcase(r, pattern) for r in (finding.releases or [finding.flashinfer_version]))
        case "verdict":
            return fnmatchcase(finding.verdict.value, pattern)
        case "table" | "backend" | "kernel" | "model":
            return fnmatchcase(str(getattr(finding, key)), pattern)
    raise AssertionError(key)  # keys are checked when a waiver is read


def judge_answers(answers: Answers, trust: bool = False) -> Verdicts:
    """The verdicts step of every command that judges rules: each table judged
    on the answers of its releases; with --repo, the tree's findings beside
    them (rules and counts not evaluable, a pin that cannot be read) and its
    classes said. `trust`: judge's (--trust-validators)."""
    numbers = [sm.number for sm in answers.targets.sms]
    findings: list[Finding] = []
    notes = list(answers.notes)
    for table in answers.tables:
        table_findings, table_notes = (
            check_table(table, answers.supports(table), numbers, trust) if answers.questions else ([], [])
        )
        if not answers.flashinfer:
            for f in table_findings:
                f.pin = answers.pin or table.requires_flashinfer
        findings.extend(table_findings)
        notes.extend(table_notes)
    verdicts = Verdicts(findings, notes)
    if answers.readings:
        verdicts = _judge_tree(answers, verdicts)
    if not verdicts.findings:
        verdicts = replace(
            verdicts,
            notes=[*verdicts.notes, "nothing was checked: no backend of the tables runs on the SMs selected"],
        )
    return verdicts


def _judge_tree(answers: Answers, verdicts: Verdicts) -> Verdicts:
    """A tree's verdicts: the tables' findings, and for each reading the
    classes whose rule and the calls whose count could not be evaluated, as
    inconclusive findings; its pin said, and judged on no release it names
    when that cannot be read."""
    repo = answers.readings[-1]  # classes and notes as the newest release reads them
    said = (
        f"flashinfer pin {repo.pin.spec} read from {repo.pin.source}"
        if repo.pin
        else f"no flashinfer requirement found in {repo.root}'s metadata"
    )
    findings = list(verdicts.findings)
    if repo.pin is None and repo.pin_unread and not answers.flashinfer and answers.pin is None:
        # Judged on the installed release only because no pin was read: not
        # the tree's answer. Shown, never concluded (exit 3 unless a finding fails).
        said = (
            f"the flashinfer requirement cannot be read ({repo.pin_unread[0]}): judged on flashinfer "
            f"{releases_judged(list(answers.probed.values()))}, which the tree may not install; every verdict is "
            "undecided until --pin or --flashinfer names the release"
        )
        findings = on_unread_pin(findings, said)
    notes = [said, *verdicts.notes, *repo.notes]
    numbers = [sm.number for sm in answers.targets.sms]
    asked = answers.targets.source == "flag"  # --sm: no row of another SM
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
    for reading in answers.readings:
        findings.extend(_unevaluated(reading, numbers, asked))
        findings.extend(_unevaluated_paths(reading, numbers, asked))
    return Verdicts(findings, notes, [p.record() for p in repo.paths.paths])


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
