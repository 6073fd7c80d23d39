"""Waivers: a committed file of accepted findings and `--ignore`. A waived
finding still prints, marked waived, and does not fail the gate; an expired
waiver fails it and says so; a waiver that matches nothing is reported."""

from __future__ import annotations

import datetime as dt
import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from hprobe.judge import exit_code, waive
from hprobe.model.errors import InputError
from hprobe.model.verdict import Finding, Verdict
from hprobe.model.waiver import parse_ignore
from hprobe.rules.waivers import gather_waivers, load_waivers

from ..conftest import engine_source

# Pure: runs without torch, flashinfer or a subprocess (the fast tier, `-m "pure and not slow"`).
pytestmark = pytest.mark.pure

TODAY = dt.date.today()
FUTURE = (TODAY + dt.timedelta(days=90)).isoformat()
PAST = (TODAY - dt.timedelta(days=1)).isoformat()


def _finding(
    verdict: Verdict,
    sm: int = 120,
    table: str = "vllm-0.25.0 (get_padded_num_q_heads)",
    release: str = "0.6.13",
    tp: int = 4,
) -> Finding:
    return Finding(
        table=table,
        table_path="t.toml",
        model="DeepSeek-V4-Pro",
        tp=tp,
        n=128 // tp,
        backend="B",
        kernel="dsv4-sparse-mla",
        sm=sm,
        flashinfer_version=release,
        padded=128 // tp,
        verdict=verdict,
        releases=[release],
    )


def _file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "hprobe-waivers.toml"
    path.write_text(body)
    return path


def test_a_waiver_accepts_what_it_matches_and_nothing_else(tmp_path):
    path = _file(
        tmp_path,
        '\n[[waiver]]\ntable = "vllm-0.25.0*"\nsm = 120\nrelease = "0.6.13"\nreason = "waits for 0.6.14"\nexpires = '
        f"{FUTURE}\n",
    )
    [waiver] = load_waivers(path)
    assert waiver.origin == f"{path}:2"  # the [[waiver]] header's line
    findings = [
        _finding(Verdict.BROKEN),
        _finding(Verdict.BROKEN, sm=100),
        _finding(Verdict.BROKEN, release="0.6.12"),
        _finding(Verdict.OK),
    ]
    assert exit_code(findings, strict=False) == 1
    waived, [use] = waive(findings, [waiver], TODAY)
    assert [f.waiver is not None for f in waived] == [True, False, False, False]
    assert use.matched == 1 and not use.expired
    assert waived[0].label == "broken [waived]" and f"waived by {path}:2" in waived[0].explain()
    assert exit_code(waived, strict=False) == 1  # SM100 and 0.6.12 still broken
    alone, _ = waive(findings[:1] + findings[3:], [waiver], TODAY)
    assert exit_code(alone, strict=False) == 0


def test_an_expired_waiver_waives_nothing_and_fails_the_gate(tmp_path):
    path = _file(tmp_path, f'[[waiver]]\nsm = 120\nreason = "old"\nexpires = {PAST}\n')
    waived, [use] = waive([_finding(Verdict.REDUCIBLE)], load_waivers(path), TODAY)
    assert waived[0].waiver is None and use.expired and use.matched == 1
    # reducible passes without --strict; the expired waiver alone fails the gate
    assert exit_code(waived, strict=False, waivers=[use]) == 1
    assert exit_code(waived, strict=False) == 0


def test_a_release_waiver_covers_every_release_the_verdict_rests_on():
    across = replace(_finding(Verdict.BROKEN), releases=["0.6.13", "0.7.2"], flashinfer_version="0.6.13, 0.7.2")
    waived, _ = waive([across], [parse_ignore("release=0.6.13,reason=x")], TODAY)
    assert waived[0].waiver is None  # it may be broken on 0.7.2: not waived by a 0.6.13 waiver
    waived, _ = waive([across], [parse_ignore("release=0.*,reason=x")], TODAY)
    assert waived[0].waiver is not None


