"""`SparseMlaSm120PagedAttention` as flashinfer 0.6.18 - 0.6.18.post1 ship it:
the entry and its helpers read as in 0.6.14; the DSV4 prefill dispatch takes
8 heads (a padded 16-head tile) in both dispatchers, and top-k 192 and 256 in
the single-cache one (`csrc/sparse_mla_sm120_prefill.cu`)."""

from __future__ import annotations

from hprobe.compiled.sm120_sparse import era_0_6_14
from hprobe.compiled.sm120_sparse.era_0_6_14 import ENTRY, PREFILL

FINGERPRINT: dict[str, dict[str, frozenset[str]]] = {
    ENTRY: era_0_6_14.FINGERPRINT[ENTRY],
    PREFILL: {
        "sparse_mla_prefill_dispatch": frozenset({"86f889a4bd95769a"}),
        "dispatch_v32": frozenset({"f2dab2eaeb9b702b"}),
        "dispatch_dsv4_single": frozenset({"696eaf3f1068318b"}),
        "dispatch_dsv4_dual": frozenset({"626e0e11c54b406b"}),
    },
}


class Entry(era_0_6_14.Entry):
    DSV4_SINGLE_HEADS = frozenset({8, 16, 32, 64, 128})
    DSV4_SINGLE_TOPK = frozenset({128, 192, 256, 512, 1024, 2048})
    DSV4_DUAL_HEADS = frozenset({8, 16, 32, 64, 128})
