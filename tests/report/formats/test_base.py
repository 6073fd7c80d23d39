"""report/formats/base: what every format shares. A finding's source split
as CI tools need it (a path and a line, the words after them kept for the
message, never part of the file's name); a report a format has no rendering
of is one input error; text rendered for a stream is styled as that stream
would be."""

from __future__ import annotations

import io

import pytest

from hprobe.report.drift import DiffReport
from hprobe.report.formats.base import (
    Formatter,
    NotRendered,
    RenderOptions,
    SourceLocation,
    render_with,
    source_location,
)
from hprobe.report.formats.json_format import JsonFormatter

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("source", "location"),
    [
        ("vllm/attention/mla.py:495", SourceLocation("vllm/attention/mla.py", 495)),
        ("vllm/attention/mla.py:495:12", SourceLocation("vllm/attention/mla.py", 495, 12)),
        (
            "vllm/attention/mla.py:495 [SM100/SM103, unpadded]",
            SourceLocation("vllm/attention/mla.py", 495, None, "[SM100/SM103, unpadded]"),
        ),
        ("vllm/x.py [SM100, decode]", SourceLocation("vllm/x.py", None, None, "[SM100, decode]")),
        ("tables/dsv4.toml", SourceLocation("tables/dsv4.toml")),
        ("C:/tables/t.toml:7", SourceLocation("C:/tables/t.toml", 7)),  # a drive's colon is the path's
    ],
)
def test_a_source_splits_into_a_path_a_line_and_the_words_after(source, location) -> None:
    assert source_location(source) == location


def test_a_report_the_format_has_no_rendering_of_is_one_input_error() -> None:
    class Unknown:
        pass

    with pytest.raises(NotRendered, match="no rendering of Unknown"):
        render_with(JsonFormatter, Unknown(), RenderOptions())


def test_text_is_rendered_for_the_stream_it_will_be_written_to() -> None:
    seen: list[bool] = []

    class Probe(JsonFormatter):
        def diff(self, result: DiffReport) -> None:
            seen.append(self.stream.isatty())
            super().diff(result)

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    report = DiffReport({}, {}, ())
    render_with(Probe, report, RenderOptions(like=Tty()))
    render_with(Probe, report, RenderOptions(like=io.StringIO()))
    assert seen == [True, False]
    assert issubclass(Probe, Formatter)
