"""Rules that read more than their head-count argument, as SGLang's does: a fixture
engine exercising each construct, judged against the installed flashinfer; then
the real SGLang 0.5.23 source, downloaded in the test and never imported,
judged against the flashinfer it pins (0.7.2) and against 0.6.13."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT, engine_source

ENGINE = ROOT / "tests" / "fixtures" / "repos" / "sglang_like"
MAPPING = ENGINE / "mapping.toml"
SGLANG = "0.5.23"  # pins flashinfer_python==0.7.2


def _extract(cli_json, *extra: str) -> dict:
    code, doc, err = cli_json("table", "extract", "--repo", str(ENGINE), "--mapping", str(MAPPING), *extra)
    assert code == 0, err
    return {c["class"]: c for c in doc["classes"]}


def _rules(item: dict) -> dict[tuple[str, str], dict[int, int]]:
    """(first SM, phase) -> {n: padded}, from a class's bound rules."""
    out = {}
    for b in item["bound"]:
        pairs = b["rule"].removeprefix("pad_map {").removesuffix("}").split(", ")
        out[f"SM{b['sms'][0]}", b["phase"]] = {int(k): int(v) for k, v in (p.split("->") for p in pairs)}
    return out


# -- the fixture engine, against the installed flashinfer (0.6.14) ----------------------


def test_instance_attributes_platform_setting_and_flashinfer_table(cli_json):
    classes = _extract(cli_json)
    decode = classes["DecodeLayer"]
    assert decode["status"] == "mapped" and decode["reads_flashinfer"]
    rules = _rules(decode)
    # SM100: not SM12x, so the setting's floor: 64 for every n <= 64; TP1 keeps n.
    assert rules["SM100", "decode"] == {64: 64, 32: 64, 16: 64, 8: 64, 4: 64}
    # SM120 decode: n where 0.6.14's own _DECODE_DSV4_DISPATCH lists it (8..64), else the floor.
    assert rules["SM120", "decode"] == {64: 64, 32: 32, 16: 16, 8: 8, 4: 64}
    # SM120 prefill (128 tokens > 64): n, whatever the table says.
    assert rules["SM120", "prefill"] == {64: 64, 32: 32, 16: 16, 8: 8, 4: 4}
    # Each count names the branch that padded it, with the conditions it held under.
    sm120 = next(b for b in decode["bound"] if b["sms"] == [120] and b["phase"] == "decode")
    branch = {(x["model"], x["n"]): x["branch"] for x in sm120["branches"]}
    assert branch["DeepSeek-V4-Flash", 8].endswith(
        "engine/attention.py:22 [SM120, decode, ENGINE_DECODE_BACKEND=flashinfer, ENGINE_PAD_FLOOR=64]"
    )
    assert branch["DeepSeek-V4-Flash", 4].endswith(
        "engine/attention.py:24 [SM120, decode, ENGINE_DECODE_BACKEND=flashinfer, ENGINE_PAD_FLOOR=64]"
    )
    assert branch["DeepSeek-V4-Flash", 64].endswith(
        "engine/attention.py:14 [SM120, decode, ENGINE_DECODE_BACKEND=flashinfer, ENGINE_PAD_FLOOR=64]"
    )
    # Outside the subset: said with its file and line, never guessed.
    shape = classes["ShapeLayer"]
    assert shape["status"] == "not-evaluable" and shape["not_evaluable"].endswith(
        "engine/attention.py:42: ShapeLayer.weight is not defined in the repo"
    )
    dynamic = classes["DynamicLayer"]
    assert "ENGINE_DYNAMIC: its default is computed at run time (_default_dynamic)" in dynamic["not_evaluable"]
    assert not any(m == "engine" or m.startswith("engine.") for m in sys.modules)  # read, never imported


