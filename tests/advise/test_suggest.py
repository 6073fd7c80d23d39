"""What a backend's padding rule should be (advise/suggest.py): the smallest
count each per-rank count may pad to on every SM and release probed, the
release the current padding is safe from, and never a count below the work a
regrouped call does. Synthetic answers: no torch, flashinfer or subprocess."""

from __future__ import annotations

import pytest
from packaging.version import Version

from hprobe.model.padding import PadTo


@pytest.mark.pure  # the fast tier: no torch, flashinfer or subprocess
def test_the_current_padding_is_safe_from_the_newest_floor_of_the_counts_it_launches():
    """An unpadded call that crashes on the pinned release at n=4 (safe from
    0.7.0 as it is), and a padded rule whose counts are among the suggested
    rule's: where their rule is left to the reader, the plan keeps the current
    padding and needs the release it is safe from."""
    from hprobe.advise.history import FirstTrue
    from hprobe.advise.pins import CountPin, PinAdvice
    from hprobe.advise.suggest import BackendSuggestion
    from hprobe.model.advice import CountChange
    from hprobe.model.padding import Backend, NoPadding, Where

    def since(count: int, version: str | None) -> CountPin:
        return CountPin(count, FirstTrue(Version(version) if version else None, None, False, (), ()))

    def suggestion(changes: list[CountChange], pins: PinAdvice) -> BackendSuggestion:
        backend = Backend("call", "sm120-sparse-mla", (120,), NoPadding(), Where("x.py", 1))
        return BackendSuggestion("t", backend, (120,), ("0.6.18",), PadTo((8, 16)), changes=changes, pins=pins)

    unpadded = PinAdvice(
        (120,), ("0.6.14", "0.7.4"), "==0.6.18", no_padding={4: since(4, "0.7.0"), 8: since(8, "0.6.14")}
    )
    assert suggestion(
        [CountChange("m", 16, 4, 4, 8), CountChange("m", 8, 8, 8, 8)], unpadded
    ).current_safe_from() == Version("0.7.0")
    padded = PinAdvice((120,), ("0.6.14", "0.7.4"), None, rule_counts={8: since(8, "0.6.14"), 16: since(16, "0.6.12")})
    assert suggestion([CountChange("m", 16, 4, 16, 8)], padded).current_safe_from() == Version("0.6.12")
    # A count nobody searched, a count no release accepts, a rule that raises: not known.
    assert suggestion([CountChange("m", 16, 4, 64, 8)], padded).current_safe_from() is None
    never = PinAdvice((120,), ("0.6.14", "0.7.4"), None, no_padding={4: since(4, None)})
    assert suggestion([CountChange("m", 16, 4, 4, 8)], never).current_safe_from() is None
    assert suggestion([CountChange("m", 16, 4, None, 8)], unpadded).current_safe_from() is None


@pytest.mark.pure  # the fast tier: no torch, flashinfer or subprocess
def test_a_regrouped_count_is_never_suggested_below_itself():
    """A drafter's call hands k * heads (draft tokens folded into heads): 48
    heads at k=2 launch 96, the work the call does. A kernel that accepts
    {8 .. 128} makes no padding "save" anything there, and 96 heads at k=2
    (192) has no count at or above it: no safe count, never a pad down to 128
    that would drop tokens."""
    from hprobe.advise.suggest import _suggest_backend
    from hprobe.model.outcome import HeadResult, KernelSMResult, Outcome
    from hprobe.model.padding import Backend, Model, PaddingTable, PadMap, Where

    result = KernelSMResult("trtllm-mla", 100, "0.7.4")
    for h in range(1, 257):
        ok = h in (8, 16, 32, 64, 96, 128)
        result.heads[h] = HeadResult(h, Outcome.ACCEPTED if ok else Outcome.REJECTED, entry="m.f")
    folded = PadMap(((48, 96), (96, 192)))
    models = [Model("Kimi", 96, (1, 2), Where("m"))]

    def suggestion(regrouped: bool):
        backend = Backend("drafter", "trtllm-mla", (100,), folded, Where("d.py", 405), regrouped=regrouped)
        table = PaddingTable("t", "s", "p", None, models, [backend])
        return _suggest_backend(table, backend, (100,), ("0.7.4",), {100: [result]}, True)

    regrouped = suggestion(True)
    assert {c.n: c.suggested for c in regrouped.changes} == {48: 96, 96: None}
    assert regrouped.unsafe == {96: [100]} and not any(c.saving for c in regrouped.changes)
    # A padding rule with the same map is one: there 48 needs no more than 48, and 96 pads to 96.
    padding = suggestion(False)
    assert {c.n: c.suggested for c in padding.changes} == {48: 64, 96: 96}


@pytest.mark.pure  # the fast tier: no torch, flashinfer or subprocess
def test_an_undecided_answer_says_where_and_why_in_the_advice():
    """No suggestion where an answer is undecided, and the line says which
    count on which release and why: the probe's own reason (an environment
    failure) or the compiled check left pending with the release's note on
    what it lacked (a kernel table not reached)."""
    from hprobe.advise.suggest import _suggest_backend
    from hprobe.model.outcome import HeadResult, KernelSMResult, Outcome
    from hprobe.model.padding import Backend, Model, PaddingTable, Where

    def advice(result: KernelSMResult) -> str:
        backend = Backend("b", "trtllm-mla", (100,), PadTo((64, 128)), Where("t.toml", 3))
        table = PaddingTable("t", "s", "p", None, [Model("DSv4", 128, (1, 2, 4), Where("m"))], [backend])
        return _suggest_backend(table, backend, (100,), ("0.6.14",), {100: [result]}, True).words()

    pending = KernelSMResult("trtllm-mla", 100, "0.6.14")
    for h in (32, 64, 128):
        pending.heads[h] = HeadResult(h, Outcome.ACCEPTED, entry="m.f", pending="no kernel table here")
    pending.not_deepened("flashinfer-cubin==0.6.14: the package index could not be reached")
    said = advice(pending)
    assert said.startswith("SM100: no suggestion, some answers are inconclusive (SM100 on flashinfer 0.6.14, h_q=32: ")
    assert "no kernel table here; compiled depth: not evaluated: flashinfer-cubin==0.6.14: the package index" in said
    failed = KernelSMResult("trtllm-mla", 100, "0.6.14")
    failed.heads[32] = HeadResult(32, Outcome.ACCEPTED, entry="m.f")
    for h in (64, 128):
        failed.heads[h] = HeadResult(h, Outcome.INCONCLUSIVE, reason="worker died: MemoryError")
    assert "(SM100 on flashinfer 0.6.14, h_q=64: worker died: MemoryError)" in advice(failed)
