"""model/call.py: an engine's call bound against a release's own signature,
as Python binds it: the cases derived from Python's binding rules, not from
hprobe's output."""

from __future__ import annotations

import inspect

import pytest

from hprobe.model.call import Binds, CallForm, bind, bound_to, signature_of
from hprobe.model.outcome import Cause, HeadResult, KernelSMResult, Outcome

pytestmark = pytest.mark.pure


def decode(query, swa_kv_cache, workspace_buffer, sparse_indices, out=None, *, sinks=None):
    """A stand-in entry: four required parameters, two optional, one keyword-only."""


def forwarding(query, **kwargs):
    """A stand-in entry that takes any keyword."""


SIG = signature_of(decode)
WHERE = "engine/attention.py:570"


def _form(positional: int = 0, keywords: tuple[str, ...] = (), **more: object) -> CallForm:
    base = ("query", "swa_kv_cache", "workspace_buffer", "sparse_indices")
    return CallForm("decode", WHERE, positional, (*base[positional:], *keywords), **more)  # type: ignore[arg-type]


def _python_binds(positional: int, keywords: tuple[str, ...], fn: object = decode) -> bool:
    """What Python itself says of the same call."""
    base = ("query", "swa_kv_cache", "workspace_buffer", "sparse_indices")
    names = (*base[positional:], *keywords)
    try:
        inspect.signature(fn).bind(*range(positional), **dict.fromkeys(names))  # type: ignore[arg-type]
    except TypeError:
        return False
    return True


@pytest.mark.parametrize(
    ("positional", "keywords"),
    [
        (0, ()),
        (4, ()),
        (2, ("out", "sinks")),
        (0, ("sparse_indices_are_storage_offsets",)),
        (6, ()),
        (5, ("sinks",)),
    ],
)
def test_binding_says_what_python_says(positional, keywords):
    assert SIG is not None
    binds, why = bind(_form(positional, keywords), SIG, "0.6.14")
    assert (binds is Binds.YES) == _python_binds(positional, keywords), why


def test_a_keyword_the_release_lacks_is_named_with_both_places():
    assert SIG is not None
    form = _form(
        keywords=("sparse_indices_are_storage_offsets",), places=(("sparse_indices_are_storage_offsets", "a.py:579"),)
    )
    binds, why = bind(form, SIG, "0.6.14")
    assert binds is Binds.NO
    assert why.startswith("flashinfer 0.6.14's decode (") and "test_call.py:" in why
    assert why.endswith("has no parameter 'sparse_indices_are_storage_offsets'; the engine passes it at a.py:579")


def test_more_positional_arguments_than_the_signature_takes_and_a_value_given_twice():
    assert SIG is not None
    assert bind(CallForm("decode", WHERE, 6, ()), SIG, "x")[1].endswith(
        "takes 5 positional arguments; the engine passes 6 at engine/attention.py:570"
    )
    assert (
        "is given 'swa_kv_cache' twice"
        in bind(CallForm("decode", WHERE, 2, ("swa_kv_cache", "workspace_buffer", "sparse_indices")), SIG, "x")[1]
    )
    assert "requires 'sparse_indices'" in bind(CallForm("decode", WHERE, 3, ()), SIG, "x")[1]


def test_a_keyword_passed_on_some_runs_or_keywords_not_read_leave_it_undecided():
    assert SIG is not None
    some_runs = _form(conditional=(("dsv4_output_scale", "under `if rope_quant`"),))
    binds, why = bind(some_runs, SIG, "0.6.14")
    assert binds is Binds.UNDECIDED and "passes 'dsv4_output_scale'" in why and "under `if rope_quant`" in why
    # One the signature has is no question.
    assert bind(_form(conditional=(("out", "under `if q`"),)), SIG, "0.6.14")[0] is Binds.YES
    unread = _form(unknown="**kw is not a dict hprobe can read")
    assert bind(unread, SIG, "0.6.14")[0] is Binds.UNDECIDED
    # With **kwargs in the signature, any keyword binds: no question either way.
    anything = signature_of(forwarding)
    assert anything is not None
    assert bind(CallForm("decode", WHERE, 1, ("whatever",), unknown="**kw"), anything, "x")[0] is Binds.YES


def test_a_refused_call_refuses_every_count_and_an_undecided_one_decides_none():
    assert SIG is not None
    result = KernelSMResult("dsv4-sparse-mla", 100, "0.6.14")
    for h in (4, 64):
        result.heads[h] = HeadResult(h, Outcome.ACCEPTED if h == 64 else Outcome.REJECTED, entry="m.f")
    result.signatures = {"decode": SIG.to_dict()}
    assert bound_to((_form(),), result) is result
    refused = bound_to((_form(keywords=("backend",)),), result)
    assert {r.outcome for r in refused.heads.values()} == {Outcome.REJECTED}
    assert all(r.error_type == "TypeError" and r.cause == Cause.CALL.value for r in refused.heads.values())
    undecided = bound_to((_form(unknown="**kw"),), result)
    assert {r.outcome for r in undecided.heads.values()} == {Outcome.INCONCLUSIVE}
    # A release whose result records no signature of that name (it lacks the entry): nothing to bind against.
    assert bound_to((CallForm("other", WHERE, 0, ("backend",)),), result) is result