def test_set_overrides_the_declared_default(cli_json):
    triton = _rules(_extract(cli_json, "--set", "ENGINE_DECODE_BACKEND=triton")["DecodeLayer"])
    assert triton["SM120", "decode"] == {64: 64, 32: 64, 16: 64, 8: 64, 4: 64}  # the flashinfer branch is not taken
    floor = _rules(_extract(cli_json, "--set", "ENGINE_PAD_FLOOR=128")["DecodeLayer"])
    assert floor["SM100", "decode"] == {64: 64, 32: 128, 16: 128, 8: 128, 4: 128}  # TP1 keeps n
    # A runtime default given with --set: the rule evaluates, through super().
    on = _extract(cli_json, "--set", "ENGINE_DYNAMIC=1")["DynamicLayer"]
    off = _extract(cli_json, "--set", "ENGINE_DYNAMIC=off")["DynamicLayer"]
    assert _rules(on)["SM100", None] == {64: 64, 32: 32, 16: 16, 8: 8, 4: 4}
    assert _rules(off)["SM100", None] == {64: 64, 32: 64, 16: 64, 8: 64, 4: 64}


@pytest.mark.parametrize(
    ("setting", "needle"),
    [
        ("NO_SUCH=1", "--set NO_SUCH: not a setting of engine.environ.Envs"),
        ("ENGINE_PAD_FLOOR=abc", "--set ENGINE_PAD_FLOOR=abc: not a value of its type (EnvInt)"),
        ("ENGINE_DYNAMIC=maybe", "--set ENGINE_DYNAMIC=maybe: not a value of its type (EnvBool)"),
        ("=1", "--set '=1': expected NAME=VALUE"),
    ],
)
def test_bad_set_is_one_line(cli, setting, needle):
    code, out, err = cli("table", "extract", "--repo", str(ENGINE), "--mapping", str(MAPPING), "--set", setting)
    assert code == 2 and out == "" and err.strip().splitlines() == [f"hprobe: error: {needle}"]


def test_set_needs_a_repo_whose_rules_read_settings(cli):
    code, _, err = cli("check", "--set", "A=1")
    assert code == 2 and "--set goes with --repo" in err
    code, _, err = cli("check", "--repo", str(ROOT / "tests" / "fixtures" / "repos" / "pre48047"), "--set", "A=1")
    assert code == 2 and err.count("hprobe: error:") == 1 and "read no settings" in err


def test_check_judges_each_branch_against_the_kernel(cli_json):
    code, doc, _ = cli_json("check", "--repo", str(ENGINE), "--mapping", str(MAPPING), "--sm", "100,120")
    assert [r["version"] for r in doc["releases"]] == ["0.6.14"]
    by = {(f["backend"], f["sm"], f["tp"]): f for f in doc["findings"] if f["model"] == "DeepSeek-V4-Flash"}
    sm100 = by["engine.attention.DecodeLayer [decode] (SM100)", 100, 8]
    assert (sm100["n"], sm100["padded"], sm100["verdict"], sm100["best"]) == (8, 64, "reducible", 8)
    sm120 = by["engine.attention.DecodeLayer [decode] (SM120)", 120, 8]
    assert (sm120["n"], sm120["padded"], sm120["verdict"]) == (8, 8, "ok")
    assert sm120["source"].endswith(
        "attention.py:22 [SM120, decode, ENGINE_DECODE_BACKEND=flashinfer, ENGINE_PAD_FLOOR=64]"
    )
    # The class outside the subset is inconclusive where it would run, with its file:line.
    shape = [f for f in doc["findings"] if f["backend"].startswith("engine.attention.ShapeLayer")]
    assert (
        shape and {f["verdict"] for f in shape} == {"inconclusive"} and shape[0]["source"].endswith("attention.py:42")
    )
    # SM120 prefill hands the paged entry 8 and 4 heads (V4-Flash TP8/16),
    # which 0.6.14's DSv4 prefill dispatch has no kernel for (its C++ switch:
    # 16, 32, 64, 128): broken, with the entry's own words.
    prefill = [f for f in doc["findings"] if "[prefill]" in f["backend"] and f["verdict"] == "broken"]
    assert {(f["n"], f["padded"]) for f in prefill} == {(8, 8), (4, 4)}
    assert all(
        f["evidence"]["message"].startswith("Unsupported sparse-MLA prefill configuration: model=DSV4") for f in prefill
    )
    assert code == 1


