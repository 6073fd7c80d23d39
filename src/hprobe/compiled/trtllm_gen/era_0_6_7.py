"""trtllm-gen FMHA kernel selection for MLA decode, as flashinfer 0.6.7 – 0.6.7.post3 ship it.

0.6.8's (era_0_6_8), but for one line of `computeCtaAndClusterConfig`: a kernel that
groups query tokens and heads fits `stepQ / numHeadsQPerKv` tokens in a CTA, and 0.6.8
made that at least one. Here it may be 0, and the ceil_div by it that follows is an
integer division by zero: the process dies (SIGFPE) rather than raising.
"""

from __future__ import annotations

from hprobe.compiled.table import KernelMeta
from hprobe.compiled.trtllm_gen import era_0_6_8 as later
from hprobe.compiled.trtllm_gen.era_0_6_12 import KERNELS, LAUNCHER, Refusal, RunnerParams

FINGERPRINT: dict[str, dict[str, tuple[str, ...]]] = {
    **later.FINGERPRINT,
    KERNELS: {**later.FINGERPRINT[KERNELS], "computeCtaAndClusterConfig": ("efbd159ab0291c61",)},
    LAUNCHER: {
        # 0.6.7 - 0.6.7.post1 derive NVFP4 scale-factor strides from the KV strides
        # (post2 reads them from the scale tensors); nothing the selection reads.
        name: (*digests, previous)
        for (name, digests), previous in zip(
            later.FINGERPRINT[LAUNCHER].items(), ("10eff360e8ead760", "bc2b3b7b4031d7cf"), strict=True
        )
    },
}


class Selection(later.Selection):
    def tokens_per_cta_q(self, row: KernelMeta, params: RunnerParams) -> int:
        tokens = row.step_q // params.num_heads_q_per_kv
        if tokens == 0:
            raise Refusal(
                "computeCtaAndClusterConfig",
                f"integer division by zero: numTokensPerCtaQ = stepQ {row.step_q} / numHeadsQPerKv "
                f"{params.num_heads_q_per_kv} = 0 (SIGFPE: the process dies)",
                KERNELS,
                "int numTokensPerCtaQ = kernelMeta.mStepQ / params.mNumHeadsQPerKv",
            )
        return tokens
