"""advise/conclusion: what a check report's findings conclude — the gate's
exit code with the calls nothing judged and a baseline's drift weighed in,
and the flashinfer the report names when nothing was probed."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from hprobe.advise.conclusion import conclusion
from hprobe.model.padding import CallPathRecord
from hprobe.model.release import INSTALLED
from hprobe.model.sm import SM
from hprobe.model.targets import Targets
from hprobe.model.verdict import Finding, Verdict
from hprobe.report.model import CheckReport

pytestmark = pytest.mark.pure


def _report(*verdicts: Verdict, planned: list[str] | None = None) -> CheckReport:
    findings = [Finding("t", "t.toml", "m", 1, 8, "b", "k", 100, "0.6.14", 8, v) for v in verdicts]
    return CheckReport([], Targets([SM.from_number(100)], "flag"), [], findings, False, planned=planned or [])


def _unresolved() -> CallPathRecord:
    return CallPathRecord("a.py:1", "f", "trtllm_batch_decode_with_kv_cache_mla", "unresolved", "why", None)


def test_an_ok_gate_passes_and_a_call_nothing_judged_leaves_it_undecided_or_failing_under_strict():
    assert conclusion(_report(Verdict.OK)).exit_code == 0
    unjudged = replace(_report(Verdict.OK), call_paths=[_unresolved()])
    assert conclusion(unjudged).exit_code == 3
    assert conclusion(replace(unjudged, strict=True)).exit_code == 1
    assert conclusion(_report()).exit_code == 3  # nothing checked


def test_a_call_not_judged_on_other_sms_only_leaves_the_gate_on_these_sms_alone():
    # The engine takes that path on SM12x only (its [[call]] entry says so).
    sm120_only = replace(_unresolved(), sms=(120, 121))
    on_sm100 = replace(_report(Verdict.OK), call_paths=[sm120_only])
    assert conclusion(on_sm100).exit_code == 0 and on_sm100.gate().not_judged == 0
    on_sm120 = replace(on_sm100, targets=Targets([SM.from_number(100), SM.from_number(120)], "flag"))
    assert conclusion(on_sm120).exit_code == 3 and on_sm120.gate().not_judged == 1


@dataclass(frozen=True)
class _Drift:
    exit_code: int


def test_a_baseline_that_drifted_fails_a_passing_gate_and_never_passes_a_failing_one():
    assert conclusion(replace(_report(Verdict.OK), drift=_Drift(1))).exit_code == 1  # type: ignore[arg-type]
    assert conclusion(replace(_report(Verdict.OK), drift=_Drift(3))).exit_code == 3  # type: ignore[arg-type]
    assert conclusion(replace(_report(Verdict.BROKEN), drift=_Drift(0))).exit_code == 1  # type: ignore[arg-type]


def test_with_nothing_probed_the_report_names_the_releases_asked_for_not_the_installed_one():
    named = conclusion(_report(planned=[INSTALLED, "0.6.14", "0.7.4"])).flashinfer
    assert (named.version, named.location) == ("0.6.14, 0.7.4", "not probed")
