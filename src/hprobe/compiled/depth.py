"""Past the validators: what trtllm-gen's compiled code does with each h_q a probe
got through, from the release's own C++ (ported per era) and its own kernel table.

For every h_q the validators accepted on a path into trtllm-gen's FMHA launcher, the
launch is evaluated over a grid of batch sizes and KV lengths (top-k widths for DSv4)
on the target GPU, and the h_q is then:
- accepted at compiled depth when a kernel launches at every point of the grid;
- accepted with `shapes` said when a kernel launches only at some points;
- rejected at compiled depth, with the C++ check that refuses it, when none does;
- inconclusive, with the shape named, when some shape is left to a run-time
  answer and the shapes decided either all launch or all refuse: neither
  "always" nor "never" is shown. The one such answer is the occupancy query
  behind run()'s CgaSmemReduction fallback, and only where the fallback's own
  selection is refused; where it launches, the count launches either way.
An h_q the validators refused keeps its refusal; where a kernel exists for it, a note
says so. An SM the runner's architecture check refuses is unsupported-arch for every
h_q the validators let through, with or without a kernel table.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from hprobe.compiled.files import TABLE_SETTING
from hprobe.compiled.table import KernelTable, TableError, Tables
from hprobe.compiled.trtllm_gen import Gate, Port, port_for, runner_gate, source
from hprobe.compiled.trtllm_gen.era_0_6_12 import (
    Device,
    FmhaCall,
    Launch,
    NotPorted,
    Refusal,
    Selection,
    Undetermined,
)
from hprobe.device.fakes import FakeDeviceProperties
from hprobe.kernels import get_variant
from hprobe.model.compiled import PENDING_SELECTION, TrtllmGenCall
from hprobe.model.heads import compact_set
from hprobe.model.outcome import OUTSIDE_FAMILIES_UNCHECKED, Cause, Depth, HeadResult, KernelSMResult, Outcome
from hprobe.model.sm import SM

# The shapes each h_q is tried at: decode batch sizes, and KV lengths (for DSv4,
# the top-k width the launcher takes as its KV length; multiples of 4).
BATCH_SIZES = (1, 2, 4, 16, 64, 256)
KV_LENGTHS = (1024, 4096, 32768, 131072)
DSV4_TOP_K = (128, 512, 1024, 2048)


@dataclass(frozen=True)
class Existence:
    """Whether a kernel launches for one h_q, over the grid of shapes: how many
    shapes launch, are refused and are left to a run-time answer, and the first
    of each (batch, KV length or top-k, what happened), which is what a
    conclusion cites. Small, so that answers worked out in a child cross a pipe
    quickly."""

    launched: int
    refused: int
    undetermined: int
    first_launch: tuple[int, int, Launch] | None = None
    first_refusal: tuple[int, int, Refusal] | None = None
    first_undetermined: tuple[int, int, str] | None = None

    @property
    def shapes(self) -> int:
        return self.launched + self.refused + self.undetermined


def device_of(sm: SM) -> Device:
    """The GPU the selection is evaluated on: the faked device the probe ran on."""
    props = FakeDeviceProperties(sm)
    return Device(sm.number, props.multi_processor_count, props.shared_memory_per_block_optin)


def existence(selection: Selection, call: TrtllmGenCall, heads: int) -> Existence:
    launched: list[tuple[int, int, Launch]] = []
    refused: list[tuple[int, int, Refusal]] = []
    undetermined: list[tuple[int, int, str]] = []
    lengths = DSV4_TOP_K if call.dsv4 else KV_LENGTHS
    for batch in BATCH_SIZES:
        for kv in lengths:
            fmha = FmhaCall(
                dsv4=call.dsv4,
                dtype_q=call.dtype_q,
                dtype_kv=call.dtype_kv,
                dtype_o=call.dtype_o,
                num_qo_heads=heads,
                head_dim_q=call.head_dim_q,
                head_dim_o=call.head_dim_o,
                batch_size=batch,
                max_q_len=call.q_len,
                max_kv_len=kv,
                page_size=call.page_size,
                sparse_mla_top_k=kv if call.dsv4 else call.sparse_mla_top_k,
                num_kv_heads=call.kv_heads or 1,
                context=call.context,
            )
            try:
                launched.append((batch, kv, selection.launch(fmha)))
            except Refusal as exc:
                refused.append((batch, kv, exc))
            except Undetermined as exc:
                undetermined.append((batch, kv, str(exc)))
    return Existence(
        len(launched),
        len(refused),
        len(undetermined),
        launched[0] if launched else None,
        refused[0] if refused else None,
        undetermined[0] if undetermined else None,
    )


def deepen(result: KernelSMResult, package: Path, get_tables: Callable[[], Tables]) -> None:
    """Take `result` past the validators where its h_q reached trtllm-gen (see
    the module docstring); leave it as it is elsewhere, saying why. The kernel
    table is asked for only where a port will read it (finding one may mean a
    download)."""
    probe = get_variant(result.key).probe
    calls = launcher_calls(result)
    if not calls:
        return
    if os.environ.get(TABLE_SETTING, "").strip().lower() == "off":
        leave_pending(result, calls, TABLE_OFF)
        return
    sm = SM.from_number(result.sm)
    gate = runner_gate(package)
    if isinstance(gate, Gate) and sm.number not in gate.sms:
        _refuse_arch(result, calls, gate, {probe.compiled_checks(e) for e in calls})
        return
    if isinstance(gate, str):
        result.not_deepened(gate)
        leave_pending(result, calls, "the runner's architecture check reads like no ported release's")
        return
    port = port_for(package)
    if isinstance(port, str):
        result.not_deepened(f"flashinfer {result.flashinfer_version}: {port}")
        leave_pending(result, calls, f"flashinfer {result.flashinfer_version}'s selection code has no port in hprobe")
        return
    if isinstance(port.gqa, str) and all(call.kv_heads for call in calls.values()):
        # Asked before the table: finding one may mean a download, and no port reads it for these.
        result.not_deepened(f"flashinfer {result.flashinfer_version}: {port.gqa}")
        leave_pending(result, calls, port.gqa)
        return
    tables = get_tables()
    if tables.disabled:
        leave_pending(result, calls, TABLE_OFF)
        return
    if tables.table is None:
        result.not_deepened(tables.missing or "no source holds it")
        leave_pending(result, calls, TABLE_UNAVAILABLE)
        return
    device = device_of(sm)
    asked = _asked(result, calls)
    # The selection (and the table's rows it loads) is made only where an
    # answer is not already known: answers worked out ahead in a child
    # (deep_ahead) leave the parent nothing to evaluate, nor rows to read.
    if any((port.key, tables.table.sha256, device, call, h) not in _EXISTENCES for h, _, call in asked):
        try:
            _selection(port, tables.table, device)
        except TableError as exc:
            result.not_deepened(str(exc))
            leave_pending(result, calls, "the release's kernel table could not be read (a note says why)")
            return
    evaluated = _evaluate(result, asked, port, tables.table, device, package)
    if evaluated:
        # A weaker basis elsewhere in the result (partial, faked device) stays what it says.
        if result.depth in (Depth.VALIDATORS, Depth.DISPATCH):
            result.depth = Depth.COMPILED
        checks = {probe.compiled_checks(e) for e in calls}
        gqa_port = port.described if any(call.kv_heads for call in calls.values()) else None
        result.unchecked = [u for u in result.unchecked if u not in checks]
        result.notes.append(
            f"compiled depth: trtllm-gen's selection ({gqa_port if gqa_port else port.era} port) on its kernel table "
            f"(flashInferMetaInfo.h sha256 {tables.table.sha256[:12]}, {len(tables.table):,} kernels), for a GPU of "
            f"{device.multiprocessor_count} SMs, "
            f"batch sizes {_span(BATCH_SIZES)} and "
            f"{'top-k ' + _span(DSV4_TOP_K) if next(iter(calls.values())).dsv4 else 'KV lengths ' + _span(KV_LENGTHS)}"
        )


# Why a count's compiled selection is pending where no table was had, short
# (it is every such row's evidence); the release's note says where the search
# looked and the command that fetches one.
TABLE_UNAVAILABLE = "no kernel table here (HPROBE_KERNEL_TABLE names one)"
TABLE_OFF = f"{TABLE_SETTING}=off keeps every answer at the validators"


def launcher_calls(result: KernelSMResult) -> dict[str, TrtllmGenCall]:
    """The entries `result`'s counts reached whose launch trtllm-gen's
    selection decides, each with the call it makes."""
    probe = get_variant(result.key).probe
    return {
        e: c
        for e in {r.entry for r in result.heads.values() if r.entry}
        if (c := probe.compiled_call(e, result.config)) is not None
    }


def leave_pending(result: KernelSMResult, calls: dict[str, TrtllmGenCall], why: str) -> None:
    """Every accepted count that reached a launcher in `calls` is left with its
    compiled selection pending: accepted as far as the validators go, never a
    verdict of "ok" (judge.py) unless its taker says so."""
    said = f"{PENDING_SELECTION}: {why}"
    for h, head in result.heads.items():
        if head.outcome is Outcome.ACCEPTED and head.entry in calls and head.pending is None:
            result.heads[h] = replace(head, pending=said)


_SELECTIONS: dict[tuple[str, str, Device], Selection] = {}


def _selection(port: Port, table: KernelTable, device: Device) -> Selection:
    # Keyed by the table's digest: hashing 13,000 rows on every lookup would cost more than the selection.
    key = (port.key, table.sha256, device)
    if key not in _SELECTIONS:
        _SELECTIONS[key] = port.selection_on(table, device)
    return _SELECTIONS[key]


# What an answer rests on: the era's code, the table (its digest), the GPU, the call and h_q.
AnswerKey = tuple[str, str, Device, TrtllmGenCall, int]

# A selection's answer for one call and h_q, for the run: releases that share
# an era's code and a kernel table (0.6.12 - 0.6.15, 0.6.16 - 0.6.17) ask the
# same 6,144 launches each, and answers worked out ahead (evaluate_ahead, in
# a child process: support/deep_ahead.py) are adopted here.
_EXISTENCES: dict[AnswerKey, Existence] = {}


def _existence(port: Port, table: KernelTable, device: Device, call: TrtllmGenCall, heads: int) -> Existence:
    if call.kv_heads and isinstance(port.gqa, str):
        raise NotPorted(port.gqa)
    key = (port.key, table.sha256, device, call, heads)
    if key not in _EXISTENCES:
        _EXISTENCES[key] = existence(_selection(port, table, device), call, heads)
    return _EXISTENCES[key]


def evaluate_ahead(
    package: Path, wanted: dict[str, list[int]], heads: list[int], tables: Tables
) -> dict[AnswerKey, Existence]:
    """Every answer `deepen` can ask of `tables` for these kernel variants
    (key -> SMs) and counts, worked out before the probe says which counts
    reach trtllm-gen: the calls each probe can make there
    (KernelProbe.compiled_calls), at every count. Answers of the same code,
    table, GPU, call and count as deepen's own, so adopting them changes no
    conclusion; what is not here deepen evaluates itself."""
    gate, port = runner_gate(package), port_for(package)
    if tables.table is None or not isinstance(gate, Gate) or isinstance(port, str):
        return {}
    answers: dict[AnswerKey, Existence] = {}
    for key, sms in wanted.items():
        variant = get_variant(key)
        calls = variant.probe.compiled_calls(variant.values)
        for sm in sms:
            if sm not in gate.sms:
                continue  # refused by the runner whatever the count: no selection runs
            device = device_of(SM.from_number(sm))
            try:
                _selection(port, tables.table, device)
            except TableError:
                return answers  # deepen meets it again, and says so
            for call in calls:
                for h in heads:
                    try:
                        found = _existence(port, tables.table, device, call, h)
                    except NotPorted:
                        continue  # deepen meets it again, and says so
                    answers[(port.key, tables.table.sha256, device, call, h)] = found
    return answers


def adopt(answers: dict[AnswerKey, Existence]) -> None:
    """Take answers worked out elsewhere (evaluate_ahead in a child) as this run's own."""
    _EXISTENCES.update(answers)


