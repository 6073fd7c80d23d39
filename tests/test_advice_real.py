"""Advice on real engine source, downloaded here (never imported): every patch
`suggest --diff` writes leaves a tree `check --repo` finds free of `broken`; the
first safe release is searched, not the pin's floor; a rule the engine's
default backend shares is named as such and never rewritten."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import engine_source

pytestmark = pytest.mark.slow

CUDA_TXT = """# Common dependencies
-r common.txt

# Dependencies for NVIDIA GPUs
torch==2.13.0
# FlashInfer moves with the Dockerfile (flashinfer-python>=0.6.0 was the old floor)
flashinfer-python==0.6.13
flashinfer-cubin==0.6.13
"""
FLASHINFER_MLA = "DeepseekV4FlashInferMLAAttention"


@pytest.fixture(scope="module")
def vllm_025_checkout(tmp_path_factory) -> Path:
    """vLLM 0.25.0's own source laid out as a checkout: the package, and its
    CUDA pins in requirements/cuda.txt as the wheel's METADATA records them
    (flashinfer-python==0.6.13, flashinfer-cubin==0.6.13)."""
    where = tmp_path_factory.mktemp("vllm025")
    tree = engine_source(where, "vllm", "0.25.0")
    meta = next(tree.glob("vllm-*.dist-info/METADATA")).read_text()
    assert "Requires-Dist: flashinfer-python==0.6.13" in meta
    checkout = where / "checkout"
    shutil.copytree(tree / "vllm", checkout / "vllm")
    (checkout / "requirements").mkdir()
    (checkout / "requirements" / "cuda.txt").write_text(CUDA_TXT)
    (checkout / "requirements" / "common.txt").write_text("numpy\n")
    subprocess.run(["git", "init", "-q"], cwd=checkout, check=True)
    return checkout


# The DSA sparse call (FlashInferMLASparseImpl) hands trtllm-gen GLM-5's 4 heads
# at TP16 unpadded, which 0.6.12 - 0.6.17 refuse (their own kernel table); its
# rule also serves FlashMLA, so it is left for a branch by hand. From 0.6.18 on
# trtllm-gen's answers wait on kernel tables only the artifact store serves: no
# pin is raised on them here, so the plans below keep to releases below 0.6.18.
SPARSE = "FlashInferMLASparseImpl.forward_mqa"


@pytest.mark.parametrize(
    "judged_under",
    [["--sm", "100", "--pin", ">=0.6.14,<0.6.18"], ["--sm", "100", "--flashinfer", "0.6.17"]],
    ids=["--pin above the tree's", "--flashinfer newer than the tree's"],
)
def test_every_patch_on_vllm_025_leaves_broken_only_what_it_names(cli_json, vllm_025_checkout, tmp_path, judged_under):
    diff = tmp_path / "p.diff"
    code, doc, err = cli_json("suggest", "--repo", str(vllm_025_checkout), *judged_under, "--diff", str(diff))
    patch = doc["patch"]
    assert code == 0 and diff.exists() and f"wrote {diff}: " in err, err
    tree = tmp_path / "tree"
    shutil.copytree(vllm_025_checkout, tree)
    subprocess.run(["git", "apply", "--check", str(diff)], cwd=tree, check=True)
    subprocess.run(["git", "apply", str(diff)], cwd=tree, check=True)
    # The DSv4 rule and the pin it needs, one change: the pin moves to 0.6.14,
    # the first release on which the rewritten rule is safe.
    assert any("→ pad_to {8, 16, 32, 64, 128}" in line for line in patch["changed"]), patch
    [moved] = [line for line in patch["changed"] if ": flashinfer requirement ==0.6.13 → ==" in line]
    assert "→ ==0.6.14 (the first release on which flashinfer_sparse.DeepseekV4FlashInferMLAAttention is safe)" in moved
    text = (tree / "requirements" / "cuda.txt").read_text()
    assert text == CUDA_TXT.replace("python==0.6.13", "python==0.6.14")
    # flashinfer-cubin has no release past 0.6.13 on the index: its exact pin is
    # never moved to one, and the patch says so.
    assert any(
        line.startswith("requirements/cuda.txt:")
        and "flashinfer-cubin==0.6.13 left as it is: the index has no flashinfer-cubin 0.6.14" in line
        for line in patch["not_rewritten"]
    ), patch["not_rewritten"]
    # What the patch cannot write, it names; the patched tree is broken there and nowhere else.
    assert any(SPARSE in line and "not rewritten" in line for line in patch["not_rewritten"])
    code, checked, err = cli_json("check", "--repo", str(tree), "--sm", "100")
    failing = {
        (f["backend"].rsplit(".", 2)[-2] + "." + f["backend"].rsplit(".", 1)[-1], f["model"], f["tp"], f["verdict"])
        for f in checked["findings"]
        if f["verdict"] in ("broken", "some-shapes", "inconclusive")
    }
    assert failing == {(SPARSE, "GLM-5", 16, "broken")}, failing
    # (0.25.0 loads no Kimi K3: none of its counts is judged here.)
    assert not any(f["model"] == "Kimi-K3" for f in checked["findings"])
    assert code == 1, err
    assert not any(m.startswith("vllm") for m in sys.modules)


def test_on_its_own_pin_vllm_025_needs_a_change_no_patch_can_make(cli_json, vllm_025_checkout, tmp_path):
    """==0.6.13: the DSv4 rule is what that release calls for; the sparse call's
    4 heads crash on it and on every release up to 0.6.17, and its rule is left
    for a branch by hand: no patch, said, and not exit 0."""
    diff = tmp_path / "p.diff"
    code, doc, err = cli_json("suggest", "--repo", str(vllm_025_checkout), "--sm", "100", "--diff", str(diff))
    assert code == 2 and not diff.exists() and "not written: nothing to rewrite" in err, err
    assert any(SPARSE in line and "not rewritten" in line for line in doc["patch"]["not_rewritten"])


def test_vllm_033_rests_no_floor_on_a_release_its_call_does_not_bind_to(cli_json, tmp_path):
    """vLLM 0.33.0's DeepSeek V4 call passes sparse_indices_are_storage_offsets,
    which no release before 0.7.x has: 0.6.14, the floor the count alone would
    give, refuses the call at every count. Its pin, 0.7.2.post1, answers on
    trtllm-gen at the validators only here (the artifact store's kernel table):
    no rule and no floor is suggested on that, and the run is undecided."""
    tree = engine_source(tmp_path, "vllm", "0.33.0")
    code, doc, err = cli_json("suggest", "--repo", str(tree / "vllm"), "--sm", "100")
    mla = next(s for s in doc["suggestions"] if s["backend"].endswith(FLASHINFER_MLA))
    assert mla["suggested"] is None and any("0.7.2.post1" in why for why in mla["inconclusive"]), mla
    assert code == 3, err
    code, checked, _ = cli_json("check", "--repo", str(tree / "vllm"), "--sm", "100", "--flashinfer", "0.6.14")
    rows = [f for f in checked["findings"] if f["backend"].endswith(FLASHINFER_MLA)]
    assert rows and {f["verdict"] for f in rows} == {"broken"}
    assert all(
        f["evidence"]["error_type"] == "TypeError"
        and "has no parameter 'sparse_indices_are_storage_offsets'" in f["evidence"]["message"]
        for f in rows
    )
    assert code == 1


# SGLang 0.5.21 pins 0.6.18, whose trtllm-gen answers wait on the artifact
# store's kernel table here: it is judged on 0.6.17, whose table is at hand.
ON_A_DECIDED_RELEASE = ("--flashinfer", "0.6.17")


@pytest.mark.parametrize("version", ["0.5.21"])
def test_sglang_fallback_is_flashmla_by_default_and_never_rewritten(cli_json, cli, tmp_path, version):
    tree = engine_source(tmp_path, "sglang", version) / "sglang"
    diff = tmp_path / "s.diff"
    code, doc, err = cli_json("suggest", "--repo", str(tree), "--sm", "100", "--diff", str(diff), *ON_A_DECIDED_RELEASE)
    # 3, not a usage error: one rule has no suggestion. GLM-5.3-Flash's NoPE
    # call (0.5.21 serves it) finds no count 0.6.17 runs: its compiled
    # selection has no kernel for a 512-wide head.
    assert code == 3 and f"--diff {diff} not written: nothing to rewrite" in err, (
        err
    )  # the report still says why for each rule
    nope = [s for s in doc["suggestions"] if "qk_rope_head_dim=0" in s["kernel"]]
    assert nope and all(s["suggested"] is None and set(s["unsafe"]) == {"4", "8", "16", "32", "64"} for s in nope)
    # Said (first on stderr, before any release is fetched, in text): a pin only
    # in built metadata is in no file a patch raises.
    assert doc["notes"][0].startswith(f"the flashinfer requirement is only in built metadata ({tree.parent}/"), doc[
        "notes"
    ][:2]
    decode = [s for s in doc["suggestions"] if s["kernel"] == "dsv4-sparse-mla"]
    assert decode
    for s in decode:
        # The search asks what the question needs: from the release below the
        # tree's pin (==0.6.18), where the rule is already safe, said so.
        assert s["suggested"] == "pad_to {8, 16, 32, 64, 128}" and s["pin"]["needs"] == "0.6.17", s["pin"]
        assert s["pin"]["searched"] == ["0.6.17", "0.7.4"]
        assert s["pin"]["searched_from"] == "the release below your pin's floor (==0.6.18)"
    # --since first: the first safe release of all, where the entry point first exists.
    _, first, _ = cli_json(
        "suggest", "--repo", str(tree), "--sm", "100", "--diff", str(diff), *ON_A_DECIDED_RELEASE, "--since", "first"
    )
    for s in [s for s in first["suggestions"] if s["kernel"] == "dsv4-sparse-mla"]:
        assert s["pin"]["needs"] == "0.6.14" and s["pin"]["searched_from"] == "where the entry point first exists"
    for s in decode:
        reach = s["reach"]
        assert (
            reach["flag"] == "--dsv4-attn-backend" and reach["value"] == "trtllm" and reach["default_reaches"] is False
        )
        assert "FlashMLA" in reach["otherwise"] and "under --dsv4-attn-backend trtllm only" in s["advice"]
    # SGLang 0.5.23 resolves `auto` in _default_dsv4_attention_backend: its
    # returns are read from the tree; 0.5.21 has only the declared default.
    if version == "0.5.23":
        assert "flashmla_mega or flashmla" in decode[0]["reach"]["default"] and decode[0]["reach"]["source"].endswith(
            "deepseek_v4_hook.py:45"
        )
    else:
        assert decode[0]["reach"]["default"] == "'auto'"
    # No patch rewrites the shared fallback; each says why and which branch it would need.
    assert not diff.exists() and doc["patch"]["changed"] == []
    shared = [
        line for line in doc["patch"]["not_rewritten"] if "needs a branch on --dsv4-attn-backend == trtllm" in line
    ]
    # One per DSv4 decode rule behind that flag: the layer's, and DSpark's own inline rule where the tree has it.
    behind_flag = [
        s
        for s in doc["suggestions"]
        if s["kernel"].startswith("dsv4-sparse-mla")
        and s["reach"]
        and not s["reach"]["default_reaches"]
        and s["changes"]
        and any(c["current"] != c["suggested"] for c in s["changes"])
    ]
    assert len(shared) == len(behind_flag) >= len(decode)
    # The check's findings say it too, in JSON and in text.
    _, checked, _ = cli_json("check", "--repo", str(tree), "--sm", "100", *ON_A_DECIDED_RELEASE)
    assert all(
        f["reach"] and f["reach"]["default_reaches"] is False
        for f in checked["findings"]
        if f["kernel"] == "dsv4-sparse-mla"
    )
    _, out, _ = cli("check", "--repo", str(tree), "--sm", "100", "--details", *ON_A_DECIDED_RELEASE)
    assert "reaches FlashInfer only under --dsv4-attn-backend trtllm" in out
    # --heads re-evaluates the rule for those heads, under a model named by its
    # count, which keeps every other attribute of the models it stands for: the
    # DeepSeek-V4 models bring `q_head_norm`, which SGLang's rule reads.
    _, kimi, _ = cli_json("check", "--repo", str(tree), "--sm", "100", "--heads", "96", *ON_A_DECIDED_RELEASE)
    rows = [f for f in kimi["findings"] if f["kernel"] == "dsv4-sparse-mla"]
    assert {f["model"] for f in rows} == {"96 heads"} and {f["n"] for f in rows} == {
        96,
        48,
        24,
        12,
        6,
    }
    assert not any(f["verdict"] in ("table-refuses", "inconclusive") for f in rows)


def test_sglang_0523_trtllm_decode_passes_a_backend_no_release_before_0_7_takes(cli_json, tmp_path):
    """SGLang 0.5.23's trtllm decode passes backend="trtllm-gen": 0.6.x's entry
    has no such parameter, so every count is refused there, through MQALayer's
    rule and DSpark's padding alike, naming the keyword and the call."""
    tree = engine_source(tmp_path, "sglang", "0.5.23") / "sglang"
    code, doc, _ = cli_json("check", "--repo", str(tree), "--sm", "100", "--flashinfer", "0.6.14")
    rows = [f for f in doc["findings"] if f["kernel"].startswith("dsv4-sparse-mla") and f["sm"] == 100]
    assert rows and {f["verdict"] for f in rows} == {"broken"}
    # The rule's rows are probed as the calls it feeds make them: with their backend.
    assert {f["kernel"] for f in rows} == {"dsv4-sparse-mla[backend=trtllm-gen]"}
    assert {f["backend"].split(" ")[0] for f in rows} == {"srt.models.deepseek_v4.MQALayer", "DSparkAttention.forward"}
    assert all(
        "has no parameter 'backend'; the engine passes it at" in f["evidence"]["message"]
        and "deepseek_v4_trtllm_backend.py:" in f["evidence"]["message"]
        for f in rows
    )
    assert code == 1


@pytest.mark.parametrize(
    ("distribution", "version"), [("sglang", "0.5.20"), ("sglang", "0.5.23"), ("vllm", "0.27.0"), ("vllm", "0.33.0")]
)
def test_what_a_patch_leaves_check_to_find_suggest_names(cli_json, tmp_path, distribution, version):
    """On the suite's engine trees: a patch suggest writes leaves `check`
    clean on the same tree and SM once applied; what it does not rewrite, its
    exit code and its `not_rewritten` lines say, one per rule `check` still
    finds wanting (broken, at some shapes, or padding more than needed)."""
    source = engine_source(tmp_path / "source", distribution, version)
    tree = tmp_path / "tree"
    shutil.copytree(source, tree)
    subprocess.run(["git", "init", "-q"], cwd=tree, check=True)
    subprocess.run(["git", "add", "-A"], cwd=tree, check=True)
    diff = tmp_path / "p.diff"
    code, doc, err = cli_json("suggest", "--repo", str(tree), "--sm", "100", "--diff", str(diff))
    if diff.exists():
        subprocess.run(["git", "apply", str(diff)], cwd=tree, check=True)
    else:
        assert code != 0 and f"--diff {diff} not written" in err, err
    checked_code, checked, _ = cli_json("check", "--repo", str(tree), "--sm", "100", "--strict")
    wanting = {f["backend"] for f in checked["findings"] if f["verdict"] in ("broken", "some-shapes", "reducible")}
    said = doc["patch"]["not_rewritten"]
    unnamed = {backend for backend in wanting if not any(line.startswith(backend) for line in said)}
    assert not unnamed, (unnamed, said)
    # Clean where nothing is left; else suggest's own exit code was not 0.
    assert checked_code == 0 or code != 0


def test_suggest_on_sm120_raises_the_pin_to_the_release_that_brings_a_route(cli_json, vllm_025_checkout):
    """0.6.13's DSv4 entry has no SM12x route: SM120 reaches trtllm-gen, whose
    runner refuses it ("Unsupported architecture"), so no padding serves there.
    suggest names the release that brings the route, with its rule, as one change."""
    code, doc, err = cli_json("suggest", "--repo", str(vllm_025_checkout), "--sm", "120")
    [sm120] = [s for s in doc["suggestions"] if s["kernel"] == "dsv4-sparse-mla" and s["sms"] == [120]]
    assert sm120["suggested_on"] == "0.6.14" and sm120["suggested"] is not None, sm120
    assert sm120["pin"]["needs"] == "0.6.14", sm120["pin"]


def test_a_rule_no_patch_can_write_is_named_with_what_it_needs(cli_json, tmp_path):
    """The prefill branch pads every count to itself; 0.6.14's DSv4 prefill
    dispatch (its C++) has no kernel for 4 or 8 heads, so it needs padding to
    16: suggest says so, and since the branch is code (it reads the SM and a
    setting), the patch asks for it by hand, as it does the decode branch."""
    from .conftest import ROOT

    like = ROOT / "tests" / "fixtures" / "repos" / "sglang_like"
    code, doc, err = cli_json(
        "suggest", "--repo", str(like), "--mapping", str(like / "mapping.toml"), "--diff", str(tmp_path / "d.diff")
    )
    [prefill] = [s for s in doc["suggestions"] if "[prefill]" in s["backend"]]
    assert prefill["suggested"] == "pad_to {16, 32, 64}", prefill
    assert "the current rule crashes on flashinfer 0.6.14 for n={4, 8}" in prefill["advice"]
    not_rewritten = doc["patch"]["not_rewritten"]
    assert any("[prefill]" in line and "change it by hand to pad_to {16, 32, 64}" in line for line in not_rewritten)
    assert any("[decode]" in line and "change it by hand" in line for line in not_rewritten)
    assert code == 2 and "not written: nothing to rewrite" in err, err
