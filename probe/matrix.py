"""Run a kernel probe over SMs and head counts and turn raw calls into outcomes."""

from __future__ import annotations

import re
from typing import Iterable

from .kernels.base import KernelProbe
from .outcome import HeadResult, KernelSMResult, Outcome
from .shim import CallResult, FlashinferSession
from .sm import SM

# Compiled calls that answer a question (format, dispatch policy) rather than launch.
_POLICY_QUERY = re.compile(r"^(resolve_|query|format_info|metadata|get_|supported_|is_)")
# A refusal that names an architecture: "got SM90", "compute capability",
# "requires SM120a", "Unsupported architecture".
_ARCH_WORDS = re.compile(r"\bsm[_ ]?\d{2,3}|compute capabilit|architecture|\barch\b", re.IGNORECASE)


def probe_kernel(
    session: FlashinferSession,
    probe: KernelProbe,
    sms: Iterable[SM],
    heads: Iterable[int],
) -> list[KernelSMResult]:
    """Probe `probe` for every SM in `sms` over `heads`."""
    heads = sorted(set(heads))
    version = session.version
    entry = session.resolve(probe.entry_point)
    results = []
    raw_by_sm: dict[SM, dict[int, CallResult]] = {}
    for sm in sms:
        result = KernelSMResult(probe.id, sm.number, version)
        if entry is None:
            for h in heads:
                result.heads[h] = HeadResult(
                    h, Outcome.ABSENT, reason=f"flashinfer {version} has no {probe.entry_point}"
                )
            results.append(result)
            continue
        raw = _run(session, probe, entry, sm, heads)
        raw_by_sm[sm] = raw
        results.append(result)
    for result in results:
        sm = SM.from_number(result.sm)
        if sm not in raw_by_sm:
            continue
        _classify(session, probe, entry, sm, heads, raw_by_sm, result)
    return results


def _run(session: FlashinferSession, probe: KernelProbe, entry, sm: SM, heads: list[int]) -> dict[int, CallResult]:
    session.target(sm)
    raw: dict[int, CallResult] = {}
    for h in heads:
        try:
            call = probe.prepare(entry, sm, h)
        except Exception as exc:  # noqa: BLE001 - a probe that cannot build inputs proves nothing
            raw[h] = CallResult(
                error_type=type(exc).__name__,
                message=str(exc),
                reason="the probe could not build inputs for this release",
            )
            continue
        raw[h] = session.call(call.fn, **call.kwargs)
    return raw


def _classify(
    session: FlashinferSession,
    probe: KernelProbe,
    entry,
    sm: SM,
    heads: list[int],
    raw_by_sm: dict[SM, dict[int, CallResult]],
    result: KernelSMResult,
) -> None:
    raw = raw_by_sm[sm]
    any_reached = any(r.reached for r in raw.values())
    if any_reached:
        # The same inputs reached the boundary for another h_q on this SM, so a
        # validator's refusal here is about h_q.
        for h, call in raw.items():
            result.heads[h] = _head_result(h, call, rejected_ok=True)
        queries = sorted({str(c.entry) for c in raw.values() if c.entry and _POLICY_QUERY.match(c.entry.function)})
        if queries:
            result.notes.append(
                f"stopped at a compiled query ({', '.join(queries)}) that this release consults before "
                "launching; Python checks that depend on its answer did not run"
            )
        if sm.major not in probe.families():
            result.notes.append(
                f"{sm} is outside the kernel's SM families ({', '.join(map(str, probe.default_sms))}); "
                "this release has no Python check for it, so only the validators answered"
            )
        return
    # Nothing reached the boundary. It is an architecture refusal only if an
    # input that reaches the boundary on a supported SM is refused here by a
    # validator that names the architecture.
    control = _control_heads(session, probe, entry, sm, heads, raw_by_sm)
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
    probe: KernelProbe,
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
    for number in probe.default_sms:
        ref = SM.from_number(number)
        if ref == sm or ref in raw_by_sm:
            continue
        # A reference SM's results are not reported, only used as the control.
        raw = _run(session, probe, entry, ref, heads)
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
