"""What a probe found for one (kernel, SM, h_q), with the evidence behind it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum


class Outcome(str, Enum):
    ACCEPTED = "accepted"  # reached the launch boundary: every Python validator accepted
    REJECTED = "rejected"  # a validator raised, while other h_q reached the boundary
    UNSUPPORTED_ARCH = "unsupported-arch"  # the kernel refuses this SM whatever h_q is
    INCONCLUSIVE = "inconclusive"  # the probe cannot tell; never read as "unsupported"
    ABSENT = "absent"  # this flashinfer release has no such entry point


@dataclass
class HeadResult:
    heads: int
    outcome: Outcome
    entry: str | None = None  # compiled module.function reached, for accepted
    error_type: str | None = None
    message: str | None = None  # the validator's own message
    location: str | None = None  # where it was raised, inside flashinfer
    reason: str | None = None  # for inconclusive: why this says nothing about heads

    @classmethod
    def from_dict(cls, data: dict) -> "HeadResult":
        fields = {k: data.get(k) for k in ("entry", "error_type", "message", "location", "reason")}
        return cls(int(data["heads"]), Outcome(data["outcome"]), **fields)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["outcome"] = self.outcome.value
        return {k: v for k, v in data.items() if v is not None}


@dataclass
class KernelSMResult:
    """Every probed h_q of one kernel on one SM, for one flashinfer release."""

    kernel: str
    sm: int
    flashinfer_version: str
    depth: str = "validators"  # what the answer rests on; see README "Depth"
    heads: dict[int, HeadResult] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def outcome(self, heads: int) -> Outcome | None:
        result = self.heads.get(heads)
        return result.outcome if result else None

    def accepted(self) -> list[int]:
        return sorted(h for h, r in self.heads.items() if r.outcome is Outcome.ACCEPTED)

    def by_outcome(self, outcome: Outcome) -> list[int]:
        return sorted(h for h, r in self.heads.items() if r.outcome is outcome)

    @property
    def status(self) -> Outcome:
        """One word for the whole SM: the outcome shared by all h_q, or accepted
        when any h_q reached the boundary."""
        outcomes = {r.outcome for r in self.heads.values()}
        if Outcome.ACCEPTED in outcomes:
            return Outcome.ACCEPTED
        if len(outcomes) == 1:
            return next(iter(outcomes))
        return Outcome.INCONCLUSIVE

    @classmethod
    def from_dict(cls, data: dict) -> "KernelSMResult":
        result = cls(data["kernel"], int(data["sm"]), data["flashinfer_version"], data.get("depth", "validators"))
        result.notes = list(data.get("notes", []))
        for item in data["heads"]:
            head = HeadResult.from_dict(item)
            result.heads[head.heads] = head
        return result

    def to_dict(self) -> dict:
        return {
            "kernel": self.kernel,
            "sm": self.sm,
            "flashinfer_version": self.flashinfer_version,
            "depth": self.depth,
            "status": self.status.value,
            "accepted": self.accepted(),
            "notes": self.notes,
            "heads": [self.heads[h].to_dict() for h in sorted(self.heads)],
        }
