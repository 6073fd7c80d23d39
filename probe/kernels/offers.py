"""What a loaded release offers, read from its entry point's signature and its own metadata."""

from __future__ import annotations

import inspect
from typing import Any, Callable


def missing_parameter(entry: Callable[..., Any], name: str) -> str | None:
    """A reason when `entry` has no parameter `name` (the release predates it)."""
    try:
        params = inspect.signature(entry).parameters
    except (TypeError, ValueError):
        return None
    return None if name in params else f"this release's {getattr(entry, '__name__', 'entry point')} has no {name!r} parameter"


def capability_metadata(entry: Callable[..., Any], sm: Any, backend: Any = None) -> Any:
    """The entry point's `supported_compute_capability` / `backend_requirement`
    claim for `sm` (and `backend`), or None when it carries none."""
    from .base import Metadata

    candidates: list[Any] = []
    obj: Any = entry
    if isinstance(obj, type):
        obj = obj.__init__
    while obj is not None and obj not in candidates:
        candidates.append(obj)
        obj = getattr(obj, "__wrapped__", None)
    for fn in candidates:
        if backend not in (None, "auto") and callable(getattr(fn, "is_backend_supported", None)):
            try:
                return Metadata("backend_requirement.is_backend_supported", bool(fn.is_backend_supported(backend, sm.number)))
            except Exception:  # noqa: BLE001 - a decorator without backend choices raises
                pass
        if callable(getattr(fn, "is_compute_capability_supported", None)):
            try:
                return Metadata("supported_compute_capability", bool(fn.is_compute_capability_supported(sm.number)))
            except Exception:  # noqa: BLE001
                continue
    return None
