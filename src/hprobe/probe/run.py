"""Run a kernel probe over SMs and head counts and turn raw calls into outcomes."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import replace
from functools import cached_property
from itertools import islice
from pathlib import Path

import hprobe.kernels as kernels_package
from hprobe.device.boundary import DECIDED_BY_SELECTION, ImportFailure
from hprobe.device.classify import CallResult
from hprobe.device.fake_cuda import cuda_tensors, reports_cuda
from hprobe.device.session import BASELINE_TOOLKIT, FlashinferSession
from hprobe.device.sites import CheckSite, passed_elsewhere
from hprobe.kernels.base import KernelProbe, Value, Variant
from hprobe.model.call import signature_of
from hprobe.model.heads import compact_set
from hprobe.model.outcome import (
    OUTSIDE_FAMILIES_UNCHECKED,
    Cause,
    Depth,
    HeadResult,
    KernelSMResult,
    Outcome,
    without_count,
)
from hprobe.model.sm import SM

# Compiled calls that answer a question (format, dispatch policy) rather than launch.
_POLICY_QUERY = re.compile(r"^(resolve_|query|format_info|metadata|get_|supported_|is_)")


def probe_kernel(
    session: FlashinferSession,
    variant: Variant | KernelProbe,
    sms: Iterable[SM],
    heads: Iterable[int],
) -> list[KernelSMResult]:
    """Probe one kernel variant for every SM in `sms` over `heads`.

    An answer is the same whatever else a run asks for: each SM is classified
    on its own, over every count of CANONICAL_HEADS as well as those asked
    (whether a refusal is about h_q rests on whether another h_q got through
    on that SM), and only the counts asked are returned."""
    if isinstance(variant, KernelProbe):
        variant = variant.variant()
    asked = sorted(set(heads))
    results = _probe_kernel(session, variant, list(sms), sorted(set(asked) | set(CANONICAL_HEADS)))
    if len(asked) != len(results[0].heads if results else asked):
        keep = set(asked)
        for result in results:
            result.heads = {h: r for h, r in result.heads.items() if h in keep}
    return results


# The counts every SM is classified over, whichever are asked for: the range
# hprobe answers by default, which covers every model's per-rank count.
CANONICAL_HEADS = range(1, 257)


def _probe_kernel(
    session: FlashinferSession, variant: Variant, sms: list[SM], heads: list[int]
) -> list[KernelSMResult]:
    probe, config = variant.probe, variant.values
    version = session.version
    results = [KernelSMResult(probe.id, sm.number, version, config=dict(config), key=variant.key) for sm in sms]
    try:
        entry = session.resolve(probe.entry_point)
    except ImportFailure as exc:
        # The module exists but does not import here: the environment, not the kernel.
        for result in results:
            for h in heads:
                result.heads[h] = HeadResult(
                    h,
                    Outcome.INCONCLUSIVE,
                    reason=f"{exc}; an import failure says nothing about the kernel",
                    cause=Cause.ENVIRONMENT.value,
                )
        return results
    signatures = _signatures(session, probe, entry)
    for result in results:
        result.signatures = signatures
    absent = f"flashinfer {version} has no {probe.entry_point}" if entry is None else probe.offered(entry, config)
    if absent is not None:
        for result in results:
            for h in heads:
                result.heads[h] = HeadResult(h, Outcome.ABSENT, reason=absent)
        return results
    session.configure(probe.pass_through_calls, probe.recorded_calls, probe.recorded_launches)
    try:
        tries = _run_alternatives(session, variant, entry, sms, heads)
        probing = _Probing(session, variant, entry, heads, tries)
        for result in results:
            sm = SM.from_number(result.sm)
            probing.classify(sm, result)
            _describe_depth(probe, tries[sm][0][1], result)
            _mark_pending(probe, result)
            _attach_metadata(session, probe, entry, sm, config, heads, result)
        probing.absent_option(results)
    finally:
        session.configure()
    return results


def _signatures(session: FlashinferSession, probe: KernelProbe, entry: object) -> dict[str, dict[str, object]]:
    """The signature of every name the probe answers for, as this release
    defines it (what an engine's call of that name is bound against: a keyword
    the signature lacks is a TypeError at every count). A name the release
    lacks, or whose signature Python cannot give, has none."""
    module = probe.entry_point.rpartition(".")[0]
    out: dict[str, dict[str, object]] = {}
    for name in probe.called_as:
        try:
            found = entry if name == probe.called_as[0] else session.resolve(f"{module}.{name}")
        except ImportFailure:
            continue
        signature = signature_of(found) if found is not None else None
        if signature is not None:
            out[name] = signature.to_dict()
    return out


Tries = dict[SM, list[tuple[int, dict[int, CallResult]]]]


def _run_alternatives(session: FlashinferSession, variant: Variant, entry, sms: list[SM], heads: list[int]) -> Tries:
    """Raw calls per SM under the probe's input conventions (releases changed
    some without a signature change: a workspace dtype, the plan layout, the
    query dtype beside an fp8 KV cache). Per SM: the first convention under
    which any call reaches the boundary, alone; when none reaches, every
    convention tried, for classification to weigh."""
    count = variant.probe.input_alternatives(entry, variant.values)
    tries: Tries = {}
    for sm in sms:
        tries[sm] = []
        for alternative in range(count):
            raw = _run(session, variant, entry, sm, heads, alternative)
            raw = _on_faked_cuda(session, variant, entry, sm, raw, alternative)
            if sm.major in variant.probe.families(variant.values):
                raw = _past_device_checks(raw)
            if any(c.reached for c in raw.values()):
                tries[sm] = [(alternative, raw)]
                break
            tries[sm].append((alternative, raw))
    return tries


def _on_faked_cuda(
    session: FlashinferSession, variant: Variant, entry, sm: SM, raw: dict[int, CallResult], alternative: int
) -> dict[int, CallResult]:
    """The calls a check on the tensors' device stopped, made again with
    tensors that report a CUDA device (device/fake_cuda.py): every check after
    the device check runs on them, flashinfer's own code as before. Only an
    answer replaces the stopped call: the boundary reached, or a validator's
    refusal, marked `faked_device`. A rerun stopped by anything else (the CUDA
    runtime past the fakes, another device check) keeps the device stop, with
    what the rerun met added to its reason: that h_q stays undecided, and no
    other h_q's answer is read through it."""
    stopped = _made_again_on_faked_cuda(raw)
    if not stopped:
        return raw
    out = dict(raw)
    with session.quiet():
        for h in stopped:
            again = _one(session, variant.probe, entry, sm, h, variant.values, alternative, faked_cuda=True)
            if again.reached or again.validator:
                out[h] = again
            elif not _stopped_by_device({h: again}):
                call = raw[h]
                met = again.reason or f"{again.error_type}: {again.message}"
                reason = (
                    f"{call.reason}; on CPU tensors that report cuda:0 it went on to {again.location or '?'}, where it "
                    f"stopped: {met}"
                )
                out[h] = replace(call, reason=reason)
    return out


