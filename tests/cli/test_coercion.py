"""cli/coercion: option values coerced without pydantic where typer's result
cannot differ (a string, a list of strings, a parser's result); anything else
handed back to typer's own coercion, so its messages stay typer's. That the
two agree for every option of every command is tested in
tests/cli/test_app.py; here, the rule itself."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Optional

import pytest

from hprobe.cli.coercion import _UNHANDLED, _light, _without_none

pytestmark = pytest.mark.pure

PLAIN = SimpleNamespace(parser=None, click_type=None)


def _parse_sm(text: str) -> int:
    if not text.isdigit():
        raise ValueError(text)
    return int(text)


@pytest.mark.parametrize(
    ("annotation", "bare"),
    [
        (str | None, str),
        (Optional[int], int),  # noqa: UP045 - typer reads both spellings
        (list[str] | None, list[str]),
        (str, str),
        (int | str, int | str),
    ],
)
def test_only_an_optional_of_one_type_is_unwrapped(annotation, bare) -> None:
    assert _without_none(annotation) == bare


def test_a_string_and_a_list_of_strings_are_taken_as_given() -> None:
    assert _light(str | None, PLAIN, "0.6.14") == "0.6.14"
    assert _light(list[str] | None, PLAIN, ["a", "b"]) == ["a", "b"]
    assert _light(list[str], PLAIN, "one") == ["one"]  # one value given for a list option


def test_a_parser_s_result_is_the_value_and_its_refusal_goes_to_typer() -> None:
    info = SimpleNamespace(parser=_parse_sm, click_type=None)
    assert _light(int, info, "100") == 100
    assert _light(list[int], info, ["100", "120"]) == [100, 120]
    # A ValueError is worded by typer as a validation error: not coerced here.
    assert _light(int, info, "sm_x") is _UNHANDLED
    assert _light(list[int], info, ["100", "x"]) is _UNHANDLED


@pytest.mark.parametrize(
    ("annotation", "info", "value"),
    [
        (int, PLAIN, "3"),  # an integer: typer's adapter converts it
        (str, SimpleNamespace(parser=None, click_type=object()), "x"),  # a choice
        (bool, PLAIN, True),
        (list[int], PLAIN, ["1"]),
    ],
    ids=["int", "click type", "bool", "list of int"],
)
def test_anything_else_is_typer_s_to_coerce(annotation, info, value) -> None:
    assert _light(annotation, info, value) is _UNHANDLED
