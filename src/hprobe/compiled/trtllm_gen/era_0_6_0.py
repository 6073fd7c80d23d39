"""trtllm-gen FMHA kernel selection for MLA decode, as flashinfer 0.6.0 – 0.6.3 ship it.

0.6.4's (era_0_6_4) before skip-softmax kernels: `hashID` has no skipsSoftmax bit
(56), the launcher and decode entry pass no threshold, and the not-found message ends
at sparseMla. Their kernel package (75d477a…, in flashinfer-cubin 0.6.0 – 0.6.3) has
no skip-softmax kernel, so no two rows meet in the narrower key.
"""

from __future__ import annotations

from hprobe.compiled.trtllm_gen import era_0_6_4 as later
from hprobe.compiled.trtllm_gen.era_0_6_12 import KERNELS, LAUNCHER

FINGERPRINT: dict[str, dict[str, tuple[str, ...]]] = {
    **later.FINGERPRINT,
    KERNELS: {
        **later.FINGERPRINT[KERNELS],
        "hashID": ("7e0f57f89914daa3",),
        "hashFromRunnerParams": ("0a698f22b9d501ac",),
    },
    LAUNCHER: {
        "trtllm_paged_attention_launcher": ("14498d73a9bf5eb5",),
        "trtllm_paged_attention_decode": ("3381cb83624864b8",),
    },
}


class Selection(later.Selection):
    HASHES_SKIPS_SOFTMAX = False
