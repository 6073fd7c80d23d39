"""The registry of kernel probes: one module per probe, one line here each."""

from __future__ import annotations

import re

from hprobe.kernels.base import KernelProbe, Value, Variant
from hprobe.kernels.batch_mla import BatchMLAProbe
from hprobe.kernels.dsv4_sparse_mla import DSv4SparseMLAProbe
from hprobe.kernels.gqa_decode import GqaDecodeProbe
from hprobe.kernels.gqa_trtllm_context import GqaTrtllmContextProbe
from hprobe.kernels.gqa_trtllm_decode import GqaTrtllmDecodeProbe
from hprobe.kernels.ragged_prefill import RaggedPrefillProbe
from hprobe.kernels.sm120_sparse_mla import SM120SparseMLAProbe
from hprobe.kernels.sm120_sparse_mla_wrapper import SM120SparseMLAWrapperProbe
from hprobe.kernels.sparse_mla_ts import SparseMLATSProbe
from hprobe.kernels.trtllm_mla import TrtllmMLAProbe
from hprobe.kernels.trtllm_mla_prefill import TrtllmMLAPrefillProbe
from hprobe.kernels.xqa_mla import XqaMLAProbe
from hprobe.model.errors import InputError

PROBES: dict[str, KernelProbe] = {
    p.id: p
    for p in (
        DSv4SparseMLAProbe(),
        TrtllmMLAProbe(),
        XqaMLAProbe(),
        BatchMLAProbe(),
        SM120SparseMLAProbe(),
        TrtllmMLAPrefillProbe(),
        SM120SparseMLAWrapperProbe(),
        SparseMLATSProbe(),
        GqaDecodeProbe(),
        GqaTrtllmDecodeProbe(),
        GqaTrtllmContextProbe(),
        RaggedPrefillProbe(),
    )
}

_KEY = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[([^\]]*)\])?$")


def get_probe(kernel_id: str) -> KernelProbe:
    try:
        return PROBES[kernel_id]
    except KeyError:
        known = ", ".join(sorted(PROBES))
        raise InputError(f"unknown kernel {kernel_id!r} (known: {known}; see `hprobe kernels`)") from None


def named_axes(key: str) -> set[str]:
    """The axes a key spells out in brackets: `trtllm-mla[backend=auto]` -> {backend}."""
    m = _KEY.match(key.strip())
    inner = (m.group(2) or "") if m else ""
    return {part.partition("=")[0].strip() for part in inner.split(",") if "=" in part}


def get_variant(key: str, values: dict[str, Value] | None = None) -> Variant:
    """`trtllm-mla[backend=xqa,dtype=fp8]` (or an id plus `values`) -> a Variant."""
    m = _KEY.match(key.strip())
    if not m:
        raise InputError(f"kernel {key!r}: expected an id such as trtllm-mla or trtllm-mla[backend=xqa]")
    probe = get_probe(m.group(1))
    merged: dict[str, Value] = {}
    for part in filter(None, (m.group(2) or "").split(",")):
        name, eq, value = part.partition("=")
        if not eq:
            raise InputError(f"kernel {key!r}: {part!r} is not axis=value")
        merged[name.strip()] = value.strip()
    merged.update(values or {})
    return probe.variant(merged)


def probes_called_as() -> dict[str, str]:
    """FlashInfer name an engine calls -> the id of the probe that answers for it."""
    return {name: probe.id for probe in PROBES.values() if probe.engine_reading for name in probe.called_as}


def probes_not_read() -> dict[str, str]:
    """FlashInfer name -> the id of a probe that answers for the kernel but whose
    calls in engine code hprobe does not read yet (the GQA/MHA entries)."""
    return {name: probe.id for probe in PROBES.values() if not probe.engine_reading for name in probe.called_as}
