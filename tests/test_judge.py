"""The judge on synthetic support: one release (`judge`) and several
(`judge_across`), where a verdict must hold for every release a pin admits."""

from __future__ import annotations

import pytest

from hprobe.judge import exit_code, judge, judge_across
from hprobe.model.outcome import HeadResult, KernelSMResult, Outcome
from hprobe.model.verdict import Finding, Verdict

# Pure: runs without torch, flashinfer or a subprocess (the fast tier, `-m "pure and not slow"`).
pytestmark = pytest.mark.pure


def _support(
    version: str, accepted: set[int], *, unclear: set[int] = frozenset(), slow: set[int] = frozenset(), up_to: int = 128
) -> KernelSMResult:
    result = KernelSMResult("dsv4-sparse-mla", 100, version)
    for h in range(1, up_to + 1):
        if h in unclear:
            result.heads[h] = HeadResult(h, Outcome.INCONCLUSIVE, reason="stopped by this machine")
        elif h in accepted:
            result.heads[h] = HeadResult(
                h, Outcome.ACCEPTED, entry="m.f", slow_path="the fallback kernel" if h in slow else None
            )
        else:
            result.heads[h] = HeadResult(
                h, Outcome.REJECTED, error_type="ValueError", message=f"Expected 64 or 128 query heads, got {h}"
            )
    return result


OLD = _support("0.6.13", {64, 128})
NEW = _support("0.6.14", {8, 16, 32, 64, 128})


def test_one_release():
    assert judge(16, 64, NEW)[:3] == (Verdict.REDUCIBLE, 16, 4.0)
    assert judge(16, 64, OLD)[:2] == (Verdict.OK, 64)
    verdict, best, _, evidence, _ = judge(16, 16, OLD)
    assert (
        verdict is Verdict.BROKEN
        and evidence is not None
        and evidence.message == "Expected 64 or 128 query heads, got 16"
    )
    assert judge(16, None, NEW)[:2] == (Verdict.TABLE_REFUSES, 16)


def test_padding_removed_is_broken_if_any_release_the_pin_admits_refuses_it():
    """vLLM PR #48047 dropping padding under a pin that still admits 0.6.13."""
    verdict, _, _, evidence, notes = judge_across(16, 16, [OLD, NEW])
    assert verdict is Verdict.BROKEN and "broken on flashinfer 0.6.13" in notes[0]
    assert evidence is not None and evidence.message.endswith("got 16")


def test_reducible_only_where_every_release_accepts_the_smaller_count():
    verdict, best, _, _, notes = judge_across(16, 64, [OLD, NEW])
    assert (verdict, best) == (Verdict.OK, 64)
    assert notes == ["reducible on flashinfer 0.6.14 alone, not on every release"]
    both_new = judge_across(16, 64, [NEW, _support("0.7.0", {8, 16, 32, 64, 128})])
    assert both_new[:3] == (Verdict.REDUCIBLE, 16, 4.0)


def test_one_inconclusive_release_makes_the_verdict_inconclusive_never_ok():
    unclear = _support("0.7.4", {8, 16, 32, 64, 128}, unclear={64})
    verdict, _, _, _, notes = judge_across(16, 64, [NEW, unclear])
    assert verdict is Verdict.INCONCLUSIVE and "inconclusive on flashinfer 0.7.4" in notes[0]


def test_off_the_fast_path_on_any_release():
    slow = _support("0.7.0", {8, 16, 32, 64, 128}, slow={64})
    assert judge_across(64, 64, [NEW, slow])[0] is Verdict.OFF_FAST_PATH


def test_a_raising_table_is_table_refuses_only_where_every_release_accepts():
    assert judge_across(16, None, [OLD, NEW])[:2] == (Verdict.TABLE_REFUSES, 64)
    # Nothing at or above 200 was probed: what the kernel does there is unknown.
    verdict, _, _, _, notes = judge_across(200, None, [OLD, NEW])
    assert verdict is Verdict.INCONCLUSIVE and "no count >= 200 was probed" in notes


def test_exit_codes_follow_the_gate():
    def finding(verdict: Verdict) -> Finding:
        return Finding("t", "p", "m", 1, 8, "b", "k", 100, "x", 8, verdict)

    assert exit_code([], strict=False) == 3
    assert exit_code([finding(Verdict.OK)], strict=False) == 0
    assert exit_code([finding(Verdict.REDUCIBLE)], strict=False) == 0
    assert exit_code([finding(Verdict.REDUCIBLE)], strict=True) == 1
    assert exit_code([finding(Verdict.INCONCLUSIVE), finding(Verdict.OK)], strict=False) == 3
    assert exit_code([finding(Verdict.INCONCLUSIVE), finding(Verdict.BROKEN)], strict=False) == 1


