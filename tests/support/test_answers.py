"""support/answers: the answers step of `check`, `suggest` and `report` —
which releases each table is judged on, which probe variants, SMs and head
counts are asked. Tables written here; nothing is probed where no backend
runs on an SM asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from hprobe.judge import judge_answers
from hprobe.model.errors import InputError
from hprobe.model.release import INSTALLED
from hprobe.rules import load_tables
from hprobe.support.answers import gather_answers, releases_for

pytestmark = pytest.mark.pure

TABLE = """
[table]
name = "t"
source = "written in the test"

[[model]]
name = "M"
num_q_heads = 128
tp = [1, 2, 4, 8, 16]

[[backend]]
name = "B"
kernel = "dsv4-sparse-mla"
sm = [100, 103]
pad_to = [8, 16, 32, 64, {largest}]
"""


def _table(tmp_path: Path, largest: int = 128, extra: str = ""):
    path = tmp_path / "t.toml"
    path.write_text(TABLE.format(largest=largest) + extra)
    [table] = load_tables([path])
    return table


def test_a_table_is_judged_on_the_releases_asked_else_the_installed_one(tmp_path):
    table = _table(tmp_path)
    assert releases_for(table, ["0.6.13", "0.6.14"], None) == (["0.6.13", "0.6.14"], [])
    assert releases_for(table, None, None) == ([INSTALLED], [])


def test_no_backend_on_the_sms_asked_probes_nothing_and_says_so(tmp_path):
    """SM120 asked of a table whose backend runs on SM100/103: no question, no
    release probed (the release named is never fetched), and the verdicts say
    nothing was checked."""
    answers = gather_answers([_table(tmp_path)], None, "120", ["0.6.14"], None)
    assert answers.questions == {} and answers.probed == {}
    assert answers.plan == {("t", str(tmp_path / "t.toml")): ["0.6.14"]} and answers.planned == ["0.6.14"]
    verdicts = judge_answers(answers)
    assert verdicts.findings == [] and verdicts.call_paths == []
    assert verdicts.notes[-1] == "nothing was checked: no backend of the tables runs on the SMs selected"


@pytest.mark.parametrize(("largest", "top"), [(128, 256), (512, 512)])
def test_the_counts_asked_reach_the_largest_padded_count(tmp_path, monkeypatch, largest, top):
    """Every count from 1 to max(256, the largest the rule pads to), on the
    table's SMs among those asked: asked through the gathering step itself."""
    from hprobe.support import answers as module

    asked = {}

    def gather(labels, needed, heads, use_cache, progress, ahead=()):
        asked.update(labels=labels, needed=needed, heads=heads)
        return {}

    monkeypatch.setattr(module, "gather", gather)
    answers = gather_answers([_table(tmp_path, largest)], None, "100,120", ["0.6.14"], None)
    assert asked["heads"] == list(range(1, top + 1))
    assert asked["needed"] == {answers.tables[0].backends[0].variant_key: [100]}
    assert asked["labels"] == ["0.6.14"]


def test_a_kernel_the_table_names_wrongly_is_one_line_with_its_place(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text(TABLE.format(largest=128).replace('kernel = "dsv4-sparse-mla"', 'kernel = "no-such-kernel"'))
    with pytest.raises(InputError, match="backend B"):
        gather_answers(load_tables([path]), None, "100", ["0.6.14"], None)
