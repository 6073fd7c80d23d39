"""Padding rules read from a consumer's source (`--repo`, `table extract`),
and the CI outputs: JUnit, markdown, GitHub annotations."""

from __future__ import annotations

import shutil
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

from hprobe.rules.repo.extract import extract
from hprobe.rules.repo.interpreter.evaluate import NotEvaluable, Raises, evaluate
from hprobe.rules.repo.tree.mapping import load_mapping
from hprobe.rules.repo.tree.scan import RepoIndex

from ...conftest import ROOT, V4_PRO_TABLE

REPOS = ROOT / "tests" / "fixtures" / "repos"
PRE, POST, EDGE = REPOS / "pre48047", REPOS / "post48047", REPOS / "edge"


def _classes(found) -> dict[str, object]:
    return {c.cls.name: c for c in found.classes}


def test_extract_finds_the_padding_classes_and_their_rules():
    found = extract(PRE, load_mapping())
    classes = _classes(found)
    # The abstract base is not a padding class; the rest are, with their own rule.
    assert set(classes) == {
        "DeepseekV4FlashMLAAttention",
        "DeepseekV4FlashInferMLAAttention",
        "DeepseekV4FlashInferSM120Attention",
        "DeepseekV4FlashInferSM120DecodeAttention",
    }
    assert classes["DeepseekV4FlashInferMLAAttention"].rule.describe() == "pad_to {64, 128}"
    assert classes["DeepseekV4FlashInferSM120Attention"].rule.describe() == "pad_to {16, 32, 64, 128}"
    decode = classes["DeepseekV4FlashInferSM120DecodeAttention"]
    assert decode.rule.describe() == "pad_to {16, 32, 64, 128}"
    assert decode.status == "mapped" and decode.mapping.kernel == "sm120-sparse-mla"
    flashmla = classes["DeepseekV4FlashMLAAttention"]
    assert flashmla.status == "unprobed" and "FlashMLA" in flashmla.mapping.unprobed
    assert flashmla.rule.describe() == "pad_to {64, 128}"  # listed with its padding, not dropped
    assert str(classes["DeepseekV4FlashInferMLAAttention"].where).endswith("nvidia/flashinfer_sparse.py:10")


def test_helper_constant_and_inherited_method_after_48047():
    found = extract(POST, load_mapping())
    classes = _classes(found)
    sm120 = classes["DeepseekV4FlashInferSM120Attention"]
    # No method of its own: the rule is the base class's helper over a module constant.
    assert sm120.rule.describe() == "pad_to {8, 16, 32, 64, 128}"
    assert str(sm120.where).endswith("flashinfer_sparse.py:21")
    assert found.pin.spec == ">=0.6.14" and found.pin.source.endswith("post48047/pyproject.toml:4")


def test_a_rule_that_raises_above_128_keeps_the_consumers_message():
    index = RepoIndex.build(PRE)
    [cls] = [c for c in index.classes_with("get_padded_num_q_heads") if c.name == "DeepseekV4FlashMLAAttention"]
    fn = cls.methods["get_padded_num_q_heads"]
    assert evaluate(index, cls, fn, 24) == 64
    assert evaluate(index, cls, fn, 129) == Raises(
        "ValueError", "DeepseekV4 FlashMLA does not support 129 heads (FP8 decode kernel requires h_q in {64, 128})."
    )


def test_a_construct_outside_the_subset_is_not_evaluable_and_exit_3(cli_json):
    found = extract(EDGE, load_mapping(EDGE / "mapping.toml"))
    [item] = found.classes
    assert isinstance(item.problem, NotEvaluable)
    assert str(item.problem).startswith(f"{EDGE / 'engine' / 'attention.py'}:10: name 'os'")
    assert found.pin.spec == "==0.6.13" and found.pin.source.endswith("requirements.txt:2")
    code, doc, _ = cli_json(
        "check", "--repo", str(EDGE), "--mapping", str(EDGE / "mapping.toml"), "--flashinfer", _installed_tree()
    )
    assert code == 3
    assert {(f["verdict"], f["padded"], f["rule_unknown"]) for f in doc["findings"]} == {("inconclusive", None, True)}
    assert all(f["source"].endswith("engine/attention.py:10") for f in doc["findings"])


