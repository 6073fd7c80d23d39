"""Parsing and comparison logic, on data built here."""

from __future__ import annotations

import pytest

from hprobe.judge import exit_code, judge
from hprobe.model.errors import InputError
from hprobe.model.outcome import HeadResult, KernelSMResult, Outcome
from hprobe.model.sm import SM, parse_sm, parse_sm_list
from hprobe.model.verdict import Finding, Verdict

from .conftest import V4_PRO_TABLE

# Pure: runs without torch, flashinfer or a subprocess (the fast tier, `-m "pure and not slow"`).
pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    "text, expected",
    [
        ("100", SM(10, 0)),
        ("sm100", SM(10, 0)),
        ("sm_100a", SM(10, 0)),
        ("SM_90a", SM(9, 0)),
        ("10.0", SM(10, 0)),
        ("12.1", SM(12, 1)),
        ("120f", SM(12, 0)),
        (" 103 ", SM(10, 3)),
    ],
)
def test_parse_sm(text, expected):
    assert parse_sm(text) == expected


@pytest.mark.parametrize("text", ["999", "10.9", "sm_1000", "ten", "100b", "-100"])
def test_parse_sm_rejects(text):
    with pytest.raises(InputError):
        parse_sm(text)


def test_parse_sm_list_dedupes_in_order():
    assert parse_sm_list("120,sm_100a,10.0") == [SM(12, 0), SM(10, 0)]


def _support(outcomes: dict[int, Outcome]) -> KernelSMResult:
    result = KernelSMResult("k", 100, "0.0")
    for h, o in outcomes.items():
        result.heads[h] = HeadResult(h, o, message=None if o is Outcome.ACCEPTED else f"no {h}")
    return result


ACCEPT_64_128 = {h: (Outcome.ACCEPTED if h in (64, 128) else Outcome.REJECTED) for h in range(1, 257)}
ACCEPT_POW2 = {h: (Outcome.ACCEPTED if h in (8, 16, 32, 64, 128) else Outcome.REJECTED) for h in range(1, 257)}


def test_judge_verdicts():
    old, new = _support(ACCEPT_64_128), _support(ACCEPT_POW2)
    assert judge(16, 64, new)[:3] == (Verdict.REDUCIBLE, 16, 4.0)
    assert judge(16, 64, old)[0] is Verdict.OK
    verdict, best, _, evidence, _ = judge(16, 16, old)
    assert (verdict, best, evidence.message) == (Verdict.BROKEN, 64, "no 16")
    assert judge(8, None, new)[:2] == (Verdict.TABLE_REFUSES, 8)
    assert judge(200, None, new)[0] is Verdict.OK  # nothing >= 200 is accepted either
    assert judge(4, 8, new)[0] is Verdict.OK


def test_judge_never_calls_inconclusive_safe_or_broken():
    support = _support({h: Outcome.INCONCLUSIVE for h in range(1, 257)})
    for n, padded in ((16, 64), (16, 16), (300, None)):
        assert judge(n, padded, support)[0] is Verdict.INCONCLUSIVE


def test_unsupported_arch_is_broken():
    support = _support({h: Outcome.UNSUPPORTED_ARCH for h in range(1, 129)})
    assert judge(64, 64, support)[0] is Verdict.BROKEN


def test_exit_codes():
    def F(verdict):
        return Finding(
            table="t",
            table_path="t.toml",
            model="m",
            tp=1,
            n=8,
            backend="b",
            kernel="k",
            sm=100,
            flashinfer_version="0.6.14",
            padded=8,
            verdict=verdict,
        )

    assert exit_code([F(Verdict.OK)], strict=False) == 0
    assert exit_code([F(Verdict.REDUCIBLE)], strict=False) == 0
    assert exit_code([F(Verdict.REDUCIBLE)], strict=True) == 1
    assert exit_code([F(Verdict.INCONCLUSIVE), F(Verdict.OK)], strict=False) == 3
    assert exit_code([F(Verdict.INCONCLUSIVE), F(Verdict.BROKEN)], strict=False) == 1
    assert exit_code([], strict=False) == 3


