"""rules/repo/padfn_child: the child's protocol, spoken to as hprobe speaks to it
(its text run with `python -I -B -c`, a JSON request on stdin, JSON lines out):
no module of hprobe loaded there, the function's prints kept off the record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hprobe.rules.repo import padfn

pytestmark = pytest.mark.slow

CHILD = Path(padfn.__file__).with_name("padfn_child.py").read_text(encoding="utf-8")


def _speak(tmp_path: Path, spec: str, counts: list[int]) -> tuple[list[dict], subprocess.CompletedProcess]:
    out = tmp_path / f"results-{len(list(tmp_path.glob('results-*')))}.jsonl"
    request = json.dumps({"spec": spec, "counts": counts, "out": str(out)})
    proc = subprocess.run(
        [sys.executable, "-I", "-B", "-c", CHILD], input=request, capture_output=True, text=True, timeout=60
    )
    return [json.loads(line) for line in out.read_text().splitlines()], proc


def test_the_record_says_where_then_each_call_then_done(tmp_path):
    rule = tmp_path / "rule.py"
    rule.write_text(
        "def pad(n):\n    print('padding', n)\n    if n == 3:\n        raise KeyError(n)\n"
        "    return 'x' if n == 5 else n\n"
    )
    records, proc = _speak(tmp_path, f"{rule}:pad", [4, 3, 5])
    assert records == [
        {"where": [str(rule), 1]},
        {"calling": 4},
        {"n": 4, "value": 4},
        {"calling": 3},
        {"n": 3, "raises": ["KeyError", "3"]},
        {"calling": 5},
        {"n": 5, "value": "'x'"},
        {"done": True},
    ]
    assert proc.stdout == "padding 4\npadding 3\npadding 5\n"  # their prints, never the record


def test_the_child_loads_nothing_of_hprobe(tmp_path):
    rule = tmp_path / "rule.py"
    rule.write_text(
        "import sys\ndef pad(n):\n    return n + len([m for m in sys.modules if m.split('.')[0] == 'hprobe'])\n"
    )
    records, _ = _speak(tmp_path, f"{rule}:pad", [8])
    assert {"n": 8, "value": 8} in records


def test_a_qualified_name_is_looked_up_part_by_part(tmp_path):
    rule = tmp_path / "rule.py"
    rule.write_text("class Rules:\n    @staticmethod\n    def pad(n):\n        return 2 * n\n")
    records, _ = _speak(tmp_path, f"{rule}:Rules.pad", [8])
    assert {"n": 8, "value": 16} in records and records[-1] == {"done": True}
    records, _ = _speak(tmp_path, f"{rule}:Rules.missing", [8])
    assert records == [{"error": f"{rule} has no Rules.missing"}]
