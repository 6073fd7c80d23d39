"""report/formats/text: the text report's writer is chosen as rich decides
what a terminal is: a pipe gets the plain writer, a terminal (or a forced
colour, or a width given) gets rich."""

from __future__ import annotations

import io

import pytest

pytestmark = pytest.mark.pure


def test_a_pipe_gets_the_plain_writer_and_a_terminal_rich(monkeypatch):
    """As rich decides what a terminal is (TTY_COMPATIBLE, FORCE_COLOR, isatty);
    a COLUMNS width goes to rich, which wraps to it."""
    from hprobe.report.formats.text import PlainWriter, make_writer

    class Tty(io.StringIO):
        def isatty(self):
            return True

    for name in ("COLUMNS", "TTY_COMPATIBLE", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    assert isinstance(make_writer(io.StringIO()), PlainWriter)
    assert not isinstance(make_writer(Tty()), PlainWriter)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert not isinstance(make_writer(io.StringIO()), PlainWriter)
    monkeypatch.setenv("TTY_COMPATIBLE", "0")
    assert isinstance(make_writer(Tty()), PlainWriter)
    monkeypatch.delenv("TTY_COMPATIBLE")
    monkeypatch.delenv("FORCE_COLOR")
    monkeypatch.setenv("COLUMNS", "100")
    assert not isinstance(make_writer(io.StringIO()), PlainWriter)