def test_a_rule_not_evaluable_on_sms_not_asked_adds_no_rows_of_them(cli_json):
    """The entry runs on SM100 only: with --sm 90 no row of SM100 is shown
    (the report would speak of an SM nobody asked about); without --sm its
    own SM is shown, so an unevaluable rule is never hidden by the SMs a table names."""
    argv = ["check", "--repo", str(EDGE), "--mapping", str(EDGE / "mapping.toml"), "--flashinfer", _installed_tree()]
    _, asked, _ = cli_json(*argv, "--sm", "90")
    assert {f["sm"] for f in asked["findings"]} <= {90} and asked["sms"] == [90]
    _, whole, _ = cli_json(*argv)
    assert {f["sm"] for f in whole["findings"]} == {100}


def test_check_repo_judges_the_extracted_rule(cli_json):
    code, doc, _ = cli_json("check", "--repo", str(PRE), "--sm", "100", "--flashinfer", _installed_tree())
    assert code == 0
    by_tp = {(f["model"], f["tp"]): f for f in doc["findings"]}
    # Before #48047 the SM100 rule pads 32 per rank to 64; 0.6.14 accepts 32.
    pro_tp4 = by_tp[("DeepSeek-V4-Pro", 4)]
    assert (pro_tp4["n"], pro_tp4["padded"], pro_tp4["verdict"], pro_tp4["best"]) == (32, 64, "reducible", 32)
    assert pro_tp4["source"].endswith("nvidia/flashinfer_sparse.py:10")
    assert any(
        "DeepseekV4FlashMLAAttention" in n and "not probed" in n and "pad_to {64, 128}" in n for n in doc["notes"]
    )
    strict, _, _ = cli_json("check", "--repo", str(PRE), "--sm", "100", "--flashinfer", _installed_tree(), "--strict")
    assert strict == 1


def test_nothing_in_the_repo_is_imported(cli):
    """Every fixture module raises at import; reading them must not trigger it."""
    before = set(sys.modules)
    code, out, err = cli("table", "extract", "--repo", str(PRE))
    assert code == 0 and "hprobe imported" not in out + err
    assert not [m for m in set(sys.modules) - before if "deepseek_v4" in m or m.startswith("vllm")]
    assert "pad_to = [16, 32, 64, 128]" in out and 'kernel = "sm120-sparse-mla"' in out


def test_extracted_toml_reads_back_as_a_table(cli, tmp_path):
    out_file = tmp_path / "extracted.toml"
    code, _, err = cli("table", "extract", "--repo", str(POST), "--output", str(out_file))
    assert code == 0 and "wrote" in err
    code, _, err = cli("table", "extract", "--repo", str(POST), "--output", str(out_file))
    assert code == 2 and "exists" in err  # never overwritten silently
    from hprobe.rules import load_tables

    [table] = load_tables([out_file])
    assert table.requires_flashinfer == ">=0.6.14"
    assert {b.name.rsplit(".", 1)[-1]: b.rule.describe() for b in table.backends} == {
        "DeepseekV4FlashInferMLAAttention": "pad_to {8, 16, 32, 64, 128}",
        "DeepseekV4FlashInferSM120Attention": "pad_to {8, 16, 32, 64, 128}",
    }


def _broken_table(write_table) -> Path:
    return write_table(V4_PRO_TABLE.format(rule="pad_to = [24, 128]"))


def test_junit_report_follows_the_junit_schema(cli, write_table, tmp_path):
    report = tmp_path / "hprobe.xml"
    code, _, _ = cli("check", "--table", str(_broken_table(write_table)), "--sm", "100", "--junit", str(report))
    assert code == 1
    root = ET.parse(report).getroot()
    assert root.tag == "testsuites"
    suites = list(root)
    assert suites and all(s.tag == "testsuite" for s in suites)
    cases = [c for s in suites for c in s]
    for suite in suites:
        assert suite.get("name") and int(suite.get("tests")) == len(list(suite))
        assert int(suite.get("failures")) == sum(1 for c in suite for child in c if child.tag == "failure")
        assert int(suite.get("errors")) == sum(1 for c in suite for child in c if child.tag == "error")
    assert int(root.get("tests")) == len(cases) == 5
    for case in cases:
        assert case.tag == "testcase" and case.get("name") and case.get("classname")
        for child in case:
            assert child.tag in ("failure", "error", "skipped", "system-out", "system-err")
            if child.tag in ("failure", "error"):
                assert child.get("message") and child.get("type")
    failed = {c.get("name"): c.find("failure") for c in cases if c.find("failure") is not None}
    # 128/TP4 = 32 per rank, padded to 128 is fine; TP8/16 pad 16 and 8 to 24: refused.
    assert set(failed) == {"SM100 DeepSeek-V4-Pro TP8 n=16", "SM100 DeepSeek-V4-Pro TP16 n=8"}
    assert "Expected 8, 16, 32, 64, or 128 query heads, got 24" in failed["SM100 DeepSeek-V4-Pro TP8 n=16"].get(
        "message"
    )


