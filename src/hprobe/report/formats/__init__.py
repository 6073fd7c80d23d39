"""Output formats. Each renders the same reports; the CLI picks one."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib import import_module

from hprobe.report.formats.base import Formatter

# The formats `--format` offers, by name, and the class that writes each:
# adding a format is its module and one line here.
_WRITERS = {
    "text": "hprobe.report.formats.text:TextFormatter",
    "json": "hprobe.report.formats.json_format:JsonFormatter",
    "markdown": "hprobe.report.formats.markdown:MarkdownFormatter",
}


class _Formats(Mapping[str, type[Formatter]]):
    """Name -> formatter class, each module imported when its format is used:
    a warm check prints text and need not load the others."""

    def __getitem__(self, name: str) -> type[Formatter]:
        module, _, cls = _WRITERS[name].partition(":")
        found: type[Formatter] = getattr(import_module(module), cls)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(_WRITERS)

    def __len__(self) -> int:
        return len(_WRITERS)


FORMATS: Mapping[str, type[Formatter]] = _Formats()

__all__ = ["FORMATS", "Formatter"]