_KERNELS_DIR = str(Path(kernels_package.__file__).resolve().parent)


def _clear_input_caches() -> None:
    """Forget every input the probes keep between calls (module-level lru
    caches, cached properties of the probe objects), so that the next call
    makes its tensors again under whatever device it runs on."""
    for name, module in list(sys.modules.items()):
        if name.startswith("hprobe.kernels.") and module is not None:
            for value in vars(module).values():
                clear = getattr(value, "cache_clear", None)
                if callable(clear):
                    clear()
    for probe in kernels_package.PROBES.values():
        for cls in type(probe).__mro__:
            for attr, value in vars(cls).items():
                if isinstance(value, cached_property):
                    probe.__dict__.pop(attr, None)


def _stopped_by_device(raw: dict[int, CallResult]) -> list[int]:
    """The h_q whose call a check on the tensors' device stopped."""
    return [h for h, c in raw.items() if c.site is not None and c.site.device_check]


def _made_again_on_faked_cuda(raw: dict[int, CallResult]) -> list[int]:
    """The h_q a device check stopped, and those a CUDA runtime call Python
    makes before any check stopped on the CPU (a device context around a plan:
    the prims_ts wrapper's): the runtime's stand-ins answer those calls."""
    return [
        h
        for h, c in raw.items()
        if c.site is not None and c.site.device_check or (c.cause == Cause.DEVICE.value and not c.faked_device)
    ]


def _past_device_checks(raw: dict[int, CallResult]) -> dict[int, CallResult]:
    """A CPU probe cannot pass a check that its tensors are on the GPU. Where
    some h_q stop there while other h_q are refused by validators before it,
    the stopped h_q passed the checks that refused the others; what follows the
    device check did not run, so they stay inconclusive (an environment
    failure), with that said in their reason. Only on an SM of the kernel's own
    families: elsewhere an architecture check may follow the device check."""
    stopped = _stopped_by_device(raw)
    if not stopped or not any(c.validator for c in raw.values()):
        return raw
    out = dict(raw)
    for h in stopped:
        call = raw[h]
        reason = (
            f"passed the checks that refused other h_q, then stopped at a check on the tensors' device "
            f"({call.location or '?'}), which a CPU probe cannot pass: the checks after it did not run"
        )
        out[h] = CallResult(
            error_type=call.error_type,
            message=call.message,
            location=call.location,
            reason=reason,
            passed=call.passed,
            site=call.site,
        )
    return out