def test_a_verdict_says_what_its_acceptance_rests_on():
    from hprobe.model.outcome import Depth

    def label(depth: Depth, unchecked: list[str]) -> str:
        return Finding("t", "p", "m", 1, 8, "b", "k", 120, "x", 8, Verdict.OK, depth=depth, unchecked=unchecked).label

    assert label(Depth.VALIDATORS, []) == "ok"
    assert label(Depth.VALIDATORS, ["cubin by h_q"]) == "ok (validators only)"
    assert label(Depth.DISPATCH, ["cubin by h_q"]) == "ok (validators and dispatch)"
    assert label(Depth.PARTIAL, []) == "ok (partial)"
    assert label(Depth.FAKED_DEVICE, []) == "ok (validators, on faked CUDA tensors)"


def _pending(version: str, accepted: set[int], pending: set[int]) -> KernelSMResult:
    """`accepted` served outright; `pending` accepted by the validators with
    trtllm-gen's compiled selection not evaluated (no kernel table here)."""
    result = _support(version, accepted | pending)
    for h in pending:
        result.heads[h] = HeadResult(
            h, Outcome.ACCEPTED, entry="get_trtllm_gen_fmha_module.x", pending="its kernel table could not be had"
        )
    return result


def test_a_count_whose_compiled_selection_is_pending_is_never_ok():
    """The validators accept it and trtllm-gen's selection follows, not
    evaluated: inconclusive (never ok), with the reason as its evidence; never
    a count to pad to instead; taken on the validators' word only with `trust`."""
    support = _pending("0.7.0.post1", {128}, {4, 8, 16, 32, 64})
    verdict, best, _waste, evidence, _notes = judge(4, 4, support)
    assert verdict is Verdict.INCONCLUSIVE and best is None
    assert evidence is not None and evidence.pending == "its kernel table could not be had"
    # A padded count that serves: no pending count is offered as the smaller one.
    assert judge(4, 128, support)[:2] == (Verdict.OK, 128)
    assert judge(4, 4, support, trust=True)[:2] == (Verdict.OK, 4)
    assert judge(4, 128, support, trust=True)[:2] == (Verdict.REDUCIBLE, 4)
    assert judge_across(8, 8, [support, NEW])[0] is Verdict.INCONCLUSIVE  # served on 0.6.14, pending on 0.7.0.post1
    finding = Finding("t", "t.toml", "GLM-5", 16, 4, "b", "trtllm-mla", 100, "0.7.0.post1", 4, Verdict.INCONCLUSIVE)
    finding.evidence = evidence
    assert finding.explain() == "accepted by the validators; its kernel table could not be had"
    assert exit_code([finding], strict=False) == 3


@pytest.mark.parametrize(
    ("counts", "crashes", "verdicts"),
    [
        # 16 and 64 accepted: ok whether or not the call runs.
        (((16, 16), (64, 64)), (), {16: Verdict.OK, 64: Verdict.OK}),
        # 96 refused, and 16 padded past what it needs: neither concluded where the call may not run.
        (((96, 96), (16, 64)), (), {96: Verdict.ASSUMED, 16: Verdict.ASSUMED}),
        # The engine raising on the way: not concluded either.
        (((16, 16),), ((("M", 16), "engine raises"),), {16: Verdict.ASSUMED}),
    ],
)
def test_a_call_that_may_not_run_concludes_only_an_accepted_count(counts, crashes, verdicts) -> None:
    """A test on the call's way that varies with the run and that hprobe
    cannot decide (Backend.unsure_reach): a refused count may never be handed
    over, so it is `assumed` with the test; an accepted one is ok either way."""
    from hprobe.judge import check_table
    from hprobe.model.assumption import Assumption
    from hprobe.model.padding import Backend, Model, PaddingTable, PadMap, Where

    heads = tuple(n for n, _ in counts)
    backend = Backend(
        "B",
        "dsv4-sparse-mla",
        (100,),
        PadMap(counts),
        Where("p"),
        key="dsv4-sparse-mla",
        counts=heads,
        crashes=crashes,
        unsure_reach="it runs only where `tiers` holds (attn.py:12), which hprobe cannot decide: batch rows",
    )
    models = [Model("M", n, (1,), Where("p")) for n in heads]
    table = PaddingTable("t", "s", "p", None, models, [backend])
    findings, _ = check_table(table, [{("dsv4-sparse-mla", 100): NEW}], [100])
    got = {f.n: f for f in findings}
    assert {n: f.verdict for n, f in got.items()} == verdicts
    for f in got.values():
        if f.verdict is Verdict.ASSUMED:
            assert f.assumed is Assumption.REACH and f.on_assumption is not None
            assert any("`tiers` holds (attn.py:12)" in note for note in f.notes)
            assert f.crash is None
