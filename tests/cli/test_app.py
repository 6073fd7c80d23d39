"""Bad input: one line on stderr, exit 2, no traceback."""

from __future__ import annotations

import pytest

from ..conftest import V4_PRO_TABLE

# Pure: runs without torch, flashinfer or a subprocess (the fast tier, `-m "pure and not slow"`).
pytestmark = pytest.mark.pure


def _one_line_error(code, out, err, *needles):
    assert code == 2, (code, out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("hprobe: error: ")
    assert "Traceback" not in err + out
    for needle in needles:
        assert needle in lines[0]


def test_malformed_toml_names_file_and_line(cli, write_table):
    path = write_table('[table]\nname = "x"\n[model\nname = 1\n')
    _one_line_error(*cli("check", "--table", str(path), "--sm", "100"), f"{path}:3", "malformed TOML")


def test_unknown_kernel_in_table(cli, write_table):
    path = write_table(V4_PRO_TABLE.format(rule="pad_to = [64, 128]").replace("dsv4-sparse-mla", "no-such-kernel"))
    _one_line_error(*cli("check", "--table", str(path), "--sm", "100"), "no-such-kernel", f"{path}:11")


def test_unknown_kernel_on_matrix(cli):
    _one_line_error(*cli("matrix", "--kernel", "no-such-kernel"), "unknown kernel 'no-such-kernel'")


@pytest.mark.parametrize("command", ["matrix", "check"])
def test_impossible_sm(cli, command):
    _one_line_error(*cli(command, "--sm", "999"), "SM999 is no real GPU architecture")


@pytest.mark.parametrize("bad", ["sm_9x", "abc", "10.0.1", ""])
def test_unparseable_sm(cli, bad):
    code, out, err = cli("matrix", "--sm", bad)
    _one_line_error(code, out, err, "--sm")


def test_zero_heads(cli):
    _one_line_error(*cli("matrix", "--heads", "0"), "positive")
    _one_line_error(*cli("check", "--heads", "0", "--sm", "100"), "positive")


def test_heads_not_dividing_over_tp_in_table(cli, write_table):
    path = write_table(V4_PRO_TABLE.format(rule="pad_to = [64, 128]").replace("tp = [1, 2, 4, 8, 16]", "tp = [1, 3]"))
    _one_line_error(*cli("check", "--table", str(path), "--sm", "100"), f"{path}:9", "tp=3")


def test_heads_not_dividing_over_tp_override(cli, write_table):
    path = write_table(V4_PRO_TABLE.format(rule="pad_to = [64, 128]"))
    _one_line_error(*cli("check", "--table", str(path), "--sm", "100", "--tp", "1,5"), "tp=5")


@pytest.mark.parametrize(
    "rule, needle",
    [
        ("pad_to = [128, 64]", "strictly increasing"),
        ("pad_to = []", "non-empty"),
        ('pad_map = { "16" = 8 }', "pads 16 down to 8"),
        ('pad_map = { "x" = 8 }', "is not a head count"),
        # Past Python's int-string digit limit: refused by length, never an internal error.
        ('pad_map = { "' + "9" * 5000 + '" = 64 }', "(5,000 digits) is above 4096"),
        ("", "exactly one of pad_to, pad_map, pad_multiple, pad_tile"),
        ('pad_to = [64]\npad_map = { "8" = 64 }', "exactly one"),
    ],
)
def test_bad_rules(cli, write_table, rule, needle):
    path = write_table(V4_PRO_TABLE.format(rule=rule))
    _one_line_error(*cli("check", "--table", str(path), "--sm", "100"), needle, str(path))


def test_bad_pin(cli, write_table):
    body = V4_PRO_TABLE.format(rule="pad_to = [64, 128]").replace(
        'source = "tests"', 'source = "tests"\nrequires_flashinfer = "latest"'
    )
    path = write_table(body)
    _one_line_error(*cli("check", "--table", str(path), "--sm", "100"), "PEP 440", f"{path}:5")


def test_missing_table_file(cli, tmp_path):
    _one_line_error(*cli("check", "--table", str(tmp_path / "nope.toml")), "no such table file")


def test_table_sm_that_is_no_gpu(cli, write_table):
    path = write_table(V4_PRO_TABLE.format(rule="pad_to = [64, 128]").replace("sm = [100]", "sm = [105]"))
    _one_line_error(*cli("check", "--table", str(path)), "SM105", f"{path}:")


@pytest.mark.parametrize("pin", ["flashinfer-python===foo", "===0.6.14", ">=0.6.x"])
def test_a_pin_that_names_no_release_is_one_input_error(cli, pin):
    code, out, err = cli("check", "--pin", pin)
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("hprobe: error: pin ")


def test_since_that_names_no_release_is_refused_before_any_work(cli):
    code, _, err = cli("suggest", "--since", "soon")
    assert code == 2 and err == "hprobe: error: --since 'soon': not a release number\n"


def test_every_option_coerces_as_typer_itself_would():
    """hprobe coerces strings and its parsers' values without pydantic
    (cli/coercion.py); for every option of every command, a value given comes
    out as typer's own coercion gives it, refusals included."""
    import typer
    from typer import _coercion
    from typer.core import _TyperParameter
    from typer.main import get_command

    from hprobe.cli.app import app

    def commands(group):
        for command in group.commands.values():
            yield from commands(command) if hasattr(command, "commands") else [command]

    def outcome(runtime, param, value):
        try:
            return ("value", runtime.coerce(value, param=param, ctx=None))
        except (typer.BadParameter, _coercion.UsageError) as exc:
            return ("refused", exc.format_message())

    checked = light = 0
    for command in commands(get_command(app)):
        for param in command.params:
            if not isinstance(param, _TyperParameter) or param.type_descriptor.annotation is bool:
                continue
            samples = [("7", "8"), ("", "x")] if param.multiple else ["7", "", " ", "x.toml", "0x10"]
            light += type(param.get_runtime_param()).__name__ == "_LightParam"
            for value in samples:
                ours = outcome(param.get_runtime_param(), param, value)
                assert ours == outcome(_coercion.build_runtime_param(param.type_descriptor), param, value), (
                    command.name,
                    param.name,
                    value,
                )
                checked += 1
    assert checked > 100 and light > 20  # and the light path is the one in use


BIG = "1" + "0" * 5000  # past Python's 4,300-digit int limit


@pytest.mark.parametrize(
    "args",
    [
        ("check", "--pin", f"=={BIG}"),
        ("check", "--flashinfer", BIG),
        ("diff", BIG, "0.6.14"),
        ("bisect", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "16", "--range", f"0.6.1..{BIG}"),
        ("report", "--releases", f"0.6.1..{BIG}", "-o", "site-never-written"),
    ],
    ids=["--pin", "--flashinfer", "diff", "bisect --range", "report --releases"],
)
def test_a_version_of_thousands_of_digits_is_one_line_and_exit_2(cli, args):
    """Every version an option names is parsed by packaging into ints: one of
    5,000 digits is refused in one line (exit 2), never an internal error (5)."""
    _one_line_error(*cli(*args), "a number in the input has thousands of digits")


def test_a_requirement_of_thousands_of_digits_in_a_tree_is_one_line_and_exit_2(cli, tmp_path):
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "attn.py").write_text(
        "class A:\n    @classmethod\n    def get_padded_num_q_heads(cls, n):\n        return n\n"
    )
    (tmp_path / "requirements.txt").write_text(f"flashinfer-python=={BIG}\n")
    _one_line_error(
        *cli("check", "--repo", str(tmp_path), "--sm", "100"), "a number in the input has thousands of digits"
    )
