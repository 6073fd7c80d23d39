"""Every shipped padding table says where in a released engine its facts are
written, and those lines still say them: each cited release is downloaded
(never imported) and each cited line read."""

from __future__ import annotations

import pytest

from hprobe.rules import shipped_data, table_sources

from .conftest import engine_source

pytestmark = pytest.mark.slow

TABLES = sorted(shipped_data().glob("*.toml"))


def test_every_shipped_table_cites_a_released_engine():
    for source in table_sources(TABLES):
        table = source.collect()
        assert table.provenance, f"{table.path}: no provenance"


@pytest.mark.parametrize("path", TABLES, ids=[p.name for p in TABLES])
def test_each_cited_line_still_says_it(tmp_path, path):
    table = table_sources([path])[0].collect()
    for fact in table.provenance:
        tree = engine_source(tmp_path, fact.engine, fact.release)
        lines = (tree / fact.file).read_text().split("\n")
        assert fact.line <= len(lines), fact
        assert lines[fact.line - 1].strip() == fact.says, f"{fact}: {lines[fact.line - 1].strip()!r}"
