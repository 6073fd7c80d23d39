"""`hprobe check`: verdicts from the installed flashinfer's validators."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from hprobe.system.envinfo import distribution_version

from ..conftest import POST_48047, PRE_48047, V4_PRO_TABLE, only_pending_undecided, tmpfs

pytestmark = pytest.mark.skipif(
    distribution_version("flashinfer-python") != "0.6.14",
    reason="these expectations are for flashinfer-python 0.6.14 (scripts/setup installs it)",
)


def _by_tp(doc: dict, model: str = "DeepSeek-V4-Pro", sm: int = 100) -> dict[int, dict]:
    return {f["tp"]: f for f in doc["findings"] if f["model"] == model and f["sm"] == sm}


def test_pre_48047_table_is_reducible_at_tp4_8_16(cli_json):
    code, doc, _ = cli_json("check", "--sm", "100", "--table", str(PRE_48047))
    assert code == 0
    assert doc["schema"] == "hprobe.check/2"
    findings = _by_tp(doc)
    assert {tp: f["verdict"] for tp, f in findings.items()} == {
        1: "ok",
        2: "ok",
        4: "reducible",
        8: "reducible",
        16: "reducible",
    }
    assert [(findings[tp]["padded"], findings[tp]["best"]) for tp in (4, 8, 16)] == [(64, 32), (64, 16), (64, 8)]
    assert findings[16]["waste"] == 8.0
    # Evidence: the padded count reached the launch boundary on this release and SM.
    assert findings[4]["evidence"]["outcome"] == "accepted"
    assert findings[4]["flashinfer_version"] == "0.6.14"
    # SM120 backends are not run on SM100: said, not silently dropped.
    assert any("DeepseekV4FlashInferSM120Attention" in n for n in doc["notes"])


def test_strict_turns_reducible_into_exit_1(cli_json):
    code, doc, _ = cli_json("check", "--sm", "100", "--table", str(PRE_48047), "--strict")
    assert code == 1
    assert doc["exit_code"] == 1 and doc["strict"] is True


def test_post_48047_table_is_all_ok(cli_json):
    code, doc, _ = cli_json("check", "--sm", "100", "--table", str(POST_48047))
    assert code == 0
    assert {f["verdict"] for f in doc["findings"]} == {"ok"}
    assert len(_by_tp(doc)) == 5


def test_padding_the_kernel_rejects_is_broken(cli_json, write_table):
    table = write_table(V4_PRO_TABLE.format(rule="pad_to = [24, 128]"))
    code, doc, _ = cli_json("check", "--sm", "100", "--table", str(table))
    assert code == 1
    findings = _by_tp(doc)
    broken = findings[8]  # 16 heads per rank, padded to 24
    assert broken["padded"] == 24 and broken["verdict"] == "broken"
    assert broken["evidence"]["outcome"] == "rejected"
    assert "got 24" in broken["evidence"]["message"]
    assert broken["best"] == 16
    assert findings[1]["verdict"] == "ok"


def test_table_that_raises_for_an_accepted_count(cli_json, write_table):
    # 8 heads per rank at TP16: the map has no entry for 8, so the consumer raises.
    table = write_table(V4_PRO_TABLE.format(rule='pad_map = { "128" = 128, "64" = 64, "32" = 64, "16" = 64 }'))
    code, doc, _ = cli_json("check", "--sm", "100", "--table", str(table))
    findings = _by_tp(doc)
    assert findings[16]["verdict"] == "table-refuses" and findings[16]["padded"] is None
    assert findings[16]["best"] == 8
    assert code == 0
    assert cli_json("check", "--sm", "100", "--table", str(table), "--strict")[0] == 1


def test_text_report_names_verdicts_and_exit(cli):
    code, out, _ = cli("check", "--sm", "100", "--table", str(PRE_48047), "--details")
    assert code == 0
    # No pin: what 0.6.14 accepts, never called removable.
    assert "reducible" in out
    assert "8 accepted: 8.00× waste, accepted unpadded on flashinfer 0.6.14 only (no pin)" in out
    assert "removable" not in out
    assert (
        out.rstrip().endswith("→ exit 0")
        and out.splitlines()[0] == out.splitlines()[-1] == "pass: 3 ok, 7 reducible  → exit 0"
    )


def test_default_tables_cover_every_sm_without_gpu(cli_json):
    # 0.7.2's answers on trtllm-gen paths wait on its kernel table (the artifact
    # store's alone): undecided here, and judged on the validators' word only when asked.
    code, doc, _ = cli_json("check")
    assert code == 3 and only_pending_undecided(doc["findings"])
    code, doc, _ = cli_json("check", "--trust-validators")
    assert code == 0
    assert doc["sm_source"] == "default"
    assert doc["sms"] == [100, 103, 120, 121]
    assert any("no GPU visible" in n for n in doc["notes"])
    tables = {t["name"] for t in doc["tables"]}
    # Only tables of FlashInfer calls a released engine makes (vLLM's CUTLASS MLA
    # is vLLM's own op; the SM120 decode class was in no release).
    assert tables == {
        "vllm-dsv4-flashinfer (before #48047)",
        "vllm-dsv4-flashinfer (after #48047)",
        "sglang (_kernel_num_heads) on flashinfer 0.7.2",
        "vllm-flashinfer-mla-dense",
    }
    # SM120 before #48047 padded 8 heads to 16, which 0.6.14 no longer needs.
    sm120 = [f for f in doc["findings"] if f["sm"] == 120 and f["n"] == 8 and "before" in f["table"]]
    assert {f["verdict"] for f in sm120} == {"reducible"}
    # SGLang 0.5.23's table, extracted from its source against the 0.7.2 it pins
    # (and judged there): decode pads 4 heads (V4-Flash TP16) to 64 on SM100,
    # where 0.7.2's validators accept 8.
    assert "0.7.2" in {r["version"] for r in doc["releases"]}
    sglang = [f for f in doc["findings"] if f["table"].startswith("sglang") and f["n"] == 4 and f["sm"] == 100]
    assert sglang and {(f["padded"], f["verdict"], f["best"]) for f in sglang} == {(64, "reducible", 8)}
    # Kimi K3 at TP4 (24 per rank) on trtllm-gen: the tile rule pads to 32. The
    # validators accept 24, but trtllm-gen's selection puts 24 heads in 16-head
    # tiles and refuses the remainder: at compiled depth 32 is what serves.
    k3 = [
        f
        for f in doc["findings"]
        if f["table"] == "vllm-flashinfer-mla-dense" and f["model"] == "Kimi-K3" and f["tp"] == 4
    ]
    assert {(f["padded"], f["label"]) for f in k3} == {(32, "ok (compiled)")}


def test_tables_are_not_modified(cli, write_table):
    table = write_table(V4_PRO_TABLE.format(rule="pad_to = [64, 128]"))
    before = hashlib.sha256(table.read_bytes()).hexdigest()
    cli("check", "--sm", "100", "--table", str(table))
    assert hashlib.sha256(table.read_bytes()).hexdigest() == before


def test_heads_and_tp_overrides(cli_json):
    code, doc, _ = cli_json("check", "--sm", "100", "--table", str(POST_48047), "--heads", "96", "--tp", "1,2,4")
    # One model, named by its count: a DeepSeek name would not hold 96 heads.
    assert {f["model"] for f in doc["findings"]} == {"96 heads"}
    findings = _by_tp(doc, model="96 heads")
    # Kimi-K3-like: 96 -> 128, 48 -> 64, 24 -> 32; all accepted, none smaller.
    assert [(findings[tp]["n"], findings[tp]["padded"], findings[tp]["verdict"]) for tp in (1, 2, 4)] == [
        (96, 128, "ok"),
        (48, 64, "ok"),
        (24, 32, "ok"),
    ]
    assert code == 0


def test_a_warm_check_imports_neither_torch_nor_flashinfer(tmp_path, write_table):
    """Results for the installed release are cached under its RECORD digest:
    a second run (a pre-commit hook) answers the same without importing."""
    import subprocess
    import sys

    table = write_table(V4_PRO_TABLE.format(rule="pad_to = [64, 128]"))
    env = dict(os.environ, NO_COLOR="1", HPROBE_CACHE_DIR=str(tmp_path / "cache"))
    argv = [sys.executable, "-X", "importtime", "-m", "hprobe", "check", "--table", str(table), "--sm", "100", "--json"]
    cold = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    warm = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert cold.returncode == warm.returncode == 0, cold.stderr[-500:]
    assert json.loads(warm.stdout) == json.loads(cold.stdout)

    def imported(proc):
        return {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}

    assert {"torch", "flashinfer"} <= imported(cold)
    assert not {"torch", "flashinfer"} & imported(warm)
    # Nor what only a probe or a typed option needs: typer's pydantic adapters, the device shims.
    assert not {"pydantic", "hprobe.device.session", "hprobe.probe.run"} & imported(warm)
    # Nor a requirement parser (its parse of the installed METADATA is kept),
    # nor report classes a check never builds.
    assert not {
        "packaging.requirements",
        "hprobe.report.suggest",
        "hprobe.report.drift",
        "hprobe.report.cache",
    } & imported(warm)
    # --no-cache asks flashinfer again.
    fresh = subprocess.run(argv + ["--no-cache"], env=env, capture_output=True, text=True, timeout=600)
    assert "flashinfer" in imported(fresh) and json.loads(fresh.stdout) == json.loads(cold.stdout)


def test_a_read_only_warm_cache_is_read(tmp_path, write_table):
    """A cache that cannot be written (mounted read-only, as a CI runner's
    restored cache can be) still answers: the run works in a temporary cache
    of its own and reads the answers, readings and kernel tables the
    configured one holds, with no index to fetch from and without importing
    torch or flashinfer."""
    import subprocess
    import sys

    table = write_table(V4_PRO_TABLE.format(rule="pad_to = [64, 128]"))
    with tmpfs(tmp_path / "ro", "64m", "a read-only cache") as mount:
        env = dict(os.environ, NO_COLOR="1", HPROBE_CACHE_DIR=str(mount / "cache"))
        argv = [sys.executable, "-X", "importtime", "-m", "hprobe", "check", "--table", str(table), "--sm", "100"]
        cold = subprocess.run([*argv, "--json"], env=env, capture_output=True, text=True, timeout=600)
        assert cold.returncode == 0, cold.stderr[-500:]
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        offline = dict(env, PIP_INDEX_URL="http://127.0.0.1:9/simple", PIP_NO_INDEX="1", PIP_FIND_LINKS="")
        warm = subprocess.run([*argv, "--json"], env=offline, capture_output=True, text=True, timeout=600)
        assert warm.returncode == 0, warm.stderr[-800:]
        assert json.loads(warm.stdout)["findings"] == json.loads(cold.stdout)["findings"]
        imported = {line.rsplit("|", 1)[-1].strip() for line in warm.stderr.splitlines() if line.startswith("import")}
        assert not {"torch", "flashinfer"} & imported


def test_check_opens_with_one_line_of_advice_per_backend(cli, cli_json):
    code, doc, _ = cli_json("check", "--table", str(PRE_48047), "--sm", "100,103")
    assert code == 0
    [table] = doc["advice"]
    assert table["pin"] is None and table["scope"] == "on flashinfer 0.6.14 only: no pin"
    mla = next(b for b in table["backends"] if b["backend"] == "DeepseekV4FlashInferMLAAttention")
    assert mla["sms"] == [100, 103] and mla["counts"] == {"ok": 3, "reducible": 7}
    assert mla["action"] == "for n={4, 8, 16, 32}, pad to {8, 16, 32} instead of {64}: saves 2–8× on TP2/4/8/16"
    code, out, _ = cli("check", "--table", str(PRE_48047), "--sm", "100,103")
    summary = out.split("\nsummary\n", 1)[1].split("\n\n", 1)[0]
    assert (
        "DeepseekV4FlashInferMLAAttention SM100/SM103: 3 ok, 7 reducible → for n={4, 8, 16, 32}, pad to {8, 16, 32} "
        "instead of {64}" in summary
    )
    assert "no pin: add requires_flashinfer" in summary


def test_suggest_writes_the_rule_the_kernels_call_for(cli, cli_json, tmp_path):
    code, doc, _ = cli_json("suggest", "--table", str(PRE_48047), "--sm", "100,120")
    assert code == 0 and doc["schema"] == "hprobe.suggest/1"
    by_backend = {s["backend"]: s for s in doc["suggestions"]}
    sm100 = by_backend["DeepseekV4FlashInferMLAAttention"]
    assert (sm100["current"], sm100["suggested"]) == ("pad_to {64, 128}", "pad_to {8, 16, 32, 64, 128}")
    change = next(c for c in sm100["changes"] if c["model"] == "DeepSeek-V4-Pro" and c["tp"] == 16)
    assert (change["current"], change["suggested"], change["saving"]) == (64, 8, 8.0)
    # The rewritten table reads back, and check finds nothing left to reduce or fix.
    out = tmp_path / "suggested.toml"
    code, _, err = cli("suggest", "--table", str(PRE_48047), "--sm", "100,120", "-o", str(out))
    assert code == 0 and out.is_file(), err
    code, checked, _ = cli_json("check", "--table", str(out), "--sm", "100,120", "--trust-validators")
    assert code == 0 and {f["verdict"] for f in checked["findings"]} == {"ok"}


def test_the_answer_comes_before_the_notes(cli):
    code, out, _ = cli("check")
    lines = out.splitlines()
    first_note = next(i for i, line in enumerate(lines) if line.startswith("note:"))
    assert lines.index("summary") < first_note and code == 3  # undecided here: 0.7.2's kernel table is not at hand


def test_the_scope_names_the_pin_the_releases_came_from(cli_json, write_table):
    """--pin chose the releases: the scope names it, not the table's own pin."""
    table = write_table(
        V4_PRO_TABLE.replace('source = "tests"', 'source = "tests"\nrequires_flashinfer = "==0.6.13"').format(
            rule="pad_to = [64, 128]"
        )
    )
    code, doc, err = cli_json("check", "--sm", "100", "--table", str(table), "--pin", "==0.6.14")
    [advice] = doc["advice"]
    assert advice["scope"] == "on flashinfer 0.6.14, the ends of pin ==0.6.14", err


