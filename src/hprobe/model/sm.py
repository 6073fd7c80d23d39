"""Target SMs: parsing user spellings and detecting the visible GPUs."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass

from hprobe.model.errors import InputError

# Compute capabilities NVIDIA has shipped (CUDA's -arch list). This says which
# numbers are GPUs at all; it says nothing about what any kernel accepts.
KNOWN_SMS = frozenset({50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 110, 120, 121})

_SM_RE = re.compile(r"^(?:sm)?_?(\d{2,3})([af])?$")
_DOTTED_RE = re.compile(r"^(\d{1,2})\.(\d)([af])?$")


@dataclass(frozen=True, order=True)
class SM:
    """A compute capability, major.minor (SM100 is 10.0)."""

    major: int
    minor: int

    @property
    def number(self) -> int:
        return self.major * 10 + self.minor

    @property
    def arch(self) -> str:
        """As in FLASHINFER_CUDA_ARCH_LIST / TORCH_CUDA_ARCH_LIST: `10.0`."""
        return f"{self.major}.{self.minor}"

    @property
    def family(self) -> int:
        return self.major

    def __str__(self) -> str:
        return f"SM{self.number}"

    @classmethod
    def from_number(cls, number: int) -> SM:
        return cls(number // 10, number % 10)


def parse_sm(text: str) -> SM:
    """Parse one SM: ``100``, ``sm100``, ``sm_100a``, ``SM90``, ``10.0``, ``12.1``."""
    raw = text.strip().lower()
    if m := _DOTTED_RE.match(raw):
        sm = SM(int(m.group(1)), int(m.group(2)))
    elif m := _SM_RE.match(raw):
        sm = SM.from_number(int(m.group(1)))
    else:
        raise InputError(f"--sm {text!r}: not an SM (try 100, sm_100a, 10.0 or 12.1)")
    if sm.number not in KNOWN_SMS:
        known = ", ".join(str(n) for n in sorted(KNOWN_SMS))
        raise InputError(f"--sm {text!r}: SM{sm.number} is no real GPU architecture (known: {known})")
    return sm


def sm_names(numbers: tuple[int, ...] | list[int]) -> str:
    """SMs as the outputs write a group of them: SM100/SM103."""
    return "/".join(f"SM{sm}" for sm in numbers)


def parse_sm_list(text: str) -> list[SM]:
    """Parse a comma list of SMs, dropping duplicates and keeping order."""
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise InputError("--sm: empty list")
    seen: dict[SM, None] = {}
    for part in parts:
        seen.setdefault(parse_sm(part), None)
    return list(seen)


@dataclass(frozen=True)
class VisibleGPU:
    """A GPU torch can see, with its SM."""

    index: int
    name: str
    sm: SM


def detect_gpus() -> list[VisibleGPU]:
    """Every GPU torch can see, with its SM. An empty list on a CPU-only machine."""
    if not _nvidia_driver_present():
        return []  # decided without importing torch (2 s): a warm run stays fast
    try:
        import torch
    except Exception:  # noqa: BLE001 - no torch means no GPU to see
        return []
    try:
        if not torch.cuda.is_available():
            return []
        gpus = []
        for index in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(index)
            gpus.append(VisibleGPU(index, torch.cuda.get_device_name(index), SM(major, minor)))
        return gpus
    except Exception:  # noqa: BLE001 - a broken driver is "no usable GPU", reported by `hprobe env`
        return []


def _nvidia_driver_present() -> bool:
    """False only where no NVIDIA GPU can be visible: Linux with neither the
    driver's /proc entry nor a device node (WSL2's /dev/dxg counts). Elsewhere
    torch is asked."""
    if not sys.platform.startswith("linux"):
        return True
    return any(os.path.exists(p) for p in ("/proc/driver/nvidia/gpus", "/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg"))
