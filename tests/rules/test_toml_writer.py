"""What hprobe writes as TOML (`suggest -o`, `table extract -o`), hprobe reads
back equal, whatever the names hold: quotes, backslashes, control characters,
escape sequences, line separators, characters beyond the Basic Multilingual
Plane. A lone surrogate has no TOML spelling and is written as U+FFFD."""

from __future__ import annotations

import tomllib

import pytest

from hprobe.model.padding import Backend, Model, PaddingTable, PadTo, Reach, Where
from hprobe.rules.toml_source import TomlTableSource
from hprobe.rules.toml_writer import comment, quote, table_toml

# Pure: runs without torch, flashinfer or a subprocess (the fast tier, `-m "pure and not slow"`).
pytestmark = pytest.mark.pure

HOSTILE = [
    'quote " and back\\slash',
    "escape \x1b[31mred\x1b[0m and bell \x07",
    "nul \x00, del \x7f, C1 \x85 \x9b",
    "lines \n\r\u2028\u2029 and tab \t",
    "beyond the BMP 😀 𝔘",
    "::error::not a workflow command",
    "[bold]markup[/] <script>x</script> `tick` | pipe",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_a_table_written_reads_back_equal(tmp_path, text):
    table = PaddingTable(
        name=f"table {text}",
        source=f"source {text}",
        path=str(tmp_path),
        requires_flashinfer=">=0.6.14",
        models=[Model(f"model {text}", 128, (1, 2), Where("t"))],
        backends=[
            Backend(
                f"backend {text}",
                "dsv4-sparse-mla",
                (100,),
                PadTo((64, 128)),
                Where("t"),
                # Known not to reach by default, or by default under settings of the engine's own.
                reach=Reach(
                    f"--flag{text}",
                    text,
                    text,
                    False if len(text) % 2 else None,
                    text,
                    text,
                    "" if len(text) % 2 else f"kv_cache_dtype == {text!r}",
                ),
            )
        ],
    )
    written = table_toml(
        table, header=[f"header {text}"], backend_comments={table.backends[0].name: f"note {text}"}, footer=[text]
    )
    tomllib.loads(written)  # valid TOML, comments included
    path = tmp_path / "t.toml"
    path.write_text(written, encoding="utf-8")
    back = TomlTableSource(path).collect()
    assert (back.name, back.source, back.requires_flashinfer) == (table.name, table.source, table.requires_flashinfer)
    assert [m.name for m in back.models] == [m.name for m in table.models]
    [b] = back.backends
    assert (b.name, b.rule, b.reach) == (table.backends[0].name, table.backends[0].rule, table.backends[0].reach)


def test_a_lone_surrogate_is_written_as_the_replacement_character():
    bad = "bad \udc80 byte"
    written = comment(bad) + "\nk = " + quote(bad) + "\n"
    assert tomllib.loads(written)["k"] == "bad \ufffd byte"
