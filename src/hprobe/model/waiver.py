"""Accepted findings: a waiver names what it matches (table, backend, SM, model,
TP, release, kernel, verdict), why, and until when. A waived finding still
prints, marked waived, and does not fail the gate; a waiver past its expiry
fails the gate and says so; a waiver that matches nothing is reported.

Waivers come from a committed TOML file (`--waivers FILE`, or
`hprobe-waivers.toml` found in the current directory or the `--repo` root) and
from `--ignore KEY=VALUE,...` on the command line."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from hprobe.model.errors import InputError

# What a waiver can match on, and what it reads from a finding.
MATCH_KEYS = ("table", "backend", "kernel", "sm", "model", "tp", "release", "verdict")
WAIVER_FILE = "hprobe-waivers.toml"


@dataclass(frozen=True)
class Waiver:
    """One accepted finding pattern. Every key given must match (values are
    globs, `*` and `?`; numbers match exactly); keys not given match anything
    (`judge.waive` applies it)."""

    match: tuple[tuple[str, str], ...]
    reason: str
    expires: dt.date | None
    origin: str  # file:line, or "--ignore"

    def expired(self, today: dt.date) -> bool:
        return self.expires is not None and self.expires < today

    @property
    def describe(self) -> str:
        said = ", ".join(f"{k}={v}" for k, v in self.match) or "every finding"
        until = f" until {self.expires.isoformat()}" if self.expires else ""
        return f"{said}{until} ({self.origin})"

    def to_dict(self) -> dict[str, Any]:
        return {"match": dict(self.match), "reason": self.reason, "expires": self.expires.isoformat() if self.expires else None, "origin": self.origin}


@dataclass(frozen=True)
class WaiverUse:
    """A waiver as one run used it: how many findings it waived, whether it has expired."""

    waiver: Waiver
    matched: int
    expired: bool

    @property
    def unmatched(self) -> bool:
        return self.matched == 0

    def to_dict(self) -> dict[str, Any]:
        return {**self.waiver.to_dict(), "matched": self.matched, "expired": self.expired}


def parse_waiver(entry: dict[str, Any], origin: str) -> Waiver:
    """One `[[waiver]]` table, or the keys of one `--ignore`."""
    unknown = sorted(set(entry) - {*MATCH_KEYS, "reason", "expires"})
    if unknown:
        raise InputError(f"{origin}: unknown waiver key {unknown[0]!r}: expected {', '.join(MATCH_KEYS)}, reason, expires")
    match = tuple((key, _text(entry[key], origin, key)) for key in MATCH_KEYS if key in entry)
    if not match:
        raise InputError(f"{origin}: a waiver must name what it matches ({', '.join(MATCH_KEYS)})")
    reason = entry.get("reason", "")
    if not isinstance(reason, str) or not reason.strip():
        raise InputError(f"{origin}: a waiver must give its reason (reason = \"...\")")
    return Waiver(match, reason.strip(), _date(entry.get("expires"), origin), origin)


def parse_ignore(text: str) -> Waiver:
    """`--ignore 'table=vllm*,sm=120,expires=2027-03-01,reason=tracked in #123'`.
    The reason, when given, is last: it may hold commas."""
    entry: dict[str, Any] = {}
    rest = text.strip()
    while rest:
        key, eq, value = rest.partition("=")
        key = key.strip()
        if not eq or not key:
            raise InputError(f"--ignore {text!r}: expected KEY=VALUE[,KEY=VALUE...] with keys {', '.join(MATCH_KEYS)}, expires, reason")
        if key == "reason":
            entry[key], rest = value, ""
            continue
        value, _, rest = value.partition(",")
        entry[key] = value.strip()
    entry.setdefault("reason", "--ignore on the command line")
    return parse_waiver(entry, f"--ignore {text}")


def _text(value: Any, origin: str, key: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InputError(f"{origin}: waiver key {key!r} must be a string or a number")
    return str(value).strip()


def _date(value: Any, origin: str) -> dt.date | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise InputError(f"{origin}: expires {value!r}: expected a date, YYYY-MM-DD")
