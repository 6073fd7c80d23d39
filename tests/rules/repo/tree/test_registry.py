"""The models an engine tree can load, from its own registry read with ast
(rules/repo/tree/registry.py), and a check that judges a model only on a tree
that serves it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hprobe.rules.repo.tree.registry import served_architectures
from hprobe.rules.repo.tree.scan import RepoIndex

from ....conftest import engine_source


def _tree(root: Path, files: dict[str, str]) -> RepoIndex:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return RepoIndex.build(root)


@pytest.mark.pure
def test_vllm_registry_keys_are_the_architectures_served(tmp_path):
    index = _tree(
        tmp_path,
        {
            "vllm/__init__.py": "",
            "vllm/model_executor/models/registry.py": """
            _TEXT_GENERATION_MODELS = {
                "DeepseekV3ForCausalLM": ("deepseek_v2", "DeepseekV3ForCausalLM"),
                "KimiK25ForConditionalGeneration": ("kimi_k25", "KimiK25ForConditionalGeneration"),
            }
            _SPECULATIVE: dict[str, tuple[str, str]] = {"DeepSeekMTPModel": ("deepseek_mtp", "DeepSeekMTP")}
            NOT_A_TABLE = ("KimiK3ForConditionalGeneration",)
            """,
        },
    )
    served = served_architectures(index, {"KimiK3ForConditionalGeneration", "DeepseekV3ForCausalLM"})
    assert served is not None and served.where == "vllm/model_executor/models/registry.py"
    assert served.architectures == {"DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration", "DeepSeekMTPModel"}


@pytest.mark.pure
@pytest.mark.parametrize("top", ["tree", "package", "nested"])
def test_code_inside_a_models_module_runs_only_for_its_architectures(tmp_path, top):
    """A registry value names the module that implements the architecture,
    beside the registry ("deepseek_v2") or absolute ("vllm.models.kimi_k3");
    code in it, or in its package, serves only those architectures. Read from
    the tree, from the vllm package itself (names start below it), or from a
    folder that holds the package one level down (an unpacked wheel beside its
    archive: names start above it)."""
    registry = """
        _MODELS = {
            "DeepseekV3ForCausalLM": ("deepseek_v2", "DeepseekV3ForCausalLM"),
            "KimiK3ForConditionalGeneration": ("vllm.models.kimi_k3", "KimiK3ForConditionalGeneration"),
            "KimiK31ForConditionalGeneration": ("vllm.models.kimi_k3", "KimiK3ForConditionalGeneration"),
        }
        """
    base = "tree/" if top == "nested" else ""
    index = _tree(tmp_path, {f"{base}vllm/__init__.py": "", f"{base}vllm/model_executor/models/registry.py": registry})
    root = {"tree": "vllm.", "package": "", "nested": "tree.vllm."}[top]
    if top == "package":
        index = RepoIndex.build(tmp_path / "vllm")
    served = served_architectures(index, {"DeepseekV3ForCausalLM"})
    assert served is not None
    assert served.only_for(f"{root}models.kimi_k3.nvidia.drafter.attention") == {
        "KimiK3ForConditionalGeneration",
        "KimiK31ForConditionalGeneration",
    }
    assert served.only_for(f"{root}model_executor.models.deepseek_v2") == {"DeepseekV3ForCausalLM"}
    # Shared code, and a module whose name only starts like a model's: every model.
    assert served.only_for(f"{root}v1.attention.backends.mla.flashinfer_mla") is None
    assert served.only_for(f"{root}models.kimi_k30") is None


@pytest.mark.pure
def test_sglang_entry_classes_are_the_architectures_served(tmp_path):
    index = _tree(
        tmp_path,
        {
            "sglang/srt/models/deepseek_v2.py": (
                "class DeepseekV3ForCausalLM: ...\nEntryClass = [DeepseekV2ForCausalLM, DeepseekV3ForCausalLM]\n"
            ),
            "sglang/srt/models/kimi_k3.py": "EntryClass = KimiK3ForConditionalGeneration\n",
            "sglang/srt/models/other.py": "EntryClass = [OtherForCausalLM]\n",
        },
    )
    served = served_architectures(
        index, {"DeepseekV3ForCausalLM", "KimiK3ForConditionalGeneration", "GlmMoeDsaForCausalLM"}
    )
    assert served is not None and served.where.startswith("the EntryClass declarations under sglang/srt/models")
    assert {"DeepseekV3ForCausalLM", "KimiK3ForConditionalGeneration"} <= served.architectures
    assert "GlmMoeDsaForCausalLM" not in served.architectures


@pytest.mark.pure
def test_a_tree_without_a_registry_says_nothing(tmp_path):
    index = _tree(tmp_path, {"engine/attention.py": "x = 1\n"})
    assert served_architectures(index, {"DeepseekV3ForCausalLM"}) is None


@pytest.mark.slow
def test_vllm_025_judges_no_model_it_cannot_load(cli_json):
    """vLLM 0.25.0 registers no Kimi K3 architecture: Kimi-K3 is said once and
    not judged (a 24-head finding on its dense path was a false alarm), unless
    asked for by name; the sparse backend's call, in a method renamed since,
    is judged through the mapping's class entry."""
    tree = engine_source(Path("unused"), "vllm", "0.25.0") / "vllm"
    code, doc, err = cli_json("check", "--repo", str(tree), "--sm", "100", "--flashinfer", "0.6.14")
    assert not any(f["model"] == "Kimi-K3" for f in doc["findings"])
    assert any(
        n.startswith("Kimi-K3: not served by this tree (no KimiK3ForConditionalGeneration in ")
        and "model_executor/models/registry.py)" in n
        for n in doc["notes"]
    ), doc["notes"]
    sparse = {p["site"].rsplit("/vllm/", 1)[1]: p for p in doc["call_paths"]}[
        "v1/attention/backends/mla/flashinfer_mla_sparse.py:495"
    ]
    assert sparse["status"] == "judged" and sparse["function"] == "FlashInferMLASparseImpl.forward_mqa"
    glm = [
        f
        for f in doc["findings"]
        if f["backend"].endswith("FlashInferMLASparseImpl.forward_mqa") and f["model"] == "GLM-5"
    ]
    assert {(f["tp"], f["n"]) for f in glm} == {(1, 64), (2, 32), (4, 16), (8, 8), (16, 4)}
    asked, doc, _ = cli_json(
        "check", "--repo", str(tree), "--sm", "100", "--flashinfer", "0.6.14", "--model", "Kimi-K3"
    )
    assert any(f["model"] == "Kimi-K3" for f in doc["findings"])
    assert any(
        n.startswith("Kimi-K3: judged as asked (--model), though this tree serves no KimiK3ForConditionalGeneration")
        for n in doc["notes"]
    )
    assert code in (0, 1, 3) and asked in (0, 1, 3), err
