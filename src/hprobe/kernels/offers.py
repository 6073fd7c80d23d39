"""What a loaded release offers, read from its entry point's signature and its own metadata."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Metadata:
    """A release's own claim of support, shown beside the probed answer."""

    source: str  # e.g. "supported_compute_capability", "supported_sparse_mla_sm120_configs()"
    sm_supported: bool | None = None  # None: the metadata says nothing about SMs
    heads: list[int] | None = None  # the h_q it claims, where it has a per-h_q claim

    def to_dict(self) -> dict:
        data: dict[str, Any] = {"source": self.source}
        if self.sm_supported is not None:
            data["sm_supported"] = self.sm_supported
        if self.heads is not None:
            data["heads"] = self.heads
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Metadata:
        return cls(data["source"], data.get("sm_supported"), data.get("heads"))


def sm120_decode_claim(
    session: Any, family_key: str, kv_format: str, heads: list[int], topk: int, tokens: int, page_size: int
) -> list[int] | None:
    """The h_q `supported_sparse_mla_sm120_configs()` (0.7.x) claims SM12x decode
    kernels for, for one model family and KV format at this top-k, token count
    and page size; None where the release publishes no such claim."""
    query = session.resolve("flashinfer.mla.supported_sparse_mla_sm120_configs")
    if query is None:
        return None
    try:
        configs = query(kv_cache_format=kv_format)
    except TypeError:  # releases before the kv_cache_format parameter: FP8 only
        if kv_format != "fp8":
            return None
        configs = query()
    family = configs.get(family_key)
    if family is None:
        return None
    return [
        h for h in heads if family.supports_decode(num_heads=h, topk=topk, num_tokens=tokens, page_block_size=page_size)
    ]


def missing_parameter(entry: Callable[..., Any], name: str) -> str | None:
    """A reason when `entry` has no parameter `name` (the release predates it)."""
    try:
        params = inspect.signature(entry).parameters
    except (TypeError, ValueError):
        return None
    return (
        None
        if name in params
        else f"this release's {getattr(entry, '__name__', 'entry point')} has no {name!r} parameter"
    )


def capability_metadata(entry: Callable[..., Any], sm: Any, backend: Any = None) -> Any:
    """The entry point's `supported_compute_capability` / `backend_requirement`
    claim for `sm` (and `backend`), or None when it carries none."""
    candidates: list[Any] = []
    obj: Any = entry
    if isinstance(obj, type):
        obj = getattr(obj, "__init__")  # noqa: B009 - the claim decorates the constructor
    while obj is not None and obj not in candidates:
        candidates.append(obj)
        obj = getattr(obj, "__wrapped__", None)
    for fn in candidates:
        if backend not in (None, "auto") and callable(getattr(fn, "is_backend_supported", None)):
            try:
                return Metadata(
                    "backend_requirement.is_backend_supported", bool(fn.is_backend_supported(backend, sm.number))
                )
            except Exception:  # noqa: BLE001 - a decorator without backend choices raises
                pass
        if callable(getattr(fn, "is_compute_capability_supported", None)):
            try:
                return Metadata("supported_compute_capability", bool(fn.is_compute_capability_supported(sm.number)))
            except Exception:  # noqa: BLE001
                continue
    return None
