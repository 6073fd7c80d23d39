"""Synthetic MLA decode inputs shared by the dense-layout probes (DeepSeek V3 shapes).

Only h_q varies between calls of one configuration; the rest is made once per
configuration and reused, so a sweep over 256 head counts allocates little.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

KV_LORA_RANK = 512
QK_ROPE_HEAD_DIM = 64
QK_NOPE_HEAD_DIM = 128
# DeepSeek's 128, GLM-5's 192, a NoPE model's 256 (GLM-5.3-Flash: qk_rope_head_dim 0).
QK_NOPE_HEAD_DIMS = (128, 192, 256)
HEAD_DIM_QK = KV_LORA_RANK + QK_ROPE_HEAD_DIM  # 576
SM120_V32_PACKED_BYTES = 656  # bytes per token of the SM12x DSv3.2 packed KV pool
NUM_PAGES = 4
SEQ_LEN = 128
# Large enough for every backend's scratch (cute-dsl asks for ~8 MiB, trtllm-gen
# reserves an 8 MiB counter region); `empty`, so its pages are never touched.
WORKSPACE_BYTES = 128 * 2**20

DTYPES = ("bf16", "fp8")
# Latent widths of MLA models: DeepSeek V3/V4-style 512, and the smaller 256.
KV_LORA_RANKS = (512, 256)


def torch_dtype(name: str) -> Any:
    import torch

    return {
        "bf16": torch.bfloat16,
        "fp8": torch.float8_e4m3fn,
        "fp16": torch.float16,
        "fp32": torch.float32,
        "int32": torch.int32,
    }[name]


# Workspace dtypes releases have asked for (cute-dsl in 0.6.13 asserts int8).
WORKSPACE_DTYPES = ("uint8", "int8")


# cudaMalloc returns 256-byte aligned memory and validators check it (CAKE asks
# for 128-byte aligned workspaces); the CPU allocator promises only 64.
DEVICE_ALIGNMENT = 256


def aligned(numel: int, dtype: str, zero: bool = False) -> Any:
    """A 1-D tensor of `numel` elements of the torch dtype named `dtype`
    ("uint8", "int8", ...) whose data starts on a DEVICE_ALIGNMENT boundary,
    as a GPU allocation's would."""
    import torch

    torch_type = getattr(torch, dtype)
    size = torch.tensor([], dtype=torch_type).element_size()
    spare = DEVICE_ALIGNMENT // size
    raw = (torch.zeros if zero else torch.empty)(numel + spare, dtype=torch_type)
    offset = (-raw.data_ptr() % DEVICE_ALIGNMENT) // size
    return raw[offset : offset + numel]


@lru_cache(maxsize=2)
def workspace(dtype: str = "uint8") -> Any:
    return aligned(WORKSPACE_BYTES, dtype)


# Bytes of a multi-CTA KV counter buffer: flashinfer needs
# round_up(max(batch * h_q, SMs), 8) * 4 (utils.get_trtllm_gen_multi_ctas_kv_counter_bytes);
# this covers one request at any h_q hprobe probes on any SM count it fakes.
KV_COUNTER_BYTES = 64 * 1024


@lru_cache(maxsize=1)
def kv_counter() -> Any:
    """A zeroed, aligned uint8 counter buffer, as engines allocate it once."""
    return aligned(KV_COUNTER_BYTES, "uint8", zero=True)


def pages_for(page_size: int, seq_len: int = SEQ_LEN) -> int:
    """Pages one sequence of `seq_len` tokens occupies (0.7.x plans check it)."""
    return -(-seq_len // page_size)


@lru_cache(maxsize=32)
def paged_kv(
    dtype: str, page_size: int, packed_bytes: int = 0, kv_lora_rank: int = KV_LORA_RANK, rope: int = QK_ROPE_HEAD_DIM
) -> Any:
    """[pages, 1, page_size, rank + rope] in `dtype` (rope 0: NoPE MLA), or a
    packed uint8 pool of `packed_bytes` per token."""
    import torch

    pages = max(NUM_PAGES, pages_for(page_size))
    if packed_bytes:
        return torch.zeros(pages, 1, page_size, packed_bytes, dtype=torch.uint8)
    return torch.zeros(pages, 1, page_size, kv_lora_rank + rope, dtype=torch_dtype(dtype))


@lru_cache(maxsize=32)
def block_tables(q_len: int, topk: int, page_size: int = 64) -> Any:
    import torch

    if topk:
        return torch.zeros(1, q_len, topk, dtype=torch.int32)
    return torch.zeros(1, max(NUM_PAGES, pages_for(page_size)), dtype=torch.int32)


@lru_cache(maxsize=8)
def seq_lens(shape: tuple[int, ...] = (1,), value: int = SEQ_LEN) -> Any:
    import torch

    return torch.full(shape, value, dtype=torch.int32)


def query(heads: int, dtype: str, q_len: int = 1, dim: int = HEAD_DIM_QK) -> Any:
    """A contiguous zero [1, q_len, heads, dim] tensor: a view of one shared buffer,
    because filling a fresh tensor per call costs more than the call itself."""
    return zeros((1, q_len, heads, dim), dtype)


@lru_cache(maxsize=64)
def _zero_buffer(dtype: str, numel: int) -> Any:
    import torch

    return torch.zeros(numel, dtype=torch_dtype(dtype))


@lru_cache(maxsize=1024)
def zeros(shape: tuple[int, ...], dtype: str) -> Any:
    """Contiguous zeros of `shape`, carved from a shared buffer (read-only use);
    the same view for the same request, since a sweep asks ~50,000 times."""
    numel = 1
    for n in shape:
        numel *= n
    size = 1 << max(numel - 1, 1).bit_length()  # power-of-two buffers, reused across h_q
    return _zero_buffer(dtype, size)[:numel].view(shape)
