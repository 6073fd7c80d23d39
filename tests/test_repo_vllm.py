"""The real vLLM source of a release, downloaded in the test and unpacked, never
imported: `table extract` and `check --repo` against the flashinfer it pins."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .conftest import engine_source, only_pending_undecided

pytestmark = pytest.mark.slow

VLLM = "0.33.0"  # has vllm/models/deepseek_v4/ and pins flashinfer-python==0.7.2.post1


@pytest.fixture(scope="module")
def vllm_tree(tmp_path_factory) -> Path:
    return engine_source(tmp_path_factory.mktemp("vllm"), "vllm", VLLM)


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "hprobe-cache"))


def test_extract_finds_the_dsv4_flashinfer_classes(cli_json, vllm_tree):
    code, doc, _ = cli_json("table", "extract", "--repo", str(vllm_tree / "vllm"))
    assert code == 0
    assert doc["pin"]["spec"] == "==0.7.2.post1" and doc["pin"]["source"].endswith("METADATA:90")
    classes = {c["module"] + "." + c["class"]: c for c in doc["classes"]}
    for name in ("DeepseekV4FlashInferMLAAttention", "DeepseekV4FlashInferSM120Attention"):
        item = classes[f"models.deepseek_v4.nvidia.flashinfer_sparse.{name}"]
        assert item["status"] == "mapped" and item["kernel"] == "dsv4-sparse-mla"
        assert item["rule"] == "pad_to {8, 16, 32, 64, 128}"
    flashmla = classes["models.deepseek_v4.nvidia.flashmla.DeepseekV4FlashMLAAttention"]
    assert flashmla["status"] == "unprobed" and flashmla["rule"] == "pad_to {64, 128}"
    assert not any(m.startswith("vllm") for m in sys.modules)  # read, never imported


def test_check_repo_judges_vllm_against_the_flashinfer_it_pins(cli_json, vllm_tree):
    # 0.7.2.post1's kernel table is the artifact store's alone: its trtllm-gen
    # answers are undecided here, and the gate says so ...
    code, doc, _ = cli_json("check", "--repo", str(vllm_tree / "vllm"), "--sm", "100,120")
    assert code == 3 and only_pending_undecided(doc["findings"])
    # ... and judged on the validators' word when asked.
    code, doc, _ = cli_json("check", "--repo", str(vllm_tree / "vllm"), "--sm", "100,120", "--trust-validators")
    assert [r["version"] for r in doc["releases"]] == ["0.7.2.post1"]
    dsv4 = [f for f in doc["findings"] if ".deepseek_v4.nvidia.flashinfer_sparse." in f["backend"]]
    assert dsv4 and {f["flashinfer_version"] for f in dsv4} == {"0.7.2.post1"}
    by = {(f["backend"].rsplit(".", 1)[-1], f["sm"], f["model"], f["tp"]): f for f in dsv4}
    f = by[("DeepseekV4FlashInferMLAAttention", 100, "DeepSeek-V4-Pro", 16)]
    assert (f["n"], f["padded"], f["verdict"]) == (8, 8, "ok")
    assert f["source"].endswith("deepseek_v4/nvidia/flashinfer_sparse.py:209")
    assert doc["summary"] == {"ok": len(doc["findings"])}
    # Every call is judged (the SM90 DSA call too, on batch-mla with one-token
    # pages, for models with and without a rope part; it runs on none of these
    # SMs) but one: GLM-5.3-Flash's NoPE call on SM12x, whose packed layout the
    # probe does not build. It runs on SM120, so the gate is undecided there ...
    assert [(p["function"], p["sms"]) for p in doc["call_paths"] if p["status"] == "unresolved"] == [
        ("FlashInferMLASparseSM120Impl._run_mqa_kernel", [120, 121])
    ]
    sm90 = [p for p in doc["call_paths"] if "flashinfer_mla_sparse_sm90.py" in p["site"]]
    assert len(sm90) == 2 and all(p["status"] == "judged" and p["kernel"] == "batch-mla" for p in sm90)
    assert code == 3 and doc["exit_code"] == 3
    # ... and not on SM100 alone, where every finding is ok: the gate passes.
    code, doc, _ = cli_json("check", "--repo", str(vllm_tree / "vllm"), "--sm", "100", "--trust-validators")
    assert doc["summary"] == {"ok": len(doc["findings"])} and code == 0 and doc["exit_code"] == 0


def test_vllm_call_paths_dense_and_sparse_at_96_heads(cli_json, vllm_tree):
    code, doc, _ = cli_json(
        "check",
        "--repo",
        str(vllm_tree / "vllm"),
        "--sm",
        "100",
        "--heads",
        "96",
        "--tp",
        "1,2,4",
        "--trust-validators",
    )
    dense = {f["tp"]: f for f in doc["findings"] if ".flashinfer_mla.FlashInferMLAImpl.forward_mqa" in f["backend"]}
    sparse = {
        f["tp"]: f
        for f in doc["findings"]
        if ".flashinfer_mla_sparse.FlashInferMLASparseImpl._forward_mqa_kernel" in f["backend"]
    }
    assert sorted(dense) == sorted(sparse) == [1, 2, 4]
    # vLLM's own selector sends 96 and 24 to cute-dsl, 48 to auto: each judged on the backend it picks.
    assert dense[1]["backend"].endswith("-> backend=cute-dsl") and dense[4]["backend"].endswith("-> backend=cute-dsl")
    assert (
        dense[2]["backend"].endswith("-> backend=auto")
        and "_select_mla_decode_backend() picks auto" in dense[2]["source"]
    )
    # The sparse path passes 96 unpadded, which 0.7.2.post1 refuses with top-k.
    assert (sparse[1]["n"], sparse[1]["padded"]) == (96, 96) and sparse[1]["verdict"] == "broken"
    assert "64 < num_heads_q < 128" in sparse[1]["evidence"]["message"]
    assert {f["verdict"] for f in (sparse[2], sparse[4])} == {"ok"}
    assert code == 1


def test_every_call_vllm_makes_is_listed(cli_json, vllm_tree):
    from hprobe.kernels import probes_called_as
    from hprobe.rules.repo.tracing.calls import find_calls
    from hprobe.rules.repo.tree.scan import RepoIndex

    _, doc, _ = cli_json("table", "extract", "--repo", str(vllm_tree / "vllm"))
    found = find_calls(RepoIndex.build(vllm_tree / "vllm"), frozenset(probes_called_as()))
    listed = {p["site"] for p in doc["call_paths"]}
    # Every call found is listed, judged or with why not.
    assert len(found) == 13 and {f"{vllm_tree / 'vllm' / s.path}:{s.line}" for s in found} <= listed
    # Not judged: only GLM-5.3-Flash's NoPE call on SM12x, with why.
    (unjudged,) = [p for p in doc["call_paths"] if p["status"] == "unresolved"]
    assert "NoPE" in unjudged["detail"] and unjudged["sms"] == [120, 121]
    # The SM90 DSA call is judged on batch-mla, for models with and without a rope part.
    sm90 = [p for p in doc["call_paths"] if p["site"].endswith("flashinfer_mla_sparse_sm90.py:281")]
    assert len(sm90) == 2 and all(p["status"] == "judged" and p["kernel"] == "batch-mla" for p in sm90)


def test_vllm_0_34_kimi_core_trail_never_passes_through_another_classs_method(tmp_path_factory):
    """vLLM 0.34.0's Kimi K3 sparse core (`FlashInferCore.trtllm`) is reached
    from `FlashInferCore.decode`, a method name dozens of classes share (an
    audio model's tokenizer among them). Every FlashInferCore is kept in
    `self.fi` of the prepared stage (and copies of it), so the trail follows
    `self.fi.decode(...)` there and no other `decode`: it follows the query
    the stage keeps (`self.query`, a property) to what the property returns
    (its query stage's `query`), never to a tokenizer."""
    from hprobe.rules.repo.extract import extract
    from hprobe.rules.repo.tracing.instances import Confined, confine
    from hprobe.rules.repo.tree.mapping import load_mapping
    from hprobe.rules.repo.tree.scan import RepoIndex

    tree = engine_source(tmp_path_factory.mktemp("vllm34"), "vllm", "0.34.0") / "vllm"
    core_module = "models.kimi_k3.nvidia.specialized_decode.cutedsl.dsa.attn_fi"
    index = RepoIndex.build(tree)
    owner = index.by_suffix(core_module).classes["FlashInferCore"]  # type: ignore[union-attr]
    confined = confine(index, owner)
    assert isinstance(confined, Confined), confined
    # `self.fi` of the prepared stage, and the local `fi` its sparse decode copies it to.
    assert {(p.name, p.holder, p.function) for p in confined.places} == {
        ("fi", f"{core_module.rsplit('.', 1)[0]}.prepared.PreparedDsa", None),
        ("fi", None, ("models/kimi_k3/nvidia/specialized_decode/cutedsl/dsa/prepared.py", 650)),
    }
    found = extract(tree, load_mapping(Path(__file__).parents[1] / "matrices" / "mappings" / "vllm.toml"))
    (core,) = [
        p
        for p in found.paths.paths
        if p.site.path.endswith("dsa/attn_fi.py") and p.site.function == "FlashInferCore.trtllm"
    ]
    assert "tokenizer" not in core.detail and "another class's decode" not in core.detail, core.detail
    assert "cutedsl/dsa/prepared.py:394: the query is `self.query_stage.query`" in core.detail, core.detail
    assert not any(m.startswith("vllm") for m in sys.modules)  # read, never imported


def test_glm_5_3_flash_is_judged_with_its_nope_call_where_the_tree_serves_it(tmp_path_factory):
    """GLM-5.3-Flash (NoPE DSA: no rope part, qk_nope_head_dim 256) is served
    by vLLM 0.34.0 (its registry names Glm5NextForCausalLM): its sparse call is
    judged as that model makes it, the query and cache without a rope part and
    the per-token top-k lengths `if self.is_nope_mla:` hands over, beside the
    other DSA models' call without them. vLLM 0.25.0 registers no such
    architecture: the model is judged nowhere on it."""
    from hprobe.rules.repo.extract import extract
    from hprobe.rules.repo.tree.mapping import load_mapping

    mapping = load_mapping(Path(__file__).parents[1] / "matrices" / "mappings" / "vllm.toml")
    new = extract(engine_source(tmp_path_factory.mktemp("vllm34"), "vllm", "0.34.0") / "vllm", mapping)
    sparse = {
        b.models: dict(b.options)
        for b in new.paths.backends
        if b.name.endswith("FlashInferMLASparseImpl._forward_mqa_kernel")
    }
    assert sparse[("GLM-5.3-Flash",)] == {"topk": 2048, "topk_lens": 1, "qk_nope_head_dim": 256, "qk_rope_head_dim": 0}
    (others,) = [models for models in sparse if "GLM-5.3-Flash" not in models]
    assert "DeepSeek-V3.2" in others and sparse[others] == {"topk": 2048}
    sm90 = {b.models: dict(b.options) for b in new.paths.backends if "_SM90State" in b.name}
    assert sm90[("GLM-5.3-Flash",)]["qk_rope_head_dim"] == 0
    old = extract(engine_source(tmp_path_factory.mktemp("vllm25"), "vllm", "0.25.0") / "vllm", mapping)
    assert any("GLM-5.3-Flash" in note and "not served" in note for note in old.notes), old.notes
    assert not any("GLM-5.3-Flash" in b.models for b in old.paths.backends)
    assert not any(p.entry is not None and p.entry.model_family == "dsa-nope" for p in old.paths.paths)
