"""SM120/121 sparse-MLA attention (DSv4, DSv3.2 families) through the runner that
both public SM12x sparse paths use, `_SparseMLAPagedAttentionRunner`.

Which kernel serves a call depends on (h_q, top-k, tokens, page size) together:
the release's Python dispatch sends decode-sized calls whose shape is in a
family's instantiated set to that family's decode kernel and the rest to the
general paged kernel. The getter that holds this dispatch runs for real (its
compiled module is a stand-in), so the probe reports which kernel was reached.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hprobe.kernels import mla_inputs as mi
from hprobe.kernels.base import Axis, KernelProbe, Metadata, PreparedCall, Value
from hprobe.kernels.offers import sm120_decode_claim
from hprobe.model.sm import SM

# family -> (query head dim, packed KV bytes per token)
FAMILIES = {"dsv4": (512, 584), "dsv3.2": (576, 656)}
# family -> its key in `supported_sparse_mla_sm120_configs()` (0.7.x)
CONFIG_KEYS = {"dsv4": "dsv4", "dsv3.2": "dsv3_2"}
D_V = 512
NUM_BLOCKS = 2


def _run(runner_cls: Any, heads: int, family: str, topk: int, tokens: int, page_size: int) -> None:
    import torch

    d_qk, packed = FAMILIES[family]
    runner = runner_cls(max_num_tokens=tokens, max_num_heads=heads, device=torch.device("cpu"))
    runner.run(
        mi.zeros((tokens, heads, d_qk), "bf16"),
        torch.zeros(NUM_BLOCKS, page_size, packed, dtype=torch.uint8),
        torch.zeros(tokens, topk, dtype=torch.int32),
        torch.empty(tokens, heads, D_V, dtype=torch.bfloat16),  # written by the kernel
        1.0 / d_qk**0.5,
        topk_length=torch.full((tokens,), topk, dtype=torch.int32),
    )


class SM120SparseMLAProbe(KernelProbe):
    id = "sm120-sparse-mla"
    entry_point = "flashinfer.mla._sparse_mla_sm120._SparseMLAPagedAttentionRunner"
    # SGLang calls the function the runner's run() forwards to (every check of
    # the function runs under the runner too; the runner adds its own sizing).
    also_called_as = ("_sparse_mla_sm120_paged_attention",)
    default_sms = (120, 121)
    summary = "SM12x sparse-MLA decode/prefill (DSv4, DSv3.2): which kernel serves each h_q"
    axes = (
        Axis("family", "dsv4", tuple(FAMILIES), help="model family (query head dim and KV packing)"),
        Axis("topk", 128, help="sparse top-k (index width)"),
        Axis("tokens", 1, help="query tokens per call (decode <= 64 < prefill)"),
        Axis("page_size", 64, help="KV cache page size"),
    )

    def dispatch_depth(self, entry: str) -> bool:
        return entry.endswith(
            ("sparse_mla_sm120_paged_attention", "sparse_mla_sm120_decode_dsv4", "sparse_mla_sm120_decode_dsv3_2")
        )

    def compiled_checks(self, entry: str) -> str | None:
        return "tile and split limits of the chosen kernel are checked in compiled code"

    def path(self, entry: str, config: dict[str, Value]) -> str | None:
        # Only a launch of the general kernel says "slow"; a stop anywhere else
        # (a decode kernel, or a compiled policy query) claims nothing.
        if entry.endswith("sparse_mla_sm120_paged_attention") and int(config["tokens"]) <= 64:
            return "general paged kernel, not a decode kernel: off the fast path"
        return None

    def metadata(
        self, session: Any, entry: Callable[..., Any], sm: SM, config: dict[str, Value], heads: list[int]
    ) -> Metadata | None:
        """`supported_sparse_mla_sm120_configs()` where the release has it: the
        decode-kernel envelope it claims for this family, top-k and token count.
        Shown beside the probe, which reports where calls really went."""
        claim = super().metadata(session, entry, sm, config, heads)
        decode = sm120_decode_claim(
            session,
            CONFIG_KEYS[str(config["family"])],
            "fp8",
            heads,
            int(config["topk"]),
            int(config["tokens"]),
            int(config["page_size"]),
        )
        if decode is None:
            return claim
        return Metadata(
            "supported_sparse_mla_sm120_configs() decode kernels",
            claim.sm_supported if claim else None,
            decode,
        )

    def prepare(
        self, entry: Callable[..., Any], sm: SM, heads: int, config: dict[str, Value], alternative: int = 0
    ) -> PreparedCall:
        return PreparedCall(
            _run,
            {
                "runner_cls": entry,
                "heads": heads,
                "family": str(config["family"]),
                "topk": int(config["topk"]),
                "tokens": int(config["tokens"]),
                "page_size": int(config["page_size"]),
            },
        )