# -- SGLang's own source ----------------------------------------------------------------


@pytest.fixture(scope="module")
def sglang_tree(tmp_path_factory) -> Path:
    return engine_source(tmp_path_factory.mktemp("sglang"), "sglang", SGLANG)


MQA = "srt.models.deepseek_v4.MQALayer"


@pytest.mark.slow
def test_sglang_extract_finds_the_rule_and_its_subclasses(cli_json, sglang_tree):
    code, doc, err = cli_json("table", "extract", "--repo", str(sglang_tree / "sglang"))
    assert code == 0, err
    assert doc["pin"]["spec"] == "==0.7.2"
    classes = {c["module"] + "." + c["class"]: c for c in doc["classes"]}
    assert classes["srt.models.deepseek_v4.MqaAttentionBase"]["status"] == "unprobed"
    assert classes[MQA]["status"] == "mapped" and classes[MQA]["defined_at"].endswith("srt/models/deepseek_v4.py:1215")
    # DSpark inherits the method but pads its own query: judged as its call paths, not through the method.
    assert classes["srt.models.deepseek_v4_dspark.DSparkAttention"]["status"] == "unprobed"
    # Evaluated against the pinned 0.7.2, whose dispatch is an object: read by importing it in a worker.
    rules = _rules(classes[MQA])
    assert rules["SM100", "decode"] == {128: 128, 64: 64, 32: 64, 16: 64, 8: 64, 4: 64}
    assert rules["SM120", "decode"] == {128: 128, 64: 64, 32: 32, 16: 16, 8: 8, 4: 64}
    assert rules["SM120", "prefill"] == {128: 128, 64: 64, 32: 32, 16: 16, 8: 8, 4: 4}
    assert not any(m == "sglang" or m.startswith("sglang.") for m in sys.modules)  # read, never imported


@pytest.mark.slow
def test_sglang_check_against_its_pin(cli_json, sglang_tree):
    # 0.7.2's trtllm-gen answers are taken on the validators' word (its kernel table is the artifact store's).
    code, doc, err = cli_json("check", "--repo", str(sglang_tree / "sglang"), "--sm", "100,120", "--trust-validators")
    assert [r["version"] for r in doc["releases"]] == ["0.7.2"], err
    # Its rules read flashinfer's tables, so the tree is read again on the pin's
    # release: that reading says, as the first did, which model it cannot load.
    assert [n for n in doc["notes"] if "not served by this tree" in n] == [
        "Kimi-K3.1: not served by this tree (no KimiK31ForConditionalGeneration in the EntryClass declarations under "
        "multimodal_gen and 13 more folders): not judged"
    ], doc["notes"]
    mqa = {
        (f["backend"].split(" (")[0], f["sm"], f["model"], f["tp"]): f
        for f in doc["findings"]
        if f["backend"].startswith(MQA)
    }
    # SM100, TP >= 2: padded to 64, where 0.7.2 accepts the per-rank count itself.
    for model, tp, n in (
        ("DeepSeek-V4-Pro", 4, 32),
        ("DeepSeek-V4-Pro", 8, 16),
        ("DeepSeek-V4-Flash", 2, 32),
        ("DeepSeek-V4-Flash", 8, 8),
    ):
        f = mqa[f"{MQA} [decode]", 100, model, tp]
        assert (f["n"], f["padded"], f["verdict"], f["best"]) == (n, 64, "reducible", n), f
        assert f["waste"] == 64 / n and f["source"].endswith("deepseek_v4.py:1235 [SM100/SM103, decode]")
    assert mqa[f"{MQA} [decode]", 100, "DeepSeek-V4-Pro", 2]["verdict"] == "ok"  # 64 -> 64
    # SM120 decode, default setting: n where 0.7.2's dispatch covers it.
    f = mqa[f"{MQA} [decode]", 120, "DeepSeek-V4-Pro", 8]
    assert (f["n"], f["padded"]) == (
        16,
        16,
    ) and "deepseek_v4.py:1232 [SM120/SM121, decode, SGLANG_SM120_FLASHMLA_BACKEND=flashinfer]" in f["source"]
    # SM120 prefill: n.
    f = mqa[f"{MQA} [prefill]", 120, "DeepSeek-V4-Flash", 16]
    assert (f["n"], f["padded"]) == (4, 4) and f["source"].endswith("deepseek_v4.py:1222 [SM120/SM121, prefill]")
    assert code in (0, 1, 3)


