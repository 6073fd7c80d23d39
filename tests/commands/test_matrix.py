"""`hprobe matrix` on the DSv4 sparse-MLA kernel, against the installed flashinfer."""

from __future__ import annotations

import pytest

from hprobe.system.envinfo import distribution_version

pytestmark = pytest.mark.skipif(
    distribution_version("flashinfer-python") != "0.6.14",
    reason="these expectations are for flashinfer-python 0.6.14 (scripts/setup installs it)",
)


def _only(doc: dict, sm: int) -> dict:
    [result] = [r for r in doc["results"] if r["sm"] == sm]
    return result


@pytest.mark.parametrize("sm", ["100", "120"])
def test_accepted_heads_over_1_to_256(cli_json, sm):
    code, doc, _ = cli_json("matrix", "--kernel", "dsv4-sparse-mla", "--sm", sm)
    assert code == 0
    assert doc["schema"] == "hprobe.matrix/2"
    assert doc["flashinfer"]["version"] == "0.6.14"
    assert doc["heads"] == {"min": 1, "max": 256, "count": 256}
    result = _only(doc, int(sm))
    assert result["status"] == "accepted"
    assert result["accepted"] == [8, 16, 32, 64, 128]
    heads = {h["heads"]: h for h in result["heads"]}
    assert len(heads) == 256
    # Every other count is refused by the validator itself, with its own words.
    assert heads[24]["outcome"] == "rejected"
    assert heads[24]["error_type"] == "ValueError"
    assert "got 24" in heads[24]["message"]
    assert heads[24]["location"].startswith("flashinfer/mla/")
    assert all(h["outcome"] in ("accepted", "rejected") for h in heads.values())


def test_boundary_names_the_compiled_entry(cli_json):
    _, doc, _ = cli_json("matrix", "--kernel", "dsv4-sparse-mla", "--sm", "100,120", "--heads", "16")
    sm100, sm120 = _only(doc, 100), _only(doc, 120)
    # The trtllm-gen getter runs for real up to its first compiled artefact, the
    # prebuilt cubins it fetches: that is where this call meets compiled code.
    assert sm100["heads"][0]["entry"] == ("get_trtllm_gen_fmha_module.trtllm_paged_attention_decode_sparse_mla_dsv4")
    # SM12x: the dispatch getter runs for real and sends h_q 16 to the DSv4 decode kernel.
    assert sm120["heads"][0]["entry"] == "_get_sparse_mla_decode_dsv4_module.sparse_mla_sm120_decode_dsv4"


def test_sm90_is_unsupported_arch_not_rejected(cli_json):
    code, doc, _ = cli_json("matrix", "--kernel", "dsv4-sparse-mla", "--sm", "90")
    assert code == 0
    result = _only(doc, 90)
    assert result["status"] == "unsupported-arch"
    assert result["accepted"] == []
    outcomes = {h["outcome"] for h in result["heads"]}
    assert outcomes == {"unsupported-arch"}
    assert "SM90" in result["heads"][0]["message"]


def test_sm_spellings_agree(cli_json):
    docs = [
        cli_json("matrix", "-k", "dsv4-sparse-mla", "--sm", spelling, "--heads", "8,24")[1]
        for spelling in ("sm_100a", "10.0", "SM100")
    ]
    assert {tuple(_only(d, 100)["accepted"]) for d in docs} == {(8,)}


def test_grid_marks(cli):
    code, out, _ = cli("matrix", "-k", "dsv4-sparse-mla", "--sm", "90,100", "--heads", "8,24", "--grid")
    assert code == 0
    lines = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()[:2].strip().isdigit()}
    assert lines["8"] == ["A", "✓"]  # SM90: no route (the architecture); SM100 accepts 8
    assert lines["24"] == ["A", "✗"]
    assert out.index("marks: ✓ accepted  ✗ rejected  A unsupported-arch") < out.index(
        "\n h_q "
    )  # the legend before the grid


def test_a_grid_folds_runs_of_counts_marked_alike(cli):
    """256 rows of mostly ✗ hid the five counts that differ: a run of
    consecutive h_q marked alike is one row."""
    code, out, _ = cli("matrix", "-k", "dsv4-sparse-mla", "--sm", "100,120", "--heads", "1-256", "--grid")
    assert code == 0
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [r[0] for r in rows] == ["1-7", "8", "9-15", "16", "17-31", "32", "33-63", "64", "65-127", "128", "129-256"]
    assert all(r[1:] == (["✓", "✓"] if "-" not in r[0] else ["✗", "✗"]) for r in rows)


def test_grid_of_several_kernels_is_one_narrow_grid_each(cli):
    code, out, _ = cli("matrix", "-k", "dsv4-sparse-mla,xqa-mla", "--sm", "90,100,120", "--heads", "8", "--grid")
    assert code == 0
    titles = [line.strip() for line in out.splitlines() if line.strip() in ("dsv4-sparse-mla", "xqa-mla")]
    assert titles == ["dsv4-sparse-mla", "xqa-mla"]
    headers = [line.split() for line in out.splitlines() if line.split()[:1] == ["h_q"]]
    assert headers == [["h_q", "SM90", "SM100", "SM120"]] * 2


def test_plain_text_when_not_a_terminal(cli):
    code, out, _ = cli("matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "1-256")
    assert code == 0
    assert "\x1b[" not in out
    assert "accepted {8, 16, 32, 64, 128}" in out
