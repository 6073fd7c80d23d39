"""trtllm-gen's FMHA selection, one module per code era of the C++ a release ships.

A release is evaluated with an era's port only where every C++ function that port
follows reads exactly as it did (cxx.SourceFile.digest); otherwise its answers stay at
the validators, and the function that changed is named. The runner's architecture
check is ported on its own: it decides whether an SM can launch any trtllm-gen kernel,
needs no kernel table, and has read the same across more releases than the selection.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import ModuleType

from hprobe.compiled.cxx import SourceFile, differences
from hprobe.compiled.files import data_dir
from hprobe.compiled.table import KernelTable
from hprobe.compiled.trtllm_gen import (
    era_0_6_0,
    era_0_6_4,
    era_0_6_6,
    era_0_6_7,
    era_0_6_8,
    era_0_6_10,
    era_0_6_11,
    era_0_6_12,
    era_0_6_16,
    era_0_6_18,
    era_0_7_0,
    era_0_7_2,
    era_0_7_2_post1,
    era_0_7_4,
)
from hprobe.compiled.trtllm_gen.era_0_6_12 import RUNNER, Device, GqaVariant, Selection

# Newest first: the first era whose every digest matches is the release's.
ERAS: tuple[tuple[str, ModuleType], ...] = (
    ("0.7.4", era_0_7_4),
    ("0.7.2.post1", era_0_7_2_post1),
    ("0.7.1 – 0.7.2", era_0_7_2),
    ("0.7.0 – 0.7.0.post1", era_0_7_0),
    ("0.6.18 – 0.6.18.post1", era_0_6_18),
    ("0.6.16 – 0.6.17", era_0_6_16),
    ("0.6.12 – 0.6.15.post1", era_0_6_12),
    ("0.6.11 – 0.6.11.post3", era_0_6_11),
    ("0.6.10 – 0.6.10.post1", era_0_6_10),
    ("0.6.8 – 0.6.9", era_0_6_8),
    ("0.6.7 – 0.6.7.post3", era_0_6_7),
    ("0.6.6", era_0_6_6),
    ("0.6.4 – 0.6.5", era_0_6_4),
    ("0.6.0 – 0.6.3", era_0_6_0),
)

# TllmGenFmhaRunner's constructor, by digest: the SMs (major*10+minor) it takes
# ("FLASHINFER_CHECK(mSM == kSM_100 || mSM == kSM_103, \"Unsupported architecture\")").
RUNNER_GATES: dict[str, tuple[int, ...]] = {
    "c3fb98dc90a18c55": (100, 103),  # 0.5.0 - 0.6.6 (one K/V dtype)
    "7a923d82e4bbaf35": (100, 103),  # 0.6.7 - 0.6.10.post1 (E2M1 K/V)
    "426fda3329ae8737": (100, 103),  # 0.6.11 - 0.6.15.post1 (separate K and V dtypes)
    "3ad615d96f27a434": (100, 103, 107),  # 0.6.16 - 0.7.4
}


def read_files() -> tuple[str, ...]:
    """Every file (under a release's `flashinfer/data`) compiled depth reads:
    what its conclusions rest on besides the kernel table."""
    return tuple(sorted({RUNNER, *(relative for _era, module in ERAS for relative in module.FINGERPRINT)}))


@dataclass(frozen=True)
class Port:
    """The era a release's selection code belongs to, and how it selects GQA/MHA
    generation kernels (or why that is not ported for it)."""

    era: str
    selection: type[Selection]
    gqa: GqaVariant | str

    @property
    def key(self) -> str:
        """What answers of this port are kept under: two releases of one era
        may select GQA/MHA kernels differently."""
        return self.era if isinstance(self.gqa, str) else f"{self.era}, GQA/MHA as {self.gqa.releases}"

    @property
    def described(self) -> str:
        """The port as a note names it: the GQA/MHA releases only where they are not the era's."""
        return self.era if isinstance(self.gqa, str) or self.gqa.releases == self.era else self.key

    def selection_on(self, table: KernelTable, device: Device) -> Selection:
        return self.selection(table, device, None if isinstance(self.gqa, str) else self.gqa)


@dataclass(frozen=True)
class Gate:
    """The runner's architecture check as a release ships it."""

    sms: tuple[int, ...]
    location: str  # file:line of the check, inside the release


@lru_cache(maxsize=16)
def _source(path: Path) -> SourceFile | None:
    return SourceFile(path) if path.is_file() else None


def source(package: Path, relative: str) -> SourceFile | None:
    return _source(data_dir(package) / relative)


# What a release's C++ was read to say, per package directory, for the run
# (reading it costs ~0.15 s); a child that read it already hands it over (known).
_GATES: dict[Path, Gate | str] = {}
_PORTS: dict[Path, Port | str] = {}


def known(package: Path) -> tuple[Gate | str, Port | str]:
    """The gate and port of `package`, to hand to another process."""
    return runner_gate(package), port_for(package)


def adopt(package: Path, gate: Gate | str, port: Port | str) -> None:
    """Take what another process read of `package` (known) as read here."""
    _GATES[package], _PORTS[package] = gate, port


def runner_gate(package: Path) -> Gate | str:
    """The runner's SM check in this release, or why it is not known."""
    if package not in _GATES:
        _GATES[package] = _read_gate(package)
    return _GATES[package]


def _read_gate(package: Path) -> Gate | str:
    runner = source(package, RUNNER)
    if runner is None:
        return f"{RUNNER} is not in this release"
    digest = runner.digest("TllmGenFmhaRunner")
    if digest not in RUNNER_GATES:
        return f"TllmGenFmhaRunner in {RUNNER} reads differently from every ported release (digest {digest})"
    line = runner.line_of("Unsupported architecture")
    return Gate(RUNNER_GATES[digest], f"flashinfer/data/{RUNNER}:{line}")


def port_for(package: Path) -> Port | str:
    """The era whose port describes this release's selection, or why none does."""
    if package not in _PORTS:
        _PORTS[package] = _read_port(package)
    return _PORTS[package]


def _gqa_port(package: Path, era: str, module: ModuleType) -> GqaVariant | str:
    # An era module's own GQA_VARIANTS only: a later era's Selection inherits the
    # GQA methods, not the assurance that its release selects as they do.
    variants: tuple[GqaVariant, ...] = vars(module).get("GQA_VARIANTS", ())
    if not variants:
        return f"trtllm-gen's GQA/MHA selection (selectGqGenerationKernel) has no port for the {era} era"
    for variant in variants:
        if not differences(package, variant.fingerprint):
            return variant
    return (
        "trtllm-gen's GQA/MHA selection (selectGqGenerationKernel) reads differently from every ported release of "
        f"the {era} era"
    )


def _read_port(package: Path) -> Port | str:
    nearest: tuple[int, list[str]] | None = None
    for era, module in ERAS:
        differs = differences(package, module.FINGERPRINT)
        if not differs:
            return Port(era, module.Selection, _gqa_port(package, era, module))
        if nearest is None or len(differs) < nearest[0]:
            nearest = (len(differs), differs)
    assert nearest is not None
    names = nearest[1]
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return (
        f"its trtllm-gen selection code has no port in hprobe yet ({shown} read differently from the nearest ported "
        "release)"
    )
