"""kernels/trtllm_mla on fetched releases: the cake backend where the release
has it, refused by name where it does not take the architecture or dtype, and
absent (never rejected) where the release has no such backend."""

from __future__ import annotations

import pytest

from .conftest import by_key

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("fetched_cache")]


def test_dense_mla_on_cake_is_probed_where_the_release_has_it(cli_json):
    """0.7.4's `trtllm_batch_decode_with_kv_cache_mla(backend="cake")` (Kimi K3's
    drafter asks for it, with every draft token folded into heads): on SM100 an
    FP8 call of any count runs into a compiled CAKE kernel, 384 heads (96 x 4
    tokens) included; on SM120 the kernel generator refuses the architecture
    by name; 0.6.14 has no such backend, said as absent, never as rejected."""
    key = "trtllm-mla[backend=cake,dtype=fp8]"
    heads = "1-8,12,16,24,32,48,64,96,128,384"
    _, doc, _ = cli_json("matrix", "--flashinfer", "0.7.4", "--sm", "100,120", "--kernel", key, "--heads", heads)
    sm100, sm120 = by_key(doc, 100)[key], by_key(doc, 120)[key]
    assert {r["outcome"] for r in sm100.values()} == {"accepted"} and 384 in sm100
    assert all("cake" in r["entry"] for r in sm100.values()), {r["entry"] for r in sm100.values()}
    assert {r["outcome"] for r in sm120.values()} == {"unsupported-arch"}
    # The BF16 call: refused by cake's own dtype check, where the Blackwell family does not take the count.
    _, bf16, _ = cli_json(
        "matrix", "--flashinfer", "0.7.4", "--sm", "100", "--kernel", "trtllm-mla[backend=cake]", "--heads", "8,96"
    )
    refused = by_key(bf16, 100)["trtllm-mla[backend=cake]"]
    assert all(r["outcome"] == "rejected" and "float8_e4m3fn" in r["message"] for r in refused.values())
    _, old, _ = cli_json("matrix", "--sm", "100", "--kernel", key, "--heads", "8,96")
    assert {r["outcome"] for r in by_key(old, 100)[key].values()} == {"absent"}


def test_a_nope_call_is_probed_with_its_own_dimensions_and_top_k_lengths(cli_json):
    """GLM-5.3-Flash's call (qk_rope_head_dim 0, qk_nope_head_dim 256, the query
    and cache 512 wide): 0.7.4 routes it to trtllm-gen where the engine hands the
    per-token top-k lengths and refuses it by its own check where it does not;
    0.6.14 has no such dimensions and no such parameter, each said as such."""
    nope = "trtllm-mla[backend=trtllm-gen,topk=2048,qk_nope_head_dim=256,qk_rope_head_dim=0"
    with_lens, without = f"{nope},topk_lens=1]", f"{nope}]"
    heads = "8,16,32,64,96,128"
    _, doc, _ = cli_json("matrix", "--flashinfer", "0.7.4", "--sm", "100", "--kernel", with_lens, "--heads", heads)
    rows = by_key(doc, 100)[with_lens]
    assert {h for h, r in rows.items() if r["outcome"] == "accepted"} == {8, 16, 32, 64, 128}
    assert rows[96]["outcome"] == "rejected" and "64 < num_heads_q < 128" in rows[96]["message"]
    assert all("trtllm_paged_attention_decode" in rows[h]["entry"] for h in (8, 64, 128))
    _, bare, _ = cli_json("matrix", "--flashinfer", "0.7.4", "--sm", "100", "--kernel", without, "--heads", "8,64")
    refused = by_key(bare, 100)[without]
    # Refused whatever the count: the configuration, not the heads.
    assert all(
        r["outcome"] == "unsupported-config" and "sparse_mla_top_k_lens" in r["message"] for r in refused.values()
    )
    # 0.6.14 (installed): its shape check names the dimensions it has; the lengths are no parameter of it.
    _, old, _ = cli_json("matrix", "--sm", "100", "--kernel", without, "--heads", "8,64")
    old_rows = by_key(old, 100)[without]
    assert all(
        r["outcome"] == "unsupported-config" and "Unsupported MLA dimensions" in r["message"] for r in old_rows.values()
    )
    _, old_lens, _ = cli_json("matrix", "--sm", "100", "--kernel", with_lens, "--heads", "8")
    assert {r["outcome"] for r in by_key(old_lens, 100)[with_lens].values()} == {"absent"}
