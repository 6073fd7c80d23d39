"""rules/repo/padfn: `--pad-fn` calls the consumer's own function in a bounded
child process and reads back, per count, what it returned or raised; anything
else it does is one input error naming the spec."""

from __future__ import annotations

import pytest

from hprobe.model.errors import InputError
from hprobe.rules.interface import RuleInputs
from hprobe.rules.repo.padfn import PadFnSourceKind, call_pad_fn

RULE = "def pad(n):\n    if n > 128:\n        raise ValueError(f'{n} heads')\n    return 64 if n <= 64 else 128\n"


@pytest.mark.pure
@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("rule.py", "expected MODULE:QUALNAME or FILE.py:QUALNAME"),
        (":pad", "expected MODULE:QUALNAME or FILE.py:QUALNAME"),
        ("rule.py:", "expected MODULE:QUALNAME or FILE.py:QUALNAME"),
        ("no/such/file.py:pad", "no such file no/such/file.py"),
    ],
)
def test_a_spec_that_names_no_function_is_refused_before_any_process(spec, said):
    with pytest.raises(InputError) as refused:
        call_pad_fn(spec, [8])
    assert str(refused.value) == f"--pad-fn {spec!r}: {said}"


@pytest.mark.slow
def test_each_count_gets_what_the_function_returned_or_raised_and_where_it_is(tmp_path):
    rule = tmp_path / "rule.py"
    rule.write_text("# the rule\n" + RULE)
    where, outputs = call_pad_fn(f"{rule}:pad", [8, 96, 256])
    assert (str(where.path), where.line) == (str(rule), 2)
    assert outputs == {8: 64, 96: 128, 256: ("ValueError", "256 heads")}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("def pad(n):\n    return True\n", "returned True for 8, not a count >= 8"),
        ("def pad(n):\n    return n - 1\n", "returned 7 for 8, not a count >= 8"),
        ("def pad(n):\n    return 10**6\n", "returned 1000000 for 8, above 4096"),
        ("def pad(a, b):\n    return a\n", "cannot be called with one head count"),
        ("pad = 3\n", "pad is not callable"),
        ("import os\ndef pad(n):\n    os._exit(0)\n", "the process ended while called for 8 heads"),
    ],
)
def test_a_function_that_does_not_pad_is_one_line_naming_it(tmp_path, body, said):
    rule = tmp_path / "rule.py"
    rule.write_text(body)
    with pytest.raises(InputError) as refused:
        call_pad_fn(f"{rule}:pad", [8])
    assert said in str(refused.value) and f"{rule}:pad" in str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.pure
def test_the_source_takes_the_kernel_sm_and_heads_and_the_tp_degrees_that_divide():
    (source,) = PadFnSourceKind().make(RuleInputs(pad_fn="r.py:pad", kernel="dsv4-sparse-mla", sm="100,103", heads=96))
    assert (source.kernel, source.sms) == ("dsv4-sparse-mla", (100, 103))
    (model,) = source.models
    assert model.num_q_heads == 96 and tuple(model.tp) == (1, 2, 4, 8, 16)
    (odd,) = PadFnSourceKind().make(RuleInputs(pad_fn="r.py:pad", kernel="dsv4-sparse-mla", sm="100", heads=12))
    assert tuple(odd.models[0].tp) == (1, 2, 4)


@pytest.mark.slow
def test_a_count_the_function_refuses_is_a_note_not_a_rule(tmp_path):
    rule = tmp_path / "rule.py"
    rule.write_text(RULE)
    (source,) = PadFnSourceKind().make(
        RuleInputs(pad_fn=f"{rule}:pad", kernel="dsv4-sparse-mla", sm="100", heads=256, tp=(1, 2))
    )
    table = source.collect()
    (backend,) = table.backends
    assert backend.rule.mapping == ((128, 128),)
    assert table.notes == [f"{rule}:pad raises for 256: ValueError: 256 heads"]


def test_pad_fn_calls_the_users_function(cli_json, cli, tmp_path):
    rule = tmp_path / "rule.py"
    rule.write_text(
        "def pad(n):\n    if n > 128:\n        raise ValueError(f'{n} heads')\n    return 64 if n <= 64 else 128\n"
    )
    code, doc, _ = cli_json(
        "check", "--pad-fn", f"{rule}:pad", "--kernel", "dsv4-sparse-mla", "--sm", "100", "--heads", "128"
    )
    assert code == 0
    by_n = {f["n"]: f for f in doc["findings"]}
    assert (by_n[32]["padded"], by_n[32]["verdict"]) == (64, "reducible")
    assert by_n[8]["source"] == f"{rule}:1"
    code, _, err = cli(
        "check", "--pad-fn", f"{rule}:nope", "--kernel", "dsv4-sparse-mla", "--sm", "100", "--heads", "128"
    )
    assert code == 2 and "has no nope" in err
    code, _, err = cli("check", "--pad-fn", f"{rule}:pad", "--sm", "100", "--heads", "128")
    assert code == 2 and "needs --kernel" in err
