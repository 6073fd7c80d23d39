"""Run a kernel probe over SMs and head counts and turn raw calls into outcomes."""

from __future__ import annotations

import re
from typing import Iterable

from .core import compact_set
from .kernels.base import KernelProbe, Variant
from .outcome import Depth, HeadResult, KernelSMResult, Outcome
from .shim import CallResult, FlashinferSession
from .sm import SM

# Compiled calls that answer a question (format, dispatch policy) rather than launch.
_POLICY_QUERY = re.compile(r"^(resolve_|query|format_info|metadata|get_|supported_|is_)")
# A refusal that names an architecture: "got SM90", "compute capability",
# "requires SM120a", "Unsupported architecture".
_ARCH_WORDS = re.compile(r"\bsm[_ ]?\d{2,3}|compute capabilit|architecture|\barch\b", re.IGNORECASE)


def probe_kernel(
    session: FlashinferSession,
    variant: Variant | KernelProbe,
    sms: Iterable[SM],
    heads: Iterable[int],
) -> list[KernelSMResult]:
    """Probe one kernel variant for every SM in `sms` over `heads`."""
    if isinstance(variant, KernelProbe):
        variant = variant.variant()
    probe, config = variant.probe, variant.values
    heads = sorted(set(heads))
    version = session.version
    entry = session.resolve(probe.entry_point)
    absent = f"flashinfer {version} has no {probe.entry_point}" if entry is None else probe.offered(entry, config)
    session.configure(probe.dispatching_getters, probe.pass_through_calls)
    results = []
    raw_by_sm: dict[SM, dict[int, CallResult]] = {}
    for sm in sms:
        result = KernelSMResult(probe.id, sm.number, version, config=dict(config), key=variant.key)
        results.append(result)
        if absent is not None:
            for h in heads:
                result.heads[h] = HeadResult(h, Outcome.ABSENT, reason=absent)
            continue
        raw_by_sm[sm] = _run(session, variant, entry, sm, heads)
    for result in results:
        sm = SM.from_number(result.sm)
        if sm not in raw_by_sm:
            continue
        _classify(session, variant, entry, sm, heads, raw_by_sm, result)
        _describe_depth(probe, raw_by_sm[sm], result)
        _attach_metadata(session, probe, entry, sm, config, heads, result)
    session.configure()
    return results


def _describe_depth(probe: KernelProbe, raw: dict[int, CallResult], result: KernelSMResult) -> None:
    """Say what the accepted answers rest on, and what compiled code still checks."""
    entries = sorted({str(c.entry) for c in raw.values() if c.reached})
    if entries and all(probe.dispatch_depth(e) for e in entries):
        result.depth = Depth.DISPATCH.value
    result.unchecked = list(dict.fromkeys(filter(None, (probe.compiled_checks(e) for e in entries))))
    passed = sorted({p for c in raw.values() for p in c.passed})
    if passed:
        result.notes.append(
            f"compiled calls whose result Python only hands on were let through unexecuted: {', '.join(passed)}"
        )


def _attach_metadata(session: FlashinferSession, probe: KernelProbe, entry, sm: SM, config: dict, heads: list[int], result: KernelSMResult) -> None:
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
        result.notes.append(f"disagreement: {claim.source} says {sm} is not supported, yet the validators accepted h_q {compact_set(accepted)}")
    if claim.sm_supported is True and result.status is Outcome.UNSUPPORTED_ARCH:
        result.notes.append(f"disagreement: {claim.source} says {sm} is supported, yet the validators refuse it")
    if claim.heads is not None:
        claimed = set(claim.heads) & set(heads)
        decided = {h for h, r in result.heads.items() if r.outcome in (Outcome.ACCEPTED, Outcome.REJECTED)}
        only_claimed = sorted((claimed - accepted) & decided)
        only_probed = sorted(accepted - claimed)
        if only_claimed:
            result.notes.append(f"disagreement: {claim.source} claims h_q {compact_set(only_claimed)}, which the probe saw refused")
        if only_probed:
            result.notes.append(f"{claim.source} does not list h_q {compact_set(only_probed)}, which the validators accepted")


