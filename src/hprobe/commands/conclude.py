"""A check report made whole: what its findings conclude, decided here once
(judge: the exit code and the release-by-release verdicts; advise: one line of
advice per table x backend), so that every format only renders."""

from __future__ import annotations

from dataclasses import replace

from hprobe.advise.summary import summarize
from hprobe.judge import exit_code, verdict_grids
from hprobe.model.release import INSTALLED, FlashinferInfo
from hprobe.report.model import CheckReport
from hprobe.system.envinfo import installed_flashinfer_info


def conclude(report: CheckReport) -> CheckReport:
    sms = [s.number for s in report.targets.sms]
    return replace(
        report,
        exit_code=exit_code(
            report.findings,
            report.strict,
            report.waivers,
            report.drift.exit_code if report.drift is not None else None,
            _unjudged(report),
        ),
        advice=summarize(report.findings, report.tables),
        verdict_grids=verdict_grids(report.tables, report.releases, sms, report.trust_validators),
        flashinfer=_flashinfer(report),
    )


def _unjudged(report: CheckReport) -> int:
    """Calls listed as not judged that no finding stands for (an assumed or
    not-evaluable path has inconclusive or assumed rows of its own)."""
    return sum(1 for p in report.call_paths if p.status == "unresolved")


def _flashinfer(report: CheckReport) -> FlashinferInfo:
    """The flashinfer a report names: the first probed, else those asked for, else the installed one."""
    if report.releases:
        return report.releases[0].info
    named = [label for label in report.planned if label != INSTALLED]
    if named:
        # Nothing was probed: name the releases asked for, not the one installed here.
        return FlashinferInfo(", ".join(named), "not probed")
    return installed_flashinfer_info()
