"""An answer for (release, variant, SM, h_q) is the same whatever else the run
asks for: which other SMs, which other head counts, which other variants.
Checked as a property against the installed flashinfer: random runs over
subsets are compared, cell by cell, with one run over everything."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hprobe.device.session import FlashinferSession
from hprobe.kernels import PROBES, get_variant
from hprobe.model.sm import SM
from hprobe.probe.run import probe_kernel

SMS = (90, 100, 103, 120, 121)
HEADS = range(1, 257)
# Every variant a default `matrix` probes, and the DSv4 entry's other backends
# and formats: the paths whose answers rest on tracing and faked devices.
VARIANTS = sorted(
    {v.key for p in PROBES.values() for v in p.variants()}
    | {
        v.key
        for v in PROBES["dsv4-sparse-mla"].variants(
            {"backend": ["auto", "trtllm-gen", "cute-dsl", "sparse", "cake"], "dtype": ["bf16", "fp8"]}
        )
    }
)


def _cells(results) -> dict:
    """(variant, SM, h_q) -> what a user is told about that cell."""
    return {
        (r.key, r.sm, h): (hr.outcome, hr.entry, hr.error_type, hr.location, hr.message, hr.slow_path)
        for r in results
        for h, hr in r.heads.items()
    }


@pytest.fixture(scope="module")
def session():
    with FlashinferSession() as opened:
        yield opened


class _FullRun(dict):
    """Every cell of the run over everything (kept out of hypothesis's reports)."""

    def __repr__(self) -> str:
        return f"<the full run: {len(self)} cells>"


@pytest.fixture(scope="module")
def everything(session):
    cells = _FullRun()
    for key in VARIANTS:
        cells.update(_cells(probe_kernel(session, get_variant(key), [SM.from_number(s) for s in SMS], HEADS)))
    return cells


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    keys=st.lists(st.sampled_from(VARIANTS), min_size=1, max_size=2, unique=True),
    sms=st.lists(st.sampled_from(SMS), min_size=1, max_size=3, unique=True),
    heads=st.one_of(
        st.lists(st.integers(1, 256), min_size=1, max_size=12, unique=True),
        st.tuples(st.integers(1, 256), st.integers(0, 40)).map(lambda t: list(range(t[0], min(256, t[0] + t[1]) + 1))),
    ),
)
def test_an_answer_does_not_depend_on_what_else_the_run_asks(session, everything, keys, sms, heads):
    for key in keys:
        results = probe_kernel(session, get_variant(key), [SM.from_number(s) for s in sms], heads)
        assert sorted(r.sm for r in results) == sorted(sms)
        got = _cells(results)
        assert set(got) == {(key, sm, h) for sm in sms for h in heads}
        for cell, answer in got.items():
            assert answer == everything[cell], f"{cell}: {answer} alone, {everything[cell]} in the full run"


def test_a_module_looked_at_while_another_thread_registers_its_fakes_is_patched(session, monkeypatch):
    """The import hook runs in every thread of a run (compiled depth is worked
    out beside the probe): a thread that meets a module binding a function
    whose fake another thread is registering must not take that module as
    done. Before one patcher at a time, a cold check once reached the real
    artefact download this way."""
    import sys
    import threading
    import types

    def original() -> str:
        return "original"

    def fake() -> str:
        return "fake"

    source = types.ModuleType("flashinfer._hprobe_race_source")
    user = types.ModuleType("flashinfer._hprobe_race_user")
    source.thing = user.thing = original
    monkeypatch.setitem(session._fakes_by_module, source.__name__, {"thing": fake})
    registering, release = threading.Event(), threading.Event()
    register = session._register

    def slow_register(found, replacement):
        registering.set()
        release.wait(10)
        register(found, replacement)

    monkeypatch.setattr(session, "_register", slow_register)
    monkeypatch.setitem(sys.modules, source.__name__, source)
    first = threading.Thread(target=session._patch_new_modules)
    first.start()
    assert registering.wait(10)
    monkeypatch.setitem(sys.modules, user.__name__, user)
    second = threading.Thread(target=session._patch_new_modules)
    second.start()
    second.join(0.5)  # a second patcher not kept waiting is done by now, `user` untouched
    release.set()
    first.join(10)
    second.join(10)
    assert source.thing is fake and user.thing is fake
