"""The registry of kernel probes: one module per probe, one line here each."""

from __future__ import annotations

from ..errors import InputError
from .base import KernelProbe
from .dsv4_sparse_mla import DSv4SparseMLAProbe

PROBES: dict[str, KernelProbe] = {p.id: p for p in (DSv4SparseMLAProbe(),)}


def get_probe(kernel_id: str) -> KernelProbe:
    try:
        return PROBES[kernel_id]
    except KeyError:
        known = ", ".join(sorted(PROBES))
        raise InputError(f"unknown kernel {kernel_id!r} (known: {known}; see `hprobe kernels`)") from None
