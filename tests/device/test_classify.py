"""The classifier on exceptions raised from a synthetic `flashinfer/` tree:
each branch of `device.classify.classify` (a validator's refusal, a device
check, JIT-spec checks and builds, ordinary code, code outside flashinfer, an
environment failure) from a real traceback, with no flashinfer imported."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from hprobe.device.classify import CallResult, cause_of, classify
from hprobe.model.outcome import Cause

# Pure: runs without torch, flashinfer or a subprocess (the fast tier, `-m "pure and not slow"`).
pytestmark = pytest.mark.pure

SOURCES = {
    "flashinfer/mla.py": """
def decode(q_heads):
    if q_heads not in (64, 128):
        raise ValueError(f"Expected 64 or 128 query heads, got {q_heads}")


def decode_assert(q_heads):
    assert (
        q_heads % 8 == 0
    ), "heads must be a multiple of 8"


def device(q):
    if q.device_type != "cuda":
        pass
    if not q.is_cuda:
        raise ValueError("q must be a CUDA tensor")


def ordinary(q_heads):
    table = {64: "a"}
    return table[q_heads]


def missing_dependency():
    import hprobe_test_no_such_module  # noqa: F401
""",
    "flashinfer/jit/spec.py": """
def gen(arch):
    if arch not in ("sm_100a",):
        raise RuntimeError(f"no JIT spec for {arch}")


def build(arch):
    return {}[arch]
""",
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("fake")
    for rel, text in SOURCES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _load(tree: Path, rel: str):
    spec = importlib.util.spec_from_file_location(f"fake_{rel.replace('/', '_')[:-3]}", tree / rel)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ended(tree: Path, rel: str, function: str, *args) -> CallResult:
    fn = getattr(_load(tree, rel), function)
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - every ending is what is classified
        return classify(exc, str((tree / "flashinfer").resolve()) + os.sep)
    raise AssertionError(f"{function}{args} returned")


def test_a_raise_guarded_by_a_check_is_a_validators_refusal(tree):
    result = _ended(tree, "flashinfer/mla.py", "decode", 32)
    assert result.validator and result.reason is None and result.cause is None
    assert (result.error_type, result.message) == ("ValueError", "Expected 64 or 128 query heads, got 32")
    assert result.location == "flashinfer/mla.py:4 (decode)"
    assert result.site is not None and result.site.tests == frozenset({3}) and not result.site.device_check


def test_a_multi_line_assert_is_a_validator_with_its_condition(tree):
    result = _ended(tree, "flashinfer/mla.py", "decode_assert", 12)
    assert result.validator and result.error_type == "AssertionError"
    assert result.site is not None and result.site.is_assert


def test_a_check_on_the_tensors_device_is_the_devices_cause(tree):
    class CpuTensor:
        device_type = "cpu"
        is_cuda = False

    result = _ended(tree, "flashinfer/mla.py", "device", CpuTensor())
    assert not result.validator
    assert result.cause == Cause.DEVICE.value and "device" in (result.reason or "")
    assert result.site is not None and result.site.device_check


def test_ordinary_code_failing_in_flashinfer_is_not_a_validator(tree):
    result = _ended(tree, "flashinfer/mla.py", "ordinary", 8)
    assert not result.validator and result.error_type == "KeyError"
    assert "ordinary code" in (result.reason or "")


def test_an_import_failure_is_this_machines(tree):
    result = _ended(tree, "flashinfer/mla.py", "missing_dependency")
    assert not result.validator and result.error_type == "ModuleNotFoundError"
    assert result.cause == Cause.ENVIRONMENT.value and "environment failure" in (result.reason or "")


def test_a_check_in_jit_spec_generation_is_a_validator_and_a_jit_crash_is_not(tree):
    refused = _ended(tree, "flashinfer/jit/spec.py", "gen", "sm_90a")
    assert refused.validator and refused.location == "flashinfer/jit/spec.py:4 (gen)"
    crashed = _ended(tree, "flashinfer/jit/spec.py", "build", "sm_90a")
    assert not crashed.validator and "JIT build" in (crashed.reason or "")


def test_an_exception_outside_flashinfer_is_the_probes_inputs(tree):
    try:
        [].pop()
    except IndexError as exc:
        result = classify(exc, str((tree / "flashinfer").resolve()) + os.sep)
    assert not result.validator and "outside flashinfer" in (result.reason or "")
    assert result.location is not None and result.location.startswith(str(Path(__file__).resolve()))


def test_missing_names_are_the_machines_only_outside_flashinfer():
    assert cause_of(AttributeError("module 'cutlass.cute' has no attribute 'ThrMma'")) is Cause.ENVIRONMENT
    assert cause_of(AttributeError("module 'flashinfer.mla' has no attribute 'plan'")) is Cause.PROBE
    assert "hprobe_test_no_such_module" not in sys.modules
