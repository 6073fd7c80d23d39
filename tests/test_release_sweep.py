"""The release sweep self-check: every declared variant x eight releases x
SM90/100/103/120/121 x h_q 1..256, against facts read in each release's own
source (file:line in the comments are that release's).

Wheels are fetched once per machine (hprobe's cache); results are cached by
wheel hash, probe version and hprobe version, so a warm run imports nothing.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

RELEASES = ("0.6.12", "0.6.13", "0.6.14", "0.6.16", "0.6.18", "0.7.0", "0.7.2.post1", "0.7.4")
SMS = "90,100,103,120,121"
DEFINITE = {"accepted", "rejected", "unsupported-arch", "unsupported-config", "absent"}
# Inconclusive for a cause that lies in this machine (its dependencies, CPU
# tensors), never one in the probe's inputs: typed, not read from the words.
MACHINE = {"environment", "device"}


@pytest.fixture(scope="module")
def sweep(request):
    import json

    from typer.testing import CliRunner

    from hprobe.cli.app import app

    result = CliRunner().invoke(
        app, ["matrix", "--flashinfer", ",".join(RELEASES), "--sm", SMS, "--json"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    return {(r["flashinfer_version"], r["key"], r["sm"]): r for r in doc["results"]}


def _accepted(sweep, release, key, sm):
    return set(sweep[(release, key, sm)]["accepted"])


def test_every_release_and_variant_was_probed(sweep):
    versions = {v for v, _, _ in sweep}
    assert versions == set(RELEASES)
    keys = {k for _, k, _ in sweep}
    assert {
        "dsv4-sparse-mla",
        "trtllm-mla[backend=cute-dsl]",
        "batch-mla[backend=trtllm-gen]",
        "sm120-sparse-mla",
    } <= keys


def test_no_variant_is_inconclusive_everywhere_for_want_of_inputs(sweep):
    """A variant whose entry point exists in a release must get a definite
    answer on some SM, unless what stops it is this machine (an import that
    fails beside today's dependencies, a check on the tensors' device)."""
    by_variant: dict[tuple[str, str], list[dict]] = {}
    for (version, key, _), result in sweep.items():
        by_variant.setdefault((version, key), []).append(result)
    defects = []
    for (version, key), results in by_variant.items():
        outcomes = {h["outcome"] for r in results for h in r["heads"]}
        if outcomes == {"inconclusive"}:
            causes = {h.get("cause") for r in results for h in r["heads"]}
            if not causes <= MACHINE:
                reasons = sorted(
                    {h.get("reason") or "" for r in results for h in r["heads"] if h.get("cause") not in MACHINE}
                )
                defects.append(f"{version} {key}: cause {sorted(map(str, causes - MACHINE))}: {reasons[0][:200]}")
    assert not defects, "\n".join(defects)


def test_definite_share_per_release(sweep):
    """Most cells are definite on every release; the rest are named above."""
    for version in RELEASES:
        cells = [h["outcome"] for (v, _, _), r in sweep.items() if v == version for h in r["heads"]]
        share = sum(o in DEFINITE for o in cells) / len(cells)
        assert share >= 0.9, f"{version}: {share:.1%} definite"


def test_thin_forwarder_backends_are_probed_not_absent(sweep):
    # 0.7.4 mla/_core.py:3884-3892: the implementation behind the forwarder takes
    # trtllm-gen, cute-dsl and xqa; its own checks decide the head counts.
    assert _accepted(sweep, "0.7.4", "trtllm-mla[backend=trtllm-gen]", 100) == set(range(1, 65)) | set(range(128, 257))
    assert _accepted(sweep, "0.7.4", "trtllm-mla[backend=cute-dsl]", 100) == set(range(1, 129))
    assert _accepted(sweep, "0.7.4", "trtllm-mla[backend=xqa]", 120) == {128}
    for version in ("0.7.2.post1", "0.7.4"):
        assert not any(
            sweep[(version, k, sm)]["status"] == "absent"
            for k in ("trtllm-mla[backend=trtllm-gen]", "trtllm-mla[backend=cute-dsl]", "trtllm-mla[backend=xqa]")
            for sm in (100, 120)
        )


def test_batch_mla_plans_consistent_pages_and_backends_present(sweep):
    # 0.7.4 mla/_batch_mla/_planning.py:139 checks kv_indptr pages against
    # ceil(kv_len / page_size); with consistent inputs auto and fa2 take every h_q.
    for key in ("batch-mla", "batch-mla[backend=fa2]"):
        assert _accepted(sweep, "0.7.4", key, 100) == set(range(1, 257))
    assert _accepted(sweep, "0.7.4", "batch-mla[backend=trtllm-gen]", 100) == set(range(1, 65)) | set(range(128, 257))
    assert _accepted(sweep, "0.7.4", "batch-mla[backend=cutlass]", 100) == {128}
    # 0.6.12/0.6.13 name fa2/fa3 only in double-backticked docs; they are there.
    for version in ("0.6.12", "0.6.13"):
        assert _accepted(sweep, version, "batch-mla[backend=fa2]", 90) == set(range(1, 257))
        assert _accepted(sweep, version, "batch-mla[backend=fa3]", 90) == set(range(1, 257))
        # gen_batch_mla_module: `raise ValueError(f"Unsupported backend: {backend}")`
        assert sweep[(version, "batch-mla[backend=xqa]", 100)]["status"] == "absent"


def test_sm12x_module_refused_by_the_jit_arch_check_elsewhere(sweep):
    # 0.6.14 jit/mla.py:35-43 asks for supported_major_versions=[12];
    # compilation_context.py:94-96 raises when the device's arch list has none.
    for sm in (90, 100, 103):
        result = sweep[("0.6.14", "sm120-sparse-mla", sm)]
        assert result["status"] == "unsupported-arch"
        assert result["heads"][0]["location"].startswith("flashinfer/compilation_context.py")
    # On SM120, one token: the decode dispatch's counts (0.6.14 _sparse_mla_sm120.py
    # _DECODE_DSV4_DISPATCH at top-k 128) reach a decode kernel; every other
    # count goes to the paged entry, whose C++ refuses decode-sized calls
    # (csrc/sparse_mla_sm120.cu: TVM_FFI_ICHECK_GT(num_tokens, 64)).
    assert _accepted(sweep, "0.6.14", "sm120-sparse-mla", 120) == {8, 16, 32, 64, 128}


def test_dsv4_validator_history(sweep):
    # 0.6.13: "Expected 64 or 128 query heads"; 0.6.14 relaxed it to 8..128 powers of two.
    assert _accepted(sweep, "0.6.13", "dsv4-sparse-mla", 100) == {64, 128}
    for version in RELEASES[2:]:
        assert _accepted(sweep, version, "dsv4-sparse-mla", 100) == {8, 16, 32, 64, 128}
    # 0.7.x SM12x stops at the compiled policy query resolve_format: partial, said so.
    result = sweep[("0.7.4", "dsv4-sparse-mla", 120)]
    assert result["depth"] == "partial"
    assert any(n.startswith("partial:") for n in result["notes"])


def test_fp8_kv_scales_only_where_run_takes_them(cli_json):
    # 0.6.13 mla/_core.py:872-919: run() takes no ckv_scale/kpe_scale; an fp8 KV
    # cache with a bf16 query is accepted for every h_q on SM90 by fa2 and fa3.
    _, doc, _ = cli_json(
        "matrix", "-k", "batch-mla", "--dtype", "fp8", "--backend", "fa2,fa3", "--sm", "90", "--flashinfer", "0.6.13"
    )
    by = {r["key"]: r for r in doc["results"]}
    for key in ("batch-mla[backend=fa2,dtype=fp8]", "batch-mla[backend=fa3,dtype=fp8]"):
        assert set(by[key]["accepted"]) == set(range(1, 257)), by[key]["heads"][0]


def test_dsv4_cute_dsl_gets_hca_inputs(cli_json):
    # 0.7.4 mla/_core.py:2296-2309: cute-dsl takes explicit HCA metadata, no
    # sparse_indices or seq_lens; batch_hca.py:438 wants an FP8 query. The probe
    # honours --dtype: a BF16 query is refused whatever h_q is (a check the FP8
    # variant passes), and with FP8 the call gets past the query's device check
    # (batch_hca.py:441) on tensors that report a CUDA device, and past
    # `torch.cuda.device` (faked like the device queries), to the CuTe DSL
    # compile: decided, never an input misfit.
    _, doc, _ = cli_json(
        "matrix",
        "-k",
        "dsv4-sparse-mla",
        "--backend",
        "cute-dsl",
        "--dtype",
        "bf16,fp8",
        "--sm",
        "100",
        "--heads",
        "8,64,129",
        "--flashinfer",
        "0.7.4",
    )
    by = {r["key"]: r for r in doc["results"]}
    assert by["dsv4-sparse-mla[backend=cute-dsl]"]["status"] == "unsupported-config"
    fp8 = {h["heads"]: h for h in by["dsv4-sparse-mla[backend=cute-dsl,dtype=fp8]"]["heads"]}
    assert fp8[8]["outcome"] == fp8[64]["outcome"] == "accepted" and fp8[8]["entry"].startswith("cute.compile.")
    assert fp8[129]["outcome"] == "rejected" and "num_heads must be in [1, 128]" in fp8[129]["message"]


def test_cute_dsl_workspace_dtype_of_0_6_13(sweep):
    # 0.6.13 cute_dsl/attention/monolithic/mla_decode.py:440 asserts an int8 workspace.
    assert _accepted(sweep, "0.6.13", "trtllm-mla[backend=cute-dsl]", 100) == set(range(1, 129))


def test_dispatch_getter_runs_for_real_and_config_refusals(cli_json):
    # 0.6.18 mla/_sparse_mla_sm120.py:388-395: get_sparse_mla_sm120_module raises
    # "no decode kernel for this shape" in Python for top-k 2048 off the decode set.
    _, doc, _ = cli_json("matrix", "-k", "trtllm-mla", "--topk", "2048", "--sm", "120,121", "--flashinfer", "0.6.18")
    for r in doc["results"]:
        if r["key"] == "trtllm-mla[topk=2048]":
            assert set(r["accepted"]) == {8, 16, 32, 64, 128}
        if r["key"] == "trtllm-mla[backend=xqa,topk=2048]":
            # "XQA MLA does not support sparse_mla_top_k": a configuration refusal.
            assert r["status"] == "unsupported-config"
    _, doc, _ = cli_json(
        "matrix", "-k", "trtllm-mla[backend=xqa]", "--q-len", "2", "--sm", "120", "--flashinfer", "0.7.4"
    )
    [r] = doc["results"]
    assert r["status"] == "unsupported-config"
    assert "q_len" in r["heads"][0]["message"]


def test_smaller_latent_rank(cli_json):
    _, doc, _ = cli_json(
        "matrix",
        "-k",
        "trtllm-mla",
        "-k",
        "trtllm-mla[backend=cute-dsl]",
        "--kv-lora-rank",
        "256",
        "--sm",
        "100",
        "--flashinfer",
        "0.6.14,0.6.16",
    )
    results = {(r["flashinfer_version"], r["key"]): r for r in doc["results"]}
    old, new = results[("0.6.14", "trtllm-mla[kv_lora_rank=256]")], results[("0.6.16", "trtllm-mla[kv_lora_rank=256]")]
    assert old["depth"] == new["depth"] == "compiled"
    old_heads, new_heads = ({h["heads"]: h for h in r["heads"]} for r in (old, new))
    # 0.6.14's validators take every h_q at rank 256; trtllm-gen's selection (head
    # dims 320/256) puts 17-31 heads in 16-head tiles and refuses the remainder.
    # A count with a shape left to a run-time answer (the CGA fallback) is inconclusive, that cause named.
    assert all(
        h["outcome"] == "accepted" or h.get("error_type") == "compiled check" or h.get("cause") == "runtime"
        for h in old_heads.values()
    )
    assert all(old_heads[n]["message"] == "The numHeadsQ/numHeadsKv is not supported." for n in range(17, 32))
    # From 0.6.16 auto routes the 256 latent to trtllm-gen, which refuses 64 < h_q
    # < 128 in Python (0.6.16 mla/_core.py, "trtllm-gen MLA decode does not support
    # 64 < num_heads_q < 128"); its selection pads 17-31 heads to one 32-head tile.
    assert all("64 < num_heads_q < 128" in (new_heads[n]["message"] or "") for n in range(65, 128))
    for n in range(17, 33):
        # Launched at every decided shape; where one is left to the run-time
        # CGA fallback, inconclusive with that said (never refused).
        assert n in new["accepted"] or (
            new_heads[n].get("cause") == "runtime" and "a kernel launches at" in new_heads[n]["reason"]
        ), new_heads[n]
    # cute-dsl "cannot implement this configuration" for every h_q at rank 256,
    # a check it passes at rank 512: a configuration refusal.
    for version in ("0.6.14", "0.6.16"):
        assert results[(version, "trtllm-mla[backend=cute-dsl,kv_lora_rank=256]")]["status"] == "unsupported-config"


def test_published_claims_are_shown_beside_the_probe_with_disagreements(cli_json):
    _, doc, _ = cli_json(
        "matrix",
        "-k",
        "dsv4-sparse-mla[kv_format=nvfp4]",
        "-k",
        "trtllm-mla",
        "--sm",
        "100,120",
        "--flashinfer",
        "0.7.4",
    )
    results = {(r["key"], r["sm"]): r for r in doc["results"]}
    nvfp4 = results[("dsv4-sparse-mla[kv_format=nvfp4]", 120)]
    # supported_sparse_mla_sm120_configs(kv_cache_format="nvfp4") lists 8, while
    # 0.7.4 mla/_core.py:1340 raises "NVFP4 sparse MLA does not yet support 8 query heads".
    assert nvfp4["metadata"]["heads"] == [8, 16, 32, 64, 128]
    assert nvfp4["accepted"] == [16, 32, 64, 128]
    assert any(n.startswith("disagreement:") and "{8}" in n for n in nvfp4["notes"])
    dense = results[("trtllm-mla", 100)]
    # mla/_core.py:74 supported_mla_layer_dimensions: 128 and 64 heads at rank 512.
    assert dense["metadata"]["source"] == "supported_mla_layer_dimensions"
    assert dense["metadata"]["heads"] == [64, 128]


def test_new_entry_points_and_backends(cli_json, sweep):
    # trtllm_prefill_with_kv_cache_mla arrives in 0.7.1; SparseMLASm120Wrapper in 0.7.0.
    assert sweep[("0.7.0", "trtllm-mla-prefill", 100)]["status"] == "absent"
    assert _accepted(sweep, "0.7.4", "trtllm-mla-prefill[backend=trtllm-gen]", 100) == set(range(1, 65)) | set(
        range(128, 257)
    )
    # "XQA MLA only supports q_len_per_request == 1": auto on SM12x picks XQA,
    # so prefill with 4 query tokens is a configuration refusal there.
    assert sweep[("0.7.4", "trtllm-mla-prefill", 120)]["status"] == "unsupported-config"
    assert sweep[("0.6.18", "sm120-sparse-mla-wrapper", 120)]["status"] == "absent"
    assert _accepted(sweep, "0.7.0", "sm120-sparse-mla-wrapper", 120) == set(range(1, 129))
    _, doc, _ = cli_json(
        "matrix", "-k", "dsv4-sparse-mla[backend=cake,kv_format=nvfp4]", "--sm", "120", "--flashinfer", "0.7.0,0.7.4"
    )
    old, new = doc["results"]
    # 0.7.0 refuses the value itself: "backend must be one of 'auto', ... got 'cake'".
    assert old["status"] == "absent"
    # 0.7.4: the cake head check (mla/_core.py:1328) lets exactly the published heads
    # through; they then stop at "q must be a contiguous CUDA bfloat16 tensor". Made
    # again on tensors that report a CUDA device, they pass every later check and
    # reach the cake kernel: accepted, at a depth that says so, and equal to the
    # release's own claim.
    published = [8, 16, 32, 48, 64, 80, 96, 112, 128]
    assert new["status"] == "accepted" and new["accepted"] == published and new["depth"] == "faked-device"
    assert new["metadata"]["source"] == "cake_sparse_mla_sm120_dsv4_nvfp4_supported_heads()"
    assert new["metadata"]["heads"] == published
    assert any(n.startswith("faked device: h_q {8, 16, 32, 48, 64, 80, 96, 112, 128}") for n in new["notes"])
    heads = {h["heads"]: h for h in new["heads"]}
    assert heads[8]["entry"].startswith("get_cake_sparse_mla_sm120_dsv4_nvfp4_module.")
    assert heads[9]["outcome"] == "rejected" and "mla/_core.py:1328" in heads[9]["location"]


def test_text_groups_rejections_by_their_own_check(cli):
    # 0.7.4 SM120 NVFP4: 8 passes the generic head check and is refused by its own
    # (mla/_core.py:1340); text must not print it under the generic message.
    code, out, _ = cli("matrix", "-k", "dsv4-sparse-mla[kv_format=nvfp4]", "--sm", "120", "--flashinfer", "0.7.4")
    assert code == 0
    lines = [ln.strip() for ln in out.splitlines() if ln.strip().startswith("rejected")]
    assert len(lines) == 2
    assert lines[1].startswith(
        "rejected {8}: ValueError: NVFP4 sparse MLA does not yet support 8 query heads [flashinfer/mla/_core.py:"
    )
    assert "None" not in out


def test_a_value_refused_only_beside_another_setting_is_not_absent(cli_json):
    # 0.6.14: "FP8 kv_data_type for MLA is only supported with the fa3 backend on
    # SM90, got backend='fa2'" names fa2, but fa2 with a bf16 cache is accepted.
    _, doc, _ = cli_json("matrix", "-k", "batch-mla[backend=fa2,dtype=fp8]", "--sm", "90", "--flashinfer", "0.6.14")
    [result] = doc["results"]
    assert result["status"] == "unsupported-config"


def test_a_refusal_in_stages_is_a_configuration_refusal(cli_json):
    # 0.7.4 cutlass_backend.py: the head check (:584 run_planless, :155 plan
    # contract) lets only h_q 128 through; 128 with an fp8 KV cache is then
    # refused by a dtype check (:597/:602 run_planless, :164 plan contract) that
    # the bf16 cache passes. fp8 KV is refused on SM100 whatever h_q is.
    _, doc, _ = cli_json(
        "matrix",
        "-k",
        "batch-mla",
        "--backend",
        "cutlass",
        "--dtype",
        "fp8,bf16",
        "--sm",
        "100",
        "--flashinfer",
        "0.7.4",
    )
    by = {r["key"]: r for r in doc["results"]}
    fp8 = by["batch-mla[backend=cutlass,dtype=fp8]"]
    assert fp8["status"] == "unsupported-config"
    heads = {h["heads"]: h for h in fp8["heads"]}
    # The head check's refusals stay what they are; the count it lets through is the configuration's.
    assert heads[1]["outcome"] == "rejected" and heads[1]["message"] == "Expected 128 heads for cutlass backend, got 1."
    assert heads[128]["outcome"] == "unsupported-config"
    assert "kv_data_type" in heads[128]["message"] and "cutlass_backend.py" in heads[128]["location"]
    assert "batch-mla[backend=cutlass] passes on SM100" in heads[128]["reason"]
    assert by["batch-mla[backend=cutlass]"]["accepted"] == [128]


def test_dsv4_fp8_path(cli_json):
    # SM10x takes a BF16 or FP8 E4M3 query with KV pools of the same dtype
    # (0.6.14 mla/_core.py:344; 0.7.4 mla/_core.py:1005, 1075): FP8 has the bf16
    # head sets. SM12x takes only a BF16 query (0.6.14 mla/_core.py:1046, 0.7.4
    # :1305); 0.6.13 has no SM12x path and checks neither.
    _, doc, _ = cli_json(
        "matrix", "-k", "dsv4-sparse-mla", "--dtype", "fp8", "--sm", "100,120", "--flashinfer", "0.6.13,0.6.14,0.7.4"
    )
    by = {(r["flashinfer_version"], r["sm"]): r for r in doc["results"]}
    assert by[("0.6.13", 100)]["accepted"] == [64, 128]
    for version in ("0.6.14", "0.7.4"):
        assert by[(version, 100)]["accepted"] == [8, 16, 32, 64, 128]
        sm120 = by[(version, 120)]
        assert sm120["status"] == "unsupported-config"
        assert sm120["heads"][0]["message"].startswith("SM120 DSv4 sparse MLA only supports BF16 query")


def test_a_device_check_is_passed_on_tensors_that_report_cuda(cli_json, cli):
    # 0.7.4 xqa_backend.py:120 refuses every h_q but 128 in the plan contract;
    # 128 passes it and stops at xqa_backend.py:65-66, the workspace's device.
    # Made again on tensors that report a CUDA device, 128 meets the checks
    # after it: on SM12x it reaches the XQA kernel (its run needs `out`, which
    # the probe passes); elsewhere xqa_backend.py:69-75 refuses the SM.
    _, doc, _ = cli_json(
        "matrix", "-k", "batch-mla", "--backend", "xqa", "--sm", "90,100,120,121", "--flashinfer", "0.7.4"
    )
    by = {r["sm"]: r for r in doc["results"]}
    for sm in (120, 121):
        heads = {h["heads"]: h for h in by[sm]["heads"]}
        assert by[sm]["accepted"] == [128] and by[sm]["depth"] == "faked-device"
        assert heads[128]["entry"] == "get_xqa_module_mla.xqa_wrapper_mla"
        assert {h for h, r in heads.items() if r["outcome"] == "rejected"} == set(range(1, 257)) - {128}
        assert heads[16]["message"] == "XQA MLA only supports 128 query heads, got 16."
    for sm in (90, 100):
        assert by[sm]["status"] == "unsupported-arch"
        evidence = by[sm]["heads"][127]
        assert (
            evidence["message"].startswith("XQA MLA wrapper requires SM120a")
            and "xqa_backend.py:71" in evidence["location"]
        )
    code, out, _ = cli("matrix", "-k", "batch-mla", "--backend", "xqa", "--sm", "120", "--flashinfer", "0.7.4")
    assert code == 0 and "accepted {128}" in out and "faked CUDA" in out and "None" not in out


def test_dsv4_sm12x_unpacked_caches_are_their_own_answer(cli_json):
    # SM12x DSv4 reads packed uint8 pools; from 0.7.1 also caches of the query's
    # dtype, 512 wide (0.7.4 mla/_core.py:1388-1401). 0.6.14 and 0.7.0 refuse
    # them by the packed row check (_sparse_mla_sm120.py): a configuration refusal,
    # never answered with the packed form's heads.
    _, doc, _ = cli_json(
        "matrix", "-k", "dsv4-sparse-mla[kv_pool=unpacked]", "--sm", "120", "--flashinfer", "0.6.14,0.7.0,0.7.1,0.7.4"
    )
    by = {r["flashinfer_version"]: r for r in doc["results"]}
    for version in ("0.6.14", "0.7.0"):
        assert by[version]["status"] == "unsupported-config", version
        heads = {h["heads"]: h for h in by[version]["heads"]}
        assert (
            heads[8]["message"].startswith("kv_cache last dim must be")
            and "_sparse_mla_sm120.py" in heads[8]["location"]
        )
    for version in ("0.7.1", "0.7.4"):
        assert by[version]["accepted"] == [8, 16, 32, 64, 128], version
        assert by[version]["depth"] == "partial"  # stopped at the compiled resolve_format query, said so


def test_the_batch_mla_packed_form_is_its_own_answer(cli_json):
    # 0.6.x plan() has no query_layout: only the split form exists (absent, from
    # the signature). 0.7.4 cutlass: the packed form is planned (cutlass_backend.py
    # :155 head check, :189 DeepSeek's fixed softmax scale, :194 the SM), the split
    # form refused by a view check (:227) that the packed form passes.
    _, doc, _ = cli_json(
        "matrix",
        "-k",
        "batch-mla",
        "--backend",
        "cutlass",
        "--layout",
        "packed,split",
        "--sm",
        "100,120",
        "--flashinfer",
        "0.6.14,0.7.4",
    )
    by = {(r["flashinfer_version"], r["key"], r["sm"]): r for r in doc["results"]}
    assert by[("0.6.14", "batch-mla[backend=cutlass,layout=packed]", 100)]["status"] == "absent"
    assert by[("0.7.4", "batch-mla[backend=cutlass,layout=packed]", 100)]["accepted"] == [128]
    assert by[("0.7.4", "batch-mla[backend=cutlass,layout=packed]", 120)]["status"] == "unsupported-arch"
    split = by[("0.7.4", "batch-mla[backend=cutlass,layout=split]", 100)]
    assert split["status"] == "unsupported-config" and "packed query view" in split["heads"][0]["message"]


def test_the_only_inconclusive_cells_are_this_machines(sweep):
    """Across the sweep (8 releases x every default variant x 5 SMs), the cells
    left inconclusive are 0.6.12's cute-dsl, whose import fails beside the only
    nvidia-cutlass-dsl this registry holds: a dependency of this machine; and
    0.7.4's prims_ts decode at 64 and 128 heads on SM10x, whose plan asks the
    NVIDIA driver for occupancy (the test above)."""
    undecided = sorted(
        (v, k, sm) for (v, k, sm), r in sweep.items() if any(h["outcome"] == "inconclusive" for h in r["heads"])
    )
    cute_dsl = [("0.6.12", "trtllm-mla[backend=cute-dsl]", sm) for sm in (100, 103, 120, 121)]
    prims_ts = [("0.7.4", "sparse-mla-ts", sm) for sm in (100, 103)]
    assert undecided == cute_dsl + prims_ts
    for v, k, sm in cute_dsl:
        for head in sweep[(v, k, sm)]["heads"]:
            assert head["cause"] == "environment" and "as installed on this machine" in head["reason"]
    for v, k, sm in prims_ts:
        left = [h for h in sweep[(v, k, sm)]["heads"] if h["outcome"] == "inconclusive"]
        assert [h["heads"] for h in left] == [64, 128]
        assert all(h["cause"] == "device" and "NVIDIA driver" in h["reason"] for h in left)


def test_the_prims_ts_sparse_decode_is_planned_and_run_as_an_engine_does(sweep):
    """BatchSparseMLADecodePagedTSWrapper (vLLM 0.34.0's Kimi K3 core plans it
    with an FP8 D576 query): 0.7.4 mla_decode.py:2399 refuses more than 128
    heads in `_resolve_sparse_mla_plan` (raised at :2400); decode.py:789 refuses every SM but
    SM100a/103a/107a; the plan compiles one kernel per shape and `run` launches
    it. 64 and 128 heads (`_D576_HEADS`, mla_decode.py:2608) take the D576
    reload route, whose plan asks the NVIDIA driver for occupancy: inconclusive
    on a CPU, for that reason, never accepted."""
    ts = sweep[("0.7.4", "sparse-mla-ts", 100)]
    heads = {h["heads"]: h for h in ts["heads"]}
    assert set(ts["accepted"]) == set(range(1, 128)) - {64}
    assert heads[96]["entry"] == "jit:prims_ts_mla_decode_sm100a_cute_dsl/main_sm100_<digest>.__call__"
    assert {h for h, r in heads.items() if r["outcome"] == "rejected"} == set(range(129, 257))
    assert "num_qo_heads must be at most 128" in heads[129]["message"]
    assert "prims_ts/mla_decode.py:2400" in heads[129]["location"]
    for h in (64, 128):
        assert heads[h]["outcome"] == "inconclusive" and heads[h]["cause"] == "device"
        assert "NVIDIA driver" in heads[h]["reason"]
    for sm in (90, 120, 121):
        other = sweep[("0.7.4", "sparse-mla-ts", sm)]
        assert other["status"] == "unsupported-arch", other["status"]
        assert "attention-ts decode requires an SM100a/B200" in other["heads"][0]["message"]
    assert sweep[("0.6.16", "sparse-mla-ts", 100)]["status"] == "absent"
