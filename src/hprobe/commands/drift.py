"""Support across releases: `hprobe diff` and `hprobe bisect`."""

from __future__ import annotations

import json
from dataclasses import dataclass

from packaging.version import Version

from hprobe.advise.history import first_true
from hprobe.kernels import get_variant
from hprobe.model.errors import InputError
from hprobe.model.outcome import KernelSMResult, Outcome
from hprobe.model.padding import MAX_HEADS
from hprobe.model.release import INSTALLED, FlashinferInfo, ProbedRelease, Progress, quiet
from hprobe.model.sm import SM, parse_sm_list
from hprobe.model.targets import DEFAULT_MAX_HEADS, Targets
from hprobe.report.drift import BisectReport, BisectStep, DiffReport, KernelChange
from hprobe.report.model import MatrixReport
from hprobe.support.gather import gather, probe_named
from hprobe.support.published import parse_release_range, published_versions
from hprobe.system.fileio import read_text


def diff_reports(report: MatrixReport) -> DiffReport:
    """What changed between the two releases of a two-release matrix report."""
    old, new = report.releases
    changes = []
    for key in sorted(new.results):
        a, b = old.results.get(key), new.results.get(key)
        if a is None or b is None:
            continue
        unknown = sorted(h for h in b.heads if Outcome.INCONCLUSIVE in (a.outcome(h), b.outcome(h)))
        # `absent` is its own state: an entry point or option value that a
        # release lacks did not start rejecting anything.
        absent = sorted(h for h in b.heads if Outcome.ABSENT in (a.outcome(h), b.outcome(h)) and h not in unknown)
        became_accepted = sorted(set(b.accepted()) - set(a.accepted()) - set(unknown) - set(absent))
        became_rejected = sorted(set(a.accepted()) - set(b.accepted()) - set(unknown) - set(absent))
        sample = b.heads[became_rejected[0]] if became_rejected else None
        changes.append(
            KernelChange(
                kernel=key[0],
                sm=key[1],
                old_status=a.status.value,
                new_status=b.status.value,
                old_accepted=tuple(a.accepted()),
                new_accepted=tuple(b.accepted()),
                became_accepted=tuple(became_accepted),
                became_rejected=tuple(became_rejected),
                unknown=tuple(unknown),
                appeared=tuple(
                    h for h in absent if a.outcome(h) is Outcome.ABSENT and b.outcome(h) is not Outcome.ABSENT
                ),
                vanished=tuple(
                    h for h in absent if b.outcome(h) is Outcome.ABSENT and a.outcome(h) is not Outcome.ABSENT
                ),
                new_refusal=(
                    {
                        "outcome": sample.outcome.value,
                        "error_type": sample.error_type,
                        "message": sample.message or sample.reason,
                        "location": sample.location,
                    }
                    if sample
                    else None
                ),
            )
        )
    return DiffReport(old.describe(), new.describe(), tuple(changes))


