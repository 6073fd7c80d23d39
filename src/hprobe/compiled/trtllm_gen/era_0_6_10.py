"""trtllm-gen FMHA kernel selection for decode, as flashinfer 0.6.10 – 0.6.10.post1 ship it.

The release before 0.6.11 (era_0_6_11), whose kernel package (1348506…)
flashinfer-cubin 0.6.10 carries. Its selection is 0.6.11's; what differs is which
rows `loadKernels` takes: one K/V dtype (`mDataTypeKv`: the table has no separate K
and V fields yet), and every kernel named "Sage" skipped (SageAttention kernels share
their hash with the plain ones). The rest of what changed in 0.6.11 (SageAttention
parameters at launch, the runner cache's key, a causal flag for context: 0.6.10's
context kernels are always causal, as the port takes them) reaches no decode selection.
"""

from __future__ import annotations

from hprobe.compiled.table import KernelMeta
from hprobe.compiled.trtllm_gen import era_0_6_11 as later
from hprobe.compiled.trtllm_gen.era_0_6_12 import KERNELS, LAUNCHER, RUNNER, GqaVariant

FINGERPRINT: dict[str, dict[str, tuple[str, ...]]] = {
    KERNELS: {
        **later.FINGERPRINT[KERNELS],
        "TllmGenFmhaKernel": ("743e763c624781a4",),
        "loadKernels": ("5c2d67e59f249f9e",),
        "hashID": ("bbb500c75acaea7c",),  # the factory's runner key differs; the kernel's hash as 0.6.11's
        "run": ("7f631719d79b4cbd",),  # no SageAttention parameters; the selection loop as 0.6.11's
        "hashFromRunnerParams": ("d361b6c26b65d83e",),  # its debug log only
    },
    RUNNER: {"TllmGenFmhaRunner": ("7a923d82e4bbaf35",)},
    LAUNCHER: {
        "trtllm_paged_attention_launcher": ("853c7304c8722a2e",),
        "trtllm_paged_attention_decode": ("863c4513b180fc23",),
    },
}


# The GQA/MHA selector reads one KV dtype (`mDtypeQ != mDtypeKv`, 0.6.11 compares K
# and V apiece: the same test for a paged cache, one dtype for both); the cost model
# and selectKernel around it as 0.6.11's; context kernels always causal.
GQA_VARIANTS = (
    GqaVariant(
        "0.6.10 – 0.6.10.post1",
        {
            KERNELS: {
                "selectGqGenerationKernel": ("96d59a7784fe1d6a",),
                "selectTileSizeQForGqaGeneration": ("638e484dc46bb525",),
            },
            LAUNCHER: {"trtllm_paged_attention_context": ("4181b4a9e38b16ef",)},
        },
        syncs_traits=False,
    ),
)


class Selection(later.Selection):
    TABLE_FIELDS = ("mDataTypeKv", "mSparseAttn")

    def _loads(self, row: KernelMeta, compatible: tuple[str, ...], q: str, k: str, v: str, o: str) -> bool:
        # k == v: the launcher asks for the runner of (q, kv, o).
        return "Sage" not in row.name and row.sm in compatible and (row.dtype_q, row.dtype_kv, row.dtype_o) == (q, k, o)
