"""commands/drift: `check --baseline` (what changed since a recorded matrix),
each bad baseline refused in one line before any probe runs (the release
ranges `diff`, `bisect` and `report` share: tests/support/test_published.py;
`diff` and `bisect` over fetched releases: tests/test_releases.py)."""

from __future__ import annotations

import json

import pytest

from hprobe.commands.drift import load_baseline
from hprobe.model.errors import InputError

from ..conftest import ROOT


@pytest.mark.pure
@pytest.mark.parametrize(
    ("written", "said"),
    [
        ("{", "not JSON"),
        ("[" * 100_000, "nested too deeply"),
        ('{"schema": "hprobe.matrix/3", "results": [{}], "flashinfer": {"version": "0.6.14"}}', "malformed result"),
        ('{"schema": "hprobe.matrix/3", "results": [], "flashinfer": {"version": "0.6.14"}}', "records no results"),
    ],
)
def test_a_baseline_that_is_not_a_recorded_matrix_is_one_input_error(tmp_path, written, said):
    path = tmp_path / "baseline.json"
    path.write_text(written)
    with pytest.raises(InputError) as refused:
        load_baseline(str(path))
    assert said in str(refused.value) and str(path) in str(refused.value)


def _against(baseline) -> tuple[str, ...]:
    """`check` of vLLM's DSv4 table after #48047 on SM100, against a recorded baseline."""
    table = ROOT / "matrices" / "vllm-dsv4-flashinfer-post-48047.toml"
    return ("check", "--table", str(table), "--sm", "100", "--baseline", str(baseline))


def test_baseline_reports_drift(cli_json, cli, tmp_path):
    code, recorded, _ = cli_json("matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "8-32")
    assert code == 0
    same = tmp_path / "same.json"
    same.write_text(json.dumps(recorded))
    code, doc, _ = cli_json(*_against(same))
    assert code == 0 and doc["drift"]["changed"] is False
    # A baseline recorded when 8 and 16 were refused (as before 0.6.14).
    old = json.loads(same.read_text())
    for head in old["results"][0]["heads"]:
        if head["heads"] in (8, 16):
            head.update(outcome="rejected", message="Expected 64 or 128 query heads")
            head.pop("entry", None)
    old["results"][0]["accepted"] = [32]
    changed = tmp_path / "old.json"
    changed.write_text(json.dumps(old))
    code, doc, _ = cli_json(*_against(changed))
    assert code == 1
    [change] = doc["drift"]["changes"]
    assert change["became_accepted"] == [8, 16] and change["became_rejected"] == []
    # Text output says what changed, not only the exit code.
    code, out, _ = cli(*_against(changed))
    assert code == 1
    assert "drift against the baseline" in out and "dsv4-sparse-mla SM100: became accepted {8, 16}" in out


def test_bad_baseline_is_one_line(cli, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "something/1"}')
    code, out, err = cli("check", "--sm", "100", "--baseline", str(bad))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "not an hprobe matrix document" in err
