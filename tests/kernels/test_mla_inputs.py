"""kernels/mla_inputs: the synthetic inputs probes hand flashinfer — aligned as a
GPU allocation would be (validators check it), shared where only h_q varies,
zero where a kernel's checks would read them, and shaped as the engines'."""

from __future__ import annotations

import pytest
import torch

from hprobe.kernels import mla_inputs as mi


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32", "bfloat16"])
def test_an_aligned_tensor_starts_on_a_device_boundary_and_has_its_length(dtype):
    for numel in (1, 7, 1000):
        tensor = mi.aligned(numel, dtype)
        assert tensor.data_ptr() % mi.DEVICE_ALIGNMENT == 0
        assert tensor.numel() == numel and tensor.dtype == getattr(torch, dtype)
    assert not mi.aligned(64, dtype, zero=True).any()


def test_the_workspace_and_the_counter_are_made_once_and_the_counter_is_zero():
    assert mi.workspace() is mi.workspace() and mi.workspace().numel() == mi.WORKSPACE_BYTES
    assert mi.workspace("int8").dtype == torch.int8
    counter = mi.kv_counter()
    assert counter is mi.kv_counter() and counter.numel() == mi.KV_COUNTER_BYTES and not counter.any()
    # flashinfer's need at the widest probe: round_up(max(batch * h_q, SMs), 8) * 4 bytes, one request.
    assert mi.KV_COUNTER_BYTES >= -(-max(1 * 4096, 148) // 8) * 8 * 4


def test_zeros_are_the_same_view_for_the_same_request_and_share_one_buffer_across_counts():
    first = mi.zeros((1, 16, 576), "bf16")
    assert first is mi.zeros((1, 16, 576), "bf16")
    assert first.shape == (1, 16, 576) and first.is_contiguous() and not first.any()
    # One power-of-two buffer per size class, not an allocation per head count:
    # 9 and 14 heads (5,184 and 8,064 elements) both fit 8,192; 16 heads (9,216) does not.
    nine, fourteen = mi.zeros((1, 9, 576), "bf16"), mi.zeros((1, 14, 576), "bf16")
    assert nine.untyped_storage().data_ptr() == fourteen.untyped_storage().data_ptr()
    assert first.untyped_storage().data_ptr() != nine.untyped_storage().data_ptr()


def test_shapes_follow_the_engines_and_pages_cover_a_sequence():
    assert mi.HEAD_DIM_QK == 576 and mi.pages_for(64) == 2 and mi.pages_for(32, 100) == 4
    assert mi.query(8, "fp8", q_len=2).shape == (1, 2, 8, 576) and mi.query(8, "fp8").dtype == torch.float8_e4m3fn
    assert mi.paged_kv("bf16", 64).shape == (mi.NUM_PAGES, 1, 64, 576)
    assert mi.paged_kv("bf16", 64, rope=0).shape[-1] == 512  # NoPE MLA
    assert mi.paged_kv("fp8", 64, packed_bytes=mi.SM120_V32_PACKED_BYTES).dtype == torch.uint8
    assert mi.block_tables(1, 2048).shape == (1, 1, 2048) and mi.block_tables(1, 0).shape == (1, mi.NUM_PAGES)
    assert mi.seq_lens().tolist() == [mi.SEQ_LEN] and mi.seq_lens((2,), 7).tolist() == [7, 7]
    assert {mi.torch_dtype(d) for d in mi.DTYPES} == {torch.bfloat16, torch.float8_e4m3fn}