def test_junit_reducible_passes_with_a_message_and_fails_under_strict(cli, write_table, tmp_path):
    table = write_table(V4_PRO_TABLE.format(rule="pad_to = [64, 128]"))
    report = tmp_path / "r.xml"
    for strict, expect_failures in ((False, 0), (True, 3)):
        args = ["check", "--table", str(table), "--sm", "100", "--junit", str(report)] + (
            ["--strict"] if strict else []
        )
        cli(*args)
        root = ET.parse(report).getroot()
        assert int(root.get("failures")) == expect_failures
        messages = [c.find("system-out") for c in root.iter("testcase")]
        assert sum(m is not None for m in messages) == (0 if strict else 3)


def test_markdown_renders_a_table(cli, write_table):
    code, out, _ = cli("check", "--table", str(_broken_table(write_table)), "--sm", "100", "--format", "markdown")
    assert code == 1
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| verdict |"))
    assert set(lines[header + 1].replace("|", "").replace("-", "").replace(":", "")) <= {""}
    columns = lines[header].count("|")
    rows = []
    for line in lines[header + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line)
    assert rows and all(r.count("|") - r.count("\\|") == columns for r in rows)
    assert any("❌ broken" in r for r in rows)


def test_github_annotations_only_under_github_actions(cli, monkeypatch, tmp_path):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    args = ("check", "--repo", str(PRE), "--sm", "100", "--flashinfer", _installed_tree(), "--strict")
    _, out, err = cli(*args)
    assert "::" not in out + err
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    _, markdown, err = cli(*args, "--format", "markdown")
    assert "::" not in markdown  # the step summary holds markdown only
    annotations = [line for line in err.splitlines() if line.startswith("::")]
    assert annotations
    first = annotations[0]
    assert first.startswith("::error file=") and "flashinfer_sparse.py,line=10," in first
    assert "DeepSeek-V4-Pro TP4 (n=32)" in first
    # Each row keeps its own evidence: TP4 pads 32 to 64 (2x), TP16 pads 8 to 64 (8x).
    by_row = {part.split(":")[0].split(", ")[0].strip(): part for part in first.split("::", 2)[2].split("; ")}
    assert "2.00× waste" in by_row["DeepSeek-V4-Pro TP4 (n=32)"]
    assert "8.00× waste" in by_row["DeepSeek-V4-Pro TP16 (n=8)"]


def test_repo_input_errors_are_one_line(cli, tmp_path):
    code, out, err = cli("check", "--repo", str(tmp_path / "missing"))
    assert code == 2 and out == "" and "no such file or directory" in err
    code, _, err = cli("check", "--repo", str(PRE), "--table", "x.toml")
    assert code == 2 and "give one" in err
    code, _, err = cli("check", "--format", "yaml")
    assert code == 2 and "--format 'yaml'" in err


def _installed_tree() -> str:
    """The installed flashinfer as an unpacked-directory release (probed in a
    worker, offline), so a repo's own pin does not send the test to fetch."""
    import importlib.util

    spec = importlib.util.find_spec("flashinfer")
    return str(Path(spec.origin).resolve().parent.parent)


def test_a_huge_power_is_not_evaluated(tmp_path):
    (tmp_path / "m.py").write_text(
        "class A:\n    @classmethod\n    def get_padded_num_q_heads(cls, n):\n        return n + 2 ** 10 ** 8\n"
    )
    index = RepoIndex.build(tmp_path)
    [cls] = index.classes_with("get_padded_num_q_heads")
    result = evaluate(index, cls, cls.methods["get_padded_num_q_heads"], 8)
    assert isinstance(result, NotEvaluable) and result.line == 4 and "power" in result.what


