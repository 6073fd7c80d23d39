"""A traced call's answers at each combination of what it depends on at run
time (rules/repo/tracing/traced.py): combinations giving the same counts are one
answer named by the values they take, a caller whose trail ended is kept
apart with where it ended, and the words name only what the answer depends on."""

from __future__ import annotations

from pathlib import Path

import pytest

from hprobe.rules.repo.interpreter.evaluate import NotEvaluable
from hprobe.rules.repo.tracing.heads import HeadTrail, trace_heads
from hprobe.rules.repo.tracing.traced import MAX_COMBINATIONS, combinations, evaluate_trail, innermost, values_text
from hprobe.rules.repo.tree.mapping import RunValue

from ..engine_tree import one_module_tree

pytestmark = pytest.mark.pure

ENGINE = """
from flashinfer.decode import trtllm_batch_decode_with_kv_cache_mla


def plan(k, heads, lse):
    if not lse:
        return k
    return max(d for d in range(1, k + 1) if k % d == 0 and d * heads <= 128)


def folded(q, k, lse):
    rows, heads, dim = q.shape
    fold = plan(k, heads, lse)
    query = q.reshape(rows // fold, 1, fold * heads, dim)
    return trtllm_batch_decode_with_kv_cache_mla(query=query)


class Impl:
    def forward_mqa(self, q, kv_cache, attn_metadata, layer):
        return folded(q, attn_metadata.k, self.lse)


class Gathered:
    def forward(self, k):
        return folded(self.box.q, k, True)
"""


def _trail(tmp_path: Path, values: tuple[int, ...] = (2, 3, 4)) -> HeadTrail:
    index, line = one_module_tree(tmp_path, ENGINE)
    module = index.by_suffix("engine.attn")
    assert module is not None
    runs = (
        RunValue("engine.attn", "folded", "k", "k", values, "draft tokens"),
        RunValue("engine.attn", "folded", "lse", "lse", (False, True), "an LSE"),
    )
    trail = trace_heads(index, module, line, ("query", 0), {"forward_mqa": "q"}, run_values=runs)
    assert isinstance(trail, HeadTrail), trail
    return trail


def test_answers_group_the_combinations_that_agree_and_name_only_what_they_depend_on(tmp_path: Path) -> None:
    trail = _trail(tmp_path)
    found = evaluate_trail(trail, [96, 48], lambda where: where)
    assert not isinstance(found, NotEvaluable)
    answers = {a.words: dict(a.counts) for a in found.answers}
    layer = "from forward_mqa (attn.py:20)"
    # Without an LSE all k tokens fold; with one, 96 heads leave no room to fold
    # and 48 fold in pairs where k is even.
    assert answers == {
        f"k=2, lse=False, {layer}": {96: 192, 48: 96},
        f"k=3, lse=False, {layer}": {96: 288, 48: 144},
        f"k=4, lse=False, {layer}": {96: 384, 48: 192},
        f"k=2, 4, lse=True, {layer}": {96: 96, 48: 96},
        f"k=3, lse=True, {layer}": {96: 96, 48: 48},
    }
    # The caller that hands in a mailbox hprobe cannot follow: kept apart, at
    # every k and LSE alike (so neither is named), with where its trail ended.
    [ended] = found.ended
    assert ended.words == "from forward (attn.py:25)"
    assert ended.end.path.endswith("attn.py") and ended.end.line == 25 and "`self.box.q`" in ended.end.what


def test_combinations_a_test_on_the_way_rules_out_give_no_answer_and_are_said(tmp_path: Path) -> None:
    """The call reached only with an LSE (`if lse:` around it): the
    combinations without one are no answer, kept apart with the test; and a
    test false at every combination leaves nothing judged, said."""
    guarded = ENGINE.replace(
        "    return trtllm_batch_decode_with_kv_cache_mla(query=query)",
        "    if lse:\n        return trtllm_batch_decode_with_kv_cache_mla(query=query)\n    return None",
    )
    (tmp_path / "a").mkdir()
    index, line = one_module_tree(tmp_path / "a", guarded)
    module = index.by_suffix("engine.attn")
    assert module is not None
    runs = (
        RunValue("engine.attn", "folded", "k", "k", (2, 3, 4), "draft tokens"),
        RunValue("engine.attn", "folded", "lse", "lse", (False, True), "an LSE"),
    )
    trail = trace_heads(index, module, line, ("query", 0), {"forward_mqa": "q"}, run_values=runs)
    assert isinstance(trail, HeadTrail), trail
    found = evaluate_trail(trail, [96, 48], lambda where: where)
    assert not isinstance(found, NotEvaluable)
    layer = "from forward_mqa (attn.py:22)"
    assert {a.words for a in found.answers} == {f"lse=True, k=2, 4, {layer}", f"lse=True, k=3, {layer}"}
    [unreached] = found.unreached
    assert unreached.words == "lse=False" and unreached.test.said == "lse"
    assert unreached.test.where.endswith("attn.py:15")
    # Never reached: nothing judged, and why.
    never = guarded.replace("    if lse:", "    if lse and not lse:")
    (tmp_path / "b").mkdir()
    index, line = one_module_tree(tmp_path / "b", never)
    module = index.by_suffix("engine.attn")
    assert module is not None
    trail = trace_heads(index, module, line, ("query", 0), {"forward_mqa": "q"}, run_values=runs)
    assert isinstance(trail, HeadTrail), trail
    nothing = evaluate_trail(trail, [96], lambda where: where)
    assert isinstance(nothing, NotEvaluable), nothing


