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