def _mark_pending(probe: KernelProbe, result: KernelSMResult) -> None:
    """Accepted counts whose entry a compiled selection follows that the probe
    does not evaluate: pending (KernelProbe.pending_selection)."""
    for h, head in result.heads.items():
        if head.outcome is Outcome.ACCEPTED and head.entry and (why := probe.pending_selection(head.entry)):
            result.heads[h] = replace(head, pending=why)


def _describe_depth(probe: KernelProbe, raw: dict[int, CallResult], result: KernelSMResult) -> None:
    """Say what the accepted answers rest on, and what compiled code still checks."""
    entries = sorted({str(c.entry) for c in raw.values() if c.reached})
    if entries and all(probe.dispatch_depth(e) for e in entries):
        result.depth = Depth.DISPATCH
    faked = sorted(h for h, c in raw.items() if c.faked_device and (c.reached or c.validator))
    if faked and result.depth is not Depth.PARTIAL:
        result.depth = Depth.FAKED_DEVICE
        result.notes.append(
            f"faked device: h_q {compact_set(faked)} stopped at a check that the tensors are on a CUDA device or "
            "at a CUDA runtime call; made again with CPU tensors that report cuda:0 (values, shapes and dtypes real) "
            "and the runtime's stand-ins, every check after it ran on them"
        )
    result.unchecked = list(dict.fromkeys(filter(None, (probe.compiled_checks(e) for e in entries))))
    major = result.sm // 10
    foreign = [e for e in entries if (built := probe.built_for(e)) is not None and major not in built]
    if foreign:
        families = ", ".join(f"SM{f}x" for f in sorted(probe.built_for(foreign[0]) or ()))
        # The caveat a reader needs before trusting an `ok` on this SM.
        result.unchecked.append(
            f"SM{result.sm} reaches {', '.join(foreign)}, built for {families}: this release has no SM{result.sm} "
            "route, so an acceptance here is not expected to hold on the GPU"
        )
    toolkit: dict[str, tuple[list[int], str]] = {}  # the check's location -> (h_q, its first message)
    for h, c in sorted(raw.items()):
        if c.toolkit and (c.reached or c.validator):
            where, _, said = c.toolkit.partition(": ")
            toolkit.setdefault(where, ([], said))[0].append(h)
    for where, (hs, said) in toolkit.items():
        result.notes.append(
            f"toolkit: h_q {compact_set(hs)} pass the JIT check at {where} only under a CUDA toolkit newer than "
            f"{BASELINE_TOOLKIT} "
            f'("{said.split(". ")[0]}"): the serving machine\'s toolkit decides that check, not h_q; shown is the '
            "answer past it"
        )
    passed = sorted({p for c in raw.values() for p in c.passed})
    recorded = [p for p in passed if p.rpartition(".")[2] in probe.recorded_calls]
    handed_on = [p for p in passed if p.rpartition(".")[2] not in (*DECIDED_BY_SELECTION, *probe.recorded_calls)]
    asked = [p for p in passed if p.rpartition(".")[2] in DECIDED_BY_SELECTION]
    if handed_on:
        result.notes.append(
            f"compiled calls whose result Python only hands on were let through unexecuted: {', '.join(handed_on)}"
        )
    if recorded:
        result.notes.append(
            f"compiled plans let through unexecuted, what each was handed kept for the checks of its own that "
            f"hprobe reads: {', '.join(recorded)}"
        )
    if asked:
        result.notes.append(
            f"compiled queries of trtllm-gen's selection answered so that every count goes on (the selection they ask "
            f"decides the count, and is not evaluated here): {', '.join(asked)}"
        )


def _attach_metadata(
    session: FlashinferSession,
    probe: KernelProbe,
    entry,
    sm: SM,
    config: dict,
    heads: list[int],
    result: KernelSMResult,
) -> None:
    """Put the release's own claim beside the probed answer; flag disagreement."""
    try:
        claim = probe.metadata(session, entry, sm, config, heads)
    except Exception as exc:  # noqa: BLE001 - metadata is commentary; its failure must not hide the probe
        result.notes.append(f"capability metadata could not be read: {type(exc).__name__}: {exc}")
        return
    if claim is None:
        return
    result.metadata = claim.to_dict()
    accepted = set(result.accepted())
    if claim.sm_supported is False and accepted:
        result.notes.append(
            f"disagreement: {claim.source} says {sm} is not supported, yet the validators accepted h_q "
            f"{compact_set(accepted)}"
        )
    if claim.sm_supported is True and result.status is Outcome.UNSUPPORTED_ARCH:
        result.notes.append(f"disagreement: {claim.source} says {sm} is supported, yet the validators refuse it")
    if claim.heads is not None:
        claimed = set(claim.heads) & set(heads)
        decided = {h for h, r in result.heads.items() if r.outcome in (Outcome.ACCEPTED, Outcome.REJECTED)}
        only_claimed = sorted((claimed - accepted) & decided)
        only_probed = sorted(accepted - claimed)
        if only_claimed:
            result.notes.append(
                f"disagreement: {claim.source} claims h_q {compact_set(only_claimed)}, which the probe saw refused"
            )
        if only_probed:
            result.notes.append(
                f"{claim.source} does not list h_q {compact_set(only_probed)}, which the validators accepted"
            )


