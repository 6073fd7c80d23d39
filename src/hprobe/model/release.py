"""One flashinfer release as probed: where it came from, what it answered, and
what of its requirements this machine lacks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hprobe.model.outcome import KernelSMResult


@dataclass
class FlashinferInfo:
    """A flashinfer release as a report names it: its version and where it was read from."""

    version: str
    location: str


@dataclass(frozen=True)
class Unmet:
    """A requirement of a probed release that this environment does not meet."""

    requirement: str  # as the release's Requires-Dist states it
    name: str  # the distribution it names
    installed: str | None = None  # the version installed here; None: not installed

    def __str__(self) -> str:
        if self.installed is None:
            return f"{self.requirement} (not installed; try `pip install '{self.requirement}'` in a separate venv)"
        return (
            f"{self.requirement} (installed {self.name} {self.installed}; try a separate venv with `pip install "
            f"'{self.requirement}'`)"
        )

    def note(self, version: str) -> str:
        return f"flashinfer {version} requires {self}"


@dataclass
class ProbedRelease:
    """One flashinfer (installed, or fetched) and what its validators answered."""

    label: str  # "installed" or what the user named
    info: FlashinferInfo
    results: dict[tuple[str, int], KernelSMResult]  # (variant key, SM) -> result
    notes: list[str] = field(default_factory=list)
    unmet: list[Unmet] = field(default_factory=list)  # its requirements not met here (each also a note)

    def describe(self) -> dict[str, Any]:
        return {"label": self.label, "version": self.info.version, "location": self.info.location, "notes": self.notes}


INSTALLED = "installed"


def releases_judged(releases: list[ProbedRelease]) -> str:
    """The releases findings rest on, for a header; "none judged" where none
    could be had (a pin the index does not serve), never the number of a
    release that answered nothing."""
    return ", ".join(dict.fromkeys(r.info.version for r in releases)) or "none judged"


Progress = Callable[[str], None]


def quiet(_: str) -> None:
    pass