@pytest.mark.slow
def test_sglang_against_0613_evaluates_the_fallback(cli_json, sglang_tree):
    """0.6.13 has no SM120 decode table: SGLang fails closed and pads to 64."""
    _, doc, _ = cli_json("check", "--repo", str(sglang_tree / "sglang"), "--sm", "120", "--flashinfer", "0.6.13")
    assert [r["version"] for r in doc["releases"]] == ["0.6.13"]
    decode = {(f["model"], f["tp"]): f for f in doc["findings"] if f["backend"].startswith(f"{MQA} [decode]")}
    f = decode["DeepSeek-V4-Pro", 4]
    assert (f["n"], f["padded"]) == (32, 64) and "deepseek_v4.py:1235 [SM120/SM121, decode" in f["source"]
    assert decode["DeepSeek-V4-Pro", 1]["padded"] == 128  # TP1: n


@pytest.mark.slow
def test_suggest_on_sglang(cli_json, sglang_tree):
    code, doc, err = cli_json("suggest", "--repo", str(sglang_tree / "sglang"), "--sm", "100")
    by = {s["backend"].split(" (")[0]: s for s in doc["suggestions"]}
    mqa = by[f"{MQA} [decode]"]
    # 0.7.2, the pin, answers on trtllm-gen at the validators only here (its
    # kernel table is the artifact store's): no rule is suggested on that, and
    # the run is undecided, saying which release.
    assert mqa["suggested"] is None and any("0.7.2" in why for why in mqa["inconclusive"]), mqa
    assert code == 3, err


DSPARK = "DSparkAttention.forward (inline)"


@pytest.mark.slow
def test_sglang_call_paths_dspark_and_the_unpadded_dense_path(cli_json, sglang_tree):
    code, doc, err = cli_json(
        "check", "--repo", str(sglang_tree / "sglang"), "--sm", "100,120", "--model", "DeepSeek-V4-Pro,DeepSeek-V3"
    )
    sites = {p["site"].split("/sglang/", 1)[1]: p for p in doc["call_paths"]}
    # trtllm_mla (the SM100 default for DeepseekV3ForCausalLM) passes num_local_heads unpadded.
    dense = sites["srt/layers/attention/trtllm_mla_backend.py:1041"]
    assert dense["status"] == "judged" and dense["detail"] == "unpadded (heads // tp)"
    rows = [f for f in doc["findings"] if f["backend"].endswith("TRTLLMMLABackend._run_decode_kernel")]
    assert sorted((f["tp"], f["n"], f["padded"]) for f in rows) == [
        (1, 128, 128),
        (2, 64, 64),
        (4, 32, 32),
        (8, 16, 16),
        (16, 8, 8),
    ]
    assert rows[0]["reach"]["default_reaches"] is True and "trtllm_mla" in rows[0]["reach"]["default"]
    # DSpark on SM120 (FlashInfer by default, a pool that is not uniform FP8): 64 for Pro TP4/8/16.
    dspark = {
        (f["tp"]): f
        for f in doc["findings"]
        if f["backend"].startswith(DSPARK) and "_flash_mla_flashinfer" in f["backend"] and f["sm"] == 120
    }
    for tp, n in ((4, 32), (8, 16), (16, 8)):
        f = dspark[tp]
        assert (f["n"], f["padded"], f["verdict"]) == (n, 64, "reducible"), f
        assert "srt/models/deepseek_v4_dspark.py:293 [SM120/SM121, decode, pool.uniform_fp8=False]" in f["source"]
    # The DSv4 calls MQALayer serves are judged through its rule; every call found is listed.
    assert sites["srt/layers/attention/deepseek_v4_trtllm_backend.py:357"]["status"] in ("by-rule", "judged")
    assert all(p["status"] in ("judged", "by-rule") for p in doc["call_paths"]), [
        p for p in doc["call_paths"] if p["status"] not in ("judged", "by-rule")
    ]
    assert code in (0, 1, 3), err


