"""device/fakes: the faked GPU answers the device queries of the SM asked, with
a part of that family's sizes (never a count a validator decides heads on)."""

from __future__ import annotations

import pytest

from hprobe.device.fakes import FakeDeviceProperties
from hprobe.model.sm import parse_sm

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("text", "capability", "sms"), [("90", (9, 0), 132), ("100", (10, 0), 148), ("12.1", (12, 1), 148)]
)
def test_the_faked_device_is_the_sm_asked(text, capability, sms):
    sm = parse_sm(text)
    props = FakeDeviceProperties(sm)
    assert (props.major, props.minor) == capability
    assert props.name == f"hprobe target {sm}"
    assert props.multi_processor_count == sms


def test_every_field_torch_reports_for_a_device_is_there():
    props = FakeDeviceProperties(parse_sm("100"))
    # The fields flashinfer's Python reads off get_device_properties (workspaces,
    # occupancy checks), each of the type torch gives it.
    for name, kind in [
        ("total_memory", int),
        ("shared_memory_per_block_optin", int),
        ("shared_memory_per_multiprocessor", int),
        ("max_threads_per_multi_processor", int),
        ("L2_cache_size", int),
        ("warp_size", int),
        ("is_integrated", bool),
        ("is_multi_gpu_board", bool),
        ("uuid", str),
    ]:
        assert isinstance(getattr(props, name), kind), name
    assert props.shared_memory_per_block_optin <= props.shared_memory_per_multiprocessor
