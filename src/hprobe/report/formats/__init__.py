"""Output formats. Each renders the same reports; the CLI picks one."""

from __future__ import annotations

from hprobe.report.formats.base import Formatter
from hprobe.report.formats.json_format import JsonFormatter
from hprobe.report.formats.markdown import MarkdownFormatter
from hprobe.report.formats.text import TextFormatter

# The formats `--format` offers, by name: adding a format is its module and one line here.
FORMATS: dict[str, type[Formatter]] = {
    "text": TextFormatter,
    "json": JsonFormatter,
    "markdown": MarkdownFormatter,
}

__all__ = ["FORMATS", "Formatter", "JsonFormatter", "MarkdownFormatter", "TextFormatter"]
