"""One escaping rule per output format, for every string hprobe did not write
itself: model, table and backend names, file names from a --repo tree, setting
values, mapping texts, validator messages, paths in error lines.

Each function takes such a string and returns text that the named format shows
as that string, and nothing else: no markup, no control sequence, no workflow
command, no element. Formats call these and nothing else on foreign text, so
a field added later is escaped by calling the one function of its format.
"""

from __future__ import annotations

import html as _html
import re

# Characters a terminal, a log viewer or a parser would act on rather than show:
# C0 and C1 controls and DEL, line and paragraph separators, and the bidi
# controls that reorder what is shown. Tab is shown as a tab.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff\ufffe\uffff\ud800-\udfff]"
)


def _visible_one(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


# The runner's older command form, `##[command]`, is read anywhere in a line.
V1_COMMAND = "##["
# Where a runner (and a terminal) starts a new line.
LINE_BREAK = re.compile(r"(\r\n|\n|\r)")


def opens_command(text: str) -> bool:
    """Whether any line of `text` is one a runner would execute (`::` after
    leading white space, `##[` anywhere)."""
    return any(line.lstrip().startswith("::") or V1_COMMAND in line for line in LINE_BREAK.split(text))


def visible(text: object) -> str:
    """Controls, separators, bidi overrides and lone surrogates as `\\x1b`,
    `\\u2028`: shown, never sent; and `##[` as `#\\x23[`, which no runner reads
    as a command."""
    return _INVISIBLE.sub(_visible_one, str(text)).replace(V1_COMMAND, "#\\x23[")


def toml_escapes(text: str) -> str:
    """For a TOML basic string's body: what `visible` shows, as the `\\uXXXX`
    escapes TOML reads back to the same characters; a lone surrogate, which
    TOML cannot hold, as U+FFFD."""

    def one(match: re.Match[str]) -> str:
        code = ord(match.group())
        return "\ufffd" if 0xD800 <= code <= 0xDFFF else f"\\u{code:04X}"

    return _INVISIBLE.sub(one, text).replace(V1_COMMAND, "#\\u0023[")


def json_text(document: str) -> str:
    """A JSON document (ASCII, as json.dumps writes it) that no runner reads a
    command in: `##[` can only occur inside strings, and is spelt with an escape
    that reads back the same."""
    return document.replace(V1_COMMAND, "#\\u0023[")


def gha_data(value: object) -> str:
    """A workflow command's message, escaped the way the Actions runner
    unescapes it; controls shown, as the log viewer would act on them."""
    return visible(value).replace("%", "%25")  # visible() leaves no \r or \n to write as %0D / %0A


def gha_property(value: object) -> str:
    """A workflow command's property value (file, title)."""
    return gha_data(value).replace(":", "%3A").replace(",", "%2C")


# What XML 1.0 allows (Char production), besides the tab, newline and return
# that attribute normalisation would turn into spaces.
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def xml(value: object) -> str:
    """For XML text and attributes (ElementTree escapes &, <, > and quotes):
    characters XML 1.0 forbids (and C1 controls it discourages) replaced by
    their visible escape, so the file parses and the reader sees they were
    there."""
    return _XML_FORBIDDEN.sub(_visible_one, str(value)).replace(V1_COMMAND, "#\\x23[")


def html(value: object) -> str:
    """For HTML text and attribute values. A line break in a message (a
    release's multi-line error) is a space on a page, as HTML shows it anyway,
    not a literal `\\x0a`; every other control is shown escaped."""
    return _html.escape(visible(LINE_BREAK.sub(" ", str(value))), quote=True)


def md_code(value: object) -> str:
    """A Markdown code span that shows `value` whatever backticks it holds,
    safe inside a table cell (pipes escaped, as GFM splits cells first)."""
    body = visible(value).replace("|", "\\|")
    runs = [len(r) for r in re.findall("`+", body)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body.strip(" ") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


# Inline Markdown that would change what is shown: code, emphasis,
# strikethrough, links, table cells. Text goes after hprobe's own line prefix
# (`- `, `| `), never at a line's start, and newlines are shown as escapes, so
# headings, lists and quotes cannot open.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def md_text(value: object) -> str:
    """Markdown prose or a table cell: shown literally, no emphasis, link,
    heading, list, HTML or mention; pipes escaped for tables."""
    body = _MD_SPECIAL.sub(r"\\\1", visible(value))
    # An `@name` in a release's message would ping that account from a PR body
    # or comment; as an entity it shows the same and pings no one.
    return body.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("@", "&#64;")
