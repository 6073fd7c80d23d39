"""Releases that are not installed, fetched at test time: --flashinfer, --pin, diff, bisect, cache."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import POST_48047, V4_PRO_TABLE, only_pending_undecided

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def release_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hprobe-cache")


@pytest.fixture(autouse=True)
def _cache_env(monkeypatch, release_cache):
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(release_cache))


def _pip_state() -> str:
    return subprocess.run(
        [sys.executable, "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True
    ).stdout


def _by_tp(doc: dict) -> dict[int, dict]:
    return {f["tp"]: f for f in doc["findings"] if f["model"] == "DeepSeek-V4-Pro" and f["sm"] == 100}


def test_post_48047_table_breaks_on_0_6_13_and_holds_on_0_6_14(cli_json):
    before = _pip_state()
    code, doc, _ = cli_json("check", "--sm", "100", "--table", str(POST_48047), "--flashinfer", "0.6.13")
    assert code == 1
    findings = _by_tp(doc)
    for tp in (4, 8, 16):
        assert findings[tp]["verdict"] == "broken"
        assert findings[tp]["flashinfer_version"] == "0.6.13"
        assert "Expected 64 or 128 query heads" in findings[tp]["evidence"]["message"]
    assert findings[1]["verdict"] == findings[2]["verdict"] == "ok"
    code, doc, _ = cli_json("check", "--sm", "100", "--table", str(POST_48047), "--flashinfer", "0.6.14")
    assert code == 0
    assert {f["verdict"] for f in doc["findings"]} == {"ok"}
    # Nothing was installed or removed in the user's environment.
    assert _pip_state() == before


@pytest.mark.parametrize("pin, expected_code", [(">=0.6.13", 1), (">=0.6.14", 0)])
def test_table_pin_is_probed_at_both_ends(cli_json, write_table, pin, expected_code):
    body = V4_PRO_TABLE.format(rule="pad_to = [8, 16, 32, 64, 128]").replace(
        'source = "tests"', f'source = "tests"\nrequires_flashinfer = "{pin}"'
    )
    code, doc, _ = cli_json("check", "--sm", "100", "--table", str(write_table(body)))
    findings = _by_tp(doc)
    probed = {r["version"] for r in doc["releases"]}
    assert pin.removeprefix(">=") in probed
    if expected_code == 1:
        assert findings[8]["verdict"] == "broken"
        assert any("0.6.13" in n for n in findings[8]["notes"])
        assert "0.6.13" in findings[8]["releases"]
        assert code == expected_code
    else:
        # 0.7.4, the pin's newest end, answers on trtllm-gen at the validators
        # only here (its kernel table is the artifact store's): undecided, and
        # ok on the validators' word when asked.
        assert code == 3 and only_pending_undecided(doc["findings"])
        code, doc, _ = cli_json("check", "--sm", "100", "--table", str(write_table(body)), "--trust-validators")
        assert {f["verdict"] for f in doc["findings"]} == {"ok"}, doc["findings"]
        assert code == expected_code


def test_pin_flag_and_reducible_needs_every_release(cli_json):
    # Before #48047's table under a >=0.6.13 pin: 64 is the smallest count that
    # every admitted release accepts, so nothing is reducible.
    pre = POST_48047.with_name("vllm-dsv4-flashinfer-pre-48047.toml")
    code, doc, _ = cli_json(
        "check", "--sm", "100", "--table", str(pre), "--pin", "flashinfer-python>=0.6.13", "--trust-validators"
    )
    findings = _by_tp(doc)
    assert findings[8]["verdict"] == "ok"
    assert any("reducible on flashinfer 0.6.14 alone" in n for n in findings[8]["notes"])
    assert code == 0


def test_diff_0_6_13_to_0_6_14(cli_json, cli):
    code, doc, _ = cli_json("diff", "0.6.13", "0.6.14", "--kernel", "dsv4-sparse-mla", "--sm", "100")
    assert code == 1
    [change] = doc["changes"]
    assert change["became_accepted"] == [8, 16, 32]
    assert change["became_rejected"] == []
    code, out, _ = cli("diff", "0.6.14", "0.6.14", "--kernel", "dsv4-sparse-mla", "--sm", "100")
    assert code == 0 and "no change" in out


def test_bisect_finds_0_6_14(cli_json):
    code, doc, _ = cli_json(
        "bisect", "--kernel", "dsv4-sparse-mla", "--sm", "100", "--heads", "16", "--range", "0.6.10..0.6.16"
    )
    assert doc["first_accepting"] == "0.6.14"
    assert doc["last_rejecting"] == "0.6.13"
    assert doc["non_monotonic"] == []
    assert code == 0
    probed = {p["version"]: p["outcome"] for p in doc["probed"]}
    assert probed["0.6.14"] == "accepted" and probed["0.6.13"] == "rejected"


def test_bisect_without_a_range_starts_where_the_entry_point_exists(cli_json):
    """Not at the index's oldest release (0.2.x here, which may not even be
    fetchable): at the first whose source defines the DSv4 entry point."""
    code, doc, err = cli_json("bisect", "--kernel", "dsv4-sparse-mla", "--sm", "100", "--heads", "16")
    assert code == 0, err
    assert doc["range"][0] == "0.6.12" and doc["first_accepting"] == "0.6.14"


def test_multi_release_matrix_and_warm_cache_imports_nothing(cli_json, release_cache, monkeypatch):
    args = ("matrix", "--kernel", "dsv4-sparse-mla", "--sm", "100", "--flashinfer", "0.6.13,0.6.14")
    code, cold, _ = cli_json(*args)
    assert code == 0
    accepted = {(r["flashinfer_version"], r["sm"]): r["accepted"] for r in cold["results"]}
    assert accepted == {("0.6.13", 100): [64, 128], ("0.6.14", 100): [8, 16, 32, 64, 128]}
    # A warm run answers from the cache: no worker is started.
    import hprobe.support.results

    def no_worker(*_args):
        raise AssertionError("a worker was started on a warm cache")

    with monkeypatch.context() as patch:
        patch.setattr(hprobe.support.results, "_run_worker", no_worker)
        code, warm, _ = cli_json(*args)
    assert code == 0
    assert warm["results"] == cold["results"]
    # Damage heals: a foreign result entry is discarded and a tree file that no
    # longer matches the wheel's RECORD sends the tree back to unpacking; the
    # recomputed answer is the cold one, never a copy of the garbage.
    for entry in (release_cache / "results").glob("*.json"):
        entry.write_text('{"schema": "hprobe.cache/1", "key": "not-this", "results": []}')
    for init in (release_cache / "trees").glob("*/flashinfer/__init__.py"):
        init.write_text("")
    code, again, _ = cli_json(*args)
    assert code == 0 and again["results"] == cold["results"]
    used = [Path(r["location"]) for r in again["releases"]]
    assert len(used) == 2 and all((tree / "flashinfer" / "__init__.py").stat().st_size > 0 for tree in used)
    shutil.rmtree(release_cache / "trees")  # later tests unpack afresh
    shutil.rmtree(release_cache / "results")


def test_wheel_path_and_directory_specs(cli_json, release_cache, tmp_path, monkeypatch):
    monkeypatch.setenv("HPROBE_WHOLE_WHEELS", "1")  # the wheel downloaded whole, then named by its path
    code, doc, _ = cli_json(
        "matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "16,64", "--flashinfer", "0.6.13"
    )
    [wheel] = (release_cache / "wheels").glob("flashinfer_python-0.6.13-*.whl")
    code, by_wheel, _ = cli_json(
        "matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "16,64", "--flashinfer", str(wheel)
    )
    assert by_wheel["results"][0]["accepted"] == [64]
    tree = tmp_path / "unpacked"
    shutil.unpack_archive(str(wheel), str(tree), format="zip")
    code, by_dir, _ = cli_json(
        "matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "16,64", "--flashinfer", str(tree)
    )
    assert by_dir["results"][0]["accepted"] == [64]
    assert by_dir["results"][0]["flashinfer_version"] == "0.6.13"


def test_unfetchable_release_is_one_line(cli):
    code, out, err = cli("matrix", "--sm", "100", "--flashinfer", "9.9.9")
    assert code == 2
    assert err.strip().startswith("hprobe: error: cannot fetch flashinfer-python==9.9.9")
    assert len(err.strip().splitlines()) == 1


def test_bad_release_spec(cli):
    code, _, err = cli("matrix", "--flashinfer", "not-a-version")
    assert code == 2 and "not a release number, wheel file or directory" in err


def test_sm12x_decode_metadata_of_0_7_4_is_shown_beside_the_probe(cli_json):
    """0.7.x exposes supported_sparse_mla_sm120_configs(): shown next to the
    probed answer, and agreeing with it for DSv4 decode at top-k 128."""
    code, doc, _ = cli_json("matrix", "-k", "sm120-sparse-mla", "--sm", "120", "--flashinfer", "0.7.4")
    assert code == 0
    [result] = doc["results"]
    assert result["flashinfer_version"] == "0.7.4"
    meta = result["metadata"]
    assert meta["source"] == "supported_sparse_mla_sm120_configs() decode kernels"
    assert meta["heads"] == result["accepted"] == list(range(1, 129))
    assert not any(n.startswith("disagreement") for n in result["notes"])
    # 0.7.4 consults a compiled policy query first; the probe stops there and says so,
    # claiming neither a fast nor a slow path.
    assert any("compiled query" in n and "resolve_format" in n for n in result["notes"])
    assert not any("slow_path" in h for h in result["heads"])
    # A stop at a policy query is partial depth, never plain validators.
    assert result["depth"] == "partial"


def test_kernels_lists_the_releases_that_have_each_entry_point(cli_json):
    code, doc, _ = cli_json("kernels", "--releases", "0.6.13,0.6.14")
    assert code == 0
    rows = {r["id"]: r for r in doc["kernels"]}
    assert rows["dsv4-sparse-mla"]["releases"] == "0.6.13, 0.6.14"
    assert rows["batch-mla"]["releases"] == "0.6.13, 0.6.14"


def test_suggest_is_safe_on_every_release_probed(cli_json):
    """After #48047 the SM100 rule pads to {8, 16, 32, 64, 128}; on 0.6.13 that
    crashes for 8/16/32, so across 0.6.13 and 0.6.14 the suggestion is the old
    padding; on 0.6.14 alone, the rule stays."""
    code, doc, _ = cli_json("suggest", "--table", str(POST_48047), "--sm", "100", "--flashinfer", "0.6.13,0.6.14")
    assert code == 0
    [sm100] = [s for s in doc["suggestions"] if s["backend"] == "DeepseekV4FlashInferMLAAttention"]
    assert sm100["releases"] == ["0.6.13", "0.6.14"]
    assert (sm100["current"], sm100["suggested"]) == ("pad_to {8, 16, 32, 64, 128}", "pad_to {64, 128}")
    assert "fixes" in sm100["advice"]
    # The crash PR #48047 would have shipped ahead of the 0.6.14 bump, named.
    assert sm100["refused_now"] == {"0.6.13": [4, 8, 16, 32]}
    assert "the current rule crashes on flashinfer 0.6.13 for n={4, 8, 16, 32}" in sm100["advice"]
    code, doc, _ = cli_json("suggest", "--table", str(POST_48047), "--sm", "100", "--flashinfer", "0.6.14")
    [sm100] = [s for s in doc["suggestions"] if s["backend"] == "DeepseekV4FlashInferMLAAttention"]
    assert sm100["suggested"] == "pad_to {8, 16, 32, 64, 128}" and "keep" in sm100["advice"]


def test_two_checks_splitting_the_counts_keep_a_decided_answer(cli_json):
    """0.6.18.post1's SM120 sparse decode has no top-k 2048 entry in its DSv4
    dispatch table: h_q 1..128 get past the head check and are refused by the
    dispatch (which the default top-k passes for h_q 64), 129..256 by the head
    check. A configuration refusal and head refusals, each with its evidence,
    never an empty inconclusive."""
    _, doc, _ = cli_json(
        "matrix", "-k", "sm120-sparse-mla[topk=2048]", "--sm", "120", "--flashinfer", "0.6.18.post1", "--json"
    )
    [result] = [r for r in doc["results"] if r["sm"] == 120]
    heads = {h["heads"]: h for h in result["heads"]}
    for h in (1, 64, 128):
        assert heads[h]["outcome"] == "unsupported-config", heads[h]
        assert (
            heads[h]["location"] == "flashinfer/mla/_sparse_mla_sm120.py:394 (_paged_attention)"
            and "no decode kernel for this shape" in heads[h]["message"]
        )
        assert "this configuration is refused, whatever h_q is" in heads[h]["reason"]
    for h in (129, 256):
        assert heads[h]["outcome"] == "rejected", heads[h]
        assert heads[h]["message"] == f"max_num_heads must be in (0, 128], got {h}"
    assert not any(h["outcome"] == "inconclusive" for h in result["heads"])
