"""report/model: reports carry conclusions. A matrix that answered nothing
is undecided (exit 3), never an empty pass; the gate's line counts each
verdict with the waivers that cover it, and says what rests on assumptions."""

from __future__ import annotations

import pytest

from hprobe.model.outcome import HeadResult, KernelSMResult, Outcome
from hprobe.model.release import FlashinferInfo, ProbedRelease
from hprobe.model.sm import SM
from hprobe.model.targets import Targets
from hprobe.model.verdict import Verdict
from hprobe.report.model import GateCounts, MatrixReport

pytestmark = pytest.mark.pure


def _matrix(*outcomes: Outcome) -> MatrixReport:
    result = KernelSMResult("trtllm-mla", 100, "0.6.14")
    for h, outcome in enumerate(outcomes, 1):
        result.heads[h] = HeadResult(h, outcome, reason="worker died" if outcome is Outcome.INCONCLUSIVE else None)
    release = ProbedRelease("installed", FlashinferInfo("0.6.14", "/site"), {("trtllm-mla", 100): result})
    return MatrixReport([release], Targets([SM(10, 0)], "flag"), list(range(1, len(outcomes) + 1)))


@pytest.mark.parametrize(
    ("outcomes", "code"),
    [
        ((Outcome.INCONCLUSIVE, Outcome.INCONCLUSIVE), 3),  # nothing answered
        ((Outcome.INCONCLUSIVE, Outcome.REJECTED), 0),  # a refusal is an answer
        ((Outcome.ACCEPTED,), 0),
    ],
)
def test_a_matrix_that_answered_nothing_is_undecided(outcomes, code) -> None:
    report = _matrix(*outcomes)
    assert report.exit_code == code
    document = report.to_dict(runs=True)
    assert document["schema"] == "hprobe.matrix/3" and document["exit_code"] == code
    assert document["heads"] == {"min": 1, "max": len(outcomes), "count": len(outcomes)}
    assert report.to_dict()["schema"] == "hprobe.matrix/2"


def test_the_gate_line_counts_waivers_and_what_rests_on_assumptions() -> None:
    gate = GateCounts(
        {Verdict.BROKEN: 22, Verdict.OK: 5},
        waived_of={Verdict.BROKEN: 22},
        expired=1,
        assumed=7,
        not_judged=1,
        trusted=2,
    )
    assert gate.said(Verdict.BROKEN) == "22 broken (22 waived)" and gate.said(Verdict.OK) == "5 ok"
    assert gate.waived == 22
    assert [kind for _, kind in gate.beside()] == ["expired", "assumed", "not_judged", "trusted"]
    assert gate.beside()[:3] == [
        ("1 expired waiver", "expired"),
        ("7 call paths assumed", "assumed"),
        ("1 call path not judged", "not_judged"),
    ]
    assert GateCounts({}, {}, 0, 0, 0).beside() == []
