"""`hprobe report`: the support matrix across a range of releases and, with
rules, each table judged release by release."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hprobe.model.release import Progress, quiet

if TYPE_CHECKING:
    from hprobe.commands.request import RuleRequest
    from hprobe.kernels.base import Value
    from hprobe.model.padding import PaddingTable
    from hprobe.report.catalogue import SiteReport
    from hprobe.rules.repo.extract import RepoTables


def run_report(
    releases: str,
    kernels: list[str],
    sm: str | None,
    heads: list[int],
    axes: dict[str, list[Value]],
    rules: tuple[RuleRequest, list[PaddingTable], RepoTables | None] | None,
    use_cache: bool,
    progress: Progress = quiet,
) -> SiteReport:
    """`rules`: the request and what `collect_rules` read for it (read before
    this is called, so a bad table costs no probing)."""
    from hprobe.commands.conclude import conclude
    from hprobe.commands.drift import release_labels
    from hprobe.commands.matrix import run_matrix
    from hprobe.commands.rules import judge_rules
    from hprobe.report.catalogue import SiteReport

    labels = release_labels(releases, progress)
    matrix = run_matrix(kernels, sm, heads, labels, use_cache, progress, axes)
    if rules is None:
        return SiteReport(matrix)
    request, tables, repo_tables = rules
    return SiteReport(
        matrix, conclude(judge_rules(request, tables, repo_tables, False, use_cache, progress, flashinfer=labels))
    )
