"""system/streams: no line hprobe did not mean as a workflow command can be
one, however it is written (in one piece or many, after white space or a
line break of any kind); hprobe's own annotations pass, each on its own line."""

from __future__ import annotations

import io

import pytest

from hprobe.system.streams import CommandGuard, write_command

pytestmark = pytest.mark.pure


def _guarded(*pieces: str) -> str:
    raw = io.StringIO()
    guard = CommandGuard(raw)
    for piece in pieces:
        assert guard.write(piece) == len(piece)
    return raw.getvalue()


@pytest.mark.parametrize(
    ("pieces", "shown"),
    [
        (["::error::x\n"], "\\::error::x\n"),
        (["   ::warning::x\n"], "   \\::warning::x\n"),
        # Split over writes: the line's opening is judged on all that was written of it.
        ([":", ":add-mask::secret\n"], ":\\:add-mask::secret\n"),
        (["  ", ":", ":stop-commands::t\n"], "  :\\:stop-commands::t\n"),
        # The old form anywhere in a line.
        (["ok ##[error]x\n"], "ok #\\#[error]x\n"),
        # After a carriage return, a new line begins (the runner splits there too).
        (["text\r::error::x"], "text\r\\::error::x"),
        # Not at a line's opening: left as written.
        (["a ::error::x\n"], "a ::error::x\n"),
        (["a:", ":b\n"], "a::b\n"),
    ],
    ids=["plain", "indented", "split", "split after spaces", "v1", "carriage return", "mid-line", "mid-line split"],
)
def test_a_line_that_would_be_a_command_is_not_one(pieces, shown) -> None:
    assert _guarded(*pieces) == shown


def test_hprobe_s_own_annotation_passes_on_a_line_of_its_own() -> None:
    raw = io.StringIO()
    guard = CommandGuard(raw)
    guard.write("partial")
    write_command(guard, "::error file=a.py,line=3::broken")
    guard.write("::not ours\n")
    assert raw.getvalue() == "partial\n::error file=a.py,line=3::broken\n\\::not ours\n"
    plain = io.StringIO()
    write_command(plain, "::notice::x")
    assert plain.getvalue() == "::notice::x\n"
