"""Text output at a terminal's width: what a reader of an 80-column terminal sees."""

from __future__ import annotations

import pytest

from .conftest import engine_source


@pytest.mark.parametrize(
    "args",
    [("check",), ("matrix", "-k", "trtllm-mla", "--sm", "100"), ("check", "--repo", "__vllm__", "--sm", "100")],
    ids=["check on the shipped tables", "matrix", "check on an engine tree"],
)
def test_a_terminal_80_columns_wide_gets_no_line_wider(cli, monkeypatch, args, tmp_path):
    """COLUMNS=80, the classic terminal: every line of text output fits, the
    findings table's evidence column folded inside it, nothing cut."""
    if "__vllm__" in args:
        args = tuple(str(engine_source(tmp_path, "vllm", "0.27.0")) if a == "__vllm__" else a for a in args)
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = cli(*args)
    assert code in (0, 1, 3), out[-2000:]  # 3: a release whose kernel table is not at hand here
    widest = max(out.splitlines(), key=len)
    assert len(widest) <= 80, widest
    assert "…" not in out


@pytest.mark.parametrize("columns", ["1", "20"])
def test_a_terminal_narrower_than_a_table_loses_nothing(cli, cli_json, monkeypatch, write_table, columns):
    """Below 60 columns rich would drop table columns and break the gate's line
    a letter a row: text is laid out 60 wide (the terminal wraps the rest),
    every word of every finding still there."""
    from .conftest import V4_PRO_TABLE

    table = str(write_table(V4_PRO_TABLE.format(rule="pad_to = [64, 128]")))
    _, doc, _ = cli_json("check", "--table", table, "--sm", "100")
    monkeypatch.setenv("COLUMNS", columns)
    code, out, _ = cli("check", "--table", table, "--sm", "100", "--details")
    assert code == doc["exit_code"]
    assert out.splitlines()[0] == "pass: 2 ok, 3 reducible  → exit 0"
    import re

    for f in doc["findings"]:
        # The row's numbers on its first line; the folded verdict below it.
        row = rf"SM{f['sm']}\s+\S+\s+{f['tp']}\s+{f['n']}\s+{f['padded']}\s+{f['verdict'][:4]}"
        assert re.search(row, out), (row, out)
    assert max(len(line) for line in out.splitlines()) <= 60
