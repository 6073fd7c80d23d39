"""What a loaded release offers, read from its entry point's signature and source."""

from __future__ import annotations

import functools
import inspect
import typing
from typing import Any, Callable


def missing_parameter(entry: Callable[..., Any], name: str) -> str | None:
    """A reason when `entry` has no parameter `name` (the release predates it)."""
    try:
        params = inspect.signature(entry).parameters
    except (TypeError, ValueError):
        return None
    return None if name in params else f"this release's {getattr(entry, '__name__', 'entry point')} has no {name!r} parameter"


def literal_choices(entry: Callable[..., Any], name: str) -> set[str]:
    """The string values parameter `name` names: its Literal annotation, else
    every quoted word the function's source compares `name` with."""
    try:
        annotation = inspect.signature(entry).parameters[name].annotation
    except (KeyError, TypeError, ValueError):
        return set()
    if isinstance(annotation, str):
        text = annotation
        return {part.strip().strip("'\"") for part in text[text.find("[") + 1 : text.rfind("]")].split(",")} if "Literal" in text else _source_strings(entry)
    if typing.get_origin(annotation) is typing.Literal:
        return {str(v) for v in typing.get_args(annotation)}
    return _source_strings(entry)


@functools.lru_cache(maxsize=32)
def _source_strings(entry: Callable[..., Any]) -> set[str]:
    import re

    try:
        source = inspect.getsource(inspect.unwrap(entry))
    except (OSError, TypeError):
        return set()
    return set(re.findall(r"""["']([a-z0-9][a-z0-9_-]*)["']""", source))


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
