"""Output formats: each a module with `render(report, options) -> str`, named
in one table. The table drives `--format` (its choices and help) and the
outputs written by options of their own (`--junit`, GitHub annotations, the
report page). A format only renders: every report it is handed is finished
(commands conclude it), and it decides nothing.

Adding a format is its module, one line in FORMATS and its test
(docs/architecture.md walks through `sarif`)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING

from hprobe.report.formats.base import Formatter, NotRendered, RenderOptions

if TYPE_CHECKING:
    from collections.abc import Callable


@dataclass(frozen=True)
class Format:
    name: str
    summary: str  # what it is for, in a few words: --format's help and the docs
    module: str  # where its `render` lives: imported only when the format is used
    option: str | None = None  # None: a --format choice; else the option that writes it
    commands: tuple[str, ...] | None = None  # the commands whose reports it renders (None: every one)

    def renders(self, command: str) -> bool:
        return self.commands is None or command in self.commands

    def renderer(self) -> Callable[[object, RenderOptions], str]:
        render: Callable[[object, RenderOptions], str] = import_module(self.module).render
        return render


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("text", "for people", "hprobe.report.formats.text"),
        Format("json", "versioned documents for tools", "hprobe.report.formats.json_format"),
        Format("markdown", "$GITHUB_STEP_SUMMARY and PR comments", "hprobe.report.formats.markdown"),
        Format("sarif", "SARIF 2.1.0 for code scanning", "hprobe.report.formats.sarif", commands=("check", "suggest")),
        Format(
            "junit",
            "JUnit XML, a test case per backend × SM × count",
            "hprobe.report.formats.junit",
            option="--junit",
            commands=("check", "suggest"),
        ),
        Format(
            "github",
            "GitHub Actions annotations at the rule's line",
            "hprobe.report.formats.github",
            option="GITHUB_ACTIONS=true",
            commands=("check",),
        ),
        Format(
            "page",
            "the report's self-contained HTML page",
            "hprobe.report.formats.html_site",
            option="hprobe report -o",
            commands=("report", "matrix"),
        ),
    )
}

# The formats `--format` offers.
CHOICES: tuple[str, ...] = tuple(name for name, f in FORMATS.items() if f.option is None)


def format_help(command: str | None = None) -> str:
    """--format's help: the choices a command offers, each with what it is for."""
    return (
        " | ".join(
            f"{f.name} ({f.summary})"
            for f in FORMATS.values()
            if f.option is None and (command is None or f.renders(command))
        )
        + "."
    )


def render(name: str, report: object, options: RenderOptions | None = None) -> str:
    """`report` as format `name` renders it."""
    return FORMATS[name].renderer()(report, options or RenderOptions())


__all__ = ["CHOICES", "FORMATS", "Format", "Formatter", "NotRendered", "RenderOptions", "format_help", "render"]
