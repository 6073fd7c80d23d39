"""CPU tensors that report a CUDA device, for the checks after a device check.

A CPU probe stops at a check that its tensors live on the GPU (`x.is_cuda`,
`x.device.type != "cuda"`), and every check after it goes unread. Inside
`cuda_tensors(made_by)`, every tensor the probe's own code makes (code under
`made_by`) and every tensor any code asks for on `cuda` is an ordinary CPU
tensor whose `device`, `is_cuda` and `get_device()` answer for `cuda:0`.
Values, shapes, dtypes and strides are real, so value checks run as they
would; what is faked is only where the memory lives. Tensors flashinfer makes
on the CPU stay CPU tensors, as they would on the GPU machine.

What it cannot show: a device mismatch between a faked tensor and a CPU one
(on the GPU a kernel-side error; here both are CPU memory), and anything that
needs the CUDA runtime itself (streams, events), which fails in torch: not a
validator's answer."""

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
    """"cuda", "cpu", ... for anything that names a device; None otherwise (a dtype, a tensor, nothing)."""
    import torch

    if value is None or isinstance(value, torch.Tensor):
        return None
    try:
        return torch.device(value).type
    except (TypeError, RuntimeError, ValueError):
        return None


@contextmanager
def cuda_tensors(made_by: str) -> Iterator[None]:
    """Tensors made by code under the directory `made_by`, or asked for on
    `cuda` by anyone, report `cuda:0` (see the module's docstring)."""
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

    with CudaOnCpu():
        yield


def _made_by(directory: str, skipped: tuple[str, ...]) -> bool:
    """Whether the code that called torch (past torch's own frames and this
    package's stand-ins) lives under `directory`."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(skipped):
        frame = frame.f_back  # type: ignore[assignment]
    return frame is not None and frame.f_code.co_filename.startswith(directory)
