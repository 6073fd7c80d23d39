"""How one probe call ended, from the exception it raised: a validator's
refusal (a `raise` or `assert` in flashinfer's own code) or a failure that says
nothing about heads, with its reason and its cause (this machine, the tensors'
device, or the probe's inputs). Pure functions of the exception."""

from __future__ import annotations

import functools
import linecache
import os
import re
from dataclasses import dataclass
from pathlib import Path

from hprobe.device.boundary import CompiledEntry
from hprobe.device.sites import CheckSite, check_site
from hprobe.model.outcome import Cause


@dataclass
class CallResult:
    """How one probe call ended."""

    entry: CompiledEntry | None = None  # set when the boundary was reached
    error_type: str | None = None
    message: str | None = None
    location: str | None = None  # file:line (function) where it was raised
    validator: bool = False  # raised by a `raise`/`assert` in flashinfer's own code
    reason: str | None = None  # why a non-validator failure says nothing about heads
    passed: tuple[str, ...] = ()  # compiled calls let through on the way (see Policy)
    site: CheckSite | None = None  # the check that refused, for tracing it on other SMs
    cause: str | None = None  # a Cause value, with `reason`
    lines_run: frozenset[int] | None = None  # lines of `trace`'s code object that ran (see call())
    faked_device: bool = False  # made with tensors on a faked CUDA device (see device/fake_cuda.py)
    # A JIT check refused the session's baseline CUDA toolkit and this call was
    # made again under a newer one: that check's location and message.
    toolkit: str | None = None

    @property
    def reached(self) -> bool:
        return self.entry is not None


_CUDA_RUNTIME = re.compile(r"[\\/]torch[\\/]cuda[\\/]")
_CUDA_DRIVER = re.compile(r"[\\/]cuda[\\/](?:bindings|pathfinder)[\\/]")
_MISSING_MODULE_ATTRIBUTE = re.compile(r"module '([\w.]+)' has no attribute")


def cause_of(exc: BaseException) -> Cause:
    """An import, the OS or memory is this machine; so is a dependency's module
    lacking a name (cutlass-dsl 4.8 under 0.6.8-0.6.12's cute-dsl). Any other
    missing attribute or name is the probe's inputs not fitting this release."""
    if isinstance(exc, (ImportError, OSError, MemoryError)):
        return Cause.ENVIRONMENT
    missing = _MISSING_MODULE_ATTRIBUTE.match(str(exc))
    if isinstance(exc, AttributeError) and missing and not missing.group(1).startswith("flashinfer"):
        return Cause.ENVIRONMENT
    return Cause.PROBE


def _environment_reason(exc: BaseException, cause: Cause) -> str:
    missing = _MISSING_MODULE_ATTRIBUTE.match(str(exc))
    if cause is Cause.ENVIRONMENT and missing:
        # A dependency's API, not flashinfer's: the version installed on this machine.
        return (
            f"{type(exc).__name__}: {missing.group(1)}, as installed on this machine, lacks a name this release uses: "
            "an environment failure, not a validator's answer"
        )
    if cause is Cause.ENVIRONMENT:
        return (
            f"{type(exc).__name__} on this machine (an import, the OS, memory) is an environment failure, not a "
            "validator's answer"
        )
    return (
        f"{type(exc).__name__}: a name this release lacks, so the probe's inputs or stand-ins do not fit it; not a "
        "validator's answer"
    )


def classify(exc: Exception, flashinfer_prefix: str) -> CallResult:
    """How a probe call that raised `exc` ended: a validator's refusal, or a
    failure that says nothing about heads (with its reason and cause). Pure:
    it reads only the exception, its traceback and the source lines it names.
    `flashinfer_prefix`: the loaded flashinfer's directory, with a trailing separator."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    location = None
    path = ""
    in_flashinfer = False
    statement = ""
    rel = ""
    if tb is not None:
        code = tb.tb_frame.f_code
        path = resolved_path(code.co_filename)
        in_flashinfer = path.startswith(flashinfer_prefix)
        rel = path[len(flashinfer_prefix) :] if in_flashinfer else path
        location = f"{'flashinfer/' if in_flashinfer else ''}{rel}:{tb.tb_lineno} ({code.co_name})"
        statement = statement_at(code.co_filename, tb.tb_lineno or 0)
    result = CallResult(error_type=type(exc).__name__, message=one_line(exc), location=location)
    if in_flashinfer:
        result.site = check_site(exc.__traceback__, flashinfer_prefix)
    environment_errors = (ImportError, AttributeError, NameError, OSError, MemoryError)
    is_check = statement.startswith(("raise", "assert"))
    if isinstance(exc, environment_errors):
        result.cause = cause_of(exc).value
        result.reason = _environment_reason(exc, Cause(result.cause))
    elif result.site is not None and result.site.device_check:
        result.reason = (
            "a check on the tensors' device refused: the probe's tensors live on the CPU, so this says nothing about "
            "the kernel"
        )
        result.cause = Cause.DEVICE.value
    elif in_flashinfer and rel.startswith(("jit" + os.sep, "compilation_context.py")) and is_check:
        # A check in JIT-spec generation (the arch list it compiles for is
        # the target's, as the device would give it; the options it can
        # generate): Python before compiled code, so a validator. Whether
        # it tests h_q, the SM or the configuration, tracing tells.
        result.validator = True
    elif in_flashinfer and rel.startswith(("jit" + os.sep, "compilation_context.py")):
        result.reason = "raised while flashinfer prepared a JIT build, past the validators"
    elif not in_flashinfer and _CUDA_DRIVER.search(path):
        # cuda-python's driver bindings (an occupancy query a planner makes on
        # its way to the launch): the NVIDIA driver itself, on no CPU machine.
        result.reason = (
            "needs the NVIDIA driver (a query through cuda-python's driver bindings), which this machine lacks"
        )
        result.cause = Cause.DEVICE.value
    elif not in_flashinfer and _CUDA_RUNTIME.search(path):
        # Past every device check (on tensors that report CUDA): the call now
        # needs the CUDA runtime itself, which a CPU build of torch lacks.
        result.reason = "needs the CUDA runtime (torch.cuda), which this machine's torch lacks"
        result.cause = Cause.DEVICE.value
    elif not in_flashinfer:
        result.reason = "raised outside flashinfer's code (the probe's inputs or torch on CPU), not by a validator"
    elif not is_check:
        result.reason = "flashinfer failed in ordinary code, not in a raise or assert of a validator"
    else:
        result.validator = True
    return result


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 400 else text[:397] + "..."


@functools.lru_cache(maxsize=1024)
def resolved_path(filename: str) -> str:
    return str(Path(filename).resolve())


@functools.lru_cache(maxsize=512)
def statement_at(filename: str, lineno: int) -> str:
    """The statement that raised. A `raise` reports its first line; a multi-line
    `assert` reports the line of its condition, so look a few lines up for it."""
    line = linecache.getline(filename, lineno).strip()
    if line.startswith(("raise", "assert")):
        return line
    for back in range(1, 4):
        above = linecache.getline(filename, lineno - back).strip()
        if not above or above.endswith(":"):
            break
        if above.startswith("assert"):
            return above
    return line
