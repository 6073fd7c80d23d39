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


def test_a_caveat_is_said_once_after_every_cell_it_qualifies():
    """Three variants on two releases qualified alike: one line naming them
    and the releases once; a caveat of one cell keeps its own line."""
    from hprobe.model.outcome import Depth, HeadResult, KernelSMResult, Outcome
    from hprobe.model.release import FlashinferInfo, ProbedRelease
    from hprobe.model.sm import SM
    from hprobe.model.targets import Targets
    from hprobe.report.formats import render
    from hprobe.report.model import MatrixReport

    limits = "the kernel's compile-time limits are not read"
    keys = ("gqa-decode[head_dim=64]", "gqa-decode", "gqa-decode[head_dim=256]")

    def release(version: str, extra: str | None = None) -> ProbedRelease:
        results = {}
        for key in keys:
            unchecked = [limits, *([extra] if extra and key == "gqa-decode" else [])]
            heads = {h: HeadResult(h, Outcome.ACCEPTED, entry="mod.fn") for h in (1, 2)}
            results[key, 100] = KernelSMResult(key, 100, version, Depth.DISPATCH, heads, unchecked=unchecked)
        return ProbedRelease(version, FlashinferInfo(version, "x"), results)

    report = MatrixReport(
        [release("0.6.14"), release("0.7.4", "only here")], Targets([SM.from_number(100)], "flag"), [1, 2], list(keys)
    )
    caveats = render("text", report).split("caveats on accepted cells\n", 1)[1]
    said = " ".join(caveats.split())  # as one line, wherever the writer wraps it
    assert (
        "gqa-decode[head_dim=64] SM100, gqa-decode SM100, gqa-decode[head_dim=256] SM100 on 0.6.14, 0.7.4: "
        f"validators and dispatch: {limits}" in said
    )
    assert "gqa-decode SM100 on 0.7.4: validators and dispatch: only here" in said
    assert said.count(limits) == 1


def test_the_list_view_names_the_accepted_counts_left_pending_and_why():
    """Accepted by every check read but pending (never `ok`): said under the
    accepted set with the first count's reason, not shown as plain accepted."""
    from hprobe.model.outcome import Depth, HeadResult, KernelSMResult, Outcome
    from hprobe.model.release import FlashinferInfo, ProbedRelease
    from hprobe.model.sm import SM
    from hprobe.model.targets import Targets
    from hprobe.report.formats import render
    from hprobe.report.model import MatrixReport

    heads = {h: HeadResult(h, Outcome.ACCEPTED, entry="mod.run") for h in (2, 4)}
    for h in (3, 5):
        heads[h] = HeadResult(h, Outcome.ACCEPTED, entry="mod.run", pending=f"{h} query heads over 2 KV heads")
    result = KernelSMResult("gqa-decode[kv_heads=2]", 100, "0.6.14", Depth.DISPATCH, heads)
    release = ProbedRelease("0.6.14", FlashinferInfo("0.6.14", "x"), {(result.key, 100): result})
    text = render("text", MatrixReport([release], Targets([SM.from_number(100)], "flag"), [2, 3, 4, 5]))
    assert "accepted {2-5}" in text
    assert "pending {3, 5}: 3 query heads over 2 KV heads" in text