def test_tables_parse_pad_multiple_and_pad_tile(write_table):
    from hprobe.model.padding import PadMultiple, PadTile
    from hprobe.rules import load_tables

    base = V4_PRO_TABLE
    [t] = load_tables([write_table(base.format(rule="pad_multiple = 16\nmax_heads = 128"))])
    assert t.backends[0].rule == PadMultiple(16, 128)
    [t] = load_tables([write_table(base.format(rule="pad_tile = [[8, 8], [32, 16], [128, 64]]"), "tile.toml")])
    assert t.backends[0].rule == PadTile(((8, 8), (32, 16), (128, 64)))


def test_unsupported_config_is_broken_and_partial_is_never_plain_ok():
    from hprobe.judge import judge
    from hprobe.model.outcome import Depth, HeadResult, KernelSMResult, Outcome
    from hprobe.model.verdict import Finding, Verdict

    refused = KernelSMResult("trtllm-mla", 120, "x")
    for h in (64, 128):
        refused.heads[h] = HeadResult(
            h,
            Outcome.UNSUPPORTED_CONFIG,
            error_type="ValueError",
            message="XQA MLA only supports q_len_per_request == 1",
        )
    verdict, *_ = judge(64, 128, refused)
    assert verdict is Verdict.BROKEN

    finding = Finding("t", "p", "m", 1, 128, "b", "k", 120, "x", padded=128, verdict=Verdict.OK, depth=Depth.PARTIAL)
    assert finding.label == "ok (partial)"


def test_refusal_messages_group_by_check_not_by_the_count_they_name():
    from hprobe.model.outcome import without_count

    assert without_count("Expected 8, 16, 32, 64, or 128 query heads for SM120 DSv4 sparse MLA, got 4", 4).endswith(
        "DSv4 sparse MLA, got #"
    )
    assert (
        without_count("unsupported configuration (q_len=1, num_heads=120, page_size=64)", 120)
        == "unsupported configuration (q_len=1, num_heads=#, page_size=64)"
    )
    assert without_count("requires SM120", 120) == "requires SM120"
    # A release number is not a head count: "0.6.13" keeps its 6 and its 13.
    assert without_count("flashinfer 0.6.13 has no x, got 13.", 13) == "flashinfer 0.6.13 has no x, got #."
    assert without_count("flashinfer 0.6.13 has no x", 6) == "flashinfer 0.6.13 has no x"


def test_every_verdict_explains_itself_in_every_output():
    """A verdict carries its mark, style, CI level and gate: a new member without
    them fails here, not in some format at run time."""
    for v in Verdict:
        assert v.explanation and v.mark and v.style
        assert v.ci_level(strict=True) in ("error", "warning", "notice", None)
    assert Verdict.BROKEN.fails(strict=False) and Verdict.BROKEN.ci_level(False) == "error"
    assert not Verdict.REDUCIBLE.fails(strict=False) and Verdict.REDUCIBLE.fails(strict=True)
    assert Verdict.REDUCIBLE.ci_level(False) == "notice" and Verdict.REDUCIBLE.ci_level(True) == "error"
    assert Verdict.INCONCLUSIVE.undecided and not Verdict.INCONCLUSIVE.fails(strict=True)
    assert Verdict.OK.ci_level(True) is None and not Verdict.OK.fails(strict=True)


def test_an_inconclusive_cause_is_typed_from_the_exception():
    """The machine (imports, a dependency's API, memory) is excused by the
    release sweep; a missing name in flashinfer or the probe is not."""
    from hprobe.device.classify import cause_of
    from hprobe.model.outcome import Cause

    assert cause_of(ImportError("cannot import name cute from cutlass")) is Cause.ENVIRONMENT
    assert cause_of(AttributeError("module 'cutlass.cute.core' has no attribute 'ThrMma'")) is Cause.ENVIRONMENT
    assert cause_of(MemoryError()) is Cause.ENVIRONMENT
    assert cause_of(AttributeError("module 'flashinfer.mla' has no attribute 'plan'")) is Cause.PROBE
    assert cause_of(AttributeError("'Tensor' object has no attribute 'kv_layout'")) is Cause.PROBE
    assert cause_of(NameError("name 'x' is not defined")) is Cause.PROBE