@pytest.mark.slow
def test_sglang_dsa_paths_are_named_the_default_where_its_own_resolution_picks_flashinfer(cli_json, sglang_tree):
    """SGLang sets --dsa-decode-backend itself when none is given
    (arg_groups/overrides.py, _dsa_split_backend_resolution): `"trtllm" if
    major >= 10` for either KV cache dtype, unless the model has learnable
    sinks or HiSparse is on; flashinfer_sparse_mla for GLM with an FP8 cache on
    SM12x. Read from the tree on the paths' SMs, not said as unknown."""
    code, doc, err = cli_json("check", "--repo", str(sglang_tree / "sglang"), "--sm", "100,120", "--model", "GLM-5")
    reaches = {
        (f["sm"], f["reach"]["value"]): f["reach"]
        for f in doc["findings"]
        if f.get("reach") and f["reach"]["flag"] == "--dsa-decode-backend"
    }
    trtllm = reaches[(100, "trtllm")]
    assert trtllm["default_reaches"] is None
    assert trtllm["default_when"] == (
        "hf_config.architectures[0] in _DEEPSEEK_FAMILY_ARCHS and is_deepseek_dsa(hf_config) "
        "and not getattr(hf_config, 'learnable_sink', False) and not view.enable_hisparse"
    )
    assert trtllm["source"].endswith("srt/arg_groups/overrides.py:720")
    assert "on SM100/SM103 when none is given" in trtllm["default"]
    sm120 = reaches[(120, "flashinfer_sparse_mla")]
    assert sm120["default_when"].endswith("and not getattr(hf_config, 'learnable_sink', False) and is_glm_sm12_fp8")
    assert sm120["source"].endswith("srt/arg_groups/overrides.py:670")
    assert code in (0, 1, 3), err


