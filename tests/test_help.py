"""Help people can learn from: every command shows examples and real
placeholders, `--format` is offered wherever a command reports, and a
mistyped option gets the closest real one."""

from __future__ import annotations

import re

import pytest
import typer

from hprobe.cli.app import app

# Pure: runs without torch, flashinfer or a subprocess (the fast tier, `-m "pure and not slow"`).
pytestmark = pytest.mark.pure


def _commands() -> list[tuple[str, ...]]:
    root = typer.main.get_command(app)
    found = []
    for name, command in root.commands.items():  # type: ignore[attr-defined]
        subs = getattr(command, "commands", None)
        if subs:
            found += [(name, sub) for sub in subs]
        found.append((name,))
    return found


COMMANDS = _commands()


def test_every_command_is_found():
    names = {c[0] for c in COMMANDS}
    assert {
        "check",
        "suggest",
        "matrix",
        "diff",
        "bisect",
        "report",
        "kernels",
        "env",
        "models",
        "cache",
        "table",
    } <= names


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != ("table",)], ids=" ".join)
def test_help_shows_examples_and_real_placeholders(cli, command):
    code, out, _ = cli(*command, "--help")
    assert code == 0
    assert "Examples:" in out and "  hprobe " in out.split("Examples:", 1)[1]
    assert not re.search(r"<(list\[|str>|int>|Path>|float>)", out), out
    assert "{old}" not in out and "{new}" not in out
    # Every command says what its exit codes mean; the gates say what fails them.
    codes = out.split("Exit codes:", 1)[1] if "Exit codes:" in out else ""
    assert codes and "2 bad input" in codes and "5 internal error" in codes, out
    if command[0] in ("check", "suggest"):
        assert "1 something would crash" in codes and "3 undecided" in codes


REPORTING = [
    ("check",),
    ("suggest",),
    ("matrix",),
    ("diff",),
    ("bisect",),
    ("kernels",),
    ("env",),
    ("models",),
    ("cache",),
    ("cache", "prune"),
    ("cache", "clear"),
]


@pytest.mark.parametrize("command", REPORTING, ids=" ".join)
def test_every_reporting_command_takes_format(cli, command):
    from hprobe.report.formats import CHOICES, FORMATS

    code, out, _ = cli(*command, "--help")
    said = " ".join(out.split())
    assert "--format FORMAT" in out
    # From the registry: every choice the command can write, with what it is for, and no other.
    for name in CHOICES:
        assert (f"{name} ({FORMATS[name].summary}" in said) == FORMATS[name].renders(command[0]), (name, said)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["check", "--tabel", "x.toml"], "no such option: --tabel (did you mean --table?)"),
        (["matrix", "--kernal", "x"], "no such option: --kernal (did you mean --kernel?)"),
        (["suggest", "--diif", "x"], "(did you mean --diff?)"),
        (["matrix", "--top-k", "128"], "(did you mean --topk?)"),
        (["matrix", "--frobnicate", "3"], "(`hprobe matrix --help` lists the options)"),
    ],
)
def test_a_mistyped_option_gets_the_closest_real_one(cli, args, said):
    code, out, err = cli(*args)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1
