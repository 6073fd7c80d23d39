"""model/compiled: a call into trtllm-gen's launcher as a probe makes it, and
the names the kernel table spells its dtypes with."""

from __future__ import annotations

import pytest

from hprobe.model.compiled import PENDING_SELECTION, TRTLLM_GEN_DTYPES, TrtllmGenCall

pytestmark = pytest.mark.pure


def _call(launcher: str, **given) -> TrtllmGenCall:
    fields = dict(
        launcher=launcher,
        dtype_q="DATA_TYPE_E4M3",
        dtype_kv="DATA_TYPE_E4M3",
        dtype_o="DATA_TYPE_BF16",
        head_dim_q=576,
        head_dim_o=512,
        q_len=1,
        page_size=64,
        sparse_mla_top_k=0,
    )
    fields.update(given)
    return TrtllmGenCall(**fields)


@pytest.mark.parametrize(
    ("launcher", "context", "dsv4"),
    [
        ("trtllm_paged_attention_decode", False, False),
        ("trtllm_paged_attention_decode_sparse_mla_dsv4", False, True),
        ("trtllm_paged_attention_context", True, False),
    ],
)
def test_the_launcher_says_the_mode(launcher, context, dsv4):
    call = _call(launcher)
    assert (call.context, call.dsv4) == (context, dsv4)


def test_mla_hands_one_latent_kv_head_unless_told():
    assert _call("trtllm_paged_attention_decode").kv_heads == 0
    assert _call("trtllm_paged_attention_decode", kv_heads=8).kv_heads == 8


def test_every_dtype_a_trtllm_gen_probe_offers_has_the_tables_spelling():
    from hprobe.kernels import PROBES

    offered = {
        str(value)
        for key in ("trtllm-mla", "dsv4-sparse-mla", "gqa-trtllm-decode", "gqa-trtllm-context")
        for axis in PROBES[key].axes
        if axis.name in ("dtype", "kv_dtype")
        for value in axis.choices
        if value != "same"
    }
    assert offered and offered <= set(TRTLLM_GEN_DTYPES)
    assert all(name.startswith("DATA_TYPE_") for name in TRTLLM_GEN_DTYPES.values())
    # The pending note is said in the probes' and compiled depth's words alike.
    assert PENDING_SELECTION.startswith("trtllm-gen's selection")
