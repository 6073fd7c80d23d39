"""One line of advice per table x backend x SM, from the findings alone: what the
padding does on the releases probed and, in plain words, what to change.

Advice never reaches beyond what was probed: a table that names no pin is
advised for the releases probed only, and says so."""

from __future__ import annotations

from dataclasses import replace
from itertools import groupby
from typing import TYPE_CHECKING, assert_never

from hprobe.model.advice import Advice, TableAdvice
from hprobe.model.assumption import Assumption
from hprobe.model.heads import compact_set
from hprobe.model.outcome import Cause
from hprobe.model.verdict import Finding, Verdict

if TYPE_CHECKING:
    from hprobe.model.padding import PaddingTable


def summarize(findings: list[Finding], tables: list[PaddingTable]) -> list[TableAdvice]:
    pins = {t.name: t.requires_flashinfer for t in tables}
    own = {t.name for t in tables if t.releases}
    out = []
    for table, rows_iter in groupby(findings, key=lambda f: f.table):
        rows = list(rows_iter)
        merged: dict[tuple, list[int]] = {}
        kernels: dict[str, str] = {}
        for (backend, sm), group_iter in groupby(rows, key=lambda f: (f.backend, f.sm)):
            group = list(group_iter)
            counts: dict[str, int] = {}
            for f in group:
                counts[f.verdict.value] = counts.get(f.verdict.value, 0) + 1
            kernels[backend] = group[0].kernel
            merged.setdefault((backend, tuple(counts.items()), _action(group)), []).append(sm)
        backends = _answers_together(
            [Advice(table, b, kernels[b], tuple(sms), dict(c), action) for (b, c, action), sms in merged.items()],
            {b.name: b.answer_of for t in tables if t.name == table for b in t.backends if b.answer_of is not None},
        )
        releases = tuple(
            sorted({r for f in rows for r in (f.releases or [f.flashinfer_version]) if r not in ("-", "")})
        )
        # The pin the releases were chosen by (--pin, else the table's own), so the
        # scope never names a pin whose releases were not the ones probed.
        chosen_by = next((f.pin for f in rows if f.pin), None)
        pin = chosen_by or pins.get(table)
        # No finding rests on the table's pin while it has one: --flashinfer named the releases.
        given = chosen_by is None and pin is not None and table not in own
        out.append(TableAdvice(table, releases, pin, backends, table in own, given))
    return out


def _answers_together(backends: list[Advice], answer_of: dict[str, str]) -> tuple[Advice, ...]:
    """A traced call's answers (`answer_of`: backend -> the call it answers
    for) that the summary would say alike (the same SMs and action: all
    undecided for the same reason) as one line, counted; each answer keeps its
    own rows in the findings."""
    out: list[Advice] = []
    together: dict[tuple[str, tuple[int, ...], str], tuple[int, list[Advice]]] = {}
    for advice in backends:
        call = answer_of.get(advice.backend)
        if call is None or set(advice.counts) not in ({Verdict.ASSUMED.value}, {Verdict.OK.value}):
            out.append(advice)
            continue
        key = (call, advice.sms, advice.action)
        if key not in together:
            together[key] = (len(out), [])
            out.append(advice)  # its place, taken by the line for all of them below
        together[key][1].append(advice)
    for (call, _, _), (place, group) in together.items():
        if len(group) > 1:
            counts: dict[str, int] = {}
            for advice in group:
                for verdict, n in advice.counts.items():
                    counts[verdict] = counts.get(verdict, 0) + n
            out[place] = replace(group[0], backend=f"{call} [{len(group)} answers]", counts=counts)
    return tuple(out)


def _tps(rows: list[Finding]) -> str:
    return "TP" + "/".join(str(tp) for tp in sorted({f.tp for f in rows}))


def _action(rows: list[Finding]) -> str:
    action = _verdict_action(rows)
    # The call runs only where the tests on its way in its own function hold: so does the verdict.
    guarded = f"where {rows[0].guard}: " if rows[0].guard else ""
    reach = rows[0].reach
    if reach is None or reach.default_reaches:
        return guarded + action
    # The rule also feeds the engine's default, which hprobe does not probe:
    # the advice is about FlashInfer's path alone and cannot be applied as is.
    scoped = f"{reach.scope()}, {guarded}{action}" if guarded else f"{reach.scope()}: {action}"
    if all(f.verdict is Verdict.OK for f in rows):
        return scoped
    default = "elsewhere the default backend" if reach.default_when else "the default backend"
    return f"{scoped} — {default} ({reach.otherwise}) shares this rule: change it behind a {reach.flag} branch"


