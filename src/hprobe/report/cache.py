"""What `hprobe cache` reports: the cache after the command, and what it removed."""

from __future__ import annotations

from dataclasses import dataclass

from hprobe.support.cache_usage import Usage


@dataclass(frozen=True)
class CacheReport:
    """The cache after the command, and what it removed."""

    usage: Usage
    removed: int = 0  # entries removed
    freed: int = 0  # bytes
    action: str = "show"
    in_use: int = 0  # entries left because a running hprobe probes from them
    left: int = 0  # entries chosen that could not be removed (a read-only cache)

    def to_dict(self) -> dict[str, object]:
        return {
            **self.usage.to_dict(),
            "action": self.action,
            "removed_entries": self.removed,
            "freed_bytes": self.freed,
            "in_use_entries": self.in_use,
            "left_entries": self.left,
        }
