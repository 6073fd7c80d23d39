"""kernels/batch_mla on fetched releases: an answer does not depend on which
other SMs the run asks for, and 0.7.x's module proxy runs to the launch."""

from __future__ import annotations

import pytest

from .conftest import by_key

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("fetched_cache")]


def test_xqa_on_sm90_answers_alike_alone_and_beside_sm120(cli_json):
    _, alone, _ = cli_json("matrix", "--flashinfer", "0.7.2", "--kernel", "batch-mla[backend=xqa]", "--sm", "90")
    _, beside, _ = cli_json("matrix", "--flashinfer", "0.7.2", "--kernel", "batch-mla[backend=xqa]", "--sm", "90,120")
    sm90_alone, sm90_beside = by_key(alone, 90), by_key(beside, 90)
    assert sm90_alone == sm90_beside
    assert {h["outcome"] for h in sm90_alone["batch-mla[backend=xqa]"].values()} == {"unsupported-arch"}
    assert {h for h, r in by_key(beside, 120)["batch-mla[backend=xqa]"].items() if r["outcome"] == "accepted"} == {128}


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
