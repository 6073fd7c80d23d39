"""model/sm: every spelling of an SM users write, parsed to one compute
capability; numbers that are no GPU and malformed lists refused with one line;
and no GPU seen on a machine without NVIDIA's driver, without importing torch."""

from __future__ import annotations

import sys

import pytest

from hprobe.model.errors import InputError
from hprobe.model.sm import KNOWN_SMS, SM, detect_gpus, parse_sm, parse_sm_list, sm_names

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("text", "number"),
    [("100", 100), ("sm100", 100), ("SM_100a", 100), ("sm_90a", 90), ("10.0", 100), ("12.1", 121), (" 103f ", 103)],
)
def test_every_spelling_reads_as_one_sm(text, number):
    sm = parse_sm(text)
    assert sm.number == number and str(sm) == f"SM{number}"
    assert sm.arch == f"{number // 10}.{number % 10}" and sm.family == number // 10


@pytest.mark.parametrize(("text", "said"), [("99", "SM99 is no real GPU architecture"), ("hopper", "not an SM")])
def test_a_number_that_is_no_gpu_or_a_word_is_refused_with_one_line(text, said):
    with pytest.raises(InputError, match=said) as refused:
        parse_sm(text)
    assert "\n" not in str(refused.value)


def test_every_known_number_parses_and_orders_by_capability():
    parsed = sorted(parse_sm(str(n)) for n in KNOWN_SMS)
    assert [sm.number for sm in parsed] == sorted(KNOWN_SMS)
    assert SM.from_number(121) == SM(12, 1) and SM(9, 0) < SM(10, 0) < SM(12, 0)


def test_a_list_keeps_its_order_drops_repeats_and_refuses_an_empty_one():
    assert [sm.number for sm in parse_sm_list("120,sm_100a,10.0, ,90")] == [120, 100, 90]
    with pytest.raises(InputError, match="--sm: empty list"):
        parse_sm_list(" , ")
    assert sm_names([100, 103]) == "SM100/SM103"


def test_no_driver_means_no_gpu_and_torch_is_not_imported(monkeypatch):
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr("os.path.exists", lambda path: False)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert detect_gpus() == []
    assert "torch" not in sys.modules