def _run(
    session: FlashinferSession, variant: Variant, entry, sm: SM, heads: list[int], alternative: int = 0
) -> dict[int, CallResult]:
    probe, config = variant.probe, variant.values
    raw: dict[int, CallResult] = {}
    with session.quiet():
        for h in heads:
            raw[h] = _one(session, probe, entry, sm, h, config, alternative)
    return raw


def _one(
    session: FlashinferSession,
    probe: KernelProbe,
    entry,
    sm: SM,
    h: int,
    config: dict,
    alternative: int = 0,
    trace: tuple[str, str] | None = None,
    faked_cuda: bool = False,
) -> CallResult:
    if faked_cuda:
        _clear_input_caches()  # cached inputs are plain CPU tensors: made again, reporting CUDA
    try:
        with cuda_tensors(_KERNELS_DIR) if faked_cuda else nullcontext():
            try:
                call = probe.prepare(entry, sm, h, config, alternative)
            except Exception as exc:  # noqa: BLE001 - a probe that cannot build inputs proves nothing
                return CallResult(
                    error_type=type(exc).__name__,
                    message=str(exc),
                    reason="the probe could not build inputs for this release"
                    + (" on a faked CUDA device" if faked_cuda else ""),
                    faked_device=faked_cuda,
                )
            kwargs = {k: reports_cuda(v) for k, v in call.kwargs.items()} if faked_cuda else call.kwargs
            result = session.call(sm, call.fn, trace=trace, **kwargs)
            result = _past_toolkit_check(session, sm, call.fn, trace, kwargs, result)
    finally:
        if faked_cuda:
            _clear_input_caches()  # never hand a CUDA-reporting input to a plain call
    result.faked_device = faked_cuda
    return result


def _past_toolkit_check(
    session: FlashinferSession, sm: SM, fn, trace: tuple[str, str] | None, kwargs: dict, result: CallResult
) -> CallResult:
    """A refusal by a check in JIT-spec generation, made again under a newer
    CUDA toolkit: a check that then passes tests the serving machine's toolkit,
    not the kernel, so the h_q's answer is the one past it, with the
    requirement kept beside it (`toolkit`). Whether a check reads the toolkit
    is found once per check; only JIT-spec code can read it."""
    site = result.site
    if not result.validator or site is None or not (result.location or "").startswith("flashinfer/jit/"):
        return result
    if session.toolkit_checks.get(site) is False:
        return result
    with session.newer_toolkit():
        again = session.call(sm, fn, trace=trace, **kwargs)
    passes = again.site != site
    session.toolkit_checks[site] = passes
    if not passes:
        return result
    again.toolkit = f"{result.location}: {result.message}"
    return again


def _refusal_groups(
    raw: dict[int, CallResult], reaches_elsewhere: Callable[[int], bool]
) -> list[tuple[CallResult, list[int], bool]]:
    """When every h_q was refused by a validator: the refusals worth tracing,
    as (first call, its h_q, exact). Exact groups share one check and one
    message word for word, for several h_q (or the only one probed), largest
    first; then single h_q that reached the boundary on another SM. Last, when
    one check (one raise or assert) refused every h_q with differing messages
    (they name the h_q), that whole group (not exact: its check may test h_q as well, so it
    can only speak for the configuration as a whole, never for the SM). Empty
    when some refusal was no validator's."""
    exact: dict[tuple, list[int]] = {}
    first: dict[tuple, CallResult] = {}
    for h, call in raw.items():
        if not call.validator or call.site is None:
            return []
        key = (call.site, call.message)
        exact.setdefault(key, []).append(h)
        first.setdefault(key, call)
    chosen = [(first[k], hs, True) for k, hs in exact.items() if len(hs) >= 2 or len(raw) == 1]
    chosen.sort(key=lambda item: -len(item[1]))
    singles = (hs for hs in exact.values() if len(hs) == 1 and len(raw) > 1)
    chosen += [
        (first[(raw[hs[0]].site, raw[hs[0]].message)], hs, True)
        for hs in islice((hs for hs in singles if reaches_elsewhere(hs[0])), 4)
    ]
    if len({c.site for c in raw.values()}) == 1 and len(exact) > 1:
        chosen.append((raw[min(raw)], sorted(raw), False))
    return chosen


