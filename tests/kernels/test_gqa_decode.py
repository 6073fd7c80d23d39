"""kernels/gqa_decode: the CUDA-core decode wrapper's head counts on real
releases, each answer checked against the release's own dispatch macro (read
here from its source, not from hprobe's port)."""

from __future__ import annotations

import re

import pytest

from hprobe.compiled.files import data_dir
from hprobe.support.trees import resolve

DISPATCH_FILE = "include/flashinfer/utils.cuh"


def _dispatch(release: str) -> tuple[set[int], int]:
    """The groups the release's DISPATCH_GQA_GROUP_SIZE names, and the line of its refusal."""
    text = (data_dir(resolve(release).tree / "flashinfer") / DISPATCH_FILE).read_text()
    start = text.index("#define DISPATCH_GQA_GROUP_SIZE(")
    end = text.index("Unsupported group_size", start)
    groups = {int(n) for n in re.findall(r"group_size == (\d+)\)", text[start:end])}
    return groups, text.count("\n", 0, end) + 1


@pytest.mark.slow
def test_cuda_core_decode_takes_the_groups_its_dispatch_names_and_refuses_the_rest(cli_json):
    """bf16, head dim 128, one KV head (h_q is the group): {1, 2, 3, 4, 8} on
    0.6.14 and {1, 2, 3, 4, 6, 8, 16} on 0.7.4 (flashinfer #996, #2684, #3563);
    5, 7 and 12 refused on both with the dispatch's words and place."""
    code, doc, err = cli_json(
        "matrix", "-k", "gqa-decode", "--sm", "100,120", "--heads", "1-17", "--flashinfer", "0.6.14,0.7.4"
    )
    assert code == 0, err
    assert len(doc["results"]) == 4
    for result in doc["results"]:
        groups, line = _dispatch(result["flashinfer_version"])
        assert result["accepted"] == sorted(groups), result["flashinfer_version"]
        assert result["depth"] == "dispatch"
        heads = {h["heads"]: h for h in result["heads"]}
        assert all(heads[g]["entry"] == "get_batch_decode_module.run" for g in groups)
        for refused in set(range(1, 18)) - groups:
            head = heads[refused]
            assert head["outcome"] == "rejected" and head["error_type"] == "compiled check"
            assert head["message"] == f"Unsupported group_size: {refused}"
            assert head["location"].startswith(f"flashinfer/data/{DISPATCH_FILE}:{line} (DISPATCH_GQA_GROUP_SIZE, in ")
    assert {5, 7, 12}.isdisjoint(doc["results"][0]["accepted"])
    assert [r["accepted"] for r in doc["results"] if r["flashinfer_version"] == "0.7.4"][0] == [1, 2, 3, 4, 6, 8, 16]


@pytest.mark.slow
def test_a_count_no_multiple_of_the_kv_heads_is_pending_and_the_group_is_the_quotient(cli_json):
    """Eight KV heads: 12 query heads pass (12 / 8 is group 1 in C++; nothing
    checks the rest), never an `ok` for a gate; 40 is group 5, refused."""
    code, doc, err = cli_json("matrix", "-k", "gqa-decode[kv_heads=8]", "--sm", "100", "--heads", "8,12,40,64")
    assert code == 0, err
    [result] = doc["results"]
    heads = {h["heads"]: h for h in result["heads"]}
    assert result["accepted"] == [8, 12, 64]
    assert "pending" not in heads[8] and "pending" not in heads[64]
    assert "group 1" in heads[12]["pending"] and "no check refuses it" in heads[12]["pending"]
    assert heads[40]["message"] == "Unsupported group_size: 5"


@pytest.mark.pure
def test_engines_calls_of_the_wrapper_are_not_read_until_their_counts_are_followed():
    """`check --repo` finds calls by the names probes answer for: the GQA
    wrapper is answered by `matrix` only, so an engine's call of it is
    neither listed nor judged at a guess."""
    from hprobe.kernels import PROBES, probes_called_as

    assert PROBES["gqa-decode"].called_as == ("BatchDecodeWithPagedKVCacheWrapper",)
    assert "BatchDecodeWithPagedKVCacheWrapper" not in probes_called_as()
    assert "trtllm_batch_decode_with_kv_cache_mla" in probes_called_as()


@pytest.mark.slow
def test_groups_against_head_dims_fit_one_screen(cli):
    """#65's layout: `--pivot head_dim,heads` on the installed release (0.6.14,
    whose dispatch names 1, 2, 3, 4 and 8): one row per head dim."""
    code, out, err = cli(
        "matrix",
        "-k",
        "gqa-decode",
        "--head-dim",
        "64,256",
        "--pivot",
        "head_dim,heads",
        "--heads",
        "5,6,8",
        "--sm",
        "100",
    )
    assert code == 0, err
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip().startswith(("64 ", "256 "))}
    assert rows == {"64": ["✗", "✗", "✓"], "256": ["✗", "✗", "✓"]}


@pytest.mark.slow
def test_tensor_cores_serve_the_groups_the_cuda_core_dispatch_lacks(cli_json):
    """use_tensor_cores=True plans the prefill template, which takes any group
    (no group dispatch): 5, 7 and 12 reach its launch on 0.6.14, where the CUDA
    cores refuse them. Its compiled plan is not read, so a count that is no
    multiple of the KV heads is pending there too."""
    code, doc, err = cli_json(
        "matrix", "-k", "gqa-decode[tensor_cores=1]", "--kv-heads", "1,8", "--sm", "90", "--heads", "5,7,12,40"
    )
    assert code == 0, err
    by = {r["key"]: {h["heads"]: h for h in r["heads"]} for r in doc["results"]}
    one = by["gqa-decode[tensor_cores=1]"]
    assert {h: r["outcome"] for h, r in one.items()} == dict.fromkeys((5, 7, 12, 40), "accepted")
    assert {r["entry"] for r in one.values()} == {"get_batch_prefill_module.paged_run"}
    assert not any(r.get("pending") for r in one.values())
    eight = by["gqa-decode[kv_heads=8,tensor_cores=1]"]
    assert "pending" not in eight[40] and eight[40]["outcome"] == "accepted"  # 40 / 8: group 5
    assert all("no multiple of them" in eight[h]["pending"] for h in (5, 7, 12))
