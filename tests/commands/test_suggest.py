"""`hprobe suggest`: the rule the kernels call for, the pin it needs (searched over
published releases), the patch to the consumer's own source; and `check`'s
summary-first output. Real flashinfer releases, fetched and probed."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from hprobe.advise.history import first_true
from hprobe.model.padding import PadTo
from hprobe.rules.repo.extract import extract
from hprobe.rules.repo.patch import Adoption, build_patch
from hprobe.rules.repo.tree.mapping import load_mapping

from ..conftest import ROOT, engine_source

REPOS = ROOT / "tests" / "fixtures" / "repos"
HELPER, PRE, POST = REPOS / "pre48047_helper", REPOS / "pre48047", REPOS / "post48047"
MLA = "vllm.models.deepseek_v4.nvidia.flashinfer_sparse.DeepseekV4FlashInferMLAAttention"
SM120 = "vllm.models.deepseek_v4.nvidia.flashinfer_sparse.DeepseekV4FlashInferSM120Attention"


# -- pure parts -------------------------------------------------------------------------


@pytest.mark.pure  # the fast tier: no torch, flashinfer or subprocess
def test_first_true_finds_the_boundary_and_reports_what_it_saw():
    versions = list(range(20))
    calls = []

    def state(v):
        calls.append(v)
        return v >= 13

    found = first_true(versions, state)
    assert (found.first, found.last_false, found.adjacent) == (13, 12, True)
    assert len(calls) <= 7 and len(set(calls)) == len(calls)  # log2(20)+2, each once
    # A regression among the releases seen is returned, not hidden.
    history = {v: (None if v == 9 else v in (5, 6, 7, 19)) for v in versions}
    flaky = first_true(versions, history.__getitem__, exhaustive=True)
    assert (5, 8) in flaky.regressions and (flaky.first, flaky.last_false) == (19, 18)
    # Inconclusive releases are stepped around; the boundary is then not exact.
    gap = first_true(versions, lambda v: None if v == 12 else v >= 13)
    assert gap.first == 13 and not gap.adjacent and gap.last_false == 11


@pytest.mark.pure  # the fast tier: no torch, flashinfer or subprocess
@pytest.mark.parametrize("k", [2, 3, 4])
def test_a_search_k_releases_a_round_finds_what_the_binary_one_finds_in_fewer_rounds(k):
    """Every history of 1..24 releases with one flip (and some with an
    inconclusive release or a regression): the same first, last-false and
    exactness as the one-at-a-time search, in no more rounds."""
    import itertools

    for n in range(1, 25):
        for flip, gap in itertools.product(range(n + 1), (None, 0, n // 2, n - 2)):
            history = {v: (None if v == gap else v >= flip) for v in range(n)}
            if n > 6 and flip == n // 3:
                history[n - 2] = False  # a regression after the flip
            rounds: list[list[int]] = []
            one = first_true(list(range(n)), history.__getitem__)
            many = first_true(list(range(n)), history.__getitem__, parallel=k, prepare=rounds.append)
            assert (many.first, many.last_false, many.adjacent) == (one.first, one.last_false, one.adjacent), (
                n,
                flip,
                gap,
                k,
            )
            assert all(1 < len(batch) <= k + 1 for batch in rounds)
            sequential_steps = len(one.seen)
            assert len(rounds) + sum(1 for v, _ in many.seen if not any(v in b for b in rounds)) <= sequential_steps + 1


@pytest.mark.pure  # the fast tier: no torch, flashinfer or subprocess
@pytest.mark.parametrize("k", [2, 3])
def test_releases_already_answered_leave_no_core_idle(k):
    """Releases the check (or an earlier search) probed are answered without
    probing: a round that probes asks k releases besides them (never fewer
    while the range has them), a round of answered ones probes nothing, and
    the search finds what it finds without them, in no more rounds."""
    import itertools

    for n in range(3, 25):
        for flip, had in itertools.product(range(n + 1), ({1}, {n // 2}, {n // 3, n // 2}, set(range(0, n, 3)))):
            history = {v: v >= flip for v in range(n)}
            plain_rounds: list[list[int]] = []
            plain = first_true(list(range(n)), history.__getitem__, parallel=k, prepare=plain_rounds.append)
            rounds: list[list[int]] = []
            found = first_true(
                list(range(n)), history.__getitem__, parallel=k, prepare=rounds.append, answered=had.__contains__
            )
            assert (found.first, found.last_false, found.adjacent) == (plain.first, plain.last_false, plain.adjacent), (
                n,
                flip,
                had,
            )
            for batch in rounds[1:]:  # the first round is the two ends
                new = [v for v in batch if v not in had]
                assert len(new) <= k
                assert (
                    len(new) in (0, k)
                    or len(batch) == len(set(range(min(batch), max(batch) + 1)))
                    or len(new) == len(batch)
                ), (n, flip, had, batch)
            assert len(rounds) <= len(plain_rounds), (n, flip, had)
            # Filling a round costs at most k - 1 probes more than the plain round.
            assert len({v for v, _ in found.seen} - had) <= len({v for v, _ in plain.seen}) + (k - 1) * len(rounds), (
                n,
                flip,
                had,
            )


@pytest.mark.pure  # the fast tier: no torch, flashinfer or subprocess
@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_flip_the_answered_releases_already_show_costs_no_round(k):
    """A suggestion's check probed the pinned release and the one after (the
    flip between them); the pin search over every published release then
    probes its two ends and nothing else, where before it probed rounds in the
    middle of the range that the flip's answers already ruled out."""
    for n in range(3, 25):
        for flip in range(1, n):
            history = {v: v >= flip for v in range(n)}
            rounds: list[list[int]] = []
            probed: list[int] = []

            def state(v: int, history: dict[int, bool] = history, probed: list[int] = probed) -> bool:
                probed.append(v)
                return history[v]

            had = {flip - 1, flip}
            found = first_true(list(range(n)), state, parallel=k, prepare=rounds.append, answered=had.__contains__)
            assert (found.first, found.last_false, found.adjacent) == (flip, flip - 1, True), (n, flip, k)
            assert set(probed) - had <= {0, n - 1}, (n, flip, k, probed)
            assert all(set(batch) <= {0, n - 1} for batch in rounds), (n, flip, k, rounds)


