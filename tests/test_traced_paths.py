"""Calls no [[call]] entry describes, judged on the head count followed through
the engine's own code (rules/repo/tracing/heads.py wired into paths.py), on a fixture
engine: a query folded in a helper, one reshaped on the way, one whose trail
ends; each served only by the models its module belongs to (the registry)."""

from __future__ import annotations

from .conftest import ROOT

ENGINE = ROOT / "tests" / "fixtures" / "repos" / "traced"
MAPPING = ENGINE / "mapping.toml"
FOLDED = "engine.models.kimi.attn.paired_decode:15 [traced]"
RESHAPED = "engine.backends.mla.MLAImpl._run:12 [traced]"
STAGED = "engine.models.kimi.attn.KimiImpl.forward_staged:23 [assumed]"


def _rows(doc: dict, backend: str) -> dict[tuple[str, int], dict]:
    return {(f["model"], f["tp"]): f for f in doc["findings"] if f["backend"] == backend}


def test_a_folded_count_is_judged_as_the_helper_folds_it(cli_json):
    code, doc, _ = cli_json("check", "--repo", str(ENGINE), "--mapping", str(MAPPING), "--sm", "100")
    folded = _rows(doc, FOLDED)
    # pair_plan(2, heads): two tokens fold into one row while 2 * heads <= 128.
    assert {(f["n"], f["padded"]) for f in folded.values()} == {(96, 96), (48, 96), (24, 48), (12, 24)}
    # The module belongs to KimiForCausalLM's implementation: Dense-64 never runs it.
    assert {model for model, _ in folded} == {"Kimi-96"}
    source = folded["Kimi-96", 2]["source"]
    assert (
        source.startswith(f"{ENGINE}/engine/models/kimi/attn.py:15 ")
        and "fold * heads" in source
        and "attn.py:19" in source
    )
    # Judged on the folded count, not on 48: the 96-head row's verdict, never the 48-head one's.
    assert folded["Kimi-96", 2]["verdict"] == folded["Kimi-96", 1]["verdict"]
    assert folded["Kimi-96", 8]["verdict"] == "broken" and code == 1
    paths = {p["site"].rpartition("traced/")[2]: p for p in doc["call_paths"]}
    assert paths["engine/models/kimi/attn.py:15"]["status"] == "judged"
    assert (
        "it runs only for KimiForCausalLM (engine/model_executor/models/registry.py)"
        in paths["engine/models/kimi/attn.py:15"]["detail"]
    )


def test_a_query_reshaped_through_a_helper_is_the_layers_count(cli_json):
    _, doc, _ = cli_json("check", "--repo", str(ENGINE), "--mapping", str(MAPPING), "--sm", "100")
    reshaped = _rows(doc, RESHAPED)
    # Shared backend code (no model's module): every model, each count as the layer has it.
    assert {(model, f["n"], f["padded"]) for (model, _), f in reshaped.items()} == {
        ("Kimi-96", 96, 96),
        ("Kimi-96", 48, 48),
        ("Kimi-96", 24, 24),
        ("Kimi-96", 12, 12),
        ("Dense-64", 64, 64),
        ("Dense-64", 32, 32),
    }
    assert all(f["verdict"] != "assumed" for f in reshaped.values())
    paths = {p["site"].rpartition("traced/")[2]: p for p in doc["call_paths"]}
    assert paths["engine/backends/mla.py:12"]["status"] == "judged"
    assert (
        "followed from the layer's query" in paths["engine/backends/mla.py:12"]["detail"]
        and "mla.py:6" in paths["engine/backends/mla.py:12"]["detail"]
    )


