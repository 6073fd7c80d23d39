"""trtllm-gen FMHA kernel selection for MLA decode, as flashinfer 0.7.1 – 0.7.2 ship it.

What changed since 0.7.0 (era_0_7_0): `getPaddedMlaTileSizeQ` pads head groups of 1, 2
and 4 to one 8-row tile too (0.7.0 padded only counts that are no power of two), so
sparse MLA with fewer than 8 heads asks for a Q8 kernel instead of a Q1/Q2/Q4 one. The
launchers pass an LSE scale and `run()` hands it to the LSE kernel after the launch;
neither reaches the selection.
"""

from __future__ import annotations

from hprobe.compiled.trtllm_gen import era_0_7_0 as previous
from hprobe.compiled.trtllm_gen.era_0_6_12 import KERNELS, LAUNCHER, RUNNER, GqaVariant
from hprobe.compiled.trtllm_gen.era_0_6_18 import GQA_SELECTOR

FINGERPRINT: dict[str, dict[str, tuple[str, ...]]] = {
    KERNELS: {
        **previous.FINGERPRINT[KERNELS],
        "run": ("cb31ca33d97a5151",),
        "getPaddedMlaTileSizeQ": ("41ba255394f4733d",),
    },
    RUNNER: previous.FINGERPRINT[RUNNER],
    LAUNCHER: {
        "trtllm_paged_attention_launcher": ("8335f39393dd2444",),
        "trtllm_paged_attention_decode": ("7963a7737598e4fc",),
        "trtllm_paged_attention_decode_sparse_mla_dsv4": ("a232cf19d508ce73",),
    },
}


# The GQA/MHA selector as 0.6.18 reads it; the context launcher's new arguments
# (DSv4 epilogue, LSE scale) are off for it.
GQA_VARIANTS = (
    GqaVariant(
        "0.7.1 – 0.7.2",
        {KERNELS: GQA_SELECTOR, LAUNCHER: {"trtllm_paged_attention_context": ("d73ec8c99c6e72a1",)}},
        syncs_traits=True,
    ),
)


class Selection(previous.Selection):
    @staticmethod
    def keeps_heuristic_tile(heads_per_kv: int) -> bool:
        return heads_per_kv >= 128 or (heads_per_kv >= 8 and heads_per_kv & (heads_per_kv - 1) == 0)
