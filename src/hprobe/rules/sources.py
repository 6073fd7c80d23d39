"""Every kind of rule source, in the order the inputs are asked about: the
first kind the inputs name is the one used (a repo, else a --pad-fn, else
tables, the shipped ones when none is named). A new kind is one module with its
SourceKind and one line here. `collect_rules` is the rules step of every
command that judges rules: the tables, with the models and options overridden."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from hprobe.rules import override_models, override_options
from hprobe.rules.interface import RuleInputs, RuleSource, SourceKind
from hprobe.rules.repo.kind import RepoSourceKind
from hprobe.rules.repo.padfn import PadFnSourceKind
from hprobe.rules.toml_source import TomlSourceKind

if TYPE_CHECKING:
    from hprobe.kernels.base import Value
    from hprobe.model.padding import PaddingTable
    from hprobe.rules.repo.extract import RepoTables

KINDS: tuple[SourceKind, ...] = (RepoSourceKind(), PadFnSourceKind(), TomlSourceKind())


def rule_sources(inputs: RuleInputs) -> list[RuleSource]:
    """The sources the inputs name, from the first kind that is given."""
    kind = next(k for k in KINDS if k.given(inputs))
    return kind.make(inputs)


def collect_rules(inputs: RuleInputs, axes: dict[str, list[Value]]) -> tuple[list[PaddingTable], RepoTables | None]:
    """(tables, the repo's record or None): each source the inputs name read,
    --heads/--tp/--model and the axis options (`axes`) applied; nothing is
    probed yet. A repo is read through `inputs.read_tree`."""
    repo_tables: RepoTables | None = None
    tables = []
    for source in rule_sources(inputs):
        record = _repo_record(source) if inputs.repo is not None else None
        if record is not None:
            repo_tables = record
            tables.append(record.table)
        else:
            tables.append(source.collect())
    # A repo's rules and a --pad-fn were evaluated for the overridden models already.
    evaluated = repo_tables is not None or inputs.pad_fn is not None
    tp_list = list(inputs.tp) if inputs.tp is not None else None
    picked = list(inputs.picked) if inputs.picked is not None else None
    tables = [override_options(override_models(t, inputs.heads, tp_list, evaluated, picked), axes) for t in tables]
    if repo_tables is not None:
        repo_tables = replace(repo_tables, table=tables[0])  # the table as overridden is the one judged and patched
    return tables, repo_tables


def _repo_record(source: RuleSource) -> RepoTables | None:
    """A repo's full record (classes, call paths, pin); None for other sources.
    Imported only where a repo is read: the extractor is 40 ms of imports."""
    from hprobe.rules.repo.extract import RepoRuleSource

    return source.read() if isinstance(source, RepoRuleSource) else None
