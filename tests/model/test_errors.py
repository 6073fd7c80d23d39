"""model/errors: each error class ends a command with its documented exit code
and prints as its one line; the codes are the reference's table."""

from __future__ import annotations

import re

import pytest

from hprobe.model import errors
from hprobe.model.errors import (
    EnvironmentProblem,
    HprobeError,
    IndexUnlisted,
    InputError,
    NothingToCheck,
    PinUnserved,
)

from ..conftest import ROOT

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (HprobeError, errors.EXIT_INPUT),
        (InputError, errors.EXIT_INPUT),
        (IndexUnlisted, errors.EXIT_INPUT),
        (PinUnserved, errors.EXIT_INPUT),
        (EnvironmentProblem, errors.EXIT_ENVIRONMENT),
        (NothingToCheck, errors.EXIT_INCONCLUSIVE),
    ],
)
def test_each_error_carries_its_exit_code_and_prints_as_its_message(error, code):
    raised = error("--heads 0: the number of query heads must be positive")
    assert raised.exit_code == code
    assert str(raised) == raised.message == "--heads 0: the number of query heads must be positive"


def test_an_unserved_pin_is_caught_where_an_unlisted_index_is():
    # A command that goes on without the index's list goes on without a pinned release too.
    with pytest.raises(IndexUnlisted):
        raise PinUnserved("flashinfer-python==9.9: not served")


def test_the_codes_are_the_references_table():
    table = (ROOT / "docs" / "reference.md").read_text().split("## Exit codes", 1)[1]
    documented = {int(code) for code in re.findall(r"^\| (\d) \|", table, re.M)}
    defined = {value for name, value in vars(errors).items() if name.startswith("EXIT_") and isinstance(value, int)}
    assert defined == {0, 1, 2, 3, 4} and defined <= documented