def _asked(result: KernelSMResult, calls: dict[str, TrtllmGenCall]) -> list[tuple[int, HeadResult, TrtllmGenCall]]:
    """The counts whose answer compiled depth reads, each with the call it makes:
    an accepted count's entry's call; a refused count reached no entry, and where
    the release has one route here, it is the call it would have made."""
    only = next(iter(calls.values())) if len(calls) == 1 else None
    asked = []
    for h, head in sorted(result.heads.items()):
        call = calls.get(head.entry or "") or (only if head.outcome is Outcome.REJECTED else None)
        if call is not None and head.outcome in (Outcome.ACCEPTED, Outcome.REJECTED):
            asked.append((h, head, call))
    return asked


def _evaluate(
    result: KernelSMResult,
    asked: list[tuple[int, HeadResult, TrtllmGenCall]],
    port: Port,
    table: KernelTable,
    device: Device,
    package: Path,
) -> bool:
    evaluated = False
    refused_with_kernel: list[int] = []
    for h, head, call in asked:
        try:
            found = _existence(port, table, device, call, h)
        except NotPorted as exc:
            if head.outcome is Outcome.ACCEPTED:
                result.heads[h] = replace(head, pending=f"{PENDING_SELECTION}: {exc}")
            continue
        if head.outcome is Outcome.REJECTED:
            if found.launched:
                refused_with_kernel.append(h)
            continue
        evaluated = True
        if found.undetermined and (not found.launched or not found.refused):
            # A count is refused only where every shape is refused, and served
            # "always" only where every shape launches: a shape left to a
            # runtime answer, with no refusal beside a launch, settles neither.
            result.heads[h] = HeadResult(
                h, Outcome.INCONCLUSIVE, reason=_undetermined(found, call), cause=Cause.RUNTIME.value
            )
            continue
        if not found.launched:
            assert found.first_refusal is not None  # every shape tried launched, was refused or left to run time
            batch, kv, refusal = found.first_refusal
            # As for any refusal, the evidence is the check's words and place (an
            # entry is what an accepted call reached).
            result.heads[h] = HeadResult(
                h,
                Outcome.REJECTED,
                error_type="compiled check",
                message=refusal.message,
                location=_location(package, refusal),
            )
        elif found.refused:
            result.heads[h] = replace(head, shapes=_shapes(found, call))
    if refused_with_kernel:
        result.notes.append(
            f"h_q {compact_set(refused_with_kernel)}: refused by the validators, yet the kernel table has a kernel for "
            "them "
            "(the refusal is the Python check's alone)"
        )
    return evaluated


