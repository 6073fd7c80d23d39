"""Output formats. Each renders the same reports; the CLI picks one."""

from __future__ import annotations

from .base import Formatter
from .json_format import JsonFormatter
from .markdown import MarkdownFormatter
from .text import TextFormatter

__all__ = ["Formatter", "JsonFormatter", "MarkdownFormatter", "TextFormatter"]
