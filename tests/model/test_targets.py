"""model/targets: the SMs a command answers for (--sm, else the visible GPUs,
else every SM the kernels or tables cover, each said) and the head counts
--heads names, bounded before a range is expanded."""

from __future__ import annotations

import time

import pytest

from hprobe.model import targets
from hprobe.model.errors import InputError
from hprobe.model.padding import MAX_HEADS
from hprobe.model.sm import SM, VisibleGPU
from hprobe.model.targets import parse_heads, resolve_targets

pytestmark = pytest.mark.pure


def test_parse_heads():
    assert parse_heads("1-4,8,16") == [1, 2, 3, 4, 8, 16]
    for bad in ("0", "4-1", "x", "", "1-5000"):
        with pytest.raises(InputError):
            parse_heads(bad)


def test_each_bad_count_is_said_for_what_it_is():
    for text, said in (
        ("0,8", "head counts must be positive"),
        ("8-4", "range 8-4 runs backwards"),
        ("8,x", "expected counts like 1-256"),
        (" , ", "no head counts given"),
        (f"1-{MAX_HEADS + 1}", f"head counts above {MAX_HEADS} are not probed"),
    ):
        with pytest.raises(InputError, match=said):
            parse_heads(text)
    assert parse_heads("16, 8-9 ,8") == [8, 9, 16]


def test_a_huge_range_is_refused_before_it_is_expanded():
    started = time.perf_counter()
    with pytest.raises(InputError, match="not probed"):
        parse_heads("1-10000000000")
    assert time.perf_counter() - started < 1.0  # expanding it first would take minutes and gigabytes


def test_sm_flag_wins_over_gpus_and_the_fallback(monkeypatch):
    monkeypatch.setattr(targets, "detect_gpus", lambda: [VisibleGPU(0, "H200", SM(9, 0))])
    flagged = resolve_targets("100,120", [90], "the tables name")
    assert (flagged.sms, flagged.source, flagged.note) == ([SM(10, 0), SM(12, 0)], "flag", None)


def test_visible_gpus_are_probed_once_per_sm_and_named(monkeypatch):
    gpus = [VisibleGPU(0, "B200", SM(10, 0)), VisibleGPU(1, "B200", SM(10, 0))]
    monkeypatch.setattr(targets, "detect_gpus", lambda: gpus)
    seen = resolve_targets(None, [90], "the tables name")
    assert seen.sms == [SM(10, 0)] and seen.source == "gpu"
    assert seen.note == "probing the visible GPUs: GPU 0 B200 (SM100), GPU 1 B200 (SM100)"


def test_without_flag_or_gpu_every_covered_sm_is_probed_and_said(monkeypatch):
    monkeypatch.setattr(targets, "detect_gpus", lambda: [])
    fallback = resolve_targets(None, [120, 90, 100, 90], "the kernels cover")
    assert fallback.sms == [SM(9, 0), SM(10, 0), SM(12, 0)] and fallback.source == "default"
    assert fallback.note == "no GPU visible and no --sm: probing every SM the kernels cover (SM90, SM100, SM120)"
