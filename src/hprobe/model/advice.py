"""Advice as data: what a table's backend does on some SMs and what to change,
and the releases that advice holds for. `advise.summary` computes it; every
format prints it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from hprobe.model.padding import Backend
    from hprobe.model.release import FlashinferInfo
    from hprobe.model.verdict import VerdictGrid


@dataclass(frozen=True)
class Advice:
    """What one backend of a table does on some SMs (those alike are merged)."""

    table: str
    backend: str
    kernel: str
    sms: tuple[int, ...]
    counts: dict[str, int]  # verdict -> findings, per SM
    action: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "backend": self.backend,
            "kernel": self.kernel,
            "sms": list(self.sms),
            "counts": self.counts,
            "action": self.action,
        }


@dataclass(frozen=True)
class TableAdvice:
    """What a table's summary says: per backend, on the releases it rests on."""

    table: str
    releases: tuple[str, ...]  # the releases the advice rests on
    pin: str | None  # the table's requires_flashinfer (or --pin)
    backends: tuple[Advice, ...]
    own_release: bool = False  # the rules were evaluated against the release they are judged on
    given: bool = False  # the releases were named with --flashinfer, not chosen by the pin

    @property
    def scope(self) -> str:
        """For which releases the advice holds, in words."""
        on = f"flashinfer {', '.join(self.releases)}" if self.releases else "no release"
        if self.own_release:
            return f"on {on}: the rules read its own tables"
        if self.given and self.pin:
            return f"on {on}, given by --flashinfer (the pin {self.pin} was not judged)"
        if self.pin:
            return f"on {on}, the ends of pin {self.pin}"
        return f"on {on} only: no pin"

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "releases": list(self.releases),
            "pin": self.pin,
            "scope": self.scope,
            "backends": [b.to_dict() for b in self.backends],
        }


@dataclass(frozen=True)
class CountChange:
    model: str
    tp: int
    n: int
    current: int | None  # None: the current rule raises for n
    suggested: int | None  # None: no count >= n is safe on every SM and release

    @property
    def saving(self) -> float | None:
        if self.current is None or self.suggested is None or self.suggested >= self.current:
            return None
        return self.current / self.suggested

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "tp": self.tp,
            "n": self.n,
            "current": self.current,
            "suggested": self.suggested,
            "saving": self.saving,
        }


class PinWords(Protocol):
    """Pin advice as a format shows it (advise/pins.py's PinAdvice)."""

    def words(self) -> list[str]: ...


class Suggestion(Protocol):
    """A backend's suggested rule as a format shows it (advise/suggest.py's
    BackendSuggestion): what report/ may read of it, so that report/ needs
    nothing from advise/."""

    table: str
    backend: Backend
    changes: list[CountChange]
    pin_note: str | None

    @property
    def pins(self) -> PinWords | None: ...

    def words(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Conclusion:
    """What a check's findings conclude, decided once (advise/conclusion.py)
    so that every format only renders: the gate's exit code, one line of
    advice per table x backend, the release-by-release verdicts of the page,
    and the flashinfer the report names."""

    exit_code: int
    advice: list[TableAdvice]
    verdict_grids: list[VerdictGrid]
    flashinfer: FlashinferInfo