def test_patch_rewrites_a_threshold_and_refuses_a_shared_constant(tmp_path):
    found = extract(PRE, load_mapping())
    patch = build_patch(found, {MLA: Adoption(PadTo((8, 16, 32, 64, 128)))}, [])
    assert "-        return 64 if num_heads <= 64 else 128" in patch.text
    assert "+        return min(h for h in (8, 16, 32, 64, 128) if h >= num_heads)" in patch.text
    # The rewritten rule reads back as the rule asked for.
    tree = tmp_path / "tree"
    shutil.copytree(PRE, tree)
    subprocess.run(["git", "apply", "-"], cwd=tree, input=patch.diff, check=True)
    again = {c.cls.qualname: c for c in extract(tree, load_mapping()).classes}
    assert again[MLA].rule == PadTo((8, 16, 32, 64, 128))
    # POST shares one constant between the SM100 and SM120 classes: rewriting it
    # for one class only would change the other's padding unjudged.
    shared = build_patch(extract(POST, load_mapping()), {MLA: Adoption(PadTo((16, 32, 64, 128)))}, [])
    assert shared.diff == b"" and "is shared with" in shared.not_rewritten[0] and SM120 in shared.not_rewritten[0]


def test_diff_needs_a_repo(cli, tmp_path):
    code, _, err = cli(
        "suggest",
        "--table",
        str(ROOT / "matrices" / "vllm-dsv4-flashinfer-pre-48047.toml"),
        "--diff",
        str(tmp_path / "x.diff"),
    )
    assert code == 2 and err.count("hprobe: error:") == 1 and "--repo" in err
    assert not (tmp_path / "x.diff").exists()


def test_check_opens_with_a_summary_that_fits_a_screen(cli):
    # On the validators' word where 0.7.2's kernel table is not at hand: the layout is the subject.
    code, out, _ = cli("check", "--trust-validators")
    lines = out.splitlines()
    # The default view fits a screen: at most 60 lines, the verdict first and last.
    assert len(lines) <= 60 and lines[0] == lines[-1] and lines[-1].startswith("pass: ") and code == 0
    assert any(line.startswith("  vllm-dsv4-flashinfer (before #48047)") for line in lines)
    # One advice line per backend: "for n=..., pad to ... instead of ...".
    assert any("for n={4, 8, 16, 32}, pad to {8, 16, 32} instead of {64}" in line for line in lines)
    assert "rows that need none not shown: --details" in out
    _, full, _ = cli("check", "--details", "--trust-validators")
    assert len(full.splitlines()) > len(lines) + 100


