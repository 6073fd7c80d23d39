"""What `suggest` reports: the check it rests on, a suggestion per backend,
and what to write."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hprobe.model.advice import Suggestion
from hprobe.model.errors import EXIT_INCONCLUSIVE

if TYPE_CHECKING:
    from hprobe.report.model import CheckReport
    from hprobe.rules.repo.patch import Patch


@dataclass
class SuggestReport:
    """`hprobe suggest`: the check it rests on, a suggestion per backend, and
    what to write (the table's TOML for -o, the patch for --diff)."""

    check: CheckReport
    suggestions: list[Suggestion]
    patch: Patch | None = None
    table_toml: str | None = None
    exit_code: int = EXIT_INCONCLUSIVE  # 0, or 3 when a suggestion is undecided or there is none (commands/suggest.py)

    def to_dict(self) -> dict[str, Any]:
        """hprobe.suggest/1: the suggestions, the patch, and what they rest on."""
        doc = self.check.to_dict()
        return {
            "schema": "hprobe.suggest/1",
            "hprobe_version": doc["hprobe_version"],
            "releases": doc["releases"],
            "sms": doc["sms"],
            "suggestions": [s.to_dict() for s in self.suggestions],
            "patch": self.patch.to_dict() if self.patch is not None else None,
            "notes": self.check.notes,
        }