def test_where_the_trail_ends_the_call_is_assumed_with_the_line_and_strict_fails(cli_json, cli):
    _, doc, _ = cli_json("check", "--repo", str(ENGINE), "--mapping", str(MAPPING), "--sm", "100")
    staged = _rows(doc, STAGED)
    assert set(staged) == {("Kimi-96", tp) for tp in (1, 2, 4, 8)}
    assert {f["verdict"] for f in staged.values()} == {"assumed"}
    note = staged["Kimi-96", 1]["notes"][0]
    assert (
        note.startswith("assumed: the model's heads // tp, unpadded")
        and f"the trail ended at {ENGINE}/engine/models/kimi/attn.py:23: the query is `self.staged`" in note
    )
    # With every traced row passing, the assumed path alone keeps the gate undecided; --strict fails on it.
    code, doc, _ = cli_json("check", "--repo", str(ENGINE), "--mapping", str(MAPPING), "--sm", "100", "--heads", "64")
    assert code == 3 and doc["exit_code"] == 3
    assert {f["verdict"] for f in doc["findings"] if f["backend"] != STAGED} <= {"ok", "reducible"}
    strict, _, _ = cli_json(
        "check", "--repo", str(ENGINE), "--mapping", str(MAPPING), "--sm", "100", "--heads", "64", "--strict"
    )
    assert strict == 1
    _, out, _ = cli("check", "--repo", str(ENGINE), "--mapping", str(MAPPING), "--sm", "100", "--heads", "64")
    assert "call paths  3 calls of FlashInfer entries found, 2 judged, 1 assumed" in out
    assert out.rstrip().splitlines()[-1].endswith("1 call path assumed  → exit 3")


DRAFTED = ROOT / "tests" / "fixtures" / "repos" / "drafted"


def test_a_fold_filled_at_run_time_is_judged_at_each_value_and_never_as_a_padding(cli_json):
    mapping = str(DRAFTED / "mapping.toml")
    code, doc, _ = cli_json("check", "--repo", str(DRAFTED), "--mapping", mapping, "--sm", "100", "--tp", "1")
    rows = {f["backend"]: f for f in doc["findings"]}
    layer = "from forward_mqa (draft.py:25)"
    base = "engine.draft.draft_decode:20 "
    # Without an LSE all k tokens fold into one row (k * 96); with one, no fold
    # fits within 128 heads: every k hands 96, one backend for all of them (k
    # is left out: the count does not depend on it there).
    traced = {name.removeprefix(base): f["padded"] for name, f in rows.items() if name.startswith(base + "[traced")}
    assert traced == {
        f"[traced, k=2, lse=False, {layer}]": 192,
        f"[traced, k=3, lse=False, {layer}]": 288,
        f"[traced, k=4, lse=False, {layer}]": 384,
        f"[traced, lse=True, {layer}]": 96,
    }
    # A fold is the work the call does: judged as it is, never reducible; the
    # query's dtype is not read, so each row is probed at bf16 and fp8 and
    # concluded only where both agree.
    for name in traced:
        finding = rows[base + name]
        assert finding["verdict"] != "reducible"
        assert (finding["verdict"] == "assumed") == (finding["assumed"] == "dtype")
        assert any("trtllm-mla[dtype=fp8]" in note for note in finding["notes"])
    # The caller whose query hprobe cannot follow (a mailbox the class
    # allocates) is shown on the stated assumption, with where its trail ended.
    dcp = rows[f"{base}[assumed, from forward (draft.py:32)]"]
    assert dcp["verdict"] == "assumed" and dcp["assumed"] == "heads"
    assert f"the trail ended at {DRAFTED}/engine/draft.py:32: the query is `self.box.q`" in dcp["notes"][0]
    path = next(p for p in doc["call_paths"] if p["site"].endswith("engine/draft.py:20"))
    assert path["status"] == "assumed"
    assert "k is filled at run time (the draft block's tokens per request" in path["detail"]
    assert "evaluated at each of 2-4" in path["detail"] and "evaluated at each of False, True" in path["detail"]
    assert "its callers hand the query in differently" in path["detail"]
    assert code in (1, 3)


def test_a_fold_the_mapping_gives_no_values_for_is_assumed_where_the_trail_ended(cli_json, tmp_path):
    text = (DRAFTED / "mapping.toml").read_text()
    bare = tmp_path / "mapping.toml"
    bare.write_text(text[: text.index("[[run_value]]")])
    code, doc, _ = cli_json("check", "--repo", str(DRAFTED), "--mapping", str(bare), "--sm", "100", "--tp", "1")
    assert {f["verdict"] for f in doc["findings"]} == {"assumed"} and code == 3
    path = next(p for p in doc["call_paths"] if p["site"].endswith("engine/draft.py:20"))
    assert path["status"] == "assumed" and "fold * heads depends on" in path["detail"]