def test_a_waiver_matching_only_ok_rows_is_unmatched():
    waiver = parse_ignore("sm=120,reason=gone")
    _, [use] = waive([_finding(Verdict.OK)], [waiver], TODAY)
    assert use.unmatched


@pytest.mark.parametrize(
    ("spec", "match", "reason"),
    [
        ("sm=120", {"sm": "120"}, "--ignore on the command line"),
        ("table=vllm*, tp=4,reason=tracked, in #12", {"table": "vllm*", "tp": "4"}, "tracked, in #12"),
        (f"verdict=broken,expires={FUTURE},reason=x", {"verdict": "broken"}, "x"),
    ],
)
def test_ignore_reads_keys_and_a_reason_last(spec, match, reason):
    waiver = parse_ignore(spec)
    assert dict(waiver.match) == match and waiver.reason == reason


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("[[waiver]]\nsm = 120\n", "must give its reason"),
        ('[[waiver]]\nreason = "x"\n', "must name what it matches"),
        ('[[waiver]]\nsm = 120\nreason = "x"\ncolour = "red"\n', "unknown waiver key 'colour'"),
        ('[[waiver]]\nsm = 120\nreason = "x"\nexpires = "soon"\n', "expected a date"),
        ("[waivers]\nsm = 120\n", "holds [[waiver]] tables only"),
        ("[[waiver]\n", "malformed TOML"),
    ],
)
def test_a_bad_waiver_file_is_one_input_error_naming_the_file(tmp_path, body, said):
    path = _file(tmp_path, body)
    with pytest.raises(InputError) as err:
        load_waivers(path)
    assert said in str(err.value) and str(path) in str(err.value)


