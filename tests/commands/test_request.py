"""commands/request: what a command is asked, parsed once; every refusal is one
InputError before any probing, naming the option and what it expects."""

from __future__ import annotations

from pathlib import Path

import pytest

from hprobe.commands.request import (
    RuleRequest,
    kernel_ids,
    parse_axes,
    parse_int_list,
    parse_pivot,
    parse_settings,
    release_number,
)
from hprobe.model.errors import InputError
from hprobe.model.padding import MAX_HEADS

pytestmark = pytest.mark.pure


def _parse(**given):
    options = dict(
        tables=None,
        repo=None,
        mapping=None,
        exclude=None,
        settings=None,
        pad_fn=None,
        kernel=None,
        sm=None,
        heads=None,
        tp=None,
        pin=None,
        flashinfer=None,
        extra_args=[],
    )
    options.update(given)
    return RuleRequest.parse("check", **options)


def test_a_request_keeps_what_was_asked_in_order():
    request = _parse(
        repo=Path("engine"),
        exclude=["tests/*"],
        settings=["tp=4", "backend=trtllm", "tp=8"],
        tp="16,8",
        extra_args=["--topk", "128,512", "--page-size=64"],
        sm="100",
    )
    assert request.repo == Path("engine") and request.exclude == ("tests/*",)
    # A name set twice keeps its last value, in the order first given.
    assert request.settings == (("tp", "8"), ("backend", "trtllm"))
    assert request.tp == (16, 8)
    assert request.axis_values == {"topk": ["128", "512"], "page_size": ["64"]}
    assert request.models is None and request.heads is None


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (dict(tables=[Path("a.toml")], repo=Path("r")), "--table, --repo and --pad-fn each choose the padding rules"),
        (dict(repo=Path("r"), pad_fn="m:f"), "--table, --repo and --pad-fn each choose the padding rules"),
        (dict(heads=0), "--heads 0: the number of query heads must be positive"),
        (dict(heads=MAX_HEADS + 1), f"--heads {MAX_HEADS + 1}: above {MAX_HEADS}"),
        (dict(flashinfer="0.6.14", pin="==0.6.14"), "--flashinfer and --pin both choose releases"),
        (dict(exclude=["x"]), "--exclude goes with --repo"),
        (dict(settings=["tp=4"]), "--set goes with --repo"),
        (dict(repo=Path("r"), settings=["tp"]), "--set 'tp': expected NAME=VALUE"),
        (dict(model=" , "), "--model: name one or more models"),
        (dict(model="DeepSeek-V3", heads=8), "--model and --heads both choose the models judged"),
        (dict(model="DeepSeek-V3", pad_fn="m:f"), "--model goes with --table or --repo"),
        (dict(kernel="trtllm-mla"), "--kernel on check goes with --pad-fn"),
        (dict(tp="4,x"), "--tp '4,x': expected a comma list of positive integers"),
    ],
)
def test_each_refusal_is_one_input_error_naming_the_option(given, said):
    with pytest.raises(InputError) as refused:
        _parse(**given)
    assert said in str(refused.value)
    assert "\n" not in str(refused.value)


def test_an_unknown_model_is_refused_before_any_work():
    with pytest.raises(InputError):
        _parse(model="No-Such-Model-Anywhere")
    assert _parse(model="DeepSeek-V3, DeepSeek-R1").models == ("DeepSeek-V3", "DeepSeek-R1")


@pytest.mark.parametrize("item", ["=4", "1tp=4", "tp", "a b=1"])
def test_a_setting_is_an_identifier_and_a_value(item):
    with pytest.raises(InputError, match="expected NAME=VALUE"):
        parse_settings([item])


def test_a_settings_value_is_kept_as_written():
    assert parse_settings([" tp =a=b", "empty="]) == {"tp": "a=b", "empty": ""}
    assert parse_settings(None) == {}


@pytest.mark.parametrize("text", ["", "0", "-4", "4,,0", str(MAX_HEADS + 1), "eight"])
def test_an_int_list_is_positive_and_bounded(text):
    with pytest.raises(InputError, match="--heads-list"):
        parse_int_list(text, "--heads-list")


def test_an_int_list_keeps_order_and_skips_empty_parts():
    assert parse_int_list("16, 8,,4", "--tp") == [16, 8, 4]


def test_a_release_number_or_one_line_why_not():
    assert str(release_number("0.7.2.post1", "--since")) == "0.7.2.post1"
    with pytest.raises(InputError, match="--since 'latest': not a release number"):
        release_number("latest", "--since")


def test_a_pivot_is_two_named_dimensions():
    assert parse_pivot(None) is None
    assert parse_pivot("heads, page-size") == ("heads", "page_size")
    for text in ("heads", "heads,", "a,b,c"):
        with pytest.raises(InputError, match="expected ROWS,COLS"):
            parse_pivot(text)


def test_axis_options_are_the_probes_own_axes():
    assert parse_axes(["--topk=128", "--topk", "512, 2048"]) == {"topk": ["128", "512", "2048"]}
    with pytest.raises(InputError, match="no such option: --no-such-axis"):
        parse_axes(["--no-such-axis", "1"])
    with pytest.raises(InputError, match="--topk needs a value"):
        parse_axes(["--topk", "--page-size", "64"])
    with pytest.raises(InputError, match="unexpected argument 'stray'"):
        parse_axes(["stray"])


def test_kernel_ids_split_on_commas_outside_a_variant():
    assert kernel_ids(["trtllm-mla[backend=cute-dsl,x=1],batch-mla", " dsv4-sparse-mla "]) == [
        "trtllm-mla[backend=cute-dsl,x=1]",
        "batch-mla",
        "dsv4-sparse-mla",
    ]
    everything = kernel_ids(None)
    assert everything == sorted(everything) and "dsv4-sparse-mla" in everything
