"""The launch boundary: stand-ins placed where flashinfer loads or calls compiled
code. Calling one raises `BoundaryReached`, which proves that every Python
check before the launch accepted the input; compiled helpers that only serve
logging do nothing, and those whose result Python merely hands on (a plan's
schedule) are let through when a probe says so."""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

# Getters (`get_trtllm_gen_fmha_module`, `get_sparse_mla_sm120_module`, ...) run
# for real: they hold Python dispatch tables and JIT-spec generation with its
# arch checks. The boundary is where a compiled artefact is loaded: a JitSpec's
# build/load, a cubin loader, a tvm-ffi module load, a CuTe DSL compile.
GETTER_PREFIXES = ("get_", "_get_")
# Compiled helpers that serve logging, not kernels: calling them proves nothing,
# so their stand-ins do nothing instead of marking the boundary.
SERVICE_SPECS = frozenset({"spdlog", "logging"})
# JitSpec methods that load or build a compiled module (across releases; 0.7.x
# splits JitSpec into subclasses that override them).
SPEC_LOADERS = ("build_and_load", "load", "try_load")


@dataclass(frozen=True)
class CompiledEntry:
    """The compiled function a probe call reached: where the launch would happen."""

    module: str  # the getter (or JIT spec) that would have produced the module
    function: str  # the attribute called on it
    # What the call handed a compiled function whose own checks hprobe reads
    # from the release's C++ (launch_shape): the entry itself
    # (RECORDED_LAUNCHES, compiled/sm120_sparse), or the compiled plan the
    # call made before it (Policy.recorded, compiled/gqa_decode)
    launch: str | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{self.module}.{self.function}"


# Compiled queries that ask trtllm-gen's selection a question Python only uses
# to refuse what the selection itself refuses (0.7.x batch MLA's plan asks the
# initial kernel's heads per CTA, then checks the count divides by it): answered
# with a value that lets every count through, so the Python after the query runs
# too; the probe leaves such a count's selection pending (never `ok`).
DECIDED_BY_SELECTION: dict[str, Any] = {"_mla_plan_head_divisor": 1}

# Compiled entries whose checks over what they are handed (sizes, widths,
# page sizes) are read from the release's C++: their calls' arguments are kept.
RECORDED_LAUNCHES = frozenset({"sparse_mla_sm120_paged_attention"})


def launch_shape(args: tuple[Any, ...]) -> str:
    """A compiled call's positional arguments as its C++ entry reads them: a
    tensor by its sizes (`1,4,512`), a number as itself, None as `-`; `;`
    between them. Only what checks over sizes need: no values of tensors."""
    parts = []
    for arg in args:
        shape = getattr(arg, "shape", None)
        if shape is not None and not isinstance(arg, (int, float)):
            parts.append(",".join(str(int(d)) for d in shape) or "scalar")
        elif arg is None:
            parts.append("-")
        elif isinstance(arg, (bool, int, float)):
            parts.append(repr(arg))
        else:
            parts.append("?")
    return ";".join(parts)


class BoundaryReached(BaseException):
    """Raised by a stand-in compiled function. BaseException, so that flashinfer's
    own `except Exception` blocks (autotuners, fallbacks) cannot swallow it."""

    def __init__(self, entry: CompiledEntry):
        super().__init__(str(entry))
        self.entry = entry


class ImportFailure(Exception):
    """A flashinfer module exists but fails to import here: the environment's
    problem, never the kernel's answer."""


class NetworkRefused(BaseException):
    """A probe call tried to open a network connection (a cubin download, say)."""


@dataclass
class Policy:
    """What the current probe lets through the boundary.

    `pass_through`: compiled functions whose result Python only hands on to
    another compiled call (a plan's schedule, say); they return None and the
    call goes on to the next boundary. `passed` records the ones that did.
    """

    pass_through: frozenset[str] = frozenset()
    passed: list[str] = field(default_factory=list)
    # Compiled plans whose checks over what they are handed are read from the
    # release's C++: let through as pass_through is, their arguments kept
    # (`handed`, by launch_shape) for the launch that follows to carry. They
    # return an empty plan (Python hands a plan's info on unread, and asserts
    # only that there is one).
    recorded: frozenset[str] = frozenset()
    handed: list[str] = field(default_factory=list)
    # Compiled launches whose own checks over their arguments are read from
    # the release's C++, beside RECORDED_LAUNCHES: for the current probe only
    # (a name as common as `run` means a launch of this probe's modules).
    launches: frozenset[str] = frozenset()


class HandedOn(tuple[None, int]):
    """What a compiled call whose result Python only hands on returns: no
    plan info, and, where a release's Python unpacks the call's result as
    (plan info, staged workspace bytes) -- 0.7.x's batch MLA proxy --, zero
    bytes staged. Handed on to the launch, which is the boundary."""


HANDED_ON = HandedOn((None, 0))