def test_the_installed_identity_rests_on_the_package_not_the_venv(monkeypatch):
    """The cached answers for the installed flashinfer are keyed by its RECORD's
    package rows: a console script, whose first line names the venv's python,
    differs between two identical installs at two paths and must not matter; a
    package file's hash must. The RECORD, the directory it is relative to and
    the requirements are read from the `.dist-info` directory as
    importlib.metadata reads them."""
    import importlib.metadata as md

    from hprobe.support import results as releases

    dist = md.distribution("flashinfer-python")
    record, base, requires = releases._installed_distribution()
    # Line endings aside (pip writes CRLF; read_text reads universal newlines).
    assert (record.splitlines(), base, requires) == (
        dist.read_text("RECORD").splitlines(),
        str(dist.locate_file("")),
        list(dist.requires or []),
    )
    assert "flashinfer/__init__.py" in record and requires

    def identity(text):
        monkeypatch.setattr(releases, "_installed_distribution", lambda: (text, base, requires))
        return releases.installed_identity()

    unpatched = releases.installed_identity()
    assert unpatched is not None and identity(record) == unpatched
    assert identity(record + "../../../bin/flashinfer,sha256=another-venv,123\n") == unpatched
    row = next(line for line in record.splitlines() if line.startswith("flashinfer/__init__.py,"))
    assert identity(record.replace(row, row.replace("sha256=", "sha256=x"))) != unpatched
    # A package file whose size no longer matches its row: no identity, so nothing cached is trusted.
    path, digest, size = row.split(",")
    assert identity(record.replace(row, f"{path},{digest},{int(size) + 1}")) is None
    # A quoted row (a path holding a comma) is read as CSV: a file it names that is not there.
    assert identity(record + '"flashinfer/a,b.py",sha256=x,5\n') is None
    # And where the listing cannot tell, importlib.metadata answers alike.
    monkeypatch.undo()
    monkeypatch.setattr(releases, "dist_info_dir", lambda name: None)
    via_metadata = releases._installed_distribution()
    assert (via_metadata[0].splitlines(), *via_metadata[1:]) == (record.splitlines(), base, requires)
    assert releases.installed_identity() == unpatched


def test_an_edit_to_hprobe_changes_the_code_digest_and_a_fresh_clone_does_not(monkeypatch, tmp_path):
    """Cached answers are keyed by hprobe's own code: an edited file (even one
    whose size and mtime stay the same) or a new module changes the key; the
    same code copied afresh, as a CI runner clones it each run, keeps it."""
    import os
    import shutil

    import hprobe
    from hprobe.support import results as releases

    digest = releases.code_digest.__wrapped__
    original = digest()
    package = tmp_path / "hprobe"
    shutil.copytree(
        os.path.dirname(hprobe.__file__), package, ignore=shutil.ignore_patterns("__pycache__")
    )  # new mtimes
    monkeypatch.setattr(hprobe, "__file__", str(package / "__init__.py"))
    assert digest() == original

    judge_py = package / "judge.py"
    stat = judge_py.stat()
    judge_py.write_text(judge_py.read_text().replace("broken", "brokeN", 1))  # same size
    os.utime(judge_py, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same mtime
    edited = digest()
    assert edited != original
    (package / "extra.py").write_text("")
    assert digest() not in (original, edited)


def test_an_edit_to_the_shipped_data_changes_the_code_digest(monkeypatch, tmp_path):
    """Readings and answers rest on the shipped tables, mappings and models as
    much as on the code: a models table edited (in a checkout they lie outside
    the package's folder) changes the key, so no cached reading outlives it."""
    import shutil

    from hprobe.support import results as releases

    digest = releases.code_digest.__wrapped__
    original = digest()
    data = tmp_path / "matrices"
    shutil.copytree(releases.shipped_data_root(), data, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(releases, "shipped_data_root", lambda: data)
    assert digest() == original
    models = data / "models" / "gqa.toml"
    models.write_text(models.read_text().replace("num_q_heads = 32", "num_q_heads = 64", 1))
    assert digest() != original
