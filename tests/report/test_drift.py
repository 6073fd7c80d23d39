"""report/drift: what `diff` and `bisect` report. A drift gate fails (exit 1)
on any change of an accepted set, counts appearing or vanishing included; it
is undecided (exit 3) only where nothing changed and some count is unknown."""

from __future__ import annotations

import pytest

from hprobe.model.errors import EXIT_FINDINGS, EXIT_INCONCLUSIVE, EXIT_OK
from hprobe.report.drift import DiffReport, KernelChange

pytestmark = pytest.mark.pure


def _change(**changed: tuple[int, ...]) -> KernelChange:
    fields: dict[str, tuple[int, ...]] = {
        "became_accepted": (),
        "became_rejected": (),
        "unknown": (),
        "appeared": (),
        "vanished": (),
        **changed,
    }
    return KernelChange("dsv4-sparse-mla", 100, "ok", "ok", (64, 128), (8, 16, 32, 64, 128), new_refusal=None, **fields)


@pytest.mark.parametrize(
    ("changes", "changed", "code"),
    [
        ([_change()], False, EXIT_OK),
        ([_change(became_accepted=(8, 16, 32))], True, EXIT_FINDINGS),
        ([_change(became_rejected=(64,))], True, EXIT_FINDINGS),
        ([_change(appeared=(256,))], True, EXIT_FINDINGS),
        ([_change(vanished=(4,))], True, EXIT_FINDINGS),
        ([_change(unknown=(96,))], False, EXIT_INCONCLUSIVE),
        # A change decides the gate whatever else is unknown.
        ([_change(unknown=(96,)), _change(became_rejected=(64,))], True, EXIT_FINDINGS),
        ([], False, EXIT_OK),
    ],
    ids=["same", "accepted", "rejected", "appeared", "vanished", "unknown", "change and unknown", "nothing"],
)
def test_the_drift_gate_fails_on_any_change_and_is_undecided_only_without_one(changes, changed, code) -> None:
    report = DiffReport({"version": "0.6.13"}, {"version": "0.6.14"}, tuple(changes))
    assert report.changed is changed and report.exit_code == code
    document = report.to_dict()
    assert document["schema"] == "hprobe.diff/1" and document["exit_code"] == code and document["changed"] is changed
    assert [c["became_rejected"] for c in document["changes"]] == [list(c.became_rejected) for c in changes]
