"""kernels/sm120_sparse_mla: the SM12x sparse-MLA entries on the installed flashinfer
(0.6.14), on CPU: which compiled kernel each count reaches, to the C++ entry's own checks."""

from __future__ import annotations


def _by_outcome(result: dict, outcome: str) -> list[int]:
    return [h["heads"] for h in result["heads"] if h["outcome"] == outcome]


def test_sm120_sparse_mla_reports_which_kernel_each_count_reaches(cli_json):
    code, doc, _ = cli_json("matrix", "-k", "sm120-sparse-mla", "--topk", "128", "--sm", "120")
    assert code == 0
    [result] = doc["results"]
    assert result["depth"] == "dispatch"
    heads = {h["heads"]: h for h in result["heads"]}
    decode = sorted(h for h, r in heads.items() if r.get("entry", "").endswith("sparse_mla_sm120_decode_dsv4"))
    assert decode == [8, 16, 32, 64, 128]
    assert all("slow_path" not in heads[h] for h in decode)
    # Python sends the other decode-sized calls to the paged entry, whose own C++
    # refuses every call of 64 tokens or fewer (csrc/sparse_mla_sm120.cu).
    paged = [h for h in range(1, 129) if h not in decode]
    assert all(heads[h]["outcome"] == "rejected" and heads[h]["error_type"] == "compiled check" for h in paged)
    assert heads[4]["message"].startswith("Decode (num_tokens <= 64) must go through sparse_mla_sm120_decode_dsv3_2")
    assert heads[4]["location"] == "flashinfer/data/csrc/sparse_mla_sm120.cu:261 (SparseMlaSm120PagedAttention)"
    assert _by_outcome(result, "rejected") == [*paged, *range(129, 257)]
    assert heads[129]["message"] == "max_num_heads must be in (0, 128], got 129"


def test_sm120_sparse_mla_prefill_tokens_take_the_general_kernel_without_a_slow_mark(cli_json):
    _, doc, _ = cli_json("matrix", "-k", "sm120-sparse-mla", "--tokens", "65", "--sm", "120", "--heads", "8,16,24")
    [result] = doc["results"]
    accepted = [h for h in result["heads"] if h["outcome"] == "accepted"]
    assert {h["entry"] for h in accepted} == {"get_sparse_mla_sm120_module.sparse_mla_sm120_paged_attention"}
    assert not any("slow_path" in h for h in result["heads"])  # prefill has no faster kernel
    # 0.6.14's DSv4 prefill switch instantiates 16, 32, 64 and 128 heads: 8 and 24 have no kernel.
    assert result["accepted"] == [16]
    refused = [h for h in result["heads"] if h["outcome"] == "rejected"]
    assert [h["heads"] for h in refused] == [8, 24]
    assert all(h["message"].startswith("Unsupported sparse-MLA prefill configuration: model=DSV4") for h in refused)
