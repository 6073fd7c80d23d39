"""`hprobe suggest`: the rules the kernels' own answers call for, and what to
write for them (a table, or a patch of the consumer's tree with the pin it
needs) as one consistent change. One pass down the layers: the rules
(rules/sources.py), their answers (support/answers.py), the verdicts
(judge.py), the report, then the advice — the suggestions, the pin search,
the table or the patch (advise/) — and the report concluded."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from hprobe.model.errors import EXIT_INCONCLUSIVE, EXIT_OK, InputError
from hprobe.model.release import Progress, quiet

if TYPE_CHECKING:
    from packaging.version import Version

    from hprobe.advise.search import HoldsAt
    from hprobe.commands.request import RuleRequest
    from hprobe.report.suggest import SuggestReport
    from hprobe.rules.repo.extract import RepoTables


def run_suggest(
    request: RuleRequest,
    *,
    start: Version | str | None,
    want_table: bool,
    diff_name: str | None,
    use_cache: bool,
    progress: Progress = quiet,
) -> SuggestReport:
    """The suggestions, and the texts to write: the table with the suggested
    rules (`want_table`) and the patch (`diff_name`, the file it goes to; with
    --repo only). Writing them is the caller's."""
    from hprobe.advise.patch import patch_for
    from hprobe.advise.search import search_pins
    from hprobe.advise.suggest import rewritten
    from hprobe.advise.suggest import suggest as make_suggestions
    from hprobe.commands.conclude import conclude
    from hprobe.judge import judge_answers
    from hprobe.report.model import CheckReport
    from hprobe.report.suggest import SuggestReport
    from hprobe.rules.sources import collect_rules
    from hprobe.support.answers import gather_answers
    from hprobe.support.gather import alongside

    if diff_name is not None and request.repo is None:
        raise InputError("--diff rewrites a source tree: it goes with --repo (use -o for a table)")
    searching = request.flashinfer is None or want_table or diff_name is not None
    # The pin search's every range ends at the newest published release: it is
    # probed beside the check (with the cache, which keeps its answer), the
    # index listed while the rules are read.
    with alongside(lambda: _newest_published() if searching and use_cache else ()) as newest:
        tables, repo_tables = collect_rules(request.rule_inputs(use_cache), request.axis_values)
        ahead = newest.result()
    if want_table and len(tables) != 1:
        raise InputError("--output writes one table: name one with --table (or use --repo)")
    unpatchable = _built_metadata_only(repo_tables) if diff_name is not None and repo_tables is not None else None
    if unpatchable is not None:
        from hprobe.system.progress import Statement

        progress(Statement(unpatchable))  # before any release is fetched
    answers = gather_answers(tables, repo_tables, request.sm, request.releases, request.pin, use_cache, progress, ahead)
    report = CheckReport.judged(answers, judge_answers(answers), False)
    if unpatchable is not None:
        report = replace(report, notes=[unpatchable, *report.notes])
    # The tables judged: a repo whose rules read flashinfer's own tables gives one per release.
    suggestions = make_suggestions(
        report.findings, report.releases, report.tables, newest_only=request.flashinfer is None
    )
    published: list[Version] = []
    listed = True
    holds_at: HoldsAt | None = None
    if searching:
        # --flashinfer names the releases to judge on; what is written
        # (-o, --diff) is still checked against every release a pin admits.
        suggestions, published, pin_notes, listed, holds_at = search_pins(
            report.tables, report.releases, suggestions, request.pin, use_cache, progress, start
        )
        report = replace(report, notes=[*report.notes, *pin_notes])
    table_text = None
    if want_table:
        from hprobe.rules.toml_writer import table_toml

        judged = rewritten(report.tables, suggestions)
        if len(judged) != 1:
            raise InputError(
                f"--output writes one table; these rules were judged as {len(judged)} (one per release): name one "
                "release with --flashinfer"
            )
        [new_table] = judged
        header = [
            f"Suggested by `hprobe suggest` from {new_table.path}: each rule is the smallest count every release "
            "probed accepts."
        ]
        table_text = table_toml(new_table, header)
    patch = None
    if diff_name is not None and repo_tables is not None:
        patch = patch_for(repo_tables, suggestions, published, holds_at, diff_name)
    undecided = any(s.inconclusive or s.unsafe for s in suggestions) or not suggestions or not listed
    return SuggestReport(
        conclude(report), list(suggestions), patch, table_text, EXIT_INCONCLUSIVE if undecided else EXIT_OK
    )


def _newest_published() -> tuple[str, ...]:
    """The newest published release, or nothing when the index cannot be
    listed now (the pin search says why when it lists it)."""
    from hprobe.support.published import final_releases

    try:
        final = final_releases()
    except InputError:
        return ()
    return (str(final[-1]),) if final else ()


def _built_metadata_only(repo_tables: RepoTables) -> str | None:
    """Why a patch cannot raise the tree's pin, where its flashinfer
    requirement lives only in built metadata (a wheel's or an installed
    package's METADATA): a padding change that needs a newer release is then
    not written; the advice is printed all the same."""
    from pathlib import Path

    from hprobe.rules.repo.pin import find_pins

    root = Path(repo_tables.root)
    pins = find_pins(root if root.is_dir() else root.parent)
    if not pins or any(p.kind != "metadata" for p in pins):
        return None
    return (
        f"the flashinfer requirement is only in built metadata ({pins[0].source}), where a patch cannot raise it "
        "(it lives in the source checkout's requirement files): --diff leaves every rule that needs a newer release "
        "as it is; the advice is printed either way"
    )
