"""Output formats: each a module with `render(report, options) -> str`, named
in one table. The table drives `--format` (its choices and help) and the
outputs written by options of their own (`--junit`, GitHub annotations, the
report page's files): the command line asks this table for what to write and
names no format itself. A format only renders: every report it is handed is
finished (commands conclude it), and it decides nothing.

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
    site_file: str | None = None  # its file among those `hprobe report -o DIR` writes
    # A tool reads it from stdout: no progress line beside it.
    for_tools: bool = False
    # Rows that need no action folded into a count unless --details asks for them.
    summarised: bool = False
    # A function of its module that says whether the environment asks for it
    # (GitHub's runner for annotations): printed on stderr whenever it does.
    wanted_when: str | None = None
    # Read whole as one document (JSON, SARIF, Markdown): nothing else may
    # follow it on stdout (text for people keeps a JUnit written after it).
    whole_document: bool = True

    def renders(self, command: str) -> bool:
        return self.commands is None or command in self.commands

    def renderer(self) -> Callable[[object, RenderOptions], str]:
        render: Callable[[object, RenderOptions], str] = import_module(self.module).render
        return render

    def wanted(self) -> bool:
        """Whether the environment asks for this format's lines on stderr."""
        if self.wanted_when is None:
            return False
        asks: Callable[[], bool] = getattr(import_module(self.module), self.wanted_when)
        return asks()


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("text", "for people", "hprobe.report.formats.text", summarised=True, whole_document=False),
        Format(
            "json",
            "versioned documents for tools",
            "hprobe.report.formats.json_format",
            site_file="matrix.json",
            for_tools=True,
        ),
        Format(
            "markdown",
            "$GITHUB_STEP_SUMMARY and PR comments",
            "hprobe.report.formats.markdown",
            site_file="matrix.md",
        ),
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
            wanted_when="in_github_actions",
        ),
        Format(
            "page",
            "the report's self-contained HTML page",
            "hprobe.report.formats.html_site",
            option="hprobe report -o",
            commands=("report", "matrix"),
            site_file="index.html",
        ),
    )
}

# The formats `--format` offers, the one it defaults to and the one `--json` names.
CHOICES: tuple[str, ...] = tuple(name for name, f in FORMATS.items() if f.option is None)
DEFAULT = "text"
JSON = "json"
# The files of `hprobe report -o DIR`, the page first.
SITE_FILES: tuple[str, ...] = tuple(
    sorted((f.site_file for f in FORMATS.values() if f.site_file), key=lambda name: not name.endswith(".html"))
)


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


def chosen(option: str, json_flag: bool, command: str) -> Format:
    """The format `--format option` (or `--json`) names for `command`;
    InputError, before any work, when the command has no rendering in it."""
    from hprobe.model.errors import InputError

    name = JSON if json_flag else option.strip().lower()
    offered = [choice for choice in CHOICES if FORMATS[choice].renders(command)]
    if name not in offered:
        raise InputError(f"--format {option!r}: `hprobe {command}` writes {', '.join(offered)}")
    return FORMATS[name]


def written_by(option: str) -> Format:
    """The format an option of its own writes (`--junit`)."""
    return next(f for f in FORMATS.values() if f.option == option)


def site_documents(report: object) -> dict[str, str]:
    """Every file of `hprobe report -o DIR`, by name."""
    return {f.site_file: render(f.name, report) for f in FORMATS.values() if f.site_file}


def wanted_lines(command: str, report: object) -> list[str]:
    """The lines the environment asks for on stderr (GitHub's annotations on
    its runner), from every format that renders `command`'s report."""
    return [
        line
        for f in FORMATS.values()
        if f.renders(command) and f.wanted()
        for line in render(f.name, report).splitlines()
    ]


__all__ = [
    "CHOICES",
    "DEFAULT",
    "FORMATS",
    "JSON",
    "SITE_FILES",
    "Format",
    "Formatter",
    "NotRendered",
    "RenderOptions",
    "chosen",
    "format_help",
    "render",
    "site_documents",
    "wanted_lines",
    "written_by",
]
