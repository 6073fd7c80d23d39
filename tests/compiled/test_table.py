"""trtllm-gen's kernel table as hprobe reads it (compiled/table.py): by field
name, and kept between runs as plain rows that read back as the parse gave
them, or not at all."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from hprobe.compiled.table import (
    ROW_FIELDS,
    KernelTable,
    RowsOnDemand,
    TableError,
    parse_table,
    plain_rows,
    read_table,
    rows_from_plain,
)
from hprobe.support import kernel_tables
from hprobe.support.kernel_package import package_of

FIXTURES = Path(__file__).parent.parent / "fixtures" / "compiled"
_SPEC = importlib.util.find_spec("flashinfer")
PACKAGE = Path(next(iter(_SPEC.submodule_search_locations)))  # type: ignore[union-attr]


def test_a_table_is_read_by_field_name_not_position():
    table = read_table(FIXTURES / "reordered_table.h")
    (row,) = table.rows
    assert (row.name, row.tile_size_q, row.tile_size_kv, row.head_dim_qk, row.sm) == (
        "fmhaDemoKernel_Q16",
        16,
        128,
        576,
        "kSM_100f",
    )
    assert row.groups_heads_q is True and row.sparse_attn == 1 and row.sage_blocks == (0, 0, 0, 0)


def test_a_table_without_a_field_the_selection_reads_is_refused(tmp_path):
    text = (FIXTURES / "reordered_table.h").read_text().replace("    int mStepQ;\n", "")
    (tmp_path / "t.h").write_text(text)
    with pytest.raises(TableError, match="mStepQ"):
        read_table(tmp_path / "t.h")


@pytest.fixture(scope="module")
def table(cubin_wheel) -> KernelTable:
    """flashinfer-cubin 0.6.13's table, parsed here (not read back from a cache)."""
    got = kernel_tables._from_wheel(cubin_wheel, package_of(PACKAGE), cubin_wheel.name)
    assert not isinstance(got, str) and got is not None
    return parse_table(got.data, got.origin, got.checksums)


def test_plain_rows_read_back_as_the_parse_gave_them(table):
    back = rows_from_plain(list(ROW_FIELDS), plain_rows(table))
    assert back is not None and len(back) == len(table) > 10_000
    assert back == tuple(table.rows)
    # Every field, of the same type: a bool stays a bool, sage blocks a tuple.
    assert all(
        type(getattr(a, f)) is type(getattr(b, f))
        for a, b in zip(back[:500], table.rows[:500], strict=True)
        for f in ROW_FIELDS
    )
    assert {type(r.sage_blocks) for r in back} == {tuple}


def test_kept_rows_of_another_shape_are_not_read_back():
    row = plain_rows(read_table(FIXTURES / "reordered_table.h"))[0]
    sage = ROW_FIELDS.index("sage_blocks")

    def changed(index: int, value: object) -> list[list[object]]:
        edited = list(row)
        edited[index] = value
        return [edited]

    assert rows_from_plain(list(ROW_FIELDS), [list(row)]) is not None
    for names, rows in (
        (list(ROW_FIELDS)[:-1], [list(row)]),  # other code's fields
        (list(reversed(ROW_FIELDS)), [list(row)]),
        (list(ROW_FIELDS), []),
        (list(ROW_FIELDS), [list(row)[:-1]]),
        (list(ROW_FIELDS), changed(0, 1.5)),  # a float where a dtype's name stands
        (list(ROW_FIELDS), changed(1, {"a": 1})),
        (list(ROW_FIELDS), changed(sage, [0, 0, 0])),
        (list(ROW_FIELDS), changed(sage, [0, 0, 0, "x"])),
        (list(ROW_FIELDS), "rows"),
    ):
        assert rows_from_plain(names, rows) is None, (names[:2], rows)


def test_rows_on_demand_are_counted_unread_and_read_once():
    rows = read_table(FIXTURES / "reordered_table.h").rows
    reads = []

    def read():
        reads.append(1)
        return rows

    lazy = RowsOnDemand(len(rows), read)
    assert len(lazy) == 1 and not reads
    assert lazy[0] == rows[0] and list(lazy) == list(rows) and reads == [1]
    with pytest.raises(TableError, match="read again are 1, not 2"):
        RowsOnDemand(2, read)[0]