def run_bisect(
    kernel_id: str,
    sm: SM,
    heads: int,
    range_text: str | None,
    exhaustive: bool,
    use_cache: bool,
    progress: Progress,
) -> BisectReport:
    """Binary search over published releases for the first that accepts `heads`."""
    kernel_id = get_variant(kernel_id).key  # unknown kernel -> input error before any download
    lo, hi = parse_release_range(range_text)
    progress("listing published flashinfer releases")
    versions = [v for v in published_versions() if (lo is None or v >= lo) and (hi is None or v <= hi)]
    if lo is None and versions:
        # No lower end given: from the first release whose source defines the
        # kernel's entry point (read, not imported), as suggest's search starts.
        from hprobe.advise.search import entry_since

        first = entry_since(get_variant(kernel_id).probe.entry_point, versions, progress)
        versions = [v for v in versions if first is None or v >= first]
    if not versions:
        raise InputError(f"--range {range_text}: no published flashinfer-python release in it")
    # Probe the usual 1..256 sweep (plus N): other counts reaching the boundary are
    # what lets a refusal of N count as "rejected"; the results share matrix's cache.
    sweep = sorted(set(range(1, DEFAULT_MAX_HEADS + 1)) | {heads})
    probed: dict[Version, BisectStep] = {}
    accepted = Outcome.ACCEPTED.value

    def state(v: Version) -> bool | None:
        progress(f"probing flashinfer {v}")
        try:
            rel = probe_named(str(v), {kernel_id: [sm.number]}, sweep, use_cache, progress)
        except InputError as exc:
            # A release that cannot be fetched or unpacked here answers nothing: the search steps around it.
            probed[v] = BisectStep(str(v), Outcome.INCONCLUSIVE.value, None, None, None, f"not probed: {exc.message}")
            return None
        result = rel.results[(kernel_id, sm.number)].heads[heads]
        probed[v] = BisectStep(
            str(v), result.outcome.value, result.entry, result.error_type, result.message, result.reason
        )
        progress(f"flashinfer {v}: {result.outcome.value}")
        return None if result.outcome is Outcome.INCONCLUSIVE else result.outcome.value == accepted

    found = first_true(versions, state, exhaustive)
    order = [probed[v] for v in sorted(probed)]
    conclusive = [p for p in order if p.outcome != Outcome.INCONCLUSIVE.value]
    first_accepting = str(found.first) if found.first is not None else None
    last_rejecting = str(found.last_false) if found.last_false is not None else None
    regressions = [(str(a), str(b)) for a, b in found.regressions]
    if regressions:
        code = 1
    elif first_accepting is None:
        code = 1 if conclusive else 3
    else:
        code = 0 if (found.adjacent or last_rejecting is None) else 3
    return BisectReport(
        kernel=kernel_id,
        sm=sm.number,
        heads=heads,
        range=(str(versions[0]), str(versions[-1])),
        releases_in_range=len(versions),
        method="exhaustive" if exhaustive else "binary search (assumes monotonic history; --exhaustive checks it)",
        first_accepting=first_accepting,
        last_rejecting=last_rejecting,
        already_accepted_at_start=bool(conclusive) and conclusive[0].outcome == accepted,
        non_monotonic=tuple(regressions),
        probed=tuple(order),
        exit_code=code,
    )


@dataclass
class Baseline:
    """A recorded `hprobe matrix --json`, read and checked before any probing."""

    release: ProbedRelease
    needed: dict[str, list[int]]
    heads: list[int]


def load_baseline(path: str) -> Baseline:
    from pathlib import Path

    try:
        doc = json.loads(read_text(Path(path), "baseline (a recorded `hprobe matrix --json`)"))
    except RecursionError:
        raise InputError(f"--baseline {path}: nested too deeply to be an hprobe matrix document") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"--baseline {path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict) or doc.get("schema") not in ("hprobe.matrix/1", "hprobe.matrix/2", "hprobe.matrix/3"):
        raise InputError(
            f"--baseline {path}: not an hprobe matrix document (record one with `hprobe matrix --json > FILE`)"
        )
    try:
        recorded = [KernelSMResult.from_dict(r) for r in doc["results"]]
        first_version = doc["releases"][0]["version"] if doc.get("releases") else doc["flashinfer"]["version"]
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise InputError(f"--baseline {path}: malformed result ({type(exc).__name__}: {exc})") from None
    recorded = [r for r in recorded if r.flashinfer_version == first_version] or recorded
    if not recorded:
        raise InputError(f"--baseline {path}: records no results")
    needed: dict[str, list[int]] = {}
    heads: set[int] = set()
    for r in recorded:
        key = get_variant(r.key).key  # an unknown kernel is an input error here
        needed.setdefault(key, [])
        if r.sm not in needed[key]:
            needed[key].append(r.sm)
        heads.update(r.heads)
    if any(not isinstance(h, int) or not 0 < h <= MAX_HEADS for h in heads):
        raise InputError(f"--baseline {path}: records head counts outside 1..{MAX_HEADS}")
    parse_sm_list(",".join(str(sm) for sms in needed.values() for sm in sms))  # an impossible SM is an input error
    old = ProbedRelease(
        f"baseline {path}",
        FlashinferInfo(first_version, str(path)),
        {(get_variant(r.key).key, r.sm): r for r in recorded},
    )
    return Baseline(old, needed, sorted(heads))


def baseline_drift(
    baseline: Baseline, flashinfer_spec: str | None, use_cache: bool, progress: Progress = quiet
) -> DiffReport:
    """`check --baseline FILE`: probe the kernels, SMs and h_q a recorded
    `hprobe matrix --json` covers, and say what changed since."""
    label = flashinfer_spec or INSTALLED
    new = gather([label], baseline.needed, baseline.heads, use_cache, progress)[label]
    sms = sorted({sm for v in baseline.needed.values() for sm in v})
    report = MatrixReport(
        [baseline.release, new], Targets([SM.from_number(s) for s in sms], "baseline"), baseline.heads
    )
    return diff_reports(report)
