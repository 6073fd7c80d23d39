"""Output formats. Each renders the same reports; the CLI picks one."""

from __future__ import annotations

from .base import Formatter
from .json_format import JsonFormatter
from .markdown import MarkdownFormatter
from .text import TextFormatter

# The formats `--format` offers, by name: adding a format is its module and one line here.
FORMATS: dict[str, type[Formatter]] = {
    "text": TextFormatter,
    "json": JsonFormatter,
    "markdown": MarkdownFormatter,
}

__all__ = ["FORMATS", "Formatter", "JsonFormatter", "MarkdownFormatter", "TextFormatter"]