@pytest.mark.slow
def test_kimi_k3_reaches_its_dense_paths_by_its_own_override(cli_json, sglang_tree):
    """Kimi K3 sets its own decode backend on SM100/SM103 when none is given
    (arg_groups/model_overrides/kimi_k3.py: trtllm_mla, cutedsl_mla under
    --dcp-size > 1); DeepSeek V3 takes deepseek_v2.py's trtllm_mla. Each
    model's rows on the same call carry their own engine's default."""
    code, doc, err = cli_json(
        "check", "--repo", str(sglang_tree / "sglang"), "--sm", "100", "--model", "Kimi-K3,DeepSeek-V3"
    )
    reach = {
        ("cutedsl" if "CuteDslMLABackend" in f["backend"] else "trtllm", f["model"]): f["reach"]
        for f in doc["findings"]
        if any(f"{cls}._run_decode_kernel" in f["backend"] for cls in ("TRTLLMMLABackend", "CuteDslMLABackend"))
    }
    assert reach["trtllm", "DeepSeek-V3"]["default_reaches"] is True
    assert reach["trtllm", "DeepSeek-V3"]["source"].endswith("model_overrides/deepseek_v2.py:185")
    kimi = reach["trtllm", "Kimi-K3"]
    assert kimi["flag"] == "--decode-attention-backend" and kimi["value"] == "trtllm_mla"
    assert kimi["default_when"] == "cfg.dcp_size <= 1" and "model_overrides/kimi_k3.py:" in kimi["source"]
    assert reach["cutedsl", "DeepSeek-V3"]["default_reaches"] is False
    assert reach["cutedsl", "Kimi-K3"]["default_when"].startswith("cfg.dcp_size > 1 and (")
    assert code in (0, 1, 3), err


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.5.18", "0.5.19"])
def test_sglang_inline_rule_of_0518_and_0519(cli_json, version):
    tree = engine_source(Path("unused"), "sglang", version) / "sglang"
    code, doc, err = cli_json("check", "--repo", str(tree), "--sm", "120")
    assert code in (0, 1), err  # judged, no error
    pins = {"0.5.18": "0.6.17", "0.5.19": "0.6.18"}
    assert [r["version"] for r in doc["releases"]] == [pins[version]]
    decode = {
        (f["model"], f["tp"]): f
        for f in doc["findings"]
        if f["backend"].startswith("MQALayer.forward (inline)") and "[decode]" in f["backend"]
    }
    # Padded inline to 64 under TP > 1; the SM120 decode kernels take the per-rank count itself.
    for model, tp, n in (("DeepSeek-V4-Pro", 4, 32), ("DeepSeek-V4-Pro", 8, 16), ("DeepSeek-V4-Flash", 8, 8)):
        f = decode[model, tp]
        assert (f["n"], f["padded"], f["verdict"]) == (n, 64, "reducible"), f
        assert "srt/models/deepseek_v4.py" in f["source"] and "[SM120/SM121, decode]" in f["source"]
    assert decode["DeepSeek-V4-Pro", 1]["padded"] == 128  # TP1: the assignment does not run, n stands
    # The DSA decode backend on SM12x is read from the release's own resolution
    # (0.5.18 tests the platform with is_hip(), 0.5.19 with get_platform()):
    # flashinfer_sparse_mla by default for GLM with an FP8 cache only.
    sparse = {f["reach"]["default_when"] for f in doc["findings"] if f["reach"] and "dsa" in f["reach"]["flag"]}
    assert sparse == {
        "hf_config.architectures[0] in _DEEPSEEK_FAMILY_ARCHS and is_deepseek_dsa(hf_config) and is_glm_sm12_fp8"
    }, sparse


@pytest.mark.slow
def test_sglang_trtllm_mla_is_probed_with_the_counter_buffer_it_passes(cli_json):
    """SGLang 0.5.22's trtllm_mla passes a multi-CTA KV counter buffer and no
    backend (flashinfer's auto). For 64 < h_q < 128 auto serves cute-dsl,
    which refuses the buffer: Kimi-K3 at TP1 (96 heads) crashes there, and
    the probe of a plain auto call would have called it ok."""
    tree = engine_source(Path("unused"), "sglang", "0.5.22") / "sglang"
    code, doc, err = cli_json("check", "--repo", str(tree), "--sm", "100", "--model", "Kimi-K3", "--trust-validators")
    rows = {f["tp"]: f for f in doc["findings"] if f["backend"].endswith("TRTLLMMLABackend._run_decode_kernel")}
    assert {f["kernel"] for f in rows.values()} == {"trtllm-mla[kv_counter=1]"}, rows
    assert (rows[1]["n"], rows[1]["padded"], rows[1]["verdict"]) == (96, 96, "broken"), rows[1]
    evidence = rows[1]["evidence"]
    assert (
        evidence["message"] == "multi_ctas_kv_counter_buffer is only supported when a trtllm-gen runner is selected"
    ), evidence
    assert evidence["location"].startswith("flashinfer/mla/_core.py:"), evidence
    assert rows[2]["verdict"] == "ok" and rows[2]["n"] == 48  # auto keeps trtllm-gen at 48
    # The cute-dsl backend's own call passes backend="cute-dsl" and no buffer: probed as that.
    cute = {f["kernel"] for f in doc["findings"] if f["backend"].endswith("CuteDslMLABackend._run_decode_kernel")}
    assert cute == {"trtllm-mla[backend=cute-dsl]"}, cute
    assert code == 1, err