# SMs a refusing check is retried on (traced) to see whether it tests the SM.
_REFERENCE_SMS = (90, 100, 103, 120, 121)


# Probe inputs, not answers: besides the h_q a refusal was read from, a few
# more counts of the refused group a witness configuration is traced at, so a
# check keyed by h_q and the configuration together can be seen to pass. They
# decide only whether a witness is found; none is ever called accepted (with
# no witness the refusal stays inconclusive).
_WITNESS_HEADS = (64, 128, 16)


class _Probing:
    """Turns one variant's raw calls into outcomes, SM by SM."""

    def __init__(self, session: FlashinferSession, variant: Variant, entry, heads: list[int], tries: Tries):
        self.session, self.variant, self.entry, self.heads, self.tries = session, variant, entry, heads, tries
        self._chosen: dict[SM, int] = {}  # SM -> the input convention its outcome was read from
        # (reference SM, h_q, input convention) -> reached
        self._reference_reached: dict[tuple[SM, int, int], bool] = {}
        self._everywhere: dict[SM, bool] = {}  # SM -> its uniform refusal refuses on every reference SM too
        self._witnessed: dict[CheckSite, str] = {}  # a configuration check -> which configuration passes it, where
        # SM -> the checks on the configuration that refuse every h_q the
        # earlier (head) checks let through; the h_q those refuse stay rejected
        self._staged: dict[tuple[SM, int], set[CheckSite]] = {}  # (SM, input convention) -> late checks

    def classify(self, sm: SM, result: KernelSMResult) -> None:
        probe = self.variant.probe
        alternative, raw = self.tries[sm][0]
        self._chosen[sm] = alternative
        if any(r.reached for r in raw.values()):
            # The same inputs reached the boundary for another h_q on this SM, so a
            # validator's refusal here is about h_q.
            for h, call in raw.items():
                result.heads[h] = _head_result(h, call, rejected_ok=True)
                if call.entry is not None:
                    result.heads[h].slow_path = probe.path(str(call.entry), self.variant.values)
            queries = sorted({str(c.entry) for c in raw.values() if c.entry and _POLICY_QUERY.match(c.entry.function)})
            if queries:
                result.depth = Depth.PARTIAL
                result.notes.append(
                    f"partial: stopped at a compiled query ({', '.join(queries)}) that this release consults before "
                    "launching; the Python that acts on its answer did not run"
                )
            families = probe.families(self.variant.values)
            if sm.major not in families:
                result.notes.append(
                    f"{sm} is outside the SM families this kernel is built for "
                    f"(SM{'x, SM'.join(str(f) for f in sorted(families))}x); " + OUTSIDE_FAMILIES_UNCHECKED
                )
            return
        # Nothing reached on this SM under any input convention. An architecture
        # refusal under any convention refuses the SM; a configuration refusal
        # must hold under every convention that fits the release (else it may
        # be the input's fault).
        verdicts = []
        # A convention this release cannot even take (a keyword its signature
        # lacks: every call fails outside flashinfer) says nothing; skip it.
        applicable = [(a, calls) for a, calls in self.tries[sm] if not all(_outside(c) for c in calls.values())]
        for alternative, calls in applicable or self.tries[sm]:
            verdicts.append((*self._unreached(sm, calls, alternative), calls, alternative))
        arch = next((v for v in verdicts if v[0] is Outcome.UNSUPPORTED_ARCH), None)
        configs = [v for v in verdicts if v[0] is Outcome.UNSUPPORTED_CONFIG]
        config = configs[0] if configs and all(v[0] is Outcome.UNSUPPORTED_CONFIG or v[2] for v in verdicts) else None
        decided = arch or config
        if decided is not None:
            outcome, why, _, raw, self._chosen[sm] = decided
            assert outcome is not None  # arch and config are picked by their outcome
            late = self._staged.get((sm, self._chosen[sm])) if outcome is Outcome.UNSUPPORTED_CONFIG else None
            for h, call in raw.items():
                if late is not None and call.site not in late:
                    # Refused by a check on h_q before the configuration's: what it refuses is h_q.
                    result.heads[h] = _head_result(h, call, rejected_ok=True)
                    continue
                result.heads[h] = HeadResult(
                    h, outcome, error_type=call.error_type, message=call.message, location=call.location, reason=why
                )
            return
        if self._refused_before_device_check(sm, result):
            return
        # Shown: the convention stopped by this machine (an environment failure,
        # CPU tensors) if any -- the likeliest reason no convention got through.
        _, reason, _, raw, self._chosen[sm] = next(
            (v for v in verdicts if any(map(_stopped_here, v[3].values()))), verdicts[0]
        )
        if len(verdicts) > 1:
            reason += f" ({len(verdicts)} input conventions tried)"
        stopped = next(filter(_stopped_here, raw.values()), None)
        for h, call in raw.items():
            hr = _head_result(h, call, rejected_ok=False)
            if call.reason:
                hr.reason = f"{reason}; {call.reason}"
            elif stopped is not None:
                # A refusal here cannot be read without the h_q this machine stopped.
                hr.reason = f"{reason}; other h_q were stopped by this machine: {stopped.reason}"
                hr.cause = stopped.cause
            else:
                hr.reason = reason
            result.heads[h] = hr

    def _refused_before_device_check(self, sm: SM, result: KernelSMResult) -> bool:
        """No h_q reached, but some stopped at a check on the tensors' device
        (which a CPU probe cannot pass) after passing, on this SM with the same
        inputs, each check that refused the other h_q (0.7.4 xqa: only h_q 128
        gets past the head check, then stops at the workspace's device). Those
        refusals are about h_q: rejected. The stopped h_q stay inconclusive.
        The first input convention where this holds is used."""
        for alternative, calls in self.tries[sm]:
            stopped = sorted(h for h, c in calls.items() if c.site is not None and c.site.device_check)
            refused = {h: c for h, c in calls.items() if h not in stopped}
            if not stopped or not refused or not all(c.validator and c.site is not None for c in refused.values()):
                continue
            # A refusal made on faked CUDA tensors (past a device check) is
            # traced on them too: on plain CPU tensors the stopped h_q would
            # never reach it.
            sites = {(c.site, c.faked_device) for c in refused.values() if c.site is not None}
            if not all(self._passes(sm, stopped[0], site, alternative, faked) for site, faked in sites):
                continue
            self._chosen[sm] = alternative
            for h, call in calls.items():
                result.heads[h] = _head_result(h, call, rejected_ok=True)
                if h in stopped:
                    result.heads[h].reason = (
                        call.reason or "stopped at a check on the tensors' device, which a CPU probe cannot pass"
                    )
                    result.heads[h].cause = Cause.DEVICE.value
            return True
        return False

    def _unreached(self, sm: SM, raw: dict[int, CallResult], alternative: int) -> tuple[Outcome | None, str, bool]:
        """What the refusals of one input convention show, when no h_q reached:
        an outcome (or None) with its reason, and whether the convention does
        not fit this release at all (one check refuses every h_q, and no probed
        call of any configuration on any SM was seen to pass it)."""
        groups = _refusal_groups(raw, lambda h: self._reaches_elsewhere(sm, h, alternative))
        kinds = [
            (self._refusal_kind(sm, refusal, heads[0], alternative), heads, exact) for refusal, heads, exact in groups
        ]
        # One architecture check, word for word the same for several h_q (or for
        # one that reaches the boundary elsewhere), is enough to refuse the SM. A
        # configuration refusal must be one check refusing every probed h_q: a
        # check that refuses some while others fail elsewhere may test h_q too.
        everyone = sorted(raw)
        arch = next((k for k, _, exact in kinds if exact and k[0] is Outcome.UNSUPPORTED_ARCH), None)
        config = next((k for k, heads, _ in kinds if heads == everyone and k[0] is Outcome.UNSUPPORTED_CONFIG), None)
        picked = arch or config
        if picked is not None:
            return (*picked, False)
        staged = self._staged_config(sm, raw, alternative)
        if staged is not None:
            return (*staged, False)
        if kinds:
            unfit = any(heads == everyone for _, heads, _ in kinds)
            return (
                None,
                (
                    "every h_q was refused by a check that no probed call was seen to pass (not this configuration on "
                    "another SM, "
                    "nor another configuration): the probe's inputs may not fit this release"
                ),
                unfit,
            )
        return (
            None,
            "no h_q reached the launch boundary on this SM, and the refusals depend on h_q or come from outside a "
            "validator",
            False,
        )

    def _staged_config(self, sm: SM, raw: dict[int, CallResult], alternative: int) -> tuple[Outcome, str] | None:
        """Every h_q refused in stages: the h_q one check lets through are refused
        by a later check that tests the configuration (a witness passes it),
        while that first check refuses the rest (cutlass in 0.7.4: only h_q 128
        passes the head check, and then fp8 KV is refused by a dtype check).
        Whatever h_q is, this configuration is refused. Each earlier check must
        be seen to pass, on this SM, for an h_q the configuration check refused:
        the inputs fit it, and what it refuses is h_q."""
        by_site: dict[CheckSite, list[int]] = {}
        for h, call in raw.items():
            if not call.validator or call.site is None:
                return None
            by_site.setdefault(call.site, []).append(h)
        if len(by_site) < 2:
            return None
        late = [
            site
            for site, heads in by_site.items()
            if self._refusal_kind(sm, raw[heads[0]], heads[0], alternative, heads)[0] is Outcome.UNSUPPORTED_CONFIG
        ]
        if not late:
            return None
        # Not one check refusing every h_q: never an option value the release lacks.
        self._everywhere[sm] = False
        passers = [by_site[site][0] for site in late]
        early = [site for site in by_site if site not in late]
        for site in early:
            if not any(self._passes(sm, h, site, alternative) for h in passers):
                return None
        self._staged[sm, alternative] = set(late)
        first = " and ".join(raw[by_site[site][0]].location or "?" for site in early)
        then = "; ".join(
            f"h_q {compact_set(by_site[site])} at {raw[by_site[site][0]].location or '?'}, which "
            f"{self._witnessed[site]}"
            for site in late
        )
        return Outcome.UNSUPPORTED_CONFIG, (
            f"every h_q is refused on {sm}: the h_q that get past {first} are refused after it by a check on the "
            "configuration "
            f"({then}): this configuration is refused, whatever h_q is"
        )

    def _passes(self, sm: SM, h: int, site: CheckSite, alternative: int, faked: bool = False) -> bool:
        call = self._traced(self.variant, sm, h, site, alternative, faked)
        return passed_elsewhere(site, call.lines_run or frozenset(), refused_here_too=call.site == site)

    def _reaches_elsewhere(self, sm: SM, h: int, alternative: int) -> bool:
        """Whether `h` reaches the boundary, under the same input convention, on
        a reference SM other than `sm` (the kernel's own SMs and
        _REFERENCE_SMS, whatever this run probes: an answer never depends on
        which other SMs were asked for). A reference SM probed in this run
        answers from its calls; another is asked for this h_q alone, through
        the same faked-CUDA rerun."""
        for number in dict.fromkeys((*self.variant.probe.default_sms, *_REFERENCE_SMS)):
            other = SM.from_number(number)
            if other == sm:
                continue
            known = next(
                (calls[h].reached for alt, calls in self.tries.get(other, []) if alt == alternative and h in calls),
                None,
            )
            if known is None:
                key = (other, h, alternative)
                if key not in self._reference_reached:
                    with self.session.quiet():
                        call = _one(
                            self.session, self.variant.probe, self.entry, other, h, self.variant.values, alternative
                        )
                    again = _on_faked_cuda(self.session, self.variant, self.entry, other, {h: call}, alternative)
                    self._reference_reached[key] = again[h].reached
                known = self._reference_reached[key]
            if known:
                return True
        return False

    def _traced(
        self, variant: Variant, sm: SM, h: int, site: CheckSite, alternative: int, faked: bool = False
    ) -> CallResult:
        """The call traced through `site`'s function; `faked`: on CUDA-reporting
        tensors, as the refusal being explained was made."""
        with self.session.quiet():
            return _one(
                self.session,
                variant.probe,
                self.entry,
                sm,
                h,
                variant.values,
                alternative,
                (site.filename, site.function),
                faked_cuda=faked,
            )

    def _refusal_kind(
        self, sm: SM, refusal: CallResult, h: int, alternative: int, group: list[int] | None = None
    ) -> tuple[Outcome | None, str]:
        """What a refusing check tests, from where it was seen to pass. The same
        call, traced on the other SMs: consulted and passed there -> it tests the
        architecture. Otherwise an h_q it refuses with another configuration
        (the defaults, or one axis reset), on this SM or another: passed there
        -> it tests this configuration. Seen to pass nowhere -> None: it may be
        the probe's own inputs that no release takes. `group`: the h_q the check
        refuses; a dispatch table keyed by h_q and the configuration together
        may take the witness only for some of them (powers of two)."""
        site = refusal.site
        assert site is not None
        everywhere = True
        for number in _REFERENCE_SMS:
            other = SM.from_number(number)
            if other == sm:
                continue
            call = self._traced(self.variant, other, h, site, alternative, refusal.faked_device)
            everywhere = everywhere and call.site == site and call.message == refusal.message
            if passed_elsewhere(site, call.lines_run or frozenset(), refused_here_too=call.site == site):
                return (
                    Outcome.UNSUPPORTED_ARCH,
                    f"the refusing check passes on {other} for the same call: it tests the architecture",
                )
        tried = [h, *(c for c in _WITNESS_HEADS if c != h and c in (group or ()))]
        numbers = tuple(dict.fromkeys((sm.number, *_REFERENCE_SMS)))
        for witness, count, number in ((w, c, n) for w in self._witnesses() for c in tried for n in numbers):
            other = SM.from_number(number)
            call = self._traced(witness, other, count, site, alternative, refusal.faked_device)
            # Got past the check, or ran through its function into compiled
            # code before the check's own test (a dispatch table taken first:
            # SM120 sparse MLA returns from a matched kernel above the raise).
            through = bool(call.reached and call.lines_run)
            if through or passed_elsewhere(site, call.lines_run or frozenset(), refused_here_too=call.site == site):
                self._everywhere[sm] = everywhere
                self._witnessed[site] = f"{witness.key} passes on {other}" + (f" (h_q {count})" if count != h else "")
                where = "on every SM" if everywhere else f"on {sm}"
                return Outcome.UNSUPPORTED_CONFIG, (
                    f"every h_q is refused {where} by one check that {self._witnessed[site]}: "
                    "this configuration is refused, whatever h_q is"
                )
        return None, ""

    def _witnesses(self) -> list[Variant]:
        """Other configurations of the same kernel: the defaults, and this one
        with each non-default axis set to its default or another of its choices,
        and any axis set to a value it names as a witness (`Axis.witnesses`)."""
        probe = self.variant.probe
        values = self.variant.values
        out = [probe.variant()]
        for axis in probe.axes:
            changed = values[axis.name] != axis.default
            others = (axis.default, *axis.choices) if changed else ()
            for other in dict.fromkeys((*others, *axis.witnesses)):
                out.append(probe.variant({**values, axis.name: other}))
        # Then an axis left at its default set to another of its choices (an
        # FP8 query where a path takes no BF16): tried only when none above
        # passed the check, since the first that passes decides.
        for axis in probe.axes:
            if values[axis.name] == axis.default:
                for other in axis.choices:
                    out.append(probe.variant({**values, axis.name: other}))
        unique = {v.config: v for v in out if v.config != self.variant.config}
        return list(unique.values())

    def absent_option(self, results: list[KernelSMResult]) -> None:
        """An option value (a backend, a KV format) that the release refuses by
        name, identically for every h_q and SM, and still refuses with every
        other axis at its default, is one it does not have: absent. (A value
        refused only beside another setting -- fa2 with an fp8 KV cache -- is
        a configuration refusal, not an absence.)"""
        probe = self.variant.probe
        changed = {k: v for k, v in self.variant.config if v != probe.axis(k).default}  # type: ignore[union-attr]
        if not changed:
            return
        # Each SM on its own: `_everywhere` already says the same check refused
        # with the same words on every reference SM, so the SMs of any run
        # agree, whichever of them it asked for.
        for result in results:
            sm = SM.from_number(result.sm)
            if not self._everywhere.get(sm) or result.status is not Outcome.UNSUPPORTED_CONFIG:
                continue
            first = result.heads[self.heads[0]]
            message = first.message or ""
            # One check, in the same words, for every h_q (a refusal in stages
            # -- a head check, then a dtype check for the h_q it lets through -- is
            # a configuration refusal, not an absent option).
            checks = {(hr.location, without_count(hr.message or "", h)) for h, hr in result.heads.items()}
            if len(checks) != 1:
                continue
            named = [k for k, v in changed.items() if _names(message, str(v))]
            if not any(self._refused_alone(k, changed[k], sm, first, self._chosen.get(sm, 0)) for k in named):
                continue
            for hr in result.heads.values():
                hr.outcome = Outcome.ABSENT
                hr.reason = f"this release refuses the option value itself, for every h_q and SM: {message}"

    def _refused_alone(self, axis: str, value: Value, sm: SM, refusal: HeadResult, alternative: int) -> bool:
        """Whether `axis=value` with every other axis at its default is refused
        by the same check, with the same message."""
        alone = self.variant.probe.variant({axis: value})
        if alone.config == self.variant.config:
            return True
        with self.session.quiet():
            call = _one(self.session, alone.probe, self.entry, sm, self.heads[0], alone.values, alternative)
        return call.location == refusal.location and call.message == refusal.message


def _names(message: str, value: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", message) is not None


def _stopped_here(call: CallResult) -> bool:
    """Stopped by this machine or the probe, not by a validator: it has a reason."""
    return bool(call.reason) and not call.validator


def _outside(call: CallResult) -> bool:
    return not call.reached and not call.validator and not (call.location or "").startswith("flashinfer/")


def _head_result(h: int, call: CallResult, *, rejected_ok: bool) -> HeadResult:
    if call.entry is not None:
        return HeadResult(h, Outcome.ACCEPTED, entry=str(call.entry), launch=call.entry.launch)
    outcome = Outcome.REJECTED if (rejected_ok and call.validator) else Outcome.INCONCLUSIVE
    return HeadResult(
        h,
        outcome,
        error_type=call.error_type,
        message=call.message,
        location=call.location,
        reason=None if outcome is Outcome.REJECTED else call.reason,
        cause=None if outcome is Outcome.REJECTED else call.cause,
    )
