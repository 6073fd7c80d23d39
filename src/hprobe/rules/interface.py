"""Where padding rules come from. Every source (a TOML table, a repo's classes
read with `ast`, the consumer's own function under `--pad-fn`) turns something
the user owns into one `PaddingTable`: each backend a rule site with its file
and line, its rule, and the kernel variant it feeds. Nothing the user owns is
modified; only `--pad-fn` runs their code, because they asked."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hprobe.model.padding import Model, PaddingTable


class RuleSource(ABC):
    @abstractmethod
    def collect(self) -> PaddingTable:
        """The rules, as a table; notes for the report go in `table.notes`."""


@dataclass(frozen=True)
class RuleInputs:
    """What the user named as the place rules come from, and the models to
    judge them for: enough for any kind of source to build itself."""

    tables: tuple[Path, ...] = ()
    repo: Path | None = None
    mapping: Path | None = None
    exclude: tuple[str, ...] = ()
    settings: tuple[tuple[str, str], ...] = ()
    pad_fn: str | None = None
    kernel: str | None = None
    sm: str | None = None
    heads: int | None = None
    tp: tuple[int, ...] | None = None
    picked: tuple[Model, ...] | None = None  # --model, from hprobe's model table
    read_tree: Callable[..., Any] | None = None  # extract() for --repo, or one through a cache


class SourceKind(ABC):
    """One kind of rule source: whether the inputs name it, and how it is built."""

    name: str

    @abstractmethod
    def given(self, inputs: RuleInputs) -> bool:
        """True when the inputs ask for this kind of source."""

    @abstractmethod
    def make(self, inputs: RuleInputs) -> list[RuleSource]:
        """The sources the inputs name; nothing is read yet."""