def _urgency(verdict: Verdict) -> int:
    """Which verdict a backend's advice speaks of first, when its rows differ."""
    match verdict:
        case Verdict.BROKEN:
            return 0
        case Verdict.SOME_SHAPES:
            return 1
        case Verdict.REDUCIBLE:
            return 2
        case Verdict.TABLE_REFUSES:
            return 3
        case Verdict.OFF_FAST_PATH:
            return 4
        case Verdict.INCONCLUSIVE:
            return 5
        case Verdict.ASSUMED:
            return 6
        case Verdict.OK:
            return 7
        case _:
            assert_never(verdict)


def _verdict_action(rows: list[Finding]) -> str:
    verdict = min({f.verdict for f in rows}, key=_urgency)
    group = [f for f in rows if f.verdict is verdict]
    ns = compact_set({f.n for f in group})
    match verdict:
        case Verdict.BROKEN:
            called = [f.evidence for f in group if f.evidence is not None and f.evidence.cause == Cause.CALL.value]
            crashed = [f.crash for f in group if f.crash is not None]
            if crashed and len(crashed) == len(group):
                # The engine's own code raises before the call: no padding mends it.
                return f"broken for {_tps(group)}, at every count: {crashed[0]}"
            if called and len(called) == len(group):
                # Python refuses the call as written, whatever the count: no padding mends it.
                return f"broken for {_tps(group)}, at every count: {called[0].message}"
            padded = compact_set({f.padded for f in group if f.padded is not None})
            return (
                f"broken for {_tps(group)}: the kernel refuses {padded}; pad to counts it accepts before shipping this"
            )
        case Verdict.SOME_SHAPES:
            padded = compact_set({f.padded for f in group if f.padded is not None})
            whole = compact_set({f.best for f in group if f.best is not None})
            instead = f"; pad to {whole}, which has a kernel at every shape tried" if whole != "{}" else ""
            return f"a kernel for {padded} only at some batch sizes and KV lengths ({_tps(group)}){instead}"
        case Verdict.REDUCIBLE:
            return _reducible_action(group)
        case Verdict.TABLE_REFUSES:
            return f"the table raises for n={ns}, which the kernel accepts ({_tps(group)})"
        case Verdict.OFF_FAST_PATH:
            return f"runs, but on a slower kernel for n={ns} ({_tps(group)})"
        case Verdict.INCONCLUSIVE:
            return f"inconclusive for n={ns}: {group[0].explain() or 'see the details'}"
        case Verdict.ASSUMED:
            why = group[0].assumed or Assumption.HEADS
            crash = compact_set({f.n for f in group if f.on_assumption is not None and f.on_assumption.fails(False)})
            shown = (
                f"; on it the kernel refuses n={crash}"
                if crash != "{}" and why in (Assumption.HEADS, Assumption.CALL, Assumption.ESCAPED, Assumption.REACH)
                else ""
            )
            where = "the notes" if why is Assumption.RELEASE else "the call paths"
            return f"undecided: {why.undecided}{shown} (see {where})"
        case Verdict.OK:
            return "ok: every count runs as padded"
        case _:
            assert_never(verdict)


def _reducible_action(reducible: list[Finding]) -> str:
    # Only the counts that change are named: "instead of" a set that also
    # holds counts other rows keep would misstate what n pads to today.
    ns = compact_set({f.n for f in reducible})
    now = compact_set({f.padded for f in reducible if f.padded is not None})
    after = compact_set({f.best for f in reducible if f.best is not None})
    wastes = [f.waste for f in reducible if f.waste]
    low, high = min(wastes or [1.0]), max(wastes or [1.0])
    saving = f"{low:.3g}–{high:.3g}×" if f"{low:.3g}" != f"{high:.3g}" else f"{high:.3g}×"
    return f"for n={ns}, pad to {after} instead of {now}: saves {saving} on {_tps(reducible)}"
