"""kernels/dsv4_sparse_mla on fetched releases: the five DSv4 variants of
0.7.2 - 0.7.4 decided on SM100 on faked CUDA tensors, each refusal in the
release's own words and place."""

from __future__ import annotations

import pytest

from .conftest import by_key

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("fetched_cache")]

FIVE = {8, 16, 32, 64, 128}
DSV4_VARIANTS = (
    "dsv4-sparse-mla[backend=cake]",
    "dsv4-sparse-mla[backend=cake,dtype=fp8]",
    "dsv4-sparse-mla[backend=cake,kv_format=nvfp4]",
    "dsv4-sparse-mla[backend=cute-dsl]",
    "dsv4-sparse-mla[backend=cute-dsl,dtype=fp8]",
)


@pytest.mark.parametrize("release", ["0.7.2", "0.7.2.post1", "0.7.4"])
def test_the_five_dsv4_variants_are_decided_on_sm100(cli_json, release):
    args = ["matrix", "--flashinfer", release, "--sm", "100"]
    for key in DSV4_VARIANTS:
        args += ["--kernel", key]
    code, doc, _ = cli_json(*args)
    assert code == 0
    results = by_key(doc, 100)
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