@pytest.fixture
def unlisted_index(monkeypatch):
    """pip pointed at a port nothing listens on: no release can be listed.
    The installed release's kernel table is had first, from the index, as a
    run before the index went away would have kept it: what these tests ask
    is the listing's absence, and alone they must answer as in the suite."""
    import importlib.util

    from hprobe.support.kernel_tables import tables_for

    spec = importlib.util.find_spec("flashinfer")
    assert spec is not None and spec.origin is not None
    assert tables_for(Path(spec.origin).parent, "0.6.14").table is not None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    for name, value in {
        "PIP_INDEX_URL": f"http://127.0.0.1:{port}/simple",
        "PIP_RETRIES": "0",
        "PIP_TIMEOUT": "2",
        "PIP_FIND_LINKS": "",
        "PIP_NO_CACHE_DIR": "1",
    }.items():
        monkeypatch.setenv(name, value)


def test_an_index_that_cannot_be_listed_leaves_the_pin_unsearched(cli_json, tmp_path, unlisted_index):
    """The pin search needs the published releases; with the index out of
    reach that is a fact of the network, not an input error: the rules are
    judged, no pin (and so no rule) is adopted, and the run is inconclusive."""
    written = tmp_path / "t.toml"
    code, doc, err = cli_json(
        "suggest",
        "--table",
        str(ROOT / "matrices" / "vllm-dsv4-flashinfer-pre-48047.toml"),
        "--sm",
        "100",
        "-o",
        str(written),
    )
    assert code == 3 and "hprobe: error" not in err, err
    [mla] = doc["suggestions"]
    assert mla["suggested"] == "pad_to {8, 16, 32, 64, 128}"  # judged on the installed release
    assert mla["pin"] is None and mla["pin_not_searched"].startswith(
        "not searched: cannot list flashinfer-python releases"
    )
    assert any(n.startswith("pin search: cannot list flashinfer-python releases") for n in doc["notes"])
    # The table written keeps the current rule: no floor, no change.
    text = written.read_text()
    assert "pad_to = [64, 128]" in text and "pad_to = [8, 16, 32, 64, 128]" not in text


def test_a_pin_whose_releases_cannot_be_listed_is_judged_on_none(cli_json, unlisted_index):
    """A pin's ends come from the index; unlisted, no other release stands in
    for them: every count is inconclusive, the note says why, exit 3 (a gate
    reads "undecided", never "safe" and never a usage error)."""
    code, doc, err = cli_json(
        "check",
        "--table",
        str(ROOT / "matrices" / "vllm-dsv4-flashinfer-pre-48047.toml"),
        "--pin",
        ">=0.6.13",
        "--sm",
        "100",
    )
    assert code == 3 and doc["exit_code"] == 3 and "hprobe: error" not in err, err
    assert doc["findings"] and {f["verdict"] for f in doc["findings"]} == {"inconclusive"}
    assert all(f["releases"] == [] for f in doc["findings"])
    assert any(
        "pin >=0.6.13: cannot list flashinfer-python releases" in n and n.endswith("judged on no release")
        for n in doc["notes"]
    )
    assert doc["advice"][0]["scope"] == "on no release, the ends of pin >=0.6.13"


# -- against published releases --------------------------------------------------------


@pytest.mark.slow
def test_suggest_repo_before_48047_raises_the_pin_and_patches_both(cli_json, tmp_path):
    """The PR #48047 question: the helper pads to (64, 128), the pin is >=0.6.13
    (bounded below 0.6.18 here: the releases whose kernel table this machine can
    have, so that every answer the patch rests on is decided)."""
    helper = _pinned_copy(HELPER, tmp_path / "helper", "flashinfer-python>=0.6.13", BOUNDED)
    diff = tmp_path / "fix.diff"
    code, doc, err = cli_json("suggest", "--repo", str(helper), "--sm", "100,103", "--diff", str(diff))
    assert code == 0, err
    [mla] = [s for s in doc["suggestions"] if s["backend"] == MLA]
    assert mla["sms"] == [100, 103]
    assert (mla["current"], mla["suggested"]) == ("pad_to {64, 128}", "pad_to {8, 16, 32, 64, 128}")
    assert mla["safe_on_every_release_probed"] == "pad_to {64, 128}"  # 0.6.13, the pin's floor, refuses the rest
    pin = mla["pin"]
    assert pin["needs"] == "0.6.14" and pin["pin_admits_unsafe"][0] == "0.6.13" and pin["new_pin"] == ">=0.6.14,<0.6.18"
    eight = next(p for p in pin["rule_counts"] if p["count"] == 8)
    assert eight["since"] == "0.6.14" and eight["last_refusing"] == "0.6.13" and eight["exact"]
    assert any(
        "your pin '<0.6.18,>=0.6.13' admits 0.6.13, which refuses {8, 16, 32}" in line for line in pin["advice"]
    ), pin["advice"]
    # The patch: the constant and the pin, which `git apply --check` accepts.
    text = diff.read_text()
    assert (
        "-_SPARSE_MLA_SUPPORTED_Q_HEADS = (64, 128)" in text
        and "+_SPARSE_MLA_SUPPORTED_Q_HEADS = (8, 16, 32, 64, 128)" in text
    )
    assert '+dependencies = ["torch", "flashinfer-python>=0.6.14,<0.6.18"]' in text
    tree = tmp_path / "tree"
    shutil.copytree(helper, tree)
    subprocess.run(["git", "apply", "--check", str(diff)], cwd=tree, check=True)
    subprocess.run(["git", "apply", str(diff)], cwd=tree, check=True)
    code, checked, _ = cli_json("check", "--repo", str(tree), "--sm", "100,103")
    verdicts = {f["verdict"] for f in checked["findings"]}
    assert code == 0 and verdicts == {"ok"}, verdicts
    assert {r["version"] for r in checked["releases"]} >= {"0.6.14", "0.6.17"}


