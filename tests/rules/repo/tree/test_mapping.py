"""Mapping files (rules/repo/tree/mapping.py): the [[run_value]] entries that say
which values the engine fills at run time, read into what a head-count trail
evaluates at; a malformed entry is one clear line naming where it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from hprobe.model.errors import InputError
from hprobe.rules.repo.tree.mapping import RunValue, load_mapping, shipped_mappings

pytestmark = pytest.mark.pure

HEADER = """
[mapping]
layer_query = ["forward_mqa(q)"]
"""

RUN_VALUE = """
[[run_value]]
at = "models.draft.attention:folded_decode"
name = "tokens_per_request"
shown = "k"
values = [2, 3]
means = "the draft block's tokens per request"
"""


def test_a_run_value_is_read_with_where_it_applies(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text(HEADER + RUN_VALUE)
    (run,) = load_mapping(path).run_values
    assert run == RunValue("models.draft.attention", "folded_decode", "tokens_per_request", "k", (2, 3), run.means)
    # The module is a dotted suffix, as everywhere in a mapping; the function is its qualname.
    assert run.at("vllm.models.draft.attention", "folded_decode")
    assert not run.at("vllm.models.draft.attention_other", "folded_decode")
    assert not run.at("vllm.models.draft.attention", "Impl.folded_decode")


@pytest.mark.parametrize(
    "change",
    [
        ("values = [2, 3]", "values = []"),
        ("values = [2, 3]", "values = [2.5]"),
        ('shown = "k"', 'shown = ""'),
        ('at = "models.draft.attention:folded_decode"', 'at = "models.draft.attention"'),
        ('means = "the draft block\'s tokens per request"', 'means = "x"\nextra = 1'),
    ],
)
def test_a_malformed_run_value_is_one_line_naming_the_entry(tmp_path: Path, change: tuple[str, str]) -> None:
    path = tmp_path / "m.toml"
    path.write_text(HEADER + RUN_VALUE.replace(*change))
    with pytest.raises(InputError) as raised:
        load_mapping(path)
    message = str(raised.value)
    assert "\n" not in message and "[[run_value]] takes at" in message and "m.toml" in message


def test_the_shipped_vllm_mapping_names_the_drafters_run_values() -> None:
    vllm = next(m for m in shipped_mappings() if m.package == "vllm")
    assert {(run.function, run.name, run.values) for run in vllm.run_values} == {
        ("folded_decode", "tokens_per_request", (2, 3, 4, 5, 6, 7, 8)),
        ("folded_decode", "need_lse", (False, True)),
    }


SETTINGS_AND_CALL = """
[[engine_setting]]
name = "dense"
flag = "--attention-backend"
value = "trtllm_mla"
default = "trtllm_mla"
default_reaches = true
source = "x.py"
otherwise = "other"

[[engine_setting]]
name = "kimi"
flag = "--decode-attention-backend"
value = "trtllm_mla"
assigned_in = "engine.overrides.kimi"
key = "decode_attention_backend"
given = "not backends_unset"
otherwise = "the backend given"

[[call]]
site = "layers.mla:Backend.decode"
entry = "trtllm_batch_decode_with_kv_cache_mla"
kernel = "trtllm-mla"
sm = [100]
reaches_flashinfer_when = "dense"
reaches_flashinfer_when_family = { kimi-k3 = "kimi" }
"""


def test_a_family_reaches_a_call_under_a_setting_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text(HEADER + SETTINGS_AND_CALL)
    mapping = load_mapping(path)
    (call,) = mapping.calls
    assert call.reach_setting(("dense-mla", "kimi-k3")) == "kimi"
    assert call.reach_setting(("dense-mla",)) == "dense"
    assert mapping.engine_settings["kimi"].given == "not backends_unset"


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (('{ kimi-k3 = "kimi" }', '{ kimi-k3 = "nothing" }'), "names no [[engine_setting]] 'nothing'"),
        (('{ kimi-k3 = "kimi" }', '"kimi"'), "reaches_flashinfer_when_family maps a model family"),
        (('given = "not backends_unset"\n', 'given = "not backends_unset"\ndefault = "x"\n'), "takes name, flag"),
        (('given = "not backends_unset"', 'given = "not ("'), "given 'not ('"),
    ],
)
def test_a_malformed_reach_is_one_line(tmp_path: Path, change: tuple[str, str], said: str) -> None:
    path = tmp_path / "m.toml"
    path.write_text(HEADER + SETTINGS_AND_CALL.replace(*change))
    with pytest.raises(InputError) as raised:
        load_mapping(path)
    message = str(raised.value)
    assert "\n" not in message and said in message and "m.toml" in message


UNRESOLVED = """
[[call]]
site = "models.sparse:Impl.decode"
entry = "trtllm_batch_decode_with_kv_cache_mla"
model_family = "dsa-nope"
sm = [120, 121]
unresolved = "a layout the probe does not build"
"""


def test_an_unresolved_call_keeps_the_sms_it_runs_on(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text(HEADER + UNRESOLVED)
    (call,) = load_mapping(path).calls
    assert (call.unresolved, call.model_family, call.sms) == (
        "a layout the probe does not build",
        "dsa-nope",
        (120, 121),
    )
    path.write_text(HEADER + UNRESOLVED.replace("sm = [120, 121]\n", ""))
    assert load_mapping(path).calls[0].sms == ()


@pytest.mark.parametrize("sm", ['"120"', "[]", '["sm999"]'])
def test_an_unresolved_calls_bad_sm_is_one_line_naming_the_entry(tmp_path: Path, sm: str) -> None:
    path = tmp_path / "m.toml"
    path.write_text(HEADER + UNRESOLVED.replace("[120, 121]", sm))
    with pytest.raises(InputError) as raised:
        load_mapping(path)
    message = str(raised.value)
    assert "\n" not in message and "models.sparse:Impl.decode" in message and "m.toml" in message