def test_an_extracted_table_reads_back_as_the_same_table(tmp_path):
    """The TOML writer is the reader's inverse: what `table extract` writes,
    `check --table` reads to the same models, backends, rules, axis values and pin."""
    from hprobe.rules import TomlTableSource
    from hprobe.rules.repo.extract import table_toml

    for root in (PRE, POST):
        found = extract(root, load_mapping())
        path = tmp_path / f"{root.name}.toml"
        path.write_text(table_toml(found))
        back = TomlTableSource(path).collect()
        written = found.table
        assert (back.name, back.source, back.requires_flashinfer) == (
            written.name,
            written.source,
            written.requires_flashinfer,
        )
        assert [(m.name, m.num_q_heads, m.tp) for m in back.models] == [
            (m.name, m.num_q_heads, m.tp) for m in written.models
        ]
        assert [(b.name, b.kernel, b.sms, b.rule, b.options) for b in back.backends] == [
            (b.name, b.kernel, b.sms, b.rule, b.options) for b in written.backends
        ]
        assert written.backends


def test_the_writer_leaves_out_padding_down(tmp_path):
    from hprobe.model.padding import Backend, Model, PaddingTable, PadMap, Where
    from hprobe.rules import TomlTableSource
    from hprobe.rules.toml_writer import table_toml

    table = PaddingTable(
        "t",
        "s",
        "p",
        None,
        [Model("M", 64, (1, 2), Where("p"))],
        [Backend("B", "dsv4-sparse-mla", (100,), PadMap(((32, 64), (64, 32))), Where("p"))],
    )
    text = table_toml(table)
    assert "# not written: pads 64 down to 32" in text
    path = tmp_path / "t.toml"
    path.write_text(text)
    assert TomlTableSource(path).collect().backends[0].rule == PadMap(((32, 64),))


def test_suggest_over_a_repo_rewrites_its_rules_as_a_table(cli, cli_json, tmp_path):
    args = ("--repo", str(PRE), "--sm", "100", "--flashinfer", _installed_tree())
    code, doc, _ = cli_json("suggest", *args)
    assert code == 0
    [mla] = [s for s in doc["suggestions"] if s["backend"].endswith("DeepseekV4FlashInferMLAAttention")]
    assert (mla["current"], mla["suggested"]) == ("pad_to {64, 128}", "pad_to {8, 16, 32, 64, 128}")
    assert mla["source"].endswith("nvidia/flashinfer_sparse.py:10")
    out = tmp_path / "suggested.toml"
    code, _, err = cli("suggest", *args, "-o", str(out))
    assert code == 0, err
    code, checked, _ = cli_json("check", "--table", str(out), "--sm", "100", "--flashinfer", _installed_tree())
    assert code == 0 and {f["verdict"] for f in checked["findings"]} == {"ok"}


class _Release:
    """A release the fixture's rules never read: only its number is asked."""

    version = "0.6.14"


def _reading_spy(seen: list):
    def read(*args, index=None):
        seen.append(index)
        return extract(*args, index=index)

    return read


def test_a_reading_per_release_evaluates_the_tree_as_already_parsed():
    seen: list = []
    first = extract(POST, load_mapping())
    again = replace(first, reader=_reading_spy(seen)).against(_Release(), "0.6.14")  # type: ignore[arg-type]
    assert seen == [first.index] and first.index is not None
    fresh = extract(POST, load_mapping(), (), _Release())  # type: ignore[arg-type]
    assert again.table.backends == fresh.table.backends and again.notes == fresh.notes
    assert [p.to_dict() for p in again.paths.paths] == [p.to_dict() for p in fresh.paths.paths]


def test_a_tree_with_a_file_not_parsed_is_read_again_per_release(tmp_path):
    tree = tmp_path / "post48047"
    shutil.copytree(POST, tree)
    (tree / "broken.py").write_text("# get_padded_num_q_heads\ndef (:\n")
    seen: list = []
    first = extract(tree, load_mapping())
    assert first.index is not None and "broken" in first.index.unread
    replace(first, reader=_reading_spy(seen)).against(_Release(), "0.6.14")  # type: ignore[arg-type]
    assert seen == [None]  # what was not parsed is said from a reading of its own