class StandInFunction:
    def __init__(self, module: str, function: str, service: bool, policy: Policy):
        self._module, self._function, self._service, self._policy = module, function, service, policy

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._service:
            return None
        if self._function in self._policy.pass_through:
            self._policy.passed.append(f"{self._module}.{self._function}")
            return HANDED_ON
        if self._function in self._policy.recorded:
            self._policy.passed.append(f"{self._module}.{self._function}")
            self._policy.handed.append(launch_shape(args))
            return []
        if self._function in DECIDED_BY_SELECTION:
            self._policy.passed.append(f"{self._module}.{self._function}")
            return DECIDED_BY_SELECTION[self._function]
        if self._function in RECORDED_LAUNCHES or self._function in self._policy.launches:
            launch: str | None = launch_shape(args)
        else:
            launch = self._policy.handed[-1] if self._policy.handed else None
        raise BoundaryReached(CompiledEntry(self._module, self._function, launch))

    def __getattr__(self, name: str) -> StandInFunction:
        if name.startswith("__"):
            raise AttributeError(name)
        return StandInFunction(self._module, f"{self._function}.{name}", self._service, self._policy)


class StandInModule:
    """Takes the place of a loaded compiled module."""

    def __init__(self, origin: str, policy: Policy, service: bool = False):
        self._origin, self._service, self._policy = origin, service, policy

    def __getattr__(self, name: str) -> StandInFunction:
        if name.startswith("__"):
            raise AttributeError(name)
        return StandInFunction(self._origin, name, self._service, self._policy)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._service:
            return None
        raise BoundaryReached(CompiledEntry(self._origin, "__call__"))


def do_nothing(*args: Any, **kwargs: Any) -> None:
    return None


# Prebuilt cubins a getter fetches before the entry's last Python checks run
# (trtllm-gen's FMHA getter is called before `_check_trtllm_gen_mla_shape` in
# 0.6.0 - 0.6.11): stand-ins let the getter finish and hand back a module whose
# every function is the boundary, so the checks after it run too. The getter
# reads two artefacts: checksums.txt (for the header's hash, parsed in Python)
# and the header (only asserted present); neither decides an answer.
STAND_IN_ARTEFACTS = ("fmha/trtllm-gen/",)
_STAND_IN_CHECKSUMS = ("0" * 64 + "  include/flashInferMetaInfo.h\n").encode()


def artefact_stand_in(name: Any = "", *args: Any, **kwargs: Any) -> Any:
    """`get_artifact` (`get_cubin` before 0.6.x renamed it) where it fetches
    an artefact of a getter that goes on to build a module: stand-in bytes,
    so the getter returns a stand-in module and the launch is the boundary;
    any other artefact is the boundary itself."""
    path = str(name)
    if any(marker in path for marker in STAND_IN_ARTEFACTS):
        return _STAND_IN_CHECKSUMS if path.endswith("checksums.txt") else b"/* hprobe: a stand-in artefact */"
    return artefact_boundary(name, *args, **kwargs)


def artefact_boundary(name: Any = "", *args: Any, **kwargs: Any) -> Any:
    # Artefact paths start with a content hash: `158f6f…/fmha/trtllm-gen/checksums.txt`.
    parts = [p for p in str(name).split("/") if p]
    if parts and len(parts[0]) >= 32 and all(ch in "0123456789abcdef" for ch in parts[0]):
        parts = parts[1:]
    where = "/".join(parts[:-1]) or "/".join(parts)
    raise BoundaryReached(CompiledEntry(loader_label("cubin"), f"<cubin artefacts {where}>"))


def loader_label(spec_name: str) -> str:
    """Name a stand-in module after the flashinfer getter that asked for it
    (`get_trtllm_gen_fmha_module`), else after its JIT spec (`jit:mla`)."""
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_name.startswith(GETTER_PREFIXES) and "module" in code.co_name:
            return code.co_name
        frame = frame.f_back  # type: ignore[assignment]
    # A spec named after a digest of what it compiles (prims_ts: one per
    # shape) is one entry, whatever the shape: the digest is said as such.
    return f"jit:{_DIGEST_IN_NAME.sub('_<digest>', spec_name)}"


_DIGEST_IN_NAME = re.compile(r"_[0-9a-f]{32,}")


# hprobe's own fetches beside a probe (a kernel table from an artifact store, in a
# thread while the release is probed) are not the probe's: they go through.
_OWN_NETWORK = threading.local()


@contextmanager
def own_network() -> Iterator[None]:
    """Network calls of this thread, inside the block, are hprobe's own: a probe's
    refusal (network_guard) lets them through."""
    _OWN_NETWORK.allowed = True
    try:
        yield
    finally:
        _OWN_NETWORK.allowed = False


def network_guard(original: Callable[..., Any]) -> Callable[..., Any]:
    """`original` (a socket function) refused to everything a probe runs: a network
    call there means a download of kernels or metadata, reported instead of made."""

    def guarded(*args: Any, **kwargs: Any) -> Any:
        if getattr(_OWN_NETWORK, "allowed", False):
            return original(*args, **kwargs)
        raise NetworkRefused("network access refused during a probe")

    return guarded
