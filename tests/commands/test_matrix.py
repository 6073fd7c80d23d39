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


def _shapes(doc: dict) -> dict[tuple, dict]:
    """`matrix --model`'s rows by (model, tp, layer, release)."""
    return {(a["model"], a["tp"], a.get("layer"), a["release"]): a for a in doc["model_shapes"]}


@pytest.mark.slow
def test_a_model_is_probed_as_each_rank_hands_the_kernel(cli_json):
    """Each TP degree's query and KV heads (KV heads replicated once TP passes
    them) against the CUDA-core decode's group dispatch, read here from each
    release's own macro: Llama-3.1-405B's group 16 (flashinfer #3563) and
    Qwen3.5-27B's group 6 (#2684) are refused on 0.6.14 and served on 0.7.4."""
    from hprobe.rules.models import every_model, pick_models
    from tests.kernels.test_gqa_decode import _dispatch

    code, doc, err = cli_json(
        "matrix",
        "-k",
        "gqa-decode",
        "--model",
        "Llama-3.1-405B,Qwen3.5-27B",
        "--sm",
        "90",
        "--flashinfer",
        "0.6.14,0.7.4",
    )
    assert code == 0, err
    rows = _shapes(doc)
    models = pick_models(every_model(), ["Llama-3.1-405B", "Qwen3.5-27B"])
    expected = {
        (m.name, tp, layer.name, release): (q, kv, layer.head_dim)
        for m in models
        for tp, layer, q, kv in m.per_rank_layers()
        for release in ("0.6.14", "0.7.4")
    }
    assert set(rows) == set(expected)
    for key, (q, kv, dim) in expected.items():
        row = rows[key]
        assert (row["heads"], row["kv_heads"], row["head_dim"], row["group"]) == (q, kv, dim, q // kv)
        groups, line = _dispatch(key[3])
        if q // kv in groups:
            assert row["answer"]["outcome"] == "accepted", key
            assert row["depth"] == "dispatch"
        else:
            assert row["answer"]["outcome"] == "rejected", key
            assert row["answer"]["message"] == f"Unsupported group_size: {q // kv}"
            assert row["answer"]["location"].startswith(f"flashinfer/data/include/flashinfer/utils.cuh:{line} ")
    assert rows[("Llama-3.1-405B", 8, "attention", "0.6.14")]["answer"]["outcome"] == "rejected"
    assert rows[("Qwen3.5-27B", 1, "full-attention", "0.7.4")]["answer"]["outcome"] == "accepted"


def test_a_model_row_is_the_matrix_cell_of_its_shape(cli_json):
    """A model's row answers as the plain matrix does for the same query heads,
    KV heads and head dim: the model view adds no judgement of its own."""
    _, by_model, _ = cli_json("matrix", "-k", "gqa-decode", "--model", "Gemma-3-27B", "--sm", "90")
    for tp, kv in ((1, 16), (16, 1)):
        [row] = [a for a in by_model["model_shapes"] if a["tp"] == tp]
        _, plain, _ = cli_json(
            "matrix", "-k", "gqa-decode", "--sm", "90", "--heads", str(row["heads"]), "--kv-heads", str(kv)
        )
        [cell] = _only(plain, 90)["heads"]
        assert row["answer"] == cell and row["kv_heads"] == kv


def test_an_mla_model_is_its_query_heads_per_rank(cli_json):
    """DeepSeek-V4-Flash's 64 heads at TP 1-16: the 0.6.14 validator takes
    {8, 16, 32, 64, 128}, so TP 16's 4 heads are refused in its words."""
    code, doc, _ = cli_json("matrix", "-k", "dsv4-sparse-mla", "--model", "DeepSeek-V4-Flash", "--sm", "100")
    assert code == 0
    answers = {a["tp"]: a for a in doc["model_shapes"]}
    assert {tp: a["heads"] for tp, a in answers.items()} == {1: 64, 2: 32, 4: 16, 8: 8, 16: 4}
    assert all("kv_heads" not in a for a in answers.values())
    assert [tp for tp, a in answers.items() if a["answer"]["outcome"] == "accepted"] == [1, 2, 4, 8]
    assert answers[16]["answer"]["message"].endswith("got 4")


def test_a_shape_no_probe_can_take_says_why_and_decides_nothing(cli, cli_json):
    """gpt-oss hands every layer sinks, which the CUDA-core decode probe has no
    axis for; Gemma 4's global layers have head dim 512, not among its values.
    Neither is guessed: not probed, with the reason, and exit 3 when nothing was."""
    code, doc, _ = cli_json("matrix", "-k", "gqa-decode", "--model", "gpt-oss-20b", "--sm", "90")
    assert code == 3
    assert {a["not_probed"] for a in doc["model_shapes"]} == {
        "gqa-decode has no sinks axis: a call with sinks is not probed"
    }
    code, doc, _ = cli_json("matrix", "-k", "gqa-trtllm-decode", "--model", "gpt-oss-20b", "--sm", "100")
    assert code == 0
    assert all("sinks=1" in a["variant"] and "answer" in a for a in doc["model_shapes"])
    code, out, _ = cli("matrix", "-k", "gqa-decode", "--model", "Gemma-4-31B", "--sm", "90")
    assert code == 0
    lines = [line.split() for line in out.splitlines() if line.split()[:1] == ["Gemma-4-31B"]]
    assert {tuple(line[2:4]) for line in lines if line[2] == "global"} >= {("global", "32/4")}
    assert all(line[-2:] == ["probed", "[1]"] or line[2] == "sliding" for line in lines)
    assert "[1] gqa-decode: head_dim 512: expected one of 64, 128, 256" in out


def test_the_model_view_in_markdown_names_each_shape(cli):
    code, out, _ = cli("matrix", "-k", "gqa-decode", "--model", "Llama-3.1-8B", "--sm", "90", "--format", "markdown")
    assert code == 0
    assert "| model | TP | layer | q/kv heads | head dim | kernel | SM | release | answer | depth | evidence |" in out
    assert (
        "| Llama-3.1-8B | 16 | attention | 2/1 (g2) | 128 | `gqa-decode` | SM90 | 0.6.14 | accepted | dispatch |" in out
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--model", "Llama-3.1-8B", "--heads", "8"], "--heads: --model sets the head counts and the rows"),
        (["--model", "Llama-3.1-8B", "--grid"], "--grid: --model sets the head counts and the rows"),
        (["--model", "Llama-3.1-8B", "--kv-heads", "2"], "--kv-heads: --model sets it from each model's layers"),
        (["--model", "Llama-3.1-8B", "-k", "dsv4-sparse-mla"], "a GQA/MHA model, and every kernel named is MLA"),
        (["--model", "DeepSeek-V3", "-k", "gqa-decode"], "an MLA model, and every kernel named is GQA/MHA"),
        (["--model", "Llama-9"], "--model 'Llama-9': not a model hprobe knows"),
        (
            ["--model", "Llama-3.1-70B", "--tp", "3"],
            "model Llama-3.1-70B: 64 query heads do not divide evenly over tp=3",
        ),
        (
            ["--model", "Qwen3.5-27B", "--tp", "3"],
            "model Qwen3.5-27B: 4 KV heads neither split over nor replicate evenly at tp=3",
        ),
        (["--tp", "2"], "--tp: TP degrees apply to models; give --model too"),
    ],
)
def test_model_refusals_are_one_line(cli, args, said):
    code, out, err = cli("matrix", "--sm", "90", *(args if "-k" in args else ["-k", "gqa-decode", *args]))
    assert code == 2
    assert said in err and len(err.strip().splitlines()) == 1
    assert out == ""


