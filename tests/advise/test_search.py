"""advise/search.py: what one release says of one count when the pin search
asks it. A count whose compiled selection could not be evaluated there is
neither safe nor refused: no floor ever rests on it."""

from __future__ import annotations

import pytest
from packaging.version import Version

from hprobe.advise.search import _Prober, _safe_at
from hprobe.model.outcome import HeadResult, KernelSMResult, Outcome
from hprobe.model.release import FlashinferInfo, ProbedRelease

pytestmark = pytest.mark.pure


def _release(version: str, head: HeadResult) -> ProbedRelease:
    result = KernelSMResult("trtllm-mla", 100, version, key="trtllm-mla")
    result.heads[head.heads] = head
    return ProbedRelease(version, FlashinferInfo(version, "here"), {("trtllm-mla", 100): result})


@pytest.mark.parametrize(
    ("head", "safe"),
    [
        (HeadResult(4, Outcome.ACCEPTED, entry="get_trtllm_gen_fmha_module.x"), True),
        (HeadResult(4, Outcome.ACCEPTED, entry="get_trtllm_gen_fmha_module.x", pending="no kernel table"), None),
        (HeadResult(4, Outcome.REJECTED, error_type="ValueError", message="no"), False),
        (HeadResult(4, Outcome.INCONCLUSIVE, reason="this machine"), None),
    ],
)
def test_a_count_pending_compiled_selection_is_undecided_for_the_search(head, safe):
    prober = _Prober([_release("0.7.0.post1", head)], use_cache=True, progress=lambda _m: None)
    assert _safe_at(prober, "trtllm-mla", Version("0.7.0.post1"), (100,), 4) is safe
