"""A model's own attributes that name a probe axis (a NoPE model's
`qk_rope_head_dim = 0`) set that axis for its rows of every call it takes:
one call, two models, probed each as it runs (paths.py `_by_model_axes`)."""

from __future__ import annotations

from .conftest import ROOT

ENGINE = ROOT / "tests" / "fixtures" / "repos" / "nope"
MAPPING = ENGINE / "mapping.toml"


def test_a_nope_model_is_probed_without_a_rope_part(cli_json):
    code, doc, _ = cli_json("check", "--repo", str(ENGINE), "--mapping", str(MAPPING), "--sm", "90,100")
    rows = {(f["model"], f["tp"], f["sm"]): f for f in doc["findings"]}
    # The same call, each model on its own variant.
    assert {rows["Rope-128", tp, 90]["kernel"] for tp in (1, 2)} == {"batch-mla[backend=fa2]"}
    assert {rows["NoPE-128", tp, 90]["kernel"] for tp in (1, 2)} == {"batch-mla[backend=fa2,qk_rope_head_dim=0]"}
    assert rows["NoPE-128", 1, 100]["kernel"] == "batch-mla[backend=cutlass,qk_rope_head_dim=0]"
    # cutlass takes a 576-wide head only: the rope model's 128 heads run, the
    # NoPE model's same count is refused for its head width, not its count.
    assert rows["Rope-128", 1, 100]["verdict"] == "ok"
    assert rows["NoPE-128", 1, 100]["verdict"] == "broken"
    assert "Expected head dim 576" in rows["NoPE-128", 1, 100]["evidence"]["message"]
    assert code == 1
    # One judged call path, its backends named per model.
    (fa2,) = [p for p in doc["call_paths"] if p["site"].endswith("sparse_sm90.py:8")]
    assert fa2["status"] == "judged" and sorted(fa2["backends"]) == [
        "engine.sparse_sm90.SparseState.__init__ (NoPE-128)",
        "engine.sparse_sm90.SparseState.__init__ (Rope-128)",
    ]
