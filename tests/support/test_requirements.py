"""Requires-Dist lines parsed once and kept (support/requirements.py): a kept
parse answers as packaging would, and one kept for another interpreter or
machine, or damaged, is never used."""

from __future__ import annotations

import pytest

from hprobe.support import requirements
from hprobe.support.requirements import Parsed, parse_requirements
from hprobe.support.trees import unmet_requirements

pytestmark = pytest.mark.pure  # the fast tier: no torch, flashinfer or subprocess

LINES = [
    "apache-tvm-ffi<0.2,>=0.1.11",
    "Torch",
    "nvidia_cutlass.dsl>=4.1; python_version >= '3'",
    "cuda-python; extra == 'cu13'",
    "not a requirement (",
]


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """Each line packaging parses, counted; the cache is this test's own."""
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    parsed: list[str] = []
    parse = requirements._parse

    def counting(line: str) -> Parsed | None:
        parsed.append(line)
        return parse(line)

    monkeypatch.setattr(requirements, "_parse", counting)
    return parsed


def test_a_kept_parse_answers_as_packaging_does(counted):
    fresh = parse_requirements(LINES)
    assert fresh == [
        Parsed("apache-tvm-ffi<0.2,>=0.1.11", "apache-tvm-ffi", "<0.2,>=0.1.11", True),
        Parsed("Torch", "Torch", "", True),
        Parsed('nvidia_cutlass.dsl>=4.1; python_version >= "3"', "nvidia_cutlass.dsl", ">=4.1", True),
        Parsed('cuda-python; extra == "cu13"', "cuda-python", "", False),
        None,
    ]
    assert len(counted) == len(LINES)
    assert parse_requirements(LINES) == fresh
    assert len(counted) == len(LINES)  # the second answer was the kept one


def test_another_machine_or_a_damaged_entry_parses_again(counted, monkeypatch, tmp_path):
    parse_requirements(LINES)
    inputs = requirements._marker_inputs()
    monkeypatch.setattr(requirements, "_marker_inputs", lambda: [*inputs[:-1], "riscv64"])
    parse_requirements(LINES)
    assert len(counted) == 2 * len(LINES)  # a marker may read otherwise there
    for entry in (tmp_path / "cache" / "readings").glob("requires-*.json"):
        entry.write_text('[["torch", "torch", "", "yes"]]')
    again = parse_requirements(LINES)
    assert len(counted) == 3 * len(LINES) and again[1] == Parsed("Torch", "Torch", "", True)


def test_unmet_requirements_read_from_a_kept_parse(counted):
    metadata = {"Requires-Dist": ["pytest>=999", "no-such-distribution-hprobe", "pytest; extra == 'x'", "pytest>=1"]}
    first = unmet_requirements(metadata)
    assert [(u.requirement, u.name, u.installed is not None) for u in first] == [
        ("pytest>=999", "pytest", True),
        ("no-such-distribution-hprobe", "no-such-distribution-hprobe", False),
    ]
    assert unmet_requirements(metadata) == first and len(counted) == 4
