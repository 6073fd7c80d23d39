"""rules/models: the shipped models tables (MLA and GQA/MHA), read strictly
(each count cited, every model's counts divide over its TP degrees, KV heads
split or replicate evenly), and `--model` picking from them."""

from __future__ import annotations

import tomllib

import pytest

from hprobe.model.errors import InputError
from hprobe.model.padding import AttentionLayer, kv_heads_per_rank
from hprobe.rules import shipped_data
from hprobe.rules.models import (
    GQA_MODELS_FILE,
    MODELS_FILE,
    every_model,
    load_models,
    pick_models,
    shipped_gqa_models,
    shipped_models,
)

pytestmark = pytest.mark.pure


def test_the_shipped_table_is_the_file_as_written():
    raw = tomllib.loads(shipped_data(*MODELS_FILE).read_text())["model"]
    models = shipped_models()
    assert [m.name for m in models] == [entry["name"] for entry in raw]
    for model, entry in zip(models, raw, strict=True):
        assert model.num_q_heads == entry["num_q_heads"]
        # Every count is cited: where it is published and the field it reads.
        assert entry["config"].strip() and entry["field"].strip()
        assert all(model.num_q_heads % tp == 0 for tp in entry["tp"])


def test_picked_in_the_order_asked_without_regard_to_case():
    models = list(shipped_models())
    picked = pick_models(models, ["deepseek-r1", " DeepSeek-V3 "])
    assert [m.name for m in picked] == ["DeepSeek-R1", "DeepSeek-V3"]
    assert all(m.asked for m in picked) and not any(m.asked for m in models)


def test_an_unknown_model_names_those_known():
    with pytest.raises(InputError) as refused:
        pick_models(list(shipped_models()), ["Llama-9"])
    message = str(refused.value)
    assert message.startswith("--model 'Llama-9': not a model hprobe knows (known: DeepSeek-V3, ")
    assert "give --heads N" in message


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[[model]]\nname = "A"\nnum_q_heads = 8\n[other]\nx = 1\n', "a models file holds [[model]] entries only"),
        ('model = "A"\n', "[[model]] must be a list of tables"),
        ('[[model]]\nname = "A"\nnum_q_heads = 8\n[[model]]\nname = "A"\nnum_q_heads = 16\n', "a model is named twice"),
        ('[[model]]\nname = "A"\nnum_q_heads = 12\ntp = [8]\n', "12 query heads do not divide evenly over tp=8"),
        ('[[model]]\nname = "A"\nnum_q_heads = 0\n', "num_q_heads must be a positive integer"),
    ],
)
def test_a_models_file_written_wrong_is_one_line_naming_the_file(tmp_path, text, said):
    path = tmp_path / "models.toml"
    path.write_text(text)
    with pytest.raises(InputError) as refused:
        load_models(path)
    assert str(path) in str(refused.value) and said in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_models_file_written_right_reads_back(tmp_path):
    path = tmp_path / "models.toml"
    path.write_text('[[model]]\nname = "Kimi-like"\nnum_q_heads = 96\ntp = [1, 2, 4, 8, 16]\nfamilies = ["kimi-k3"]\n')
    (model,) = load_models(path)
    assert (model.name, model.num_q_heads, tuple(model.tp)) == ("Kimi-like", 96, (1, 2, 4, 8, 16))


def test_the_shipped_gqa_table_is_the_file_as_written():
    raw = tomllib.loads(shipped_data(*GQA_MODELS_FILE).read_text())["model"]
    models = shipped_gqa_models()
    assert [m.name for m in models] == [entry["name"] for entry in raw]
    for model, entry in zip(models, raw, strict=True):
        assert entry["config"].strip() and entry["field"].strip() and entry["corroborated"].strip()
        layers = entry.get("layers") or [
            {"name": "attention", "num_kv_heads": entry["num_kv_heads"], "head_dim": entry["head_dim"]}
        ]
        assert [(layer.name, layer.num_kv_heads, layer.head_dim) for layer in model.layers] == [
            (item["name"], item["num_kv_heads"], item["head_dim"]) for item in layers
        ]
        assert all(layer.sinks == entry.get("sinks", False) for layer in model.layers)