@pytest.mark.slow
def test_one_plan_on_sglang_0520_sm120_a_pin_raise_after_which_check_is_clean(cli, tmp_path):
    """SGLang 0.5.20 pinned ==0.6.18, on SM120: an unpadded call crashes at n=4
    on 0.6.18 (safe as it is from 0.7.0), the prefill rule kept as it is needs
    0.7.1 (refused from 0.6.18, then accepted again: the recovery is bisected,
    not read off the newest end), and the rules hprobe cannot rewrite (per-phase, inline) are safe as
    they are from 0.6.14. The patch is one change: the pin raised to the
    release every rule, as the patched tree holds it, is safe from; `check` on
    the patched tree then passes where it failed before."""
    from .engine_wheels import as_checkout

    checkout = as_checkout(
        engine_source(tmp_path / "src", "sglang", "0.5.20"), tmp_path / "repo", "flashinfer-python==0.6.18\n"
    )
    code, out, err = cli("check", "--repo", str(checkout), "--sm", "120")
    assert code == 1 and "broken" in out.splitlines()[-1], err
    diff = tmp_path / "fix.diff"
    code, out, err = cli("suggest", "--repo", str(checkout), "--sm", "120", "--diff", str(diff))
    assert code in (0, 1), err
    text = diff.read_text()
    assert (
        "-flashinfer-python==0.6.18\n+flashinfer-python==0.7.1\n" in text and text.count("+++ ") == 1
    )  # the pin, nothing else
    said = " ".join(out.split())
    # FlashInfer serves that call by default only where SGLang's own resolution
    # picks flashinfer_sparse_mla (GLM with an FP8 cache on SM12x): a change for
    # it alone needs a branch, and the call kept as it is still moves the pin.
    sparse = said.split("flashinfer_sparse_mla_forward: not rewritten: the rule also serves", 1)
    assert len(sparse) == 2, said
    assert "a change for FlashInfer alone needs a branch on --dsa-decode-backend == flashinfer_sparse_mla" in sparse[1]
    assert "as it is, it holds from flashinfer 0.7.0, and the pin moves with it" in sparse[1]
    assert (
        "DSparkAttention.forward (inline) -> _flash_mla_flashinfer [decode]: padding written at the call itself" in said
    )
    subprocess.run(["git", "apply", str(diff)], cwd=checkout, check=True)
    # Nothing broken is left; what keeps the gate from passing on SM120 is
    # GLM-5.3-Flash's NoPE call there (0.5.20 serves it), which hprobe lists as
    # not judged: for the models this test is about, the gate passes.
    code, out, err = cli("check", "--repo", str(checkout), "--sm", "120")
    last = out.splitlines()[-1]
    assert code == 3 and last.startswith("undecided: ") and "broken" not in last, out[-2000:]
    assert "NoPE model's SM12x sparse call" in " ".join(out.split())
    served = "DeepSeek-V4-Pro,DeepSeek-V4-Flash,DeepSeek-V3,DeepSeek-V3.2,GLM-5"
    code, out, err = cli("check", "--repo", str(checkout), "--sm", "120", "--model", served)
    assert code == 0 and out.splitlines()[-1].startswith("pass: "), out[-2000:]


@pytest.mark.slow
def test_sglang_as_its_repository_lays_it_out(cli_json, tmp_path):
    """SGLang's repository keeps its Python project in python/ (the package
    and the pyproject.toml that pins flashinfer). `--repo` at the repository's
    root is read as SGLang, with that pin, and judged as `--repo python/` is:
    never with another engine's mapping, never without its pin."""
    import shutil

    repo = tmp_path / "sglang"
    shutil.copytree(engine_source(tmp_path / "src", "sglang", "0.5.20") / "sglang", repo / "python" / "sglang")
    (repo / "python" / "pyproject.toml").write_text(
        '[project]\nname = "sglang"\nversion = "0.5.20"\ndependencies = ["flashinfer_python==0.7.2"]\n'
    )
    (repo / "docs").mkdir()  # the rest of a repository, no project of its own

    def judged(tree: Path) -> tuple[dict, set]:
        code, doc, err = cli_json("check", "--repo", str(tree), "--sm", "120")
        assert code in (0, 1, 3), err
        rows = {
            (f["backend"].removeprefix("python."), f["sm"], f["model"], f["tp"], f["n"], f["padded"], f["verdict"])
            for f in doc["findings"]
        }
        return doc, rows

    whole, rows = judged(repo)
    _, alone = judged(repo / "python")
    assert [r["version"] for r in whole["releases"]] == ["0.7.2"]  # the pin in python/pyproject.toml
    assert whole["tables"][0]["requires_flashinfer"] == "==0.7.2"
    assert "_kernel_num_heads" in whole["tables"][0]["name"]  # SGLang's mapping, not vLLM's
    assert rows == alone and rows