def test_each_kernel_a_model_meets_is_one_table_with_its_evidence(cli):
    """gqa-trtllm-decode sweeps three backends per shape: one table each, not a
    table per row. On SM120, 0.6.14's XQA refuses Gemma 4's head dim 512 in its
    JIT spec (flashinfer #4546), trtllm-gen the architecture."""
    code, out, _ = cli("matrix", "-k", "gqa-trtllm-decode", "--model", "Gemma-4-31B", "--sm", "120")
    assert code == 0
    titles = [line for line in out.splitlines() if line.startswith("gqa-trtllm-decode")]
    assert titles == [
        "gqa-trtllm-decode · SM120",
        "gqa-trtllm-decode[backend=trtllm-gen] · SM120",
        "gqa-trtllm-decode[backend=xqa] · SM120",
    ]
    xqa = out[out.index(titles[2]) :]
    global_rows = [line.split() for line in xqa.splitlines() if line.split()[2:3] == ["global"]]
    # Refused whatever h_q is: the configuration (its head dim), not the count.
    assert len(global_rows) == 5 and all(row[-2:] == ["unsupported-config", "[1]"] for row in global_rows)
    assert (
        "[1] ValueError: Invalid head_dim: 512, must be divisible by 16 and in range [16, 256] [flashinfer/jit/xqa.py:"
        in xqa
    )


def test_tp_degrees_given_replace_the_models(cli_json):
    code, doc, _ = cli_json("matrix", "-k", "gqa-decode", "--model", "Llama-3.1-70B", "--tp", "2,16", "--sm", "90")
    assert code == 0
    assert [(a["tp"], a["heads"], a["kv_heads"]) for a in doc["model_shapes"]] == [(2, 32, 4), (16, 4, 1)]


def test_a_models_rows_do_not_depend_on_the_models_asked_beside_it(cli_json):
    """Llama-3.1-8B and -70B share variants (one KV head per rank at TP 8 and
    16): each model's variants are probed at its own counts, so its rows read
    the same asked alone or beside the other."""
    args = ("matrix", "-k", "gqa-decode", "--sm", "90")
    _, alone, _ = cli_json(*args, "--model", "Llama-3.1-8B")
    _, beside, _ = cli_json(*args, "--model", "Llama-3.1-70B,Llama-3.1-8B")
    assert alone["model_shapes"] == [a for a in beside["model_shapes"] if a["model"] == "Llama-3.1-8B"]
    # Alone, the shared variant was asked at this model's counts only (2 and 4 query heads).
    [shared] = [r for r in alone["results"] if r["key"] == "gqa-decode"]  # one KV head, head dim 128: the defaults
    assert sorted(h["heads"] for h in shared["heads"]) == [2, 4]
