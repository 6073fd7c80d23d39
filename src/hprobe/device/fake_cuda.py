"""CPU tensors that report a CUDA device, for the checks after a device check.

A CPU probe stops at a check that its tensors live on the GPU (`x.is_cuda`,
`x.device.type != "cuda"`), and every check after it goes unread. Inside
`cuda_tensors(made_by)`, every tensor the probe's own code makes (code under
`made_by`) and every tensor any code asks for on `cuda` is an ordinary CPU
tensor whose `device`, `is_cuda` and `get_device()` answer for `cuda:0`.
Values, shapes, dtypes and strides are real, so value checks run as they
would; what is faked is only where the memory lives. Tensors flashinfer makes
on the CPU stay CPU tensors, as they would on the GPU machine.

The few CUDA runtime calls Python makes on its way to a launch answer as the
GPU machine's would, for the same span: `torch.cuda.device(...)` and
`torch.cuda.stream(...)` are contexts that switch nothing, streams and events
are handles with nothing behind them, `is_available()` is true and one device
is visible. Python only hands these on to compiled code; none of them holds a
value a validator reads.

What it cannot show: a device mismatch between a faked tensor and a CPU one
(on the GPU a kernel-side error; here both are CPU memory), and anything else
that needs the CUDA runtime or driver itself (a compiled occupancy query, a
cuBLAS handle), which fails in torch or the dependency: not a validator's
answer, and it stops only the h_q that reach it."""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@functools.cache
def _reports_cuda_class() -> type:
    import torch

    cuda = torch.device("cuda", 0)

    class ReportsCuda(torch.Tensor):
        """A CPU tensor that says it is on `cuda:0`."""

        @property
        def device(self) -> Any:  # type: ignore[override]
            return cuda

        @property
        def is_cuda(self) -> bool:  # type: ignore[override]
            return True

        @property
        def is_cpu(self) -> bool:  # type: ignore[override]
            return False

        def get_device(self) -> int:
            return 0

    return ReportsCuda


def reports_cuda(value: Any) -> Any:
    """`value` (a tensor, or tuples, lists and dicts of them) with every tensor
    CUDA-reporting: what a caller on the GPU machine would pass."""
    import torch

    cls = _reports_cuda_class()
    if isinstance(value, torch.Tensor):
        return value if isinstance(value, cls) else value.as_subclass(cls)
    if isinstance(value, (tuple, list)):
        return type(value)(reports_cuda(v) for v in value)
    if isinstance(value, dict):
        return {k: reports_cuda(v) for k, v in value.items()}
    return value


def _device_type(value: Any) -> str | None:
    """ "cuda", "cpu", ... for anything that names a device; None otherwise (a dtype, a tensor, nothing)."""
    import torch

    if value is None or isinstance(value, torch.Tensor):
        return None
    try:
        return torch.device(value).type
    except (TypeError, RuntimeError, ValueError):
        return None


class _NoSwitch:
    """`torch.cuda.device(d)`, `torch.cuda.stream(s)`: a context that switches nothing (one faked device)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> _NoSwitch:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class _Handle:
    """A stream or an event of the faked device: a handle Python passes on to
    compiled code, with nothing behind it. Waiting, recording and syncing do
    nothing; `cuda_stream` is the null stream's handle."""

    cuda_stream = 0
    device_index = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    @property
    def device(self) -> Any:
        import torch

        return torch.device("cuda", 0)

    def _nothing(self, *args: Any, **kwargs: Any) -> None:
        return None

    wait_stream = wait_event = record = wait = synchronize = _nothing

    def record_event(self, event: Any = None) -> _Handle:
        return event if event is not None else _Handle()

    def query(self) -> bool:
        return True


def _runtime_fakes() -> dict[str, Any]:
    """torch.cuda's runtime calls, as one visible device with nothing behind it answers them."""
    return {
        "device": _NoSwitch,
        "device_of": _NoSwitch,
        "stream": _NoSwitch,
        "Stream": _Handle,
        "Event": _Handle,
        "current_stream": lambda device=None: _Handle(),
        "default_stream": lambda device=None: _Handle(),
        "set_stream": lambda stream: None,
        "set_device": lambda device: None,
        "synchronize": lambda device=None: None,
        "init": lambda: None,
        "is_available": lambda: True,
        "is_initialized": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
    }


@contextmanager
def _cuda_runtime() -> Iterator[None]:
    """The runtime fakes above on `torch.cuda` for the span of the context, restored after."""
    import torch

    saved = {name: getattr(torch.cuda, name) for name in _runtime_fakes() if hasattr(torch.cuda, name)}
    try:
        for name, fake in _runtime_fakes().items():
            setattr(torch.cuda, name, fake)
        yield
    finally:
        for name in _runtime_fakes():
            if name in saved:
                setattr(torch.cuda, name, saved[name])
            else:
                delattr(torch.cuda, name)


@contextmanager
def cuda_tensors(made_by: str) -> Iterator[None]:
    """Tensors made by code under the directory `made_by`, or asked for on
    `cuda` by anyone, report `cuda:0`, and the CUDA runtime calls Python makes
    answer for that one device (see the module's docstring)."""
    import torch
    from torch.overrides import TorchFunctionMode

    skipped = (str(Path(torch.__file__).resolve().parent), str(Path(__file__).resolve().parent))

    class CudaOnCpu(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = dict(kwargs or {})
            name = getattr(func, "__name__", "")
            if name == "cuda" and args:  # Tensor.cuda(): already where it says it is
                return reports_cuda(args[0])
            positional = _device_type(args[1]) if name == "to" and len(args) > 1 else None
            wanted = positional or _device_type(kwargs.get("device"))
            if name == "cpu" and args or name == "to" and wanted == "cpu":
                # Copied to the host, as on the GPU machine: a plain CPU tensor again.
                return func(*args, **kwargs).as_subclass(torch.Tensor)
            asked = wanted == "cuda"
            if asked and positional:
                args = (args[0], "cpu", *args[2:])
            elif asked:
                kwargs["device"] = "cpu"
            out = func(*args, **kwargs)
            return reports_cuda(out) if asked or _made_by(made_by, skipped) else out

    with CudaOnCpu(), _cuda_runtime():
        yield


def _made_by(directory: str, skipped: tuple[str, ...]) -> bool:
    """Whether the code that called torch (past torch's own frames and this
    package's stand-ins) lives under `directory`."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(skipped):
        frame = frame.f_back  # type: ignore[assignment]
    return frame is not None and frame.f_code.co_filename.startswith(directory)
