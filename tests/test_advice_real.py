"""Advice on real engine source, downloaded here (never imported): every patch
`suggest --diff` writes leaves a tree `check --repo` finds free of `broken`; the
first safe release is searched, not the pin's floor; a rule the engine's
default backend shares is named as such and never rewritten."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

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


@pytest.mark.parametrize(
    ("judged_under", "reduces"),
    [
        # On its own pin (==0.6.13) the DSv4 rule is already what that release
        # calls for; the DSA sparse call is not, and the pin moves for it.
        (["--sm", "100"], False),
        (["--sm", "100", "--pin", ">=0.6.14"], True),
        (["--sm", "100,120", "--flashinfer", "0.7.4"], True),
    ],
    ids=["own pin", "--pin above the tree's", "--flashinfer newer than the tree's"],
)
def test_every_patch_on_vllm_025_leaves_no_broken_finding(cli_json, vllm_025_checkout, tmp_path, judged_under, reduces):
    diff = tmp_path / "p.diff"
    code, doc, err = cli_json("suggest", "--repo", str(vllm_025_checkout), *judged_under, "--diff", str(diff))
    patch = doc["patch"]
    assert code == 0 and diff.exists() and f"wrote {diff}: " in err, err
    tree = tmp_path / "tree"
    shutil.copytree(vllm_025_checkout, tree)
    subprocess.run(["git", "apply", "--check", str(diff)], cwd=tree, check=True)
    subprocess.run(["git", "apply", str(diff)], cwd=tree, check=True)
    # A floor whose answers rest on the validators only says so beside it
    # (validators_only names every release seen that rests on them).
    shallow = {r: s for s in doc["suggestions"] if s.get("pin") for r in s["pin"]["validators_only"]}
    for release, s in shallow.items():
        if release in (s["pin"]["needs"], s["pin"]["no_padding_needs"]):
            assert any(
                f"at flashinfer {release} the answers rest on its validators only" in line
                for line in s["pin"]["advice"]
            )
    if "--flashinfer" in judged_under:
        assert "0.7.4" in shallow  # the plan's floor: 0.7.4's kernel table is not reachable here
    text = (tree / "requirements" / "cuda.txt").read_text()
    removed_padding = any("→ pad_to {8, 16, 32, 64, 128}" in line for line in patch["changed"])
    # One plan for every path judged: the pin moves to the first release on
    # which each of them, rewritten or kept as it is, is safe. The DSA sparse
    # call keeps handing trtllm-gen GLM-5's 4 heads at TP16, which 0.6.12 –
    # 0.6.17 refuse (trtllm-gen's own kernel table), so it is what moves the
    # pin; the raised line names it.
    [moved] = [line for line in patch["changed"] if ": flashinfer requirement ==0.6.13 → ==" in line]
    raised = moved.split("→ ==", 1)[1].split(" ", 1)[0]
    assert Version(raised) >= Version("0.6.18"), moved
    assert re.search(r"on which FlashInferMLASparse(SM120)?Impl\.forward_mqa, kept as it is, is safe\)$", moved), moved
    # flashinfer-cubin has no release past 0.6.13 on the index: its exact pin is
    # never moved to one, and the patch says so.
    assert text == CUDA_TXT.replace("python==0.6.13", f"python=={raised}")
    assert any(
        line.startswith("requirements/cuda.txt:")
        and f"flashinfer-cubin==0.6.13 left as it is: the index has no flashinfer-cubin {raised}" in line
        for line in patch["not_rewritten"]
    ), patch["not_rewritten"]
    code, checked, err = cli_json("check", "--repo", str(tree), "--sm", judged_under[1])
    padded = [f for f in checked["findings"] if f["kernel"] == "dsv4-sparse-mla"]
    assert padded and not {f["verdict"] for f in padded} & {"broken", "some-shapes", "inconclusive"}, err
    # The patched tree checks clean: nothing the patch leaves is broken.
    # (0.25.0 loads no Kimi K3: none of its counts is judged here.)
    failing = {
        (f["kernel"], f["model"], f["tp"], f["verdict"])
        for f in checked["findings"]
        if f["verdict"] in ("broken", "some-shapes", "inconclusive")
    }
    assert failing == set(), failing
    assert not any(f["model"] == "Kimi-K3" for f in checked["findings"])
    assert code == 0, err
    assert removed_padding is reduces, patch
    assert not any(m.startswith("vllm") for m in sys.modules)


def test_vllm_033_first_safe_release_is_searched_not_the_pin_floor(cli_json, tmp_path):
    tree = engine_source(tmp_path, "vllm", "0.33.0")
    code, doc, err = cli_json("suggest", "--repo", str(tree / "vllm"), "--sm", "100")
    mla = next(s for s in doc["suggestions"] if s["backend"].endswith(FLASHINFER_MLA))
    assert mla["suggested"] == "pad_to {8, 16, 32, 64, 128}"
    assert mla["pin"]["current_pin"] == "==0.7.2.post1" and mla["pin"]["needs"] == "0.6.14", mla["pin"]
    assert any("safe from flashinfer 0.6.14 (first safe release" in line for line in mla["pin"]["advice"])
    assert any(
        "safe on every release your pin '==0.7.2.post1' admits (0.7.2.post1)" in line for line in mla["pin"]["advice"]
    )
    assert code == 0, err


@pytest.mark.parametrize("version", ["0.5.21", "0.5.23"])
def test_sglang_fallback_is_flashmla_by_default_and_never_rewritten(cli_json, cli, tmp_path, version):
    tree = engine_source(tmp_path, "sglang", version) / "sglang"
    diff = tmp_path / "s.diff"
    code, doc, err = cli_json("suggest", "--repo", str(tree), "--sm", "100", "--diff", str(diff))
    assert code == 2 and f"--diff {diff} not written: nothing to rewrite" in err, (
        err
    )  # the report still says why for each rule
    decode = [s for s in doc["suggestions"] if s["kernel"] == "dsv4-sparse-mla"]
    assert decode
    for s in decode:
        # The first safe release of the rule FlashInfer's path calls for, searched.
        assert s["suggested"] == "pad_to {8, 16, 32, 64, 128}" and s["pin"]["needs"] == "0.6.14", s["pin"]
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
    _, checked, _ = cli_json("check", "--repo", str(tree), "--sm", "100")
    assert all(
        f["reach"] and f["reach"]["default_reaches"] is False
        for f in checked["findings"]
        if f["kernel"] == "dsv4-sparse-mla"
    )
    _, out, _ = cli("check", "--repo", str(tree), "--sm", "100", "--details")
    assert "reaches FlashInfer only under --dsv4-attn-backend trtllm" in out
    # --heads re-evaluates the rule for those heads, under a model named by its
    # count, which keeps every other attribute of the models it stands for: the
    # DeepSeek-V4 models bring `q_head_norm`, which SGLang's rule reads.
    _, kimi, _ = cli_json("check", "--repo", str(tree), "--sm", "100", "--heads", "96")
    rows = [f for f in kimi["findings"] if f["kernel"] == "dsv4-sparse-mla"]
    assert {f["model"] for f in rows} == {"96 heads"} and {f["n"] for f in rows} == {
        96,
        48,
        24,
        12,
        6,
    }
    assert not any(f["verdict"] in ("table-refuses", "inconclusive") for f in rows)


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


def test_a_rule_kept_as_it_is_is_not_asked_to_be_changed_by_hand(cli_json, tmp_path):
    """The prefill branch already pads every count to itself: suggest says
    keep it, and the patch does not then ask for a change by hand."""
    from .conftest import ROOT

    like = ROOT / "tests" / "fixtures" / "repos" / "sglang_like"
    code, doc, err = cli_json(
        "suggest", "--repo", str(like), "--mapping", str(like / "mapping.toml"), "--diff", str(tmp_path / "d.diff")
    )
    [prefill] = [s for s in doc["suggestions"] if "[prefill]" in s["backend"]]
    assert prefill["advice"].startswith("SM120: keep ")
    assert all(c["current"] == c["suggested"] for c in prefill["changes"])
    prefill_lines = [line for line in doc["patch"]["not_rewritten"] if "[prefill]" in line]
    assert not any("by hand" in line for line in prefill_lines), prefill_lines
    # What it does need is said: the tree declares no flashinfer requirement to raise.
    assert all(
        "as it is, it needs flashinfer >= " in line and "declares no flashinfer requirement" in line
        for line in prefill_lines
    )
    assert any("[decode]" in line and "change it by hand" in line for line in doc["patch"]["not_rewritten"])
    assert code == 2 and "not written: nothing to rewrite" in err, err