def test_the_scope_says_when_flashinfer_named_the_release_and_the_pin_was_not_judged(cli_json, write_table):
    """--flashinfer chose the release: the scope never calls it the ends of the table's pin."""
    table = write_table(
        V4_PRO_TABLE.replace('source = "tests"', 'source = "tests"\nrequires_flashinfer = "==0.6.13"').format(
            rule="pad_to = [64, 128]"
        )
    )
    installed = __import__("importlib.metadata").metadata.version("flashinfer-python")
    code, doc, err = cli_json("check", "--sm", "100", "--table", str(table), "--flashinfer", installed)
    [advice] = doc["advice"]
    assert advice["scope"].endswith("given by --flashinfer (the pin ==0.6.13 was not judged)"), (advice, err)


@pytest.mark.pure
def test_heads_keeps_every_model_attribute_but_the_count():
    """--heads N stands for the models it replaces: the config attributes they
    bring (a rule may read `self.q_head_norm`) are kept on one model; only an
    attribute the models give different values splits it, one model per value
    on its models' paths."""
    from hprobe.model.padding import Model, Where
    from hprobe.rules import overridden_models

    v4 = Model("V4", 128, (1,), Where("m"), families=("dsv4",), attributes=(("q_head_norm", True),))
    glm = Model("GLM", 64, (1,), Where("m"), families=("dsa",))
    kimi = Model("Kimi", 96, (1,), Where("m"), families=("dsa", "dense-mla"))
    [one] = overridden_models([glm, v4, kimi], 96, None)
    assert (one.name, one.num_q_heads, one.attributes, one.families, one.tp) == (
        "96 heads",
        96,
        (("q_head_norm", True),),
        (),
        (1, 2, 4, 8, 16),
    )
    unnormed = Model("V5", 128, (1,), Where("m"), families=("dsv5",), attributes=(("q_head_norm", False),))
    models = overridden_models([glm, v4, unnormed], 96, [1, 2])
    by_name = {m.name: m for m in models}
    assert set(by_name) == {"96 heads", "96 heads (q_head_norm=true)", "96 heads (q_head_norm=false)"}
    assert by_name["96 heads (q_head_norm=true)"].families == ("dsv4",)
    assert by_name["96 heads (q_head_norm=false)"].attributes == (("q_head_norm", False),)
    assert by_name["96 heads"].families == ("dsa",) and by_name["96 heads"].attributes == ()
    assert all(m.tp == (1, 2) for m in models)
