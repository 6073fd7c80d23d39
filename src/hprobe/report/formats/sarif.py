"""SARIF 2.1.0, for code scanning (GitHub's `upload-sarif`, and other
readers): a result per padding rule × SM × verdict that a CI reader should
see, at the rule's file and line, as the GitHub annotations group them; one
reporting rule per verdict, with the verdict's own explanation.

A path hprobe shows relative (a tree given relative) stays relative, which
code scanning resolves against the repository; an absolute one is a file:
URI. Every string from outside hprobe goes through `json.dumps`."""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from hprobe import __version__
from hprobe.model.verdict import Verdict
from hprobe.report.formats.base import NotRendered, RenderOptions, source_location
from hprobe.system.escaping import json_text

if TYPE_CHECKING:
    from hprobe.model.verdict import Finding
    from hprobe.report.model import CheckReport

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVELS = {"error": "error", "warning": "warning", "notice": "note"}


def render(report: object, options: RenderOptions) -> str:
    """A check (or the check a suggest rests on) as one SARIF log."""
    from hprobe.report.model import CheckReport
    from hprobe.report.suggest import SuggestReport

    if isinstance(report, SuggestReport):
        report = report.check
    if not isinstance(report, CheckReport):
        raise NotRendered(f"sarif renders check and suggest reports, not {type(report).__name__}")
    return json_text(json.dumps(sarif_log(report), indent=2)) + "\n"


def sarif_log(report: CheckReport) -> dict[str, Any]:
    grouped: dict[tuple[str, str, str, int, str, Verdict], list[Finding]] = {}
    for f in report.findings:
        level = f.ci_level(report.strict)
        if level is None:
            continue
        grouped.setdefault((_LEVELS[level], f.source, f.backend, f.sm, f.label, f.verdict), []).append(f)
    results = []
    for (level, source, backend, sm, label, verdict), findings in grouped.items():
        cases: dict[str, list[str]] = {}
        for f in findings:
            cases.setdefault(f.explain(), []).append(f"{f.model} TP{f.tp} (n={f.n})")
        where = source_location(source).rest if source else ""
        message = (
            f"{backend} on SM{sm}: {label}. "
            + "; ".join(f"{', '.join(who)}: {why}" for why, who in cases.items())
            + (f" (the rule's branch: {where})" if where else "")
        )
        results.append(
            {
                "ruleId": verdict.value,
                "level": level,
                "message": {"text": message},
                "locations": [_location(source)] if source else [],
                "partialFingerprints": {"hprobe/v1": f"{source}|{backend}|SM{sm}|{verdict.value}"},
                "properties": {
                    "kernel": findings[0].kernel,
                    "sm": sm,
                    "flashinfer": sorted({f.flashinfer_version for f in findings}),
                    "counts": [{"model": f.model, "tp": f.tp, "n": f.n, "padded": f.padded} for f in findings],
                },
            }
        )
    rules = [
        {
            "id": v.value,
            "name": v.name.title().replace("_", ""),
            "shortDescription": {"text": v.value},
            "fullDescription": {"text": v.explanation},
            "defaultConfiguration": {"level": _LEVELS.get(v.ci_level(report.strict) or "", "none")},
        }
        for v in Verdict
    ]
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "hprobe", "version": __version__, "rules": rules}},
                "results": results,
                "properties": {
                    "releases": [r.info.version for r in report.releases],
                    "sms": [sm.number for sm in report.targets.sms],
                    "exit_code": report.exit_code,
                },
            }
        ],
    }


def _location(source: str) -> dict[str, Any]:
    """A path and a line, as code scanning reads them: the words after them
    ("[SM100/SM103, unpadded]") belong to the message, never to the file URI."""
    place = source_location(source)
    posix = PurePosixPath(place.path.replace("\\", "/"))
    uri = f"file://{quote(str(posix))}" if posix.is_absolute() else quote(str(posix))
    physical: dict[str, Any] = {"artifactLocation": {"uri": uri}}
    if place.line is not None:
        region: dict[str, int] = {"startLine": place.line}
        if place.col is not None:
            region["startColumn"] = place.col
        physical["region"] = region
    return {"physicalLocation": physical}
