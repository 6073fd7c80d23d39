"""Which SMs and head counts a command covers: `--sm` (or the visible GPUs, or
what the kernels or tables name) and `--heads`."""

from __future__ import annotations

from dataclasses import dataclass

from hprobe.model.errors import InputError
from hprobe.model.padding import MAX_HEADS
from hprobe.model.sm import SM, detect_gpus, parse_sm_list

DEFAULT_MAX_HEADS = 256


@dataclass
class Targets:
    """The SMs a command answers for, and where they came from."""

    sms: list[SM]
    source: str  # "flag", "gpu" or "default"
    note: str | None = None


def resolve_targets(sm_option: str | None, fallback: list[int], what: str) -> Targets:
    """--sm wins; otherwise the visible GPUs; otherwise every SM `what` covers."""
    if sm_option is not None:
        return Targets(parse_sm_list(sm_option), "flag")
    gpus = detect_gpus()
    if gpus:
        sms = list(dict.fromkeys(g.sm for g in gpus))
        names = ", ".join(f"GPU {g.index} {g.name} ({g.sm})" for g in gpus)
        return Targets(sms, "gpu", f"probing the visible GPUs: {names}")
    sms = [SM.from_number(n) for n in sorted(set(fallback))]
    return Targets(
        sms,
        "default",
        f"no GPU visible and no --sm: probing every SM {what} ({', '.join(map(str, sms))})",
    )


def parse_heads(text: str) -> list[int]:
    """`1-256`, `8,16,24`, `1-8,16`: positive head counts up to MAX_HEADS. Bounds
    are checked before a range is expanded, so `1-10000000000` costs nothing."""
    values: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo_text, dash, hi_text = part.partition("-")
        try:
            lo = int(lo_text)
            hi = int(hi_text) if dash else lo
        except ValueError:
            raise InputError(f"--heads {text!r}: expected counts like 1-256 or 8,16,24") from None
        if lo <= 0:
            raise InputError(f"--heads {text!r}: head counts must be positive")
        if lo > hi:
            raise InputError(f"--heads {text!r}: range {part} runs backwards")
        if hi > MAX_HEADS:
            raise InputError(f"--heads {text!r}: head counts above {MAX_HEADS} are not probed")
        values.update(range(lo, hi + 1))
    if not values:
        raise InputError(f"--heads {text!r}: no head counts given")
    return sorted(values)
