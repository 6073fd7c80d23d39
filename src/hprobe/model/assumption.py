"""Why an `assumed` finding is undecided: what hprobe could not read from the
engine, each member saying so in the words every output uses."""

from __future__ import annotations

from enum import Enum
from typing import assert_never


class Assumption(str, Enum):
    HEADS = "heads"  # the head count's trail ended: shown as heads // tp, unpadded
    CALL = "call"  # the count is the engine's own; a dispatch keyword the call passes was not read
    DTYPE = "dtype"  # the kernel's answer changes with the query's dtype, which the engine sets unread
    ARCH = "arch"  # the kernel refuses the SM; whether the engine takes the path there was not read
    # the tree's flashinfer requirement is there but unreadable: judged on a
    # release the tree may not install
    RELEASE = "release"
    # the engine hands the entry on (stores it, passes it to a helper) where its
    # call is not followed: shown as heads // tp, unpadded, on the kernel's defaults
    ESCAPED = "escaped"
    # a test on the call's way that varies with the run and that hprobe cannot
    # decide: the count is the engine's own where the call runs, and the kernel
    # refuses or pads it there (an accepted count is ok whether or not it runs)
    REACH = "reach"

    @property
    def undecided(self) -> str:
        """The summary's words for a backend undecided on this assumption."""
        match self:
            case Assumption.HEADS:
                return "the head count this call hands FlashInfer was not followed; shown as heads // tp, unpadded"
            case Assumption.CALL:
                return (
                    "the head count is the engine's own, but what the call passes besides it was not read; shown "
                    "with the kernel's defaults"
                )
            case Assumption.DTYPE:
                return "the kernel's answer depends on the query's dtype, which hprobe does not read from the engine"
            case Assumption.ARCH:
                return "the kernel refuses this SM; whether the engine takes this path on it was not read"
            case Assumption.ESCAPED:
                return (
                    "the engine hands this entry on where its call is not followed (see the call path); shown as "
                    "heads // tp, unpadded, with the kernel's defaults"
                )
            case Assumption.REACH:
                return (
                    "the call runs only where a test on its way holds, which hprobe cannot decide; where it runs, "
                    "the kernel refuses or pads the count it hands"
                )
            case Assumption.RELEASE:
                return (
                    "the tree's flashinfer requirement cannot be read, so which release it installs is unknown; "
                    "shown as judged on the release probed"
                )
            case _:
                assert_never(self)
