"""Accepted findings: a waiver names what it matches (table, backend, SM, model,
TP, release, kernel, verdict), why, and until when. A waived finding still
prints, marked waived, and does not fail the gate; a waiver past its expiry
fails the gate and says so; a waiver that matches nothing is reported.

Waivers come from a committed TOML file (`--waivers FILE`, or
`hprobe-waivers.toml` found in the current directory or the `--repo` root) and
from `--ignore KEY=VALUE,...` on the command line."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
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
        """`today`: the UTC date (commands/check.py), so that a waiver ends at
        the same moment on every machine whatever its time zone."""
        return self.expires is not None and self.expires < today

    @property
    def describe(self) -> str:
        said = ", ".join(f"{k}={v}" for k, v in self.match) or "every finding"
        until = f" until {self.expires.isoformat()}" if self.expires else ""
        return f"{said}{until} ({self.origin})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "match": dict(self.match),
            "reason": self.reason,
            "expires": self.expires.isoformat() if self.expires else None,
            "origin": self.origin,
        }


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
        raise InputError(
            f"{origin}: unknown waiver key {unknown[0]!r}: expected {', '.join(MATCH_KEYS)}, reason, expires"
        )
    match = tuple((key, _text(entry[key], origin, key)) for key in MATCH_KEYS if key in entry)
    if not match:
        raise InputError(f"{origin}: a waiver must name what it matches ({', '.join(MATCH_KEYS)})")
    reason = entry.get("reason", "")
    if not isinstance(reason, str) or not reason.strip():
        raise InputError(f'{origin}: a waiver must give its reason (reason = "...")')
    return Waiver(match, reason.strip(), _date(entry.get("expires"), origin), origin)


def parse_ignore(text: str) -> Waiver:
    """`--ignore 'table=vllm*,sm=120,expires=2027-03-01,reason=tracked in #123'`,
    keys in any order. A part that does not start with a known key continues
    the value before it, so a reason may hold commas wherever it stands; a key
    given twice is refused (the last one silently winning would waive more
    or less than written)."""
    keys = (*MATCH_KEYS, "expires", "reason")
    expected = f"--ignore {text!r}: expected KEY=VALUE[,KEY=VALUE...] with keys {', '.join(keys)}"
    entry: dict[str, Any] = {}
    current: str | None = None
    for part in text.strip().split(","):
        key, eq, value = part.partition("=")
        if eq and key.strip() in keys:
            current = key.strip()
            if current in entry:
                raise InputError(
                    f"--ignore {text!r}: {current} is given twice; one --ignore waives one match (repeat --ignore for "
                    "another)"
                )
            entry[current] = value
        elif current == "reason":
            entry[current] += "," + part  # a comma inside the reason
        else:
            raise InputError(expected)
    if not entry:
        raise InputError(expected)
    entry = {k: v if k == "reason" else v.strip() for k, v in entry.items()}
    entry.setdefault("reason", "--ignore on the command line")
    return parse_waiver(entry, f"--ignore {text}")


def _text(value: Any, origin: str, key: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InputError(f"{origin}: waiver key {key!r} must be a string or a number")
    return str(value).strip()


def utc_today(now: Callable[[dt.tzinfo], dt.datetime] = dt.datetime.now) -> dt.date:
    """The day waivers are compared with: today in UTC, so that a waiver ends
    at the same moment on every machine whatever its time zone."""
    return now(dt.UTC).date()


def _date(value: Any, origin: str) -> dt.date | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        # A waiver holds through its date. A moment with an offset holds
        # through the last UTC day before that moment: at most a day early, never late.
        if value.tzinfo is None:
            return value.date()
        try:
            day = value.astimezone(dt.UTC).date()
        except OverflowError:
            # Moved to UTC it runs past the calendar's end it is next to.
            return dt.date.max if value.year == dt.MAXYEAR else dt.date.min
        return day - dt.timedelta(days=1) if day > dt.date.min else day
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise InputError(f"{origin}: expires {value!r}: expected a date, YYYY-MM-DD")
