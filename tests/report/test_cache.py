"""report/cache: what `hprobe cache` reports carries the cache's own listing
and, beside it, what the command did to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hprobe.report.cache import CacheReport
from hprobe.support.cache_usage import Entry, Usage

pytestmark = pytest.mark.pure


def test_a_prune_says_what_it_removed_beside_what_is_left():
    usage = Usage(
        Path("/cache"),
        [Entry(Path("/cache/wheels/a.whl"), "wheel", "0.6.14", 4096, 0.0)],
        total=8192,
    )
    doc = CacheReport(usage, removed=3, freed=1 << 20, action="prune", in_use=1, left=2).to_dict()
    assert doc["schema"] == "hprobe.cache/1" and doc["total_bytes"] == 8192
    assert doc["releases"] == [{"release": "0.6.14", "bytes": 4096}]
    assert (doc["action"], doc["removed_entries"], doc["freed_bytes"]) == ("prune", 3, 1 << 20)
    assert (doc["in_use_entries"], doc["left_entries"]) == (1, 2)


def test_a_listing_alone_removed_nothing():
    doc = CacheReport(Usage(Path("/cache"))).to_dict()
    assert doc["action"] == "show" and doc["removed_entries"] == doc["freed_bytes"] == 0
    assert doc["entries"] == [] and doc["location"] == "/cache"