def test_kv_heads_split_while_there_are_enough_then_replicate():
    # Llama-3.1-70B: 64 query heads over 8 KV heads, as the engines shard them.
    (llama,) = pick_models(every_model(), ["Llama-3.1-70B"])
    per_rank = [(tp, q, kv) for tp, _, q, kv in llama.per_rank_layers()]
    assert per_rank == [(1, 64, 8), (2, 32, 4), (4, 16, 2), (8, 8, 1), (16, 4, 1)]
    assert [kv_heads_per_rank(8, tp) for tp in (1, 8, 16)] == [8, 1, 1]


def test_gemma_4_has_a_row_per_layer_kind_and_tp():
    (gemma,) = pick_models(every_model(), ["gemma-4-31b"])
    assert gemma.layers == (AttentionLayer("global", 4, 512), AttentionLayer("sliding", 16, 256))
    shapes = {(tp, layer.name): (q, kv) for tp, layer, q, kv in gemma.per_rank_layers()}
    assert shapes[(8, "global")] == (4, 1) and shapes[(8, "sliding")] == (4, 2)
    assert len(shapes) == 2 * len(gemma.tp)


def test_mla_and_gqa_models_are_known_together_and_kept_apart():
    names = [m.name for m in every_model()]
    assert names == [m.name for m in (*shipped_models(), *shipped_gqa_models())]
    assert not any(m.layers for m in shipped_models()) and all(m.layers for m in shipped_gqa_models())


def test_check_asked_for_a_gqa_model_says_where_it_is_probed():
    with pytest.raises(InputError) as refused:
        pick_models(list(shipped_models()), ["llama-3.1-8b"])
    message = str(refused.value)
    assert "a GQA/MHA model, and check judges MLA call paths only" in message
    assert "`hprobe matrix --model Llama-3.1-8B`" in message


_GQA = '[[model]]\nname = "G"\nnum_q_heads = 32\n'


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (_GQA + "num_kv_heads = 8\nhead_dim = 128\ntp = [1, 2, 4, 8, 16, 32]\n", ""),
        (_GQA + "num_kv_heads = 6\nhead_dim = 128\n", "num_kv_heads must be a positive integer that divides"),
        (
            _GQA + 'tp = [1, 2, 4]\nlayers = [{ name = "a", num_kv_heads = 12, head_dim = 128 }]\n',
            "12 KV heads do not divide 32 query heads",
        ),
        (
            '[[model]]\nname = "G"\nnum_q_heads = 24\ntp = [8]\nnum_kv_heads = 12\nhead_dim = 128\n',
            "12 KV heads neither split over nor replicate evenly at tp=8",
        ),
        (_GQA + "head_dim = 128\nlayers = []\n", "give layers or head_dim, not both"),
        (_GQA + "sinks = true\n", "sinks needs a head_dim"),
        (_GQA + "head_dim = 0\n", "its head_dim one up to 1024"),
        (_GQA + 'head_dim = 128\nsinks = "yes"\n', "its sinks true or false"),
        (
            _GQA + 'layers = [{ name = "a", head_dim = 128 }, { name = "a", head_dim = 256 }]\n',
            "a layer is named twice",
        ),
        (_GQA + 'layers = [{ name = "a", head_dim = 128, window = 4 }]\n', "a layer holds name, num_kv_heads"),
    ],
)
def test_a_gqa_model_written_wrong_is_one_line(tmp_path, text, said):
    path = tmp_path / "models.toml"
    path.write_text(text)
    if not said:
        # TP 32 leaves one query head and one KV head, replicated: valid.
        (model,) = load_models(path)
        assert model.per_rank_layers()[-1][2:] == (1, 1)
        return
    with pytest.raises(InputError) as refused:
        load_models(path)
    assert str(path) in str(refused.value) and said in str(refused.value)
    assert "\n" not in str(refused.value)
