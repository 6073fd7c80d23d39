"""The only place verdicts are decided: a padding table against probed support,
per release and across releases. Nothing here probes or prints."""

from __future__ import annotations

from hprobe.model.heads import compact_set
from hprobe.model.outcome import Depth, HeadResult, KernelSMResult, Outcome
from hprobe.model.padding import Backend, Model, PaddingTable
from hprobe.model.verdict import Finding, Verdict

# (verdict, the smallest accepted count >= n, padded / that count, the kernel's
# answer the verdict rests on, notes)
Judgement = tuple[Verdict, int | None, float | None, HeadResult | None, list[str]]


def judge(n: int, padded: int | None, support: KernelSMResult) -> Judgement:
    """The verdict for one per-rank count n padded to `padded` against probed support."""
    notes: list[str] = []
    above = sorted(h for h in support.heads if h >= n)
    accepted_above = [h for h in above if support.heads[h].outcome is Outcome.ACCEPTED]
    best = accepted_above[0] if accepted_above else None
    if padded is None:
        if not above:
            return Verdict.INCONCLUSIVE, None, None, None, [f"no count >= {n} was probed"]
        if best is not None:
            return Verdict.TABLE_REFUSES, best, None, support.heads[best], notes
        unclear = [h for h in above if support.heads[h].outcome is Outcome.INCONCLUSIVE]
        if unclear:
            return Verdict.INCONCLUSIVE, None, None, support.heads[unclear[0]], notes
        notes.append(f"the table raises for {n}; the kernel accepts no count in {n}..{max(support.heads)} either")
        return Verdict.OK, None, None, None, notes
    result = support.heads.get(padded)
    if result is None:
        return Verdict.INCONCLUSIVE, best, None, None, [f"{padded} was not probed"]
    if result.outcome is Outcome.ACCEPTED and result.slow_path:
        fast = [h for h in accepted_above if not support.heads[h].slow_path]
        if fast:
            notes.append(f"{fast[0]} reaches {support.heads[fast[0]].entry}")
        return Verdict.OFF_FAST_PATH, (fast[0] if fast else None), None, result, notes + [result.slow_path]
    if result.outcome is Outcome.ACCEPTED:
        # Only counts on the fast path are worth padding to instead.
        smaller = [h for h in accepted_above if h < padded and not support.heads[h].slow_path]
        unclear = [h for h in range(n, padded) if h in support.heads and support.heads[h].outcome is Outcome.INCONCLUSIVE]
        if unclear:
            notes.append(f"counts {compact_set(unclear)} between n and the padded count were inconclusive")
        if smaller:
            return Verdict.REDUCIBLE, smaller[0], padded / smaller[0], result, notes
        return Verdict.OK, padded, None, result, notes
    if result.outcome in (Outcome.REJECTED, Outcome.UNSUPPORTED_ARCH, Outcome.UNSUPPORTED_CONFIG, Outcome.ABSENT):
        return Verdict.BROKEN, best, None, result, notes
    return Verdict.INCONCLUSIVE, best, None, result, notes


def judge_across(n: int, padded: int | None, supports: list[KernelSMResult]) -> Judgement:
    """A verdict that holds for every release in `supports`.

    broken if any release refuses the padded count; reducible only if a smaller
    count is accepted by all of them, so that advice to remove padding is safe
    for every release the consumer allows.
    """
    per = [(s.flashinfer_version, judge(n, padded, s)) for s in supports]
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
        return Verdict.INCONCLUSIVE, best, None, evidence, [f"inconclusive on flashinfer {', '.join(v for v, _ in unclear)}"] + notes
    slow = [(v, j) for v, j in per if j[0] is Verdict.OFF_FAST_PATH]
    if slow:
        _, (_, best, _, evidence, notes) = slow[0]
        return Verdict.OFF_FAST_PATH, best, None, evidence, [f"off the fast path on flashinfer {', '.join(v for v, _ in slow)}"] + notes
    accepted_by_all = set.intersection(*({h for h in s.accepted() if not s.heads[h].slow_path} for s in supports))
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
) -> tuple[list[Finding], list[str]]:
    """Every backend x SM (among `sms`) x model x TP of a table, judged across releases.

    Each element of `supports` maps (kernel id, SM) to one release's results
    covering 1..max padded.
    """
    findings: list[Finding] = []
    notes: list[str] = []
    for backend in table.backends:
        targets = [sm for sm in backend.sms if sm in sms]
        if not targets:
            notes.append(
                f"{table.name}: backend {backend.name} runs on SM{'/'.join(map(str, backend.sms))}, "
                "none of the SMs checked"
            )
            continue
        for sm in targets:
            probed = [support[(backend.variant_key, sm)] for support in supports]
            for model in table.models:
                if not backend.models or model.name in backend.models:
                    findings.extend(_judge_model(table, backend, sm, probed, model))
    return findings, notes


def _judge_model(table: PaddingTable, backend: Backend, sm: int, probed: list[KernelSMResult], model: Model) -> list[Finding]:
    out = []
    versions = [p.flashinfer_version for p in probed]
    extra_notes = list(dict.fromkeys(n for p in probed for n in p.notes))
    for tp, n in model.per_rank():
        padded = backend.rule.pad(n)
        verdict, best, waste, evidence, notes = judge_across(n, padded, probed)
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
                notes=notes + extra_notes,
                releases=versions,
                source=backend.source_for(model.name, n),
                depth=_weakest_depth(probed),
                unchecked=list(dict.fromkeys(u for p in probed for u in p.unchecked)),
                reach=backend.reach,
            )
        )
    return out


def _weakest_depth(probed: list[KernelSMResult]) -> Depth:
    depths = {p.depth for p in probed}
    if Depth.PARTIAL in depths:
        return Depth.PARTIAL
    if Depth.FAKED_DEVICE in depths:
        return Depth.FAKED_DEVICE
    return Depth.DISPATCH if depths == {Depth.DISPATCH} else Depth.VALIDATORS


def exit_code(findings: list[Finding], strict: bool) -> int:
    verdicts = {f.verdict for f in findings}
    if any(v.fails(strict) for v in verdicts):
        return 1
    if any(v.undecided for v in verdicts) or not findings:
        return 3
    return 0