# A pin's upper bound that keeps its releases to those whose trtllm-gen kernel
# table this machine can have (flashinfer-cubin 0.6.13 serves 0.6.12 - 0.6.17;
# later ones are the artifact store's alone): a test of the advice itself then
# rests on no pending answer.
BOUNDED = ",<0.6.18"


def _pinned_copy(tree: Path, dest: Path, requirement: str, bound: str) -> Path:
    shutil.copytree(tree, dest)
    pyproject = dest / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(requirement, requirement + bound))
    return dest


@pytest.mark.slow
def test_suggest_repo_after_48047_with_an_old_pin_offers_both_ways(cli_json, tmp_path):
    tree = tmp_path / "post"
    shutil.copytree(POST, tree)
    (tree / "pyproject.toml").write_text(
        f'[project]\nname = "f"\nversion = "0"\ndependencies = ["flashinfer-python>=0.6.13{BOUNDED}"]\n'
    )
    code, doc, _ = cli_json("suggest", "--repo", str(tree), "--sm", "100")
    [mla] = [s for s in doc["suggestions"] if s["backend"] == MLA]
    # The rule crashes on 0.6.13 for these per-rank counts ...
    assert set(mla["refused_now"]["0.6.13"]) == {4, 8, 16, 32}
    # ... so: either the pin >=0.6.14 (the rule stays), or the old padding.
    assert mla["suggested"] == mla["current"] == "pad_to {8, 16, 32, 64, 128}"
    assert mla["pin"]["new_pin"] == ">=0.6.14,<0.6.18"
    assert mla["safe_on_every_release_probed"] == "pad_to {64, 128}"
    assert "crashes on flashinfer 0.6.13 for n={4, 8, 16, 32}" in mla["advice"]
    assert code == 0


@pytest.fixture(scope="module")
def vllm_026(tmp_path_factory) -> Path:
    """vLLM 0.26.0's own source (pins flashinfer-python==0.6.14; DSv4 pads `64 if n <= 64 else 128`)."""
    return engine_source(tmp_path_factory.mktemp("vllm026"), "vllm", "0.26.0")


@pytest.mark.slow
def test_suggest_on_vllm_026_proposes_the_smaller_counts_with_the_saving(cli_json, vllm_026):
    code, doc, err = cli_json("suggest", "--repo", str(vllm_026 / "vllm"), "--sm", "100,103,120")
    assert [r["version"] for r in doc["releases"]] == ["0.6.14"]
    by = {s["backend"].rsplit(".", 1)[-1]: s for s in doc["suggestions"]}
    mla = by["DeepseekV4FlashInferMLAAttention"]
    assert mla["source"].endswith("deepseek_v4/nvidia/flashinfer_sparse.py:166")
    assert (mla["current"], mla["suggested"]) == ("pad_to {64, 128}", "pad_to {8, 16, 32, 64, 128}")
    saving = {(c["model"], c["tp"]): c["saving"] for c in mla["changes"]}
    assert (
        saving[("DeepSeek-V4-Pro", 4)] == 2.0
        and saving[("DeepSeek-V4-Pro", 8)] == 4.0
        and saving[("DeepSeek-V4-Pro", 16)] == 8.0
    )
    assert saving[("DeepSeek-V4-Pro", 1)] is None  # 128 stays 128
    # The pin ==0.6.14 already admits only a release that accepts the smaller counts.
    assert (
        mla["pin"]["current_pin"] == "==0.6.14"
        and mla["pin"]["pin_admits_unsafe"] == []
        and mla["pin"]["new_pin"] is None
    )
    assert mla["pin"]["needs"] == "0.6.14"
    sm120 = by["DeepseekV4FlashInferSM120Attention"]
    assert sm120["sms"] == [120] and sm120["suggested"] == "pad_to {8, 16, 32, 64, 128}"
    assert not any(m.startswith("vllm") for m in sys.modules)  # read, never imported
    assert code == 0, err


