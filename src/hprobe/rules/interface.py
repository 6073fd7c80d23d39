"""Where padding rules come from. Every source (a TOML table, a repo's classes
read with `ast`, the consumer's own function under `--pad-fn`) turns something
the user owns into one `PaddingTable`: each backend a rule site with its file
and line, its rule, and the kernel variant it feeds. Nothing the user owns is
modified; only `--pad-fn` runs their code, because they asked."""

from __future__ import annotations

from abc import ABC, abstractmethod

from hprobe.model.padding import PaddingTable


class RuleSource(ABC):
    @abstractmethod
    def collect(self) -> PaddingTable:
        """The rules, as a table; notes for the report go in `table.notes`."""
