"""Tests mirror the package: the unit tests of `src/hprobe/a/b.py` live in
`tests/a/test_b.py` (a package's `__init__.py`: `tests/a/test_<package>.py`).
A module tested elsewhere is listed below with the tests that cover it, so a
new module without tests, or a test moved without its module, fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.pure

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "hprobe"

# Why each of these has no test module at its mirrored path: the tests that
# cover it, each a path under tests/ (checked to exist).
_E2E = "run end to end through the command in "
_FORMATS = "every verdict, outcome and hostile string rendered in tests/report/test_formats.py"
_KERNELS = "probed on real releases in tests/test_releases.py and tests/kernels/"
_ERAS = "a few hooks over the neighbouring era, whose cases run it: "
ELSEWHERE: dict[str, str] = {
    "commands/conclude.py": "tests/report/test_formats.py (every report concluded before it is rendered)",
    "compiled/trtllm_gen/era_0_6_4.py": _ERAS + "tests/compiled/trtllm_gen/test_era_0_6_6.py",
    "compiled/trtllm_gen/era_0_6_7.py": _ERAS + "tests/compiled/trtllm_gen/test_era_0_6_8.py",
    "kernels/__init__.py": _KERNELS,
    "kernels/base.py": _KERNELS,
    "kernels/sparse_mla_ts.py": "probed on 0.6.16 and 0.7.4 in tests/test_release_sweep.py (not in 0.6.14)",
    "report/catalogue.py": _FORMATS,
    "report/formats/html_site.py": _FORMATS + " and tests/commands/test_report.py",
    "report/formats/terminal.py": _FORMATS,
    "report/suggest.py": "tests/commands/test_suggest.py",
    "rules/interface.py": "abstract interfaces only; a kind built on them in tests/rules/test_sources.py",
    "rules/repo/interpreter/bound.py": "tests/rules/repo/interpreter/test_evaluate.py and tests/test_hostile.py",
    "rules/repo/interpreter/inline.py": "tests/rules/repo/tracing/test_paths.py",
    "support/workers.py": "tests/support/test_zygote.py and tests/support/test_worker.py",
}


def _has_logic(path: Path) -> bool:
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(ast.parse(path.read_text())))


def _mirrored(module: Path) -> Path:
    rel = module.relative_to(PACKAGE)
    if module.name == "__init__.py":
        return ROOT / "tests" / rel.parent.parent / f"test_{rel.parent.name}.py"
    return ROOT / "tests" / rel.parent / f"test_{module.stem}.py"


MODULES = sorted(
    p for p in PACKAGE.rglob("*.py") if p.name != "__main__.py" and "__pycache__" not in p.parts and _has_logic(p)
)


def test_every_module_with_logic_has_its_tests_at_the_mirrored_path_or_says_where():
    unplaced = [
        str(p.relative_to(PACKAGE))
        for p in MODULES
        if not _mirrored(p).is_file() and str(p.relative_to(PACKAGE)) not in ELSEWHERE
    ]
    assert unplaced == [], "modules with neither tests at the mirrored path nor an entry in ELSEWHERE"


def test_the_list_of_modules_tested_elsewhere_is_current():
    """An entry for a module since mirrored, renamed or removed is stale."""
    current = {str(p.relative_to(PACKAGE)): _mirrored(p) for p in MODULES}
    stale = sorted(m for m in ELSEWHERE if m not in current or current[m].is_file())
    assert stale == []


def test_every_test_named_as_covering_a_module_exists():
    named = {path for reason in ELSEWHERE.values() for path in re.findall(r"tests/[\w/]+(?:\.py|/)", reason)}
    assert named, "the reasons name their tests"
    assert sorted(p for p in named if not (ROOT / p).exists()) == []


def test_the_mirror_rule_reads_real_paths():
    """The rule itself: a module known to be mirrored is found so."""
    assert _mirrored(PACKAGE / "rules" / "repo" / "heads.py") == ROOT / "tests" / "rules" / "repo" / "test_heads.py"
    assert _mirrored(PACKAGE / "report" / "formats" / "__init__.py") == ROOT / "tests" / "report" / "test_formats.py"
    assert _mirrored(PACKAGE / "judge.py").is_file()
    assert len(MODULES) > 100