def _undetermined(found: Existence, call: TrtllmGenCall) -> str:
    what = "top-k" if call.dsv4 else "KV"
    assert found.first_undetermined is not None
    batch, kv, why = found.first_undetermined
    said = [
        f"compiled depth: at {found.undetermined} of {found.shapes} shapes tried the launch is decided at run time "
        f"(batch {batch}, {what} {kv}: {why})"
    ]
    if found.first_launch is not None:
        ok_batch, ok_kv, _ = found.first_launch
        said.append(f"a kernel launches at {found.launched} (batch {ok_batch}, {what} {ok_kv})")
    if found.first_refusal is not None:
        no_batch, no_kv, refusal = found.first_refusal
        said.append(f'none at {found.refused} (batch {no_batch}, {what} {no_kv}: "{refusal.message}")')
    return "; ".join(said)


def _shapes(found: Existence, call: TrtllmGenCall) -> str:
    what = "top-k" if call.dsv4 else "KV"
    assert found.first_refusal is not None and found.first_launch is not None
    batch, kv, refusal = found.first_refusal
    ok_batch, ok_kv, _ = found.first_launch
    return (
        f"a kernel at {found.launched} of {found.launched + found.refused} shapes tried: none at batch {batch}, {what} "
        f"{kv} "
        f'("{refusal.message}"); one at batch {ok_batch}, {what} {ok_kv}'
    )