def test_the_file_is_found_in_the_first_place_that_has_one(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _file(tmp_path / "b", '[[waiver]]\nsm = 120\nreason = "b"\n')
    [w, ignored] = gather_waivers(None, ["sm=90"], [tmp_path / "a", tmp_path / "b"])
    assert w.reason == "b" and ignored.origin == "--ignore sm=90"


def test_a_waiver_file_linked_out_of_its_directory_is_not_read(tmp_path):
    """A tree that waives its own findings through a link to a file outside it:
    nothing it waives could be seen in the tree. A link within is read, and a
    file named with --waivers is the user's choice."""
    (tmp_path / "elsewhere").mkdir()
    outside = _file(tmp_path / "elsewhere", '[[waiver]]\nsm = 100\nreason = "hidden"\n')
    repo = tmp_path / "repo"
    (repo / "waivers").mkdir(parents=True)
    (repo / "hprobe-waivers.toml").symlink_to(outside)
    with pytest.raises(InputError, match="links out of its directory"):
        gather_waivers(None, [], [repo])
    (repo / "hprobe-waivers.toml").unlink()
    _file(repo / "waivers", '[[waiver]]\nsm = 100\nreason = "seen"\n')
    (repo / "hprobe-waivers.toml").symlink_to(repo / "waivers" / "hprobe-waivers.toml")
    assert [w.reason for w in gather_waivers(None, [], [repo])] == ["seen"]  # a link within the tree is read
    (repo / "hprobe-waivers.toml").unlink()
    (repo / "hprobe-waivers.toml").symlink_to(outside)
    assert [w.reason for w in gather_waivers(repo / "hprobe-waivers.toml", [], [])] == [
        "hidden"
    ]  # named with --waivers: read


# -- on vLLM 0.25.0 as released: SM120 on its pin (0.6.13) has no route -----------------


@pytest.fixture(scope="module")
def vllm_025(tmp_path_factory) -> Path:
    return engine_source(tmp_path_factory.mktemp("vllm025w"), "vllm", "0.25.0")


@pytest.mark.slow
def test_a_waiver_file_lets_vllm_025_on_sm120_pass_and_an_expired_one_fails_it(cli, vllm_025, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the file is found in the current directory
    monkeypatch.setenv("COLUMNS", "4000")  # a log's lines, whole: the waiver lines name long temporary paths
    code, out, err = cli("check", "--repo", str(vllm_025), "--sm", "120")
    assert code == 1, err
    # Two paths break on SM120 with 0.6.13: DSv4's padding rule, and the DSA
    # sparse backend's call (a packed cache that 0.6.13's auto hands XQA).
    body = (
        '[[waiver]]\nkernel = "dsv4-sparse-mla"\nsm = 120\nrelease = "0.6.13"\nreason = "SM120 waits for the 0.6.14 '
        'bump"\nexpires = {}\n\n'
        '[[waiver]]\nbackend = "*FlashInferMLASparseSM120Impl*"\nsm = 120\nrelease = "0.6.13"\nreason = "DSA on SM120 '
        'waits for the bump too"\nexpires = {}\n\n'
        '[[waiver]]\nsm = 90\nreason = "nothing on Hopper"\n'
    )
    _file(tmp_path, body.format(FUTURE, FUTURE))
    junit = tmp_path / "j.xml"
    code, out, err = cli("check", "--repo", str(vllm_025), "--sm", "120", "--junit", str(junit))
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].startswith("pass: ") and lines[-1] == lines[0] and "waived" in lines[0]
    assert "broken [waived]" in out and out.count("waives 10 findings") == 2
    assert "sm=90" in out and "matches no finding" in out
    suites = ET.parse(junit).getroot()
    assert suites.get("failures") == "0" and sum(int(s.get("skipped", 0)) for s in suites) == 20
    code, doc, _ = cli("check", "--repo", str(vllm_025), "--sm", "120", "--json")
    doc = json.loads(doc)
    assert doc["exit_code"] == 0 and sorted(u["matched"] for u in doc["waivers"]) == [0, 10, 10]
    code, md, _ = cli("check", "--repo", str(vllm_025), "--sm", "120", "--format", "markdown")
    headline = next(line for line in md.splitlines() if line.startswith("**") and "exit 0" in line)
    assert (
        "20 broken (20 waived)" in headline and "20 broken (20 waived)" in lines[0]
    )  # beside its verdict, the same in both formats
    assert {f["waiver"]["reason"] for f in doc["findings"] if f["verdict"] == "broken"} == {
        "SM120 waits for the 0.6.14 bump",
        "DSA on SM120 waits for the bump too",
    }

    _file(tmp_path, body.format(PAST, FUTURE))
    code, out, err = cli("check", "--repo", str(vllm_025), "--sm", "120", "--junit", str(junit))
    assert code == 1
    assert f"expired on {PAST}: fails the gate" in out and f"{tmp_path / 'hprobe-waivers.toml'}:1" in out
    assert out.splitlines()[-1].startswith("fail: ") and "1 expired waiver" in out.splitlines()[-1]
    assert ET.parse(junit).getroot().find(".//failure[@type='expired-waiver']") is not None
    # --ignore on the command line does what a file entry does
    (tmp_path / "empty").mkdir()
    code, out, _ = cli(
        "check",
        "--repo",
        str(vllm_025),
        "--sm",
        "120",
        "--waivers",
        str(_file(tmp_path / "empty", "")),
        "--ignore",
        f"sm=120,expires={FUTURE},reason=CLI",
    )
    assert code == 0 and "waives 20 findings" in out


@pytest.mark.parametrize(
    ("expires", "through"),
    [
        # Moved to UTC these run past the calendar's ends: the end each is next to, never OverflowError.
        ("9999-12-31T23:59:59-12:00", dt.date.max),
        ("0001-01-01T00:00:00+14:00", dt.date.min),
        # A moment with an offset holds through the last UTC day before it.
        ("2027-03-01T10:00:00+02:00", dt.date(2027, 2, 28)),
    ],
)
def test_a_waiver_s_expiry_is_a_utc_day_whatever_its_offset(tmp_path, expires, through):
    path = tmp_path / "w.toml"
    path.write_text(f'[[waiver]]\nsm = 120\nreason = "r"\nexpires = {expires}\n')
    [waiver] = load_waivers(path)
    assert waiver.expires == through
