"""The interface every kernel probe implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable

from ..sm import SM


@dataclass
class PreparedCall:
    """One call into flashinfer, ready to run: only h_q differs between calls."""

    fn: Callable[..., Any]
    kwargs: dict[str, Any]


class KernelProbe(ABC):
    """Calls one flashinfer entry point with synthetic inputs in which only h_q varies."""

    #: id used on the command line and in padding tables
    id: str
    #: dotted path of the public entry point
    entry_point: str
    #: SMs the kernel is built for; probed by default when no GPU is visible
    default_sms: tuple[int, ...]
    #: one line for `hprobe kernels`
    summary: str
    #: bump when the inputs change, so recorded results are not reused
    probe_version: int = 1

    @abstractmethod
    def prepare(self, entry: Callable[..., Any], sm: SM, heads: int) -> PreparedCall:
        """Build the call for `heads` query heads on `sm`. `entry` is the loaded
        release's entry point; adapt to its signature by inspecting it."""

    def families(self) -> set[int]:
        return {sm // 10 for sm in self.default_sms}