def test_past_the_combination_cap_the_callers_must_agree(tmp_path: Path) -> None:
    many = tuple(range(2, MAX_COMBINATIONS // 2 + 2))  # k x lse alone is at the cap; callers would double it
    trail = _trail(tmp_path, many)
    found = evaluate_trail(trail, [96], lambda where: where)
    # Without telling the callers apart, the mailbox's caller leaves nothing evaluable.
    assert isinstance(found, NotEvaluable) and "`self.box.q`" in found.what


def test_combinations_and_values_as_said() -> None:
    assert combinations(()) == [{}]
    assert (
        values_text((2, 3, 4, 5)) == "2-5"
        and values_text((2, 4)) == "2, 4"
        and values_text((False, True)) == ("False, True")
    )
    nested = NotEvaluable("a.py", 3, "engine/b.py:7: engine/c.py:9: the query is `box.q`")
    assert innermost(nested) == NotEvaluable("engine/c.py", 9, "the query is `box.q`")


# The drafter's shape (vLLM 0.34.0 Kimi K3): the backend is one of two names
# the device decides, and the split launch runs only where the batch is long
# enough (`tiers`), which the count does not tell.
DEVICE_PLANNED = """
from flashinfer.decode import trtllm_batch_decode_with_kv_cache_mla

current_platform: object


def supported(q):
    return current_platform.is_family(100) and q.dtype == 1


def plan(k, heads, lse, ok):
    if not lse:
        return k, "cake" if ok else "auto"
    return max(d for d in range(1, k + 1) if k % d == 0 and d * heads <= 128), "cute-dsl"


def tiers_of(device, rows):
    if rows * 4 <= current_platform.sms(device):
        return ()
    return (4,)


def folded(q, k, lse):
    rows, heads, dim = q.shape
    fold, planned = plan(k, heads, lse, supported(q))
    query = q.reshape(rows // fold, 1, fold * heads, dim)
    tiers = tiers_of(q.device, rows) if lse else ()
    if planned == "cute-dsl" and tiers:
        return trtllm_batch_decode_with_kv_cache_mla(query=query, backend=planned)
    return None


class Impl:
    def forward_mqa(self, q, kv_cache, attn_metadata, layer):
        return folded(q, attn_metadata.k, self.lse)
"""


def test_a_backend_the_device_picks_and_a_test_on_the_batch_leave_the_count_judged(tmp_path: Path) -> None:
    """`planned` is "cake" or "auto" without an LSE (which, the device decides):
    neither is "cute-dsl", so the call is not reached there. With one, the
    count is the fold's, and the call runs only where `tiers` holds, which
    the batch decides: the answer carries that test (an accepted count is ok
    either way; heads.Unsure), never a guess that it runs."""
    index, line = one_module_tree(tmp_path, DEVICE_PLANNED)
    module = index.by_suffix("engine.attn")
    assert module is not None
    runs = (
        RunValue("engine.attn", "folded", "k", "k", (2, 3), "draft tokens"),
        RunValue("engine.attn", "folded", "lse", "lse", (False, True), "an LSE"),
    )
    trail = trace_heads(index, module, line, ("query", 0), {"forward_mqa": "q"}, run_values=runs)
    assert isinstance(trail, HeadTrail), trail
    found = evaluate_trail(trail, [96, 48], lambda where: where)
    assert not isinstance(found, NotEvaluable), found
    assert {a.words: dict(a.counts) for a in found.answers} == {
        "k=2, lse=True": {96: 96, 48: 96},
        "k=3, lse=True": {96: 96, 48: 48},
    }
    for answer in found.answers:
        [unsure] = answer.unsure
        assert (unsure.said, unsure.where, unsure.own) == ("tiers", "engine/attn.py:28", True)
        assert "`rows` is axis 0 of `q`" in unsure.why
    [missed] = found.unreached
    assert (missed.words, missed.test.said) == ("lse=False", "planned == 'cute-dsl'")
