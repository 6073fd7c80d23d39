"""Call paths: every call of a probed FlashInfer entry in an engine's tree,
found with ast and judged or listed (a fixture engine with each construct the
real engines use), against the installed flashinfer."""

from __future__ import annotations

import sys
from pathlib import Path

from hprobe.rules.repo.calls import find_calls
from hprobe.rules.repo.extract import extract
from hprobe.rules.repo.mapping import load_mapping
from hprobe.rules.repo.scan import RepoIndex

from .conftest import ROOT
from .test_repo import _installed_tree

ENGINE = ROOT / "tests" / "fixtures" / "repos" / "callpaths"
MAPPING = ENGINE / "mapping.toml"
ENTRIES = frozenset({"trtllm_batch_decode_with_kv_cache_mla", "trtllm_batch_decode_sparse_mla_dsv4", "BatchMLAPagedAttentionWrapper"})


def _paths(found) -> dict[str, object]:
    return {Path(p.shown).relative_to(ENGINE).as_posix(): p for p in found.paths.paths}


def test_every_call_is_found_however_it_is_spelled():
    sites = find_calls(RepoIndex.build(ENGINE), ENTRIES)
    found = {(s.path, s.line, s.function, s.entry) for s in sites}
    assert found == {
        # `from flashinfer.decode import X`, X(...)
        ("engine/backends/dense.py", 28, "DenseImpl.forward", "trtllm_batch_decode_with_kv_cache_mla"),
        # `import flashinfer` under try, flashinfer.decode.X(...) in a nested function
        ("engine/backends/sparse.py", 10, "SparseImpl._kernel.run", "trtllm_batch_decode_with_kv_cache_mla"),
        # imported inside the function under another name
        ("engine/backends/sparse.py", 18, "unmapped", "trtllm_batch_decode_with_kv_cache_mla"),
        ("engine/backends/sparse.py", 22, "stale", "trtllm_batch_decode_with_kv_cache_mla"),
        # the engine's own lazy wrapper of the entry, imported from its utils
        ("engine/models/v4.py", 14, "Attention.forward", "trtllm_batch_decode_sparse_mla_dsv4"),
    }
    # `inspect.signature(X)` mentions the entry without calling it: no call path.
    assert not any(s.function == "has_entry" for s in sites)


def test_each_call_is_judged_or_listed_with_why():
    found = extract(ENGINE, load_mapping(MAPPING))
    paths = _paths(found)
    assert {k: p.status.value for k, p in paths.items()} == {
        "engine/backends/dense.py:28": "judged",
        "engine/backends/sparse.py:10": "judged",
        "engine/backends/sparse.py:18": "unresolved",
        "engine/backends/sparse.py:22": "unresolved",
        "engine/models/v4.py:14": "judged",
    }
    assert "the mapping does not say what decides its head count" in paths["engine/backends/sparse.py:18"].detail
    # What the mapping says is checked against the call itself.
    assert "it passes backend='xqa', the mapping says 'auto'" in paths["engine/backends/sparse.py:22"].detail
    backends = {b.name: b for b in found.table.backends}
    # The engine's own selector, evaluated per count: 24 and 96 do not tile, 48 does.
    cute = backends["engine.backends.dense.DenseImpl.forward -> backend=cute-dsl"]
    auto = backends["engine.backends.dense.DenseImpl.forward -> backend=auto"]
    assert (cute.counts, dict(cute.options)["backend"]) == ((24, 96), "cute-dsl")
    assert (auto.counts, dict(auto.options)["backend"]) == ((48,), "auto")
    assert cute.models == ("Dense-96",)  # the dense path serves the dense models only
    # Unpadded: each count as it is, with top-k.
    sparse = backends["engine.backends.sparse.SparseImpl._kernel"]
    assert sparse.rule.describe() == "pad_map {24->24, 48->48, 96->96}" and dict(sparse.options)["topk"] == 2048
    # Inline: q_padded is allocated with _PAD heads below 64, unless the pool is FP8 (false here).
    inline = backends["Attention.forward (inline) -> Attention.forward"]
    assert inline.rule.describe() == "pad_map {8->64, 32->64, 128->128}" and inline.models == ("DSv4-Pro",)
    branches = dict(inline.branches)
    assert branches["DSv4-Pro", 8].endswith("engine/models/v4.py:12 [SM100, self.pool_is_fp8=False]")
    assert "q_padded not assigned in Attention.forward: unpadded" in branches["DSv4-Pro", 128]
    assert not any(m == "engine" or m.startswith("engine.") for m in sys.modules)  # read, never imported


def test_check_judges_paths_and_names_those_not_judged(cli_json):
    code, doc, _ = cli_json("check", "--repo", str(ENGINE), "--mapping", str(MAPPING), "--sm", "100")
    by = {(f["backend"], f["model"], f["tp"]): f for f in doc["findings"]}
    # 0.6.14's dense trtllm-mla on SM100: the validators take 48 (auto) ...
    assert by["engine.backends.dense.DenseImpl.forward -> backend=auto", "Dense-96", 2]["n"] == 48
    # ... and the inline rule pads DSv4-Pro TP4 (32) to 64, where 0.6.14 takes 32 itself.
    inline = by["Attention.forward (inline) -> Attention.forward", "DSv4-Pro", 4]
    assert (inline["n"], inline["padded"], inline["verdict"], inline["best"]) == (32, 64, "reducible", 32)
    assert inline["source"].endswith("engine/models/v4.py:12 [SM100, self.pool_is_fp8=False]")
    listed = {p["site"].rsplit("callpaths/", 1)[1]: p for p in doc["call_paths"]}
    assert len(listed) == 5 and {p["status"] for p in listed.values()} == {"judged", "unresolved"}
    assert listed["engine/backends/sparse.py:18"]["status"] == "unresolved"


def test_text_lists_the_calls_not_judged(cli):
    code, out, _ = cli("check", "--repo", str(ENGINE), "--mapping", str(MAPPING), "--sm", "100")
    assert "call paths  5 calls of FlashInfer entries found, 3 judged" in out
    assert "engine/backends/sparse.py:18 unmapped → trtllm_batch_decode_with_kv_cache_mla: unresolved" in out
    assert out.rstrip().splitlines()[-1].endswith(f"2 call paths not judged  → exit {code}")


def test_model_picks_from_the_table_and_its_paths(cli_json):
    installed = _installed_tree()
    code, doc, _ = cli_json("check", "--repo", str(ROOT / "tests" / "fixtures" / "repos" / "post48047"), "--model", "Kimi-K3", "--sm", "100", "--flashinfer", installed)
    # The DSv4 classes serve the dsv4 family: Kimi K3 takes none of their paths.
    assert doc["findings"] == [] and code == 3
    code, doc, _ = cli_json("check", "--repo", str(ROOT / "tests" / "fixtures" / "repos" / "post48047"), "--model", "DeepSeek-V4-Flash", "--sm", "100", "--flashinfer", installed)
    assert {f["model"] for f in doc["findings"]} == {"DeepSeek-V4-Flash"} and {f["n"] for f in doc["findings"]} == {64, 32, 16, 8, 4}


def test_an_unknown_model_is_one_line(cli):
    code, out, err = cli("check", "--model", "GPT-5")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("hprobe: error: --model 'GPT-5': not a model hprobe knows (known: DeepSeek-V3,")
    code, _, err = cli("check", "--model", "Kimi-K3", "--heads", "96")
    assert code == 2 and "--model and --heads both choose the models judged" in err
