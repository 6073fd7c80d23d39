"""Releases probed ahead (support/gather.py `gather(..., ahead=...)`): suggest's
pin search always asks the newest release, so it is probed beside the check;
its answer is the result cache's when the search asks, the same as probed
then, and nothing of it is the check's."""

from __future__ import annotations

import pytest

from hprobe.model.release import quiet
from hprobe.support import gather as gather_module
from hprobe.support import results

pytestmark = pytest.mark.slow

NEEDED = {"dsv4-sparse-mla": [100, 120]}
HEADS = list(range(1, 129))


def _answers(probed) -> dict:
    return {f"{key}@{sm}": result.to_dict() for (key, sm), result in sorted(probed.results.items())}


def test_a_release_probed_ahead_is_answered_from_the_cache_as_probed_then(tmp_path, monkeypatch):
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "alone"))
    alone = gather_module.probe_named("0.6.14", NEEDED, HEADS, False, quiet)

    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "ahead"))
    # 0.0.999 does not exist: a release probed ahead that fails is not the check's failure.
    got = gather_module.gather(["0.6.13"], NEEDED, HEADS, True, quiet, ahead=("0.6.14", "0.0.999", "0.6.13"))
    assert list(got) == ["0.6.13"]
    monkeypatch.setattr(results, "_run_worker", lambda *_a: pytest.fail("probed again: the answer probed ahead was not kept"))
    later = gather_module.probe_named("0.6.14", NEEDED, HEADS, True, quiet)
    assert _answers(later) == _answers(alone)


def test_without_the_cache_nothing_is_probed_ahead(tmp_path, monkeypatch):
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(gather_module, "_probe_ahead", lambda *_a: pytest.fail("probed ahead with nothing to keep it"))
    got = gather_module.gather(["0.6.13"], NEEDED, HEADS, False, quiet, ahead=("0.6.14",))
    assert list(got) == ["0.6.13"]
