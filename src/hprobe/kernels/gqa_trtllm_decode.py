"""GQA/MHA decode through `trtllm_batch_decode_with_kv_cache`, per backend.

`backend="auto"` picks trtllm-gen where the SM major is 10 and XQA elsewhere
(the release's own dispatch, run for real). trtllm-gen's runner takes SM10x
only (its architecture check, read from the release's C++ as for MLA); which
of its kernels serves a group and head dim is its GQA selection
(`selectGqGenerationKernel`), evaluated on the release's kernel table where
hprobe ports the release's code (0.6.10 – 0.7.2.post1, compiled/trtllm_gen): elsewhere
an SM10x count that reaches it is pending, never `ok`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hprobe.kernels import mla_inputs as mi
from hprobe.kernels.base import Axis, KernelProbe, PreparedCall, Value
from hprobe.model.compiled import TRTLLM_GEN_DTYPES, TrtllmGenCall
from hprobe.model.sm import SM

HEAD_DIMS = (64, 128, 256, 512)
# The axes trtllm-gen's paged GQA/MHA entries share (decode and context).
KV_HEADS = Axis("kv_heads", 1, help="KV heads per rank (h_q / kv_heads is the group size; 1: the row reads as groups)")
HEAD_DIM = Axis("head_dim", 128, HEAD_DIMS, help="head dim of Q, K and V")
TRTLLM_GEN_UNCHECKED = "trtllm-gen selects a cubin by group, head dim, dtypes and page size inside compiled code"
XQA_UNCHECKED = "XQA's kernel is compiled for the group and head dim; its compile-time limits are not read"


class GqaTrtllmDecodeProbe(KernelProbe):
    id = "gqa-trtllm-decode"
    entry_point = "flashinfer.decode.trtllm_batch_decode_with_kv_cache"
    default_sms = (90, 100, 103, 120, 121)
    summary = "GQA/MHA decode through trtllm_batch_decode_with_kv_cache (trtllm-gen on SM10x, XQA elsewhere)"
    # Engines' calls of this entry are not read yet: its count is not followed.
    engine_reading = False
    axes = (
        Axis("backend", "auto", ("auto", "trtllm-gen", "xqa"), sweep=True, help="flashinfer backend"),
        KV_HEADS,
        HEAD_DIM,
        Axis("dtype", "bf16", mi.DTYPES, help="query and KV cache dtype (fp8: both e4m3, a bf16 output)"),
        Axis("q_len", 1, help="query tokens per request (MTP)"),
        Axis("page_size", 32, help="KV cache page size"),
        # gpt-oss passes one learned sink per query head.
        Axis("sinks", 0, (0, 1), help="1 = pass attention sinks, one float32 per query head, as gpt-oss does"),
    )
    compiled_launchers = ("get_trtllm_gen_fmha_module",)

    def families(self, config: dict[str, Value] | None = None) -> set[int]:
        by_backend = {"trtllm-gen": {10}, "xqa": {9, 12}}
        return by_backend.get(str((config or {}).get("backend")), {9, 10, 12})

    def compiled_checks(self, entry: str) -> str | None:
        if entry.startswith(self.compiled_launchers):
            return TRTLLM_GEN_UNCHECKED
        if "xqa" in entry:
            return XQA_UNCHECKED
        return None

    def compiled_call(self, entry: str, config: dict[str, Value]) -> TrtllmGenCall | None:
        if not entry.startswith(self.compiled_launchers):
            return None
        dtype = str(config["dtype"])
        return paged_call("trtllm_paged_attention_decode", config, dtype, dtype)

    def prepare(
        self, entry: Callable[..., Any], sm: SM, heads: int, config: dict[str, Value], alternative: int = 0
    ) -> PreparedCall:
        import torch

        dtype, q_len = str(config["dtype"]), int(config["q_len"])
        head_dim = int(config["head_dim"])
        kwargs = paged_inputs(heads, config, dtype, dtype, mi.SEQ_LEN)
        kwargs |= {"max_seq_len": mi.SEQ_LEN, "q_len_per_req": q_len}
        if dtype == "fp8":
            kwargs["out"] = mi.zeros((q_len, heads, head_dim), "bf16")
        if int(config["sinks"]):
            kwargs["sinks"] = torch.zeros(heads, dtype=torch.float32)
        if str(config["backend"]) != "auto":
            kwargs["backend"] = str(config["backend"])
        return PreparedCall(entry, kwargs)


def paged_inputs(heads: int, config: dict[str, Value], dtype: str, kv_dtype: str, kv_len: int) -> dict[str, Any]:
    """What trtllm-gen's paged GQA/MHA entries take alike: `q_len` query tokens
    of `heads` heads, one request's `kv_len` tokens over pages of the config's
    size (HND, the entries' default layout: [pages, K/V, kv heads, page, head dim])."""
    import torch

    head_dim, kv_heads = int(config["head_dim"]), int(config["kv_heads"])
    q_len, page_size = int(config["q_len"]), int(config["page_size"])
    pages = mi.pages_for(page_size, kv_len)
    return {
        "query": mi.zeros((q_len, heads, head_dim), dtype),
        "kv_cache": mi.zeros((pages, 2, kv_heads, page_size, head_dim), kv_dtype),
        "workspace_buffer": mi.workspace(),
        "block_tables": torch.arange(pages, dtype=torch.int32).reshape(1, pages),
        "seq_lens": mi.seq_lens(value=kv_len),
    }


def paged_call(launcher: str, config: dict[str, Value], dtype: str, kv_dtype: str) -> TrtllmGenCall:
    """The call a paged GQA/MHA entry makes into trtllm-gen's `launcher` (a bf16 output)."""
    head_dim = int(config["head_dim"])
    return TrtllmGenCall(
        launcher,
        TRTLLM_GEN_DTYPES[dtype],
        TRTLLM_GEN_DTYPES[kv_dtype],
        TRTLLM_GEN_DTYPES["bf16"],
        head_dim,
        head_dim,
        int(config["q_len"]),
        int(config["page_size"]),
        0,
        kv_heads=int(config["kv_heads"]),
    )
