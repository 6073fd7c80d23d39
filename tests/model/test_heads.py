"""model/heads: sets of head counts as people write them, runs of three or
more collapsed to a range."""

from __future__ import annotations

import pytest

from hprobe.model.heads import compact_set

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ([8, 16, 32, 64, 128], "{8, 16, 32, 64, 128}"),
        (list(range(1, 8)) + [9, 10, 12], "{1-7, 9, 10, 12}"),
        ([], "{}"),
        ([5], "{5}"),
        ([5, 6], "{5, 6}"),  # two in a row stay two
        ([5, 6, 7], "{5-7}"),  # three make a range
        ({128, 1, 3, 2}, "{1-3, 128}"),  # unordered, repeated
        ([96, 48, 24, 12, 6], "{6, 12, 24, 48, 96}"),
    ],
)
def test_compact_set(values, said) -> None:
    assert compact_set(values) == said
