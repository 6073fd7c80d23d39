"""What the kernel probes' tests on fetched releases share: a cache of their
own per test module (answers computed here, never read from another test's
run), and the results of a matrix document by variant key."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def _module_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hprobe-cache")


@pytest.fixture
def fetched_cache(monkeypatch, _module_cache) -> Path:
    """HPROBE_CACHE_DIR set to the module's own cache."""
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(_module_cache))
    return _module_cache


def by_key(doc: dict, sm: int) -> dict[str, dict[int, dict]]:
    """A matrix document's answers on `sm`: variant key -> h_q -> answer."""
    return {r["key"]: {h["heads"]: h for h in r["heads"]} for r in doc["results"] if r["sm"] == sm}
