"""rules/models: the shipped models table, read strictly (each count cited,
every model's counts divide over its TP degrees), and `--model` picking from it."""

from __future__ import annotations

import tomllib

import pytest

from hprobe.model.errors import InputError
from hprobe.rules import shipped_data
from hprobe.rules.models import MODELS_FILE, load_models, pick_models, shipped_models

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
