"""Where a padding class found in a consumer's tree stands; apart from the
extraction itself, so a check of TOML tables never loads the interpreter."""

from __future__ import annotations

from enum import Enum


class ClassStatus(str, Enum):
    """Where a padding class found in the tree stands."""

    MAPPED = "mapped"  # the mapping names the kernel it feeds: judged
    UNPROBED = "unprobed"  # the mapping names it, for a kernel hprobe does not probe
    UNMAPPED = "unmapped"  # the mapping does not name it
    NOT_EVALUABLE = "not-evaluable"  # its rule could not be evaluated
