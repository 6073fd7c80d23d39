"""Answers on fetched releases that rest on faked CUDA tensors and the runtime
calls past a device check: refusals the release makes by name are kept, and
an answer does not depend on which other SMs the run asks for."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

FIVE = {8, 16, 32, 64, 128}
DSV4_VARIANTS = (
    "dsv4-sparse-mla[backend=cake]",
    "dsv4-sparse-mla[backend=cake,dtype=fp8]",
    "dsv4-sparse-mla[backend=cake,kv_format=nvfp4]",
    "dsv4-sparse-mla[backend=cute-dsl]",
    "dsv4-sparse-mla[backend=cute-dsl,dtype=fp8]",
)


@pytest.fixture(scope="module")
def release_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hprobe-cache")


@pytest.fixture(autouse=True)
def _cache_env(monkeypatch, release_cache):
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(release_cache))


def _by_key(doc: dict, sm: int) -> dict[str, dict[int, dict]]:
    return {r["key"]: {h["heads"]: h for h in r["heads"]} for r in doc["results"] if r["sm"] == sm}


@pytest.mark.parametrize("release", ["0.7.2", "0.7.2.post1", "0.7.4"])
def test_the_five_dsv4_variants_are_decided_on_sm100(cli_json, release):
    args = ["matrix", "--flashinfer", release, "--sm", "100"]
    for key in DSV4_VARIANTS:
        args += ["--kernel", key]
    code, doc, _ = cli_json(*args)
    assert code == 0
    results = _by_key(doc, 100)
    assert set(DSV4_VARIANTS) <= set(results)
    for key in DSV4_VARIANTS:
        outcomes = {h["outcome"] for h in results[key].values()}
        assert "inconclusive" not in outcomes, f"{key} on {release}: {outcomes}"
    for key in ("dsv4-sparse-mla[backend=cake]", "dsv4-sparse-mla[backend=cake,dtype=fp8]"):
        heads = results[key]
        # Refused by name outside the five, with the release's own words; the five get through.
        assert {h for h, r in heads.items() if r["outcome"] == "accepted"} == FIVE
        refused = {h: r for h, r in heads.items() if h not in FIVE}
        assert all(
            r["outcome"] == "rejected" and "query heads" in r["message"] and r["location"].startswith("flashinfer/mla/")
            for r in refused.values()
        )
    fp8 = results["dsv4-sparse-mla[backend=cute-dsl,dtype=fp8]"]
    # CuTe DSL HCA: 1..128 through, 129..256 refused by its own head check.
    assert {h for h, r in fp8.items() if r["outcome"] == "accepted"} == set(range(1, 129))
    assert all(fp8[h]["outcome"] == "rejected" and "batch_hca.py" in fp8[h]["location"] for h in range(129, 257))
    # The BF16 query is the variant's own: HCA refuses it for every h_q, a configuration refusal.
    assert {h["outcome"] for h in results["dsv4-sparse-mla[backend=cute-dsl]"].values()} == {"unsupported-config"}


def test_xqa_on_sm90_answers_alike_alone_and_beside_sm120(cli_json):
    _, alone, _ = cli_json("matrix", "--flashinfer", "0.7.2", "--kernel", "batch-mla[backend=xqa]", "--sm", "90")
    _, beside, _ = cli_json("matrix", "--flashinfer", "0.7.2", "--kernel", "batch-mla[backend=xqa]", "--sm", "90,120")
    sm90_alone, sm90_beside = _by_key(alone, 90), _by_key(beside, 90)
    assert sm90_alone == sm90_beside
    assert {h["outcome"] for h in sm90_alone["batch-mla[backend=xqa]"].values()} == {"unsupported-arch"}
    assert {h for h, r in _by_key(beside, 120)["batch-mla[backend=xqa]"].items() if r["outcome"] == "accepted"} == {128}


def test_dense_mla_on_cake_is_probed_where_the_release_has_it(cli_json):
    """0.7.4's `trtllm_batch_decode_with_kv_cache_mla(backend="cake")` (Kimi K3's
    drafter asks for it, with every draft token folded into heads): on SM100 an
    FP8 call of any count runs into a compiled CAKE kernel, 384 heads (96 x 4
    tokens) included; on SM120 the kernel generator refuses the architecture
    by name; 0.6.14 has no such backend, said as absent, never as rejected."""
    key = "trtllm-mla[backend=cake,dtype=fp8]"
    heads = "1-8,12,16,24,32,48,64,96,128,384"
    _, doc, _ = cli_json("matrix", "--flashinfer", "0.7.4", "--sm", "100,120", "--kernel", key, "--heads", heads)
    sm100, sm120 = _by_key(doc, 100)[key], _by_key(doc, 120)[key]
    assert {r["outcome"] for r in sm100.values()} == {"accepted"} and 384 in sm100
    assert all("cake" in r["entry"] for r in sm100.values()), {r["entry"] for r in sm100.values()}
    assert {r["outcome"] for r in sm120.values()} == {"unsupported-arch"}
    # The BF16 call: refused by cake's own dtype check, where the Blackwell family does not take the count.
    _, bf16, _ = cli_json(
        "matrix", "--flashinfer", "0.7.4", "--sm", "100", "--kernel", "trtllm-mla[backend=cake]", "--heads", "8,96"
    )
    refused = _by_key(bf16, 100)["trtllm-mla[backend=cake]"]
    assert all(r["outcome"] == "rejected" and "float8_e4m3fn" in r["message"] for r in refused.values())
    _, old, _ = cli_json("matrix", "--sm", "100", "--kernel", key, "--heads", "8,96")
    assert {r["outcome"] for r in _by_key(old, 100)[key].values()} == {"absent"}


@pytest.mark.parametrize("release", ["0.7.0.post1", "0.7.4"])
def test_batch_mla_runs_the_release_s_module_proxy_and_stops_at_the_launch(cli_json, release):
    """0.7.x loads the batch MLA module through a proxy (its JitSpec's
    post_load_adapter) whose Python checks the workspaces and calls the
    compiled plan; `plan` then stages the metadata and `run` checks its inputs.
    All of that runs: the boundary is the launch, `run`, never the proxy's
    `plan_with_staged_workspace_bytes`."""
    code, doc, err = cli_json(
        "matrix",
        "-k",
        "batch-mla[backend=fa2]",
        "-k",
        "batch-mla[backend=fa3]",
        "--sm",
        "90",
        "--heads",
        "8,128",
        "--flashinfer",
        release,
    )
    assert code == 0, err
    for result in doc["results"]:
        assert {h["entry"] for h in result["heads"]} == {"get_batch_mla_module.run"}, result["key"]
        assert any("let through unexecuted: get_batch_mla_module.plan" in n for n in result["notes"])
