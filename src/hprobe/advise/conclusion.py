"""What a check report's findings conclude, decided here once: the exit code
and the release-by-release verdicts (judge), one line of advice per table x
backend (advise.summary), and the flashinfer the report names. The report
hands over what it holds (`Concludable`); commands/conclude.py puts the
conclusion into it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from hprobe.advise.summary import summarize
from hprobe.judge import exit_code, verdict_grids
from hprobe.model.advice import Conclusion
from hprobe.model.release import INSTALLED, FlashinferInfo
from hprobe.system.envinfo import installed_flashinfer_info

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hprobe.model.padding import CallPathRecord, PaddingTable
    from hprobe.model.release import ProbedRelease
    from hprobe.model.targets import Targets
    from hprobe.model.verdict import Finding
    from hprobe.model.waiver import WaiverUse


class _Drift(Protocol):
    @property
    def exit_code(self) -> int: ...


class Concludable(Protocol):
    """What a report holds that its conclusion rests on (report.model.CheckReport)."""

    @property
    def findings(self) -> Sequence[Finding]: ...
    @property
    def tables(self) -> Sequence[PaddingTable]: ...
    @property
    def releases(self) -> Sequence[ProbedRelease]: ...
    @property
    def targets(self) -> Targets: ...
    @property
    def strict(self) -> bool: ...
    @property
    def waivers(self) -> Sequence[WaiverUse]: ...
    @property
    def drift(self) -> _Drift | None: ...
    @property
    def call_paths(self) -> Sequence[CallPathRecord]: ...
    @property
    def trust_validators(self) -> bool: ...
    @property
    def planned(self) -> Sequence[str]: ...


def conclusion(report: Concludable) -> Conclusion:
    sms = [s.number for s in report.targets.sms]
    findings, tables, releases = list(report.findings), list(report.tables), list(report.releases)
    return Conclusion(
        exit_code=exit_code(
            findings,
            report.strict,
            list(report.waivers),
            report.drift.exit_code if report.drift is not None else None,
            _unjudged(report, sms),
        ),
        advice=summarize(findings, tables),
        verdict_grids=verdict_grids(tables, releases, sms, report.trust_validators),
        flashinfer=_flashinfer(report),
    )


def _unjudged(report: Concludable, sms: list[int]) -> int:
    """Calls listed as not judged that no finding stands for (an assumed or
    not-evaluable path has inconclusive or assumed rows of its own), on the
    SMs checked."""
    return sum(1 for p in report.call_paths if p.status == "unresolved" and p.runs_on(sms))


def _flashinfer(report: Concludable) -> FlashinferInfo:
    """The flashinfer a report names: the first probed, else those asked for, else the installed one."""
    if report.releases:
        return report.releases[0].info
    named = [label for label in report.planned if label != INSTALLED]
    if named:
        # Nothing was probed: name the releases asked for, not the one installed here.
        return FlashinferInfo(", ".join(named), "not probed")
    return installed_flashinfer_info()
