"""model/pins: pin arithmetic for every layer that reads or writes a
flashinfer requirement. A pin on another package, a clause that names no
release, or `===` is an input error with its words; a raised pin keeps what
it can and refuses what it cannot raise mechanically."""

from __future__ import annotations

import pytest
from packaging.version import Version

from hprobe.model.errors import InputError
from hprobe.model.pins import exact_release, parse_pin, raised_pin

pytestmark = pytest.mark.pure


def test_raised_pin_keeps_upper_bounds_and_refuses_what_it_cannot_raise():
    assert raised_pin(">=0.6.13", Version("0.6.14")) == ">=0.6.14"
    assert raised_pin(">=0.6.13,<0.8", Version("0.6.14")) == ">=0.6.14,<0.8"
    assert raised_pin(None, Version("0.6.14")) == ">=0.6.14"
    assert raised_pin("~=0.6.13", Version("0.6.14")) is None
    assert raised_pin("==0.6.13", Version("0.6.14")) == "==0.6.14"  # an exact pin stays exact
    assert raised_pin(">=0.6.0,<0.6.14", Version("0.6.14")) is None  # no safe release left in it


@pytest.mark.parametrize(
    ("spec", "admits", "refuses"),
    [
        ("flashinfer-python>=0.6.13", "0.6.14", "0.6.12"),
        ("flashinfer>=0.6.13,<0.7", "0.6.18", "0.7.0"),  # the old distribution name is the same package
        (">=0.6.13", "0.6.13", "0.6.12"),
        ("  ==0.7.2.post1 ", "0.7.2.post1", "0.7.2"),
    ],
)
def test_a_pin_names_flashinfer_or_nothing(spec, admits, refuses) -> None:
    specifier = parse_pin(spec)
    assert specifier.contains(admits, prereleases=True) and not specifier.contains(refuses, prereleases=True)


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("", "empty"),
        ("torch>=2.4", "names torch, not flashinfer-python"),
        ("===0.6.14", "arbitrary equality (===) compares strings"),
        ("flashinfer-python>=", "not a requirement"),
        ("==banana", "not a requirement"),
    ],
)
def test_a_pin_that_names_no_flashinfer_release_is_an_input_error(spec, said) -> None:
    with pytest.raises(InputError, match=said.replace("(", r"\(").replace(")", r"\)")):
        parse_pin(spec)


@pytest.mark.parametrize(
    ("spec", "release"),
    [
        ("==0.7.2", "0.7.2"),
        ("flashinfer-python==0.6.14", "0.6.14"),
        ("==0.6.*", None),
        (">=0.6.14", None),
        ("==0.6.14,<0.7", None),
        (None, None),
    ],
)
def test_an_exact_pin_names_its_one_release(spec, release) -> None:
    assert exact_release(spec) == release