def test_sglang_0521_on_070_crashes_on_the_dispatch_envelope_it_iterates(cli_json, tmp_path):
    """SGLang 0.5.21 builds `frozenset(heads for heads, _ in _DECODE_DSV4_DISPATCH)`
    (kernels/ops/attention/flash_mla_sm120.py), outside the try that guards
    its import; 0.7.0.post1's envelope answers `in` and does not iterate:
    TypeError, uncaught (sglang#39492). Every SM120 decode row that asks it is
    broken, at every count, naming the line; TP1 never asks it."""
    tree = engine_source(tmp_path, "sglang", "0.5.21") / "sglang"
    code, doc, _ = cli_json("check", "--repo", str(tree), "--sm", "120", "--flashinfer", "0.7.0.post1")
    decode = [f for f in doc["findings"] if f["backend"].startswith("srt.models.deepseek_v4.MQALayer [decode]")]
    crash = (
        f"the engine's code raises TypeError at {tree}/kernels/ops/attention/flash_mla_sm120.py:281: "
        "'_DecodeDispatchEnvelope' object is not iterable"
    )
    assert {(f["model"], f["tp"]) for f in decode if f["crash"] == crash and f["verdict"] == "broken"} == {
        (model, tp) for model in ("DeepSeek-V4-Pro", "DeepSeek-V4-Flash") for tp in (2, 4, 8, 16)
    }
    assert {f["tp"]: f["verdict"] for f in decode if f["crash"] is None} == {1: "ok"}
    assert {f["sm"] for f in doc["findings"]} == {120}  # --sm filters every row
    [action] = [
        b["action"]
        for a in doc["advice"]
        for b in a["backends"]
        if b["backend"].startswith("srt.models.deepseek_v4.MQALayer [decode]")
    ]
    assert action == f"broken for TP2/4/8/16, at every count: {crash}"
    assert code == 1


@pytest.mark.slow
def test_glm_5_3_flash_is_judged_on_its_nope_call_with_the_top_k_lengths_sglang_hands_it(sglang_tree):
    """SGLang 0.5.23 serves GLM-5.3-Flash (EntryClass Glm5NextForConditionalGeneration):
    its DSA decode passes `sparse_mla_top_k_lens` only `if self.qk_rope_head_dim == 0`
    (and the DCP helper `None if top_k_lens is None else ...`), so the NoPE model's
    call is probed with the lengths, a rope part of 0 and its qk_nope_head_dim, and
    every other DSA model's without the lengths."""
    from hprobe.rules.repo.extract import extract
    from hprobe.rules.repo.tree.mapping import load_mapping

    found = extract(sglang_tree / "sglang", load_mapping(ROOT / "matrices" / "mappings" / "sglang.toml"))
    for function in ("DeepseekSparseAttnBackend._forward_trtllm", "dcp_trtllm_sparse_attention"):
        options = {b.models: dict(b.options) for b in found.paths.backends if b.name.endswith(function)}
        nope = options[("GLM-5.3-Flash",)]
        assert (nope["qk_rope_head_dim"], nope["qk_nope_head_dim"], nope["topk_lens"]) == (0, 256, 1), nope
        rope = [o for models, o in options.items() if "GLM-5" in models]
        assert rope and all("topk_lens" not in o and "qk_rope_head_dim" not in o for o in rope), options
