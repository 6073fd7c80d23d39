"""A check report made whole: what its findings conclude (advise/conclusion.py)
put into it, so that every format only renders."""

from __future__ import annotations

from dataclasses import replace

from hprobe.advise.conclusion import conclusion
from hprobe.report.model import CheckReport


def conclude(report: CheckReport) -> CheckReport:
    done = conclusion(report)
    return replace(
        report,
        exit_code=done.exit_code,
        advice=done.advice,
        verdict_grids=done.verdict_grids,
        flashinfer=done.flashinfer,
    )
