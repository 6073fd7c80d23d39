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