def _location(package: Path, refusal: Refusal) -> str:
    return _located(package, refusal.file, refusal.function, refusal.needle)


@lru_cache(maxsize=256)
def _located(package: Path, relative: str, function: str, needle: str) -> str:
    # Hundreds of counts cite one check: its line is found once.
    file = source(package, relative)
    line = None
    if file is not None:
        start = min((d.line for d in file.definitions(function)), default=0)
        line = file.line_of(needle, after=start) or file.line_of(needle)
    where = f"flashinfer/data/{relative}" + (f":{line}" if line else "")
    return f"{where} ({function})"


def _refuse_arch(result: KernelSMResult, calls: dict[str, TrtllmGenCall], gate: Gate, checks: set[str | None]) -> None:
    for h, head in result.heads.items():
        if head.outcome is Outcome.ACCEPTED and head.entry in calls:
            result.heads[h] = HeadResult(
                h,
                Outcome.UNSUPPORTED_ARCH,
                error_type="compiled check",
                message="Unsupported architecture",
                location=f"{gate.location} (TllmGenFmhaRunner)",
            )
    if result.depth in (Depth.VALIDATORS, Depth.DISPATCH):
        result.depth = Depth.COMPILED
    # The runner's check answered, where the probe could say only that the validators had.
    result.notes = [n for n in result.notes if not n.endswith(OUTSIDE_FAMILIES_UNCHECKED)]
    allowed = "/".join(f"SM{s}" for s in gate.sms)
    # What the runner's check settles: the cubin caveat, and "no SMxxx route".
    result.unchecked = [u for u in result.unchecked if u not in checks and " route, " not in u]
    result.notes.append(
        f'compiled depth: trtllm-gen\'s runner takes {allowed} only ("Unsupported architecture", {gate.location}): '
        f"SM{result.sm} has no trtllm-gen route in flashinfer {result.flashinfer_version}, whatever h_q is"
    )


def _span(values: tuple[int, ...]) -> str:
    return f"{values[0]}..{values[-1]}"