@pytest.mark.slow
def test_a_pin_the_index_does_not_serve_is_judged_on_none_with_the_nearest(cli, cli_json):
    """vLLM 0.34.0 pins flashinfer-python==0.7.3, which the index does not
    serve: the whole report, every count inconclusive, the note naming pip's
    reason and the nearest published releases, exit 3 (never 2: the input is
    right, the release is missing)."""
    code, doc, err = cli_json(
        "check",
        "--table",
        str(ROOT / "matrices" / "vllm-dsv4-flashinfer-pre-48047.toml"),
        "--pin",
        "==0.7.3",
        "--sm",
        "100",
    )
    assert code == 3 and doc["exit_code"] == 3 and "hprobe: error" not in err, err
    assert doc["findings"] and {f["verdict"] for f in doc["findings"]} == {"inconclusive"}
    [note] = [n for n in doc["notes"] if "the pin ==0.7.3, cannot be fetched" in n]
    assert "No matching distribution found for flashinfer-python==0.7.3" in note, note
    assert "nearest published: 0.7.2.post1, 0.7.4" in note and note.endswith("judged on no release"), note
    assert doc["releases"] == []
    # The headers name no release: none answered (the installed one was not asked).
    table = str(ROOT / "matrices" / "vllm-dsv4-flashinfer-pre-48047.toml")
    _, text, _ = cli("check", "--table", table, "--pin", "==0.7.3", "--sm", "100")
    assert "hprobe check  flashinfer none judged  targets: SM100" in text
    _, markdown, _ = cli("check", "--table", table, "--pin", "==0.7.3", "--sm", "100", "--format", "markdown")
    assert "## hprobe check — flashinfer none judged" in markdown


@pytest.mark.pure  # the fast tier: no torch, flashinfer or subprocess
def test_holds_from_x_holds_on_every_release_answered_from_x_on():
    """Both ends hold, and the check's own probe found 15 refusing it: releases
    answered already are weighed, the refusal moves the flip past it and the
    recovery after it is searched (16, adjacent), and a refusal at the newest
    release seen leaves no release it holds from."""
    versions = list(range(20))
    history = {v: v != 15 for v in versions}
    checked = {15}  # the check probed it; the search would not ask it
    found = first_true(versions, history.__getitem__, answered=checked.__contains__)
    assert (found.first, found.last_false, found.adjacent) == (16, 15, True) and (0, 15) in found.regressions
    newest = {v: 5 <= v < 19 for v in versions}
    gone = first_true(versions, newest.__getitem__, exhaustive=True)
    assert gone.first is None and gone.last_false == 19
    from hprobe.advise.pins import CountPin

    assert CountPin(24, gone).words() == "24: refused by 19, the newest release seen, after releases that accepted it"


@pytest.mark.pure  # the fast tier: no torch, flashinfer or subprocess
def test_a_search_says_up_front_how_many_releases_it_may_fetch(tmp_path, monkeypatch):
    """A cold suggest probed ~30 releases (2 min, 1 GB) without a word: the
    search says its range, and how many of it the cache does not hold yet."""
    from hprobe.support.trees import fetched_versions

    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path))
    (tmp_path / "wheels").mkdir()
    for name in ("flashinfer_python-0.6.13-py3-none-any.whl", "flashinfer_python-0.7.4-py3-none-any.whl", "notes.txt"):
        (tmp_path / "wheels" / name).write_bytes(b"")
    assert fetched_versions() == {Version("0.6.13"), Version("0.7.4")}


@pytest.mark.slow
def test_a_tree_that_needs_no_change_writes_no_diff_and_passes(cli, tmp_path):
    """Every rule of POST is already the smallest count the releases its pin
    admits accept: --diff writes nothing, says so once, and the run passes
    (the upgrade-proposal workflow reads exit 0 as "nothing to change")."""
    diff = tmp_path / "p.diff"
    code, out, err = cli("suggest", "--repo", str(POST), "--sm", "100", "--flashinfer", "0.6.14", "--diff", str(diff))
    assert code == 0, err
    assert not diff.exists()
    said = f"--diff {diff} not written: nothing to change"
    assert (out + err).count(said) == 1 and "nothing to rewrite" not in out + err, err
