"""cli/run.py: how a command's progress reaches the user. A transient message
shows only on a terminal; a Statement (what a long search will ask of the
index and the disk) stays as a line in a CI log too; --json keeps stderr to
errors and run notes."""

from __future__ import annotations

import io

import pytest

from hprobe.cli import run
from hprobe.system.progress import Statement

pytestmark = pytest.mark.pure


def _said(monkeypatch: pytest.MonkeyPatch, json_output: bool, *messages: str) -> str:
    stderr = io.StringIO()  # not a terminal, as in CI
    monkeypatch.setattr(run.sys, "stderr", stderr)
    with run.progress(json_output) as update:
        for message in messages:
            update(message)
    return stderr.getvalue()


def test_a_statement_stays_in_a_log_and_a_passing_message_does_not(monkeypatch):
    said = _said(monkeypatch, False, "reading flashinfer 0.6.13", Statement("pin search over 0.6.0..0.7.4"))
    assert said == "hprobe: pin search over 0.6.0..0.7.4\n"


def test_json_output_keeps_statements_off_stderr(monkeypatch):
    assert _said(monkeypatch, True, Statement("pin search over 0.6.0..0.7.4")) == ""


def test_a_statement_is_escaped_as_every_line_from_outside(monkeypatch):
    said = _said(monkeypatch, False, Statement("pin search over 0.6.0\x1b[2J..0.7.4\nnext"))
    assert "\x1b" not in said and said.count("\n") == 1


class _Unexpected(BaseException):
    """Not an Exception: what `except Exception` in a command body lets through."""


@pytest.mark.parametrize(
    ("raised", "code", "words"),
    [
        (ValueError("a bug"), run.EXIT_INTERNAL, "internal error: ValueError: a bug (a bug of hprobe's"),
        (_Unexpected("escaped"), run.EXIT_INTERNAL, "internal error: _Unexpected: escaped"),
        (None, 3, "error: /t/x.cuh could not be written from /w.whl: FileNotFoundError"),
    ],
)
def test_whatever_a_command_raises_is_one_line_and_never_exit_1(monkeypatch, raised, code, words):
    """A failure no clause names is exit 5 with one line saying where to report
    it (never a traceback, never the exit code a gate reads as "broken"); a
    slim tree's file that cannot be written is this machine's, undecided (3)."""
    import typer

    from hprobe.support.slim import TreeUnreadable

    if raised is None:
        raised = TreeUnreadable("hprobe: /t/x.cuh could not be written from /w.whl: FileNotFoundError")
    stderr = io.StringIO()
    monkeypatch.setattr(run.sys, "stderr", stderr)
    monkeypatch.delenv("HPROBE_DEBUG", raising=False)

    def job() -> int:
        raise raised

    with pytest.raises(typer.Exit) as ended:
        run.run_job(job)
    assert ended.value.exit_code == code
    said = stderr.getvalue()
    assert said.count("\n") == 1 and words in said and "Traceback" not in said, said
