"""MLA prefill through `trtllm_prefill_with_kv_cache_mla` (0.7.1+): the decode
implementation with prefill semantics, probed with several query tokens per
request by default (XQA takes only one; `--q-len 1` probes the decode form)."""

from __future__ import annotations

from dataclasses import replace

from hprobe.kernels.trtllm_mla import TrtllmMLAProbe

# Query tokens per request a prefill caller (chunked prefill, MTP) passes.
PREFILL_Q_LEN = 4


class TrtllmMLAPrefillProbe(TrtllmMLAProbe):
    id = "trtllm-mla-prefill"
    entry_point = "flashinfer.mla.trtllm_prefill_with_kv_cache_mla"
    summary = "MLA prefill / multi-token decode (same backends as trtllm-mla, several query tokens per request)"
    axes = tuple(  # type: ignore[assignment]
        replace(a, default=PREFILL_Q_LEN) if a.name == "q_len" else a for a in TrtllmMLAProbe.axes
    )