def _run(session: FlashinferSession, variant: Variant, entry, sm: SM, heads: list[int]) -> dict[int, CallResult]:
    session.target(sm)
    probe, config = variant.probe, variant.values
    raw: dict[int, CallResult] = {}
    with session.quiet():
        for h in heads:
            raw[h] = _one(session, probe, entry, sm, h, config)
    return raw


def _one(session: FlashinferSession, probe: KernelProbe, entry, sm: SM, h: int, config: dict) -> CallResult:
    try:
        call = probe.prepare(entry, sm, h, config)
    except Exception as exc:  # noqa: BLE001 - a probe that cannot build inputs proves nothing
        return CallResult(
            error_type=type(exc).__name__,
            message=str(exc),
            reason="the probe could not build inputs for this release",
        )
    return session.call(call.fn, **call.kwargs)


def _classify(
    session: FlashinferSession,
    variant: Variant,
    entry,
    sm: SM,
    heads: list[int],
    raw_by_sm: dict[SM, dict[int, CallResult]],
    result: KernelSMResult,
) -> None:
    probe = variant.probe
    raw = raw_by_sm[sm]
    any_reached = any(r.reached for r in raw.values())
    if any_reached:
        # The same inputs reached the boundary for another h_q on this SM, so a
        # validator's refusal here is about h_q.
        for h, call in raw.items():
            result.heads[h] = _head_result(h, call, rejected_ok=True)
            if call.entry is not None:
                result.heads[h].slow_path = probe.path(str(call.entry), variant.values)
        queries = sorted({str(c.entry) for c in raw.values() if c.entry and _POLICY_QUERY.match(c.entry.function)})
        if queries:
            result.notes.append(
                f"stopped at a compiled query ({', '.join(queries)}) that this release consults before "
                "launching; Python checks that depend on its answer did not run"
            )
        families = probe.families(variant.values)
        if sm.major not in families:
            result.notes.append(
                f"{sm} is outside the SM families this kernel is built for (SM{'x, SM'.join(str(f) for f in sorted(families))}x); "
                "this release has no Python check for it, so only the validators answered"
            )
        return
    # Nothing reached the boundary. It is an architecture refusal only if an
    # input that reaches the boundary on a supported SM is refused here by a
    # validator that names the architecture.
    control = _control_heads(session, variant, entry, sm, heads, raw_by_sm)
    if control is not None:
        call = raw.get(control)
        if call is not None and call.validator and _ARCH_WORDS.search(call.message or ""):
            for h in heads:
                result.heads[h] = HeadResult(
                    h,
                    Outcome.UNSUPPORTED_ARCH,
                    error_type=call.error_type,
                    message=call.message,
                    location=call.location,
                )
            return
    reason = "no h_q reached the launch boundary on this SM, so no refusal can be attributed to h_q"
    if control is None:
        reason += " (and no reference SM accepted any probed h_q either)"
    for h, call in raw.items():
        hr = _head_result(h, call, rejected_ok=False)
        hr.reason = f"{reason}; {call.reason}" if call.reason else reason
        result.heads[h] = hr


def _control_heads(
    session: FlashinferSession,
    variant: Variant,
    entry,
    sm: SM,
    heads: list[int],
    raw_by_sm: dict[SM, dict[int, CallResult]],
) -> int | None:
    """An h_q that reaches the boundary on some SM of the kernel's families."""
    for other, raw in raw_by_sm.items():
        if other != sm:
            for h in heads:
                if raw[h].reached:
                    return h
    for number in variant.probe.default_sms:
        ref = SM.from_number(number)
        if ref == sm or ref in raw_by_sm:
            continue
        # A reference SM's results are not reported, only used as the control.
        raw = _run(session, variant, entry, ref, heads)
        for h in heads:
            if raw[h].reached:
                session.target(sm)
                return h
    session.target(sm)
    return None


def _head_result(h: int, call: CallResult, *, rejected_ok: bool) -> HeadResult:
    if call.reached:
        return HeadResult(h, Outcome.ACCEPTED, entry=str(call.entry))
    outcome = Outcome.REJECTED if (rejected_ok and call.validator) else Outcome.INCONCLUSIVE
    return HeadResult(
        h,
        outcome,
        error_type=call.error_type,
        message=call.message,
        location=call.location,
        reason=None if outcome is Outcome.REJECTED else call.reason,
    )
