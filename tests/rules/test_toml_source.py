"""rules/toml_source: a padding table the user wrote, read without running
anything. Every refusal is one InputError that names the file and the line
of the key at fault; a misspelt key is an error, never a silent default."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hprobe.model.errors import InputError
from hprobe.model.padding import PadTo
from hprobe.rules.toml_source import TomlTableSource, table_sources

pytestmark = pytest.mark.pure

GOOD = """[table]
name = "t"
source = "engine 1.0"
requires_flashinfer = ">=0.6.14"

[model]
name = "DSv4"
num_q_heads = 128
tp = [1, 2, 4, 8, 16]

[[backend]]
name = "b"
kernel = "dsv4-sparse-mla"
sm = [100, "sm_103a"]
pad_to = [64, 128]
"""


def _read(tmp_path: Path, text: str):
    path = tmp_path / "t.toml"
    path.write_text(text)
    return TomlTableSource(path).collect()


def test_a_table_reads_as_written(tmp_path: Path) -> None:
    table = _read(tmp_path, GOOD)
    assert (table.name, table.source, table.requires_flashinfer) == ("t", "engine 1.0", ">=0.6.14")
    [model] = table.models
    assert (model.name, model.num_q_heads, model.tp) == ("DSv4", 128, (1, 2, 4, 8, 16))
    [backend] = table.backends
    assert backend.kernel == "dsv4-sparse-mla" and backend.sms == (100, 103)
    assert backend.rule == PadTo((64, 128))
    assert str(backend.where) == f"{tmp_path / 't.toml'}:11"


@pytest.mark.parametrize(
    ("old", "new", "line", "said"),
    [
        ('name = "DSv4"', 'nmae = "DSv4"', 6, "[model]: unknown key 'nmae'"),
        ("num_q_heads = 128", "num_q_heads = 100", 9, "100 query heads do not divide evenly over tp=8"),
        ("num_q_heads = 128", "num_q_heads = 0", 8, "num_q_heads must be a positive integer"),
        ("tp = [1, 2, 4, 8, 16]", "tp = []", 9, "tp must be a list of positive integers"),
        ('sm = [100, "sm_103a"]', 'sm = ["sm_99z"]', 14, "backend b:"),
        ('requires_flashinfer = ">=0.6.14"', 'requires_flashinfer = "newest"', 4, "not a PEP 440 version specifier"),
        ('kernel = "dsv4-sparse-mla"', "kernel = 3", 11, "needs a kernel id"),
    ],
)
def test_a_refusal_names_the_file_and_the_line_of_the_key(tmp_path: Path, old, new, line, said) -> None:
    assert old in GOOD
    with pytest.raises(InputError) as raised:
        _read(tmp_path, GOOD.replace(old, new))
    assert raised.value.message.startswith(f"{tmp_path / 't.toml'}:{line}: "), raised.value.message
    assert said in raised.value.message


def test_malformed_toml_is_one_line_with_its_line(tmp_path: Path) -> None:
    with pytest.raises(InputError) as raised:
        _read(tmp_path, GOOD.replace("pad_to = [64, 128]", "pad_to = [64, 128"))
    assert raised.value.message.startswith(f"{tmp_path / 't.toml'}:") and "malformed TOML" in raised.value.message
    assert "\n" not in raised.value.message


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[table]\nname = 't'\n", "a table needs a [model]"),
        (GOOD.split("[[backend]]")[0], "a table needs at least one [[backend]]"),
        (GOOD + "\n[extra]\nx = 1\n", "unknown top-level key(s): extra"),
    ],
)
def test_a_table_missing_its_parts_is_refused_whole(tmp_path: Path, text, said) -> None:
    with pytest.raises(InputError, match=re.escape(said)):
        _read(tmp_path, text)


def test_without_tables_named_the_shipped_ones_are_read() -> None:
    shipped = table_sources(None)
    assert shipped and all(source.path.suffix == ".toml" for source in shipped)
    assert [s.path for s in table_sources([Path("x.toml")])] == [Path("x.toml")]
