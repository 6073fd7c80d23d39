"""report/pivot: `matrix --pivot ROWS,COLS` — the cells a report's results
fill on two dimensions, and the collisions found before anything is probed
(check_planned) as after (pivot_cells), each one input error naming the
dimensions that differ."""

from __future__ import annotations

import pytest

from hprobe.model.errors import InputError
from hprobe.model.outcome import HeadResult, KernelSMResult, Outcome
from hprobe.model.release import FlashinferInfo, ProbedRelease
from hprobe.model.sm import SM
from hprobe.model.targets import Targets
from hprobe.report.model import MatrixReport
from hprobe.report.pivot import check_planned, pivot_cells

pytestmark = pytest.mark.pure


def _result(head_dim: int, sm: int, accepted: set[int], heads: range) -> KernelSMResult:
    key = "gqa-decode" if head_dim == 128 else f"gqa-decode[head_dim={head_dim}]"
    outcomes = {h: HeadResult(h, Outcome.ACCEPTED if h in accepted else Outcome.REJECTED) for h in heads}
    return KernelSMResult("gqa-decode", sm, "0.6.14", heads=outcomes, config={"head_dim": head_dim}, key=key)


def _report(*results: KernelSMResult) -> MatrixReport:
    release = ProbedRelease("installed", FlashinferInfo("0.6.14", "site-packages"), {(r.key, r.sm): r for r in results})
    return MatrixReport([release], Targets([SM.from_number(90)], "flag"), [1, 2, 3])


def test_an_axis_against_heads_gives_one_outcome_per_cell_in_the_order_seen():
    report = _report(_result(128, 90, {1, 2}, range(1, 4)), _result(64, 90, {1}, range(1, 4)))
    rows, cols, cells = pivot_cells(report, "head_dim", "heads")
    assert rows == [128, 64] and cols == [1, 2, 3]
    assert cells[(128, 2)] is Outcome.ACCEPTED and cells[(64, 2)] is Outcome.REJECTED


def test_two_other_dimensions_give_a_result_per_cell():
    first, second = _result(128, 90, {1}, range(1, 3)), _result(128, 100, {1, 2}, range(1, 3))
    rows, cols, cells = pivot_cells(_report(first, second), "sm", "release")
    assert rows == ["SM90", "SM100"] and cols == ["0.6.14"]
    assert cells[("SM100", "0.6.14")] is second


def test_results_falling_in_one_cell_are_an_input_error():
    report = _report(_result(128, 90, {1}, range(1, 3)), _result(128, 100, {1}, range(1, 3)))
    with pytest.raises(InputError, match=r"several results fall in one cell \(128, 1\)"):
        pivot_cells(report, "head_dim", "heads")


def test_an_unknown_dimension_or_the_same_twice_is_an_input_error():
    report = _report(_result(128, 90, {1}, range(1, 3)))
    with pytest.raises(InputError, match=r"'page' is not heads, sm, release, kernel or an axis .*\(head_dim\)"):
        pivot_cells(report, "page", "heads")
    with pytest.raises(InputError, match="pick two different dimensions"):
        pivot_cells(report, "sm", "sm")


def test_a_collision_is_found_before_probing_with_what_differs():
    keys = ["gqa-decode[head_dim=64]", "gqa-decode[head_dim=128]"]
    check_planned("head_dim", "heads", ["0.6.14"], keys, [90])  # one result per head dim
    with pytest.raises(InputError, match=r"several results would fall in one cell \(64; they differ in sm\)"):
        check_planned("head_dim", "heads", ["0.6.14"], keys, [90, 100])
    with pytest.raises(InputError, match="they differ in release"):
        check_planned("head_dim", "sm", ["0.6.13", "0.6.14"], keys, [90])
    with pytest.raises(InputError, match=r"'bogus' is not heads"):
        check_planned("bogus", "heads", ["0.6.14"], keys, [90])
