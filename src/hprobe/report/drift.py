"""What `diff` and `bisect` report (and `check --baseline` carries): how
releases differ, per variant x SM, and the first release that accepts an h_q."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hprobe import __version__
from hprobe.model.errors import EXIT_FINDINGS, EXIT_INCONCLUSIVE, EXIT_OK


@dataclass(frozen=True)
class KernelChange:
    """One variant x SM between two releases (`diff`, `check --baseline`)."""

    kernel: str
    sm: int
    old_status: str
    new_status: str
    old_accepted: tuple[int, ...]
    new_accepted: tuple[int, ...]
    became_accepted: tuple[int, ...]
    became_rejected: tuple[int, ...]
    unknown: tuple[int, ...]
    appeared: tuple[int, ...]  # absent in the old release, present in the new
    vanished: tuple[int, ...]  # present in the old release, absent in the new
    new_refusal: dict[str, Any] | None  # how the new release refuses the first count it stopped accepting

    @property
    def changed(self) -> bool:
        return bool(self.became_accepted or self.became_rejected or self.appeared or self.vanished)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "sm": self.sm,
            "old_status": self.old_status,
            "new_status": self.new_status,
            "old_accepted": list(self.old_accepted),
            "new_accepted": list(self.new_accepted),
            "became_accepted": list(self.became_accepted),
            "became_rejected": list(self.became_rejected),
            "unknown": list(self.unknown),
            "appeared": list(self.appeared),
            "vanished": list(self.vanished),
            "new_refusal": self.new_refusal,
        }


@dataclass(frozen=True)
class DiffReport:
    """What changed between two releases, per variant x SM."""

    old: dict[str, Any]  # ProbedRelease.describe() of each side
    new: dict[str, Any]
    changes: tuple[KernelChange, ...]

    @property
    def changed(self) -> bool:
        return any(c.changed for c in self.changes)

    @property
    def exit_code(self) -> int:
        """1 when an accepted set changed (a drift gate), 3 when nothing changed but some h_q were inconclusive."""
        return (
            EXIT_FINDINGS if self.changed else (EXIT_INCONCLUSIVE if any(c.unknown for c in self.changes) else EXIT_OK)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "hprobe.diff/1",
            "hprobe_version": __version__,
            "old": self.old,
            "new": self.new,
            "changes": [c.to_dict() for c in self.changes],
            "changed": self.changed,
            "exit_code": self.exit_code,
        }


@dataclass(frozen=True)
class BisectStep:
    """One release probed by `bisect`, and its answer."""

    version: str
    outcome: str
    entry: str | None
    error_type: str | None
    message: str | None
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "outcome": self.outcome,
            "entry": self.entry,
            "error_type": self.error_type,
            "message": self.message,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class BisectReport:
    """What `bisect` prints: the first release that accepts an h_q, and every step to it."""

    kernel: str
    sm: int
    heads: int
    range: tuple[str, str]
    releases_in_range: int
    method: str
    first_accepting: str | None
    last_rejecting: str | None
    already_accepted_at_start: bool
    non_monotonic: tuple[tuple[str, str], ...]  # (accepted in, then not accepted in)
    probed: tuple[BisectStep, ...]
    exit_code: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "hprobe.bisect/1",
            "hprobe_version": __version__,
            "kernel": self.kernel,
            "sm": self.sm,
            "heads": self.heads,
            "range": list(self.range),
            "releases_in_range": self.releases_in_range,
            "method": self.method,
            "first_accepting": self.first_accepting,
            "last_rejecting": self.last_rejecting,
            "already_accepted_at_start": self.already_accepted_at_start,
            "non_monotonic": [{"accepted": a, "then_not_accepted": b} for a, b in self.non_monotonic],
            "probed": [p.to_dict() for p in self.probed],
            "exit_code": self.exit_code,
        }
