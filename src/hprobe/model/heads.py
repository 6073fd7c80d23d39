"""Sets of head counts as people write them."""

from __future__ import annotations


def compact_set(values: list[int] | set[int]) -> str:
    """{1-4, 8, 16}: runs of three or more collapse to a range."""
    ordered = sorted(set(values))
    if not ordered:
        return "{}"
    parts = []
    start = prev = ordered[0]
    for v in ordered[1:] + [None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        if prev - start >= 2:
            parts.append(f"{start}-{prev}")
        else:
            parts.extend(str(x) for x in range(start, prev + 1))
        if v is not None:
            start = prev = v
    return "{" + ", ".join(parts) + "}"
