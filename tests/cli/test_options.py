"""cli/options: the options commands share. The axis list the help shows is
the probes' own (written out so that `--help` loads no probe); an empty path
is an input error, never the current directory; every command's help ends
with its examples and exit codes."""

from __future__ import annotations

import pytest
import typer

from hprobe.cli.options import GATE_EXITS, examples, path_value


def test_the_axis_help_names_every_axis_the_probes_declare(cli):
    from hprobe.cli.options import AXIS_NAMES
    from hprobe.kernels import PROBES

    assert set(AXIS_NAMES) == {a.name for p in PROBES.values() for a in p.axes}
    code, out, _ = cli("matrix", "--help")
    # rich may wrap the list at a hyphen inside a name: compared without the wrapping.
    assert code == 0 and all(
        f"--{name.replace('_', '-')}," in "".join(out.split()) or f"--{name.replace('_', '-')}(" in "".join(out.split())
        for name in AXIS_NAMES
    )


@pytest.mark.pure
def test_an_empty_path_is_refused_not_read_as_here() -> None:
    assert str(path_value("t.toml")) == "t.toml"
    for text in ("", "  "):
        with pytest.raises(typer.BadParameter, match="empty path"):
            path_value(text)


@pytest.mark.pure
def test_a_help_ends_with_its_examples_and_every_exit_code() -> None:
    said = examples("hprobe check", "hprobe check --repo ~/vllm", exits=GATE_EXITS)
    assert said.startswith("Examples:\n\n\b\n  hprobe check\n  hprobe check --repo ~/vllm\n\nExit codes:")
    assert said.splitlines()[-3:] == [
        "  4 torch or flashinfer unusable here",
        "  5 internal error (HPROBE_DEBUG=1 shows the traceback)",
        "  130 Ctrl-C, 143 SIGTERM",
    ]
    assert examples("hprobe table extract", exits=None).endswith("Each command's --help lists its exit codes.")
