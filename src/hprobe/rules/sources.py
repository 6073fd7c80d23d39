"""Every kind of rule source, in the order the inputs are asked about: the
first kind the inputs name is the one used (a repo, else a --pad-fn, else
tables, the shipped ones when none is named). A new kind is one module with its
SourceKind and one line here."""

from __future__ import annotations

from hprobe.rules.interface import RuleInputs, RuleSource, SourceKind
from hprobe.rules.repo.kind import RepoSourceKind
from hprobe.rules.repo.padfn import PadFnSourceKind
from hprobe.rules.toml_source import TomlSourceKind

KINDS: tuple[SourceKind, ...] = (RepoSourceKind(), PadFnSourceKind(), TomlSourceKind())


def rule_sources(inputs: RuleInputs) -> list[RuleSource]:
    """The sources the inputs name, from the first kind that is given."""
    kind = next(k for k in KINDS if k.given(inputs))
    return kind.make(inputs)
