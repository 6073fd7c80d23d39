"""system/escaping: each format's escape, read back by that format's own
parser (tomllib, json, ElementTree, html.unescape, the Actions runner's
unescaping) over generated hostile strings: what comes back is the string,
or its controls shown — never a control, a command or markup."""

from __future__ import annotations

import html as html_lib
import json
import re
import tomllib
import xml.etree.ElementTree as ET

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hprobe.system import escaping

pytestmark = pytest.mark.pure

# Text as foreign strings come: any code point, with the ones that act weighted in.
HOSTILE = st.lists(
    st.one_of(
        st.characters(),
        st.sampled_from(["\x1b", "\r", "\n", "\u2028", "\u202e", "\ufeff", "::", "##[", "`", "|", "@", "%", "<", "&"]),
    ),
    max_size=30,
).map("".join)
SHOWN = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff\ufffe\uffff\ud800-\udfff]")


def _no_surrogates(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")


@settings(max_examples=300, deadline=None)
@given(HOSTILE)
def test_visible_leaves_nothing_a_terminal_acts_on(text):
    shown = escaping.visible(text)
    assert not SHOWN.search(shown) and "##[" not in shown
    assert "\n" not in shown and "\r" not in shown


def test_a_command_is_seen_on_any_line_and_not_once_shown():
    assert escaping.opens_command("ok\n  ::error::x") and escaping.opens_command("a ##[group]")
    assert not escaping.opens_command("a :: b") and not escaping.opens_command(escaping.visible("a\n::error::x"))


def test_visible_spells_each_control_as_an_escape():
    assert escaping.visible("a\x1b[31mb\nc\u202ed") == "a\\x1b[31mb\\x0ac\\u202ed"
    assert escaping.visible("x ##[group] y") == "x #\\x23[group] y"
    assert escaping.visible("tab\tkept") == "tab\tkept"


@settings(max_examples=300, deadline=None)
@given(HOSTILE)
def test_toml_reads_back_the_characters_a_surrogate_aside(text):
    body = escaping.toml_escapes(text).replace("\\", "\\\\").replace('"', '\\"')
    # toml_escapes' own \uXXXX escapes must stay escapes: undo the doubling of theirs.
    body = re.sub(r"\\\\(u[0-9A-F]{4})", r"\\\1", body)
    read = tomllib.loads(f'v = "{body}"\n')["v"]
    expected = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    assert read == expected


def test_toml_escapes_spell_controls_and_the_runner_command():
    assert escaping.toml_escapes("a\nb##[c") == "a\\u000Ab#\\u0023[c"
    assert tomllib.loads('v = "' + escaping.toml_escapes("a\nb##[c") + '"')["v"] == "a\nb##[c"


@settings(max_examples=200, deadline=None)
@given(HOSTILE)
def test_json_text_reads_back_the_same_document(text):
    document = json.dumps({"message": _no_surrogates(text)})
    written = escaping.json_text(document)
    assert "##[" not in written
    assert json.loads(written) == json.loads(document)


def _runner_unescape_data(text: str) -> str:
    # The Actions runner's command parser (ActionCommand.UnescapeData): %0D, %0A, %25.
    return text.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def _runner_unescape_property(text: str) -> str:
    return _runner_unescape_data(text.replace("%3A", ":").replace("%2C", ","))


@settings(max_examples=200, deadline=None)
@given(HOSTILE)
@example("50%25 done%0A::error::x, at a:b")
def test_a_workflow_commands_message_and_properties_read_back_as_shown(text):
    assert _runner_unescape_data(escaping.gha_data(text)) == escaping.visible(text)
    prop = escaping.gha_property(text)
    assert ":" not in prop and "," not in prop
    assert _runner_unescape_property(prop) == escaping.visible(text)


@settings(max_examples=200, deadline=None)
@given(HOSTILE)
def test_xml_parses_and_shows_what_xml_can_hold(text):
    element = ET.Element("r", {"message": escaping.xml(text)})
    element.text = escaping.xml(text)
    parsed = ET.fromstring(ET.tostring(element, encoding="unicode"))
    # XML's own end-of-line handling (2.11) reads a return as a newline.
    expected = escaping.xml(text).replace("\r\n", "\n").replace("\r", "\n")
    assert (parsed.text or "") == expected
    assert "##[" not in ET.tostring(element, encoding="unicode")


@settings(max_examples=200, deadline=None)
@given(HOSTILE)
def test_html_is_text_and_reads_back_as_visible_text(text):
    written = escaping.html(text)
    assert "<" not in written and ">" not in written and '"' not in written
    assert html_lib.unescape(written) == escaping.visible(escaping.LINE_BREAK.sub(" ", text))


def test_a_markdown_code_span_holds_any_backticks_and_pipes():
    assert escaping.md_code("a`b") == "``a`b``"
    assert escaping.md_code("`x`") == "`` `x` ``"
    assert escaping.md_code("a|b") == "`a\\|b`"
    assert escaping.md_code(" ") == "`   `"


def test_markdown_text_opens_no_markup_and_pings_no_one():
    written = escaping.md_text("**bold** [link](x) <b> @team | `c` ~~s~~")
    assert written == ("\\*\\*bold\\*\\* \\[link\\](x) &lt;b&gt; &#64;team \\| \\`c\\` \\~\\~s\\~\\~")


def test_a_page_shows_a_line_break_as_a_space_and_other_controls_escaped():
    """An SM120 caveat whose message spans lines showed a literal `\\x0a` on the page."""
    from hprobe.system.escaping import html

    assert html("dispatches by\n(h_q, top-k)\r\nin compiled code") == "dispatches by (h_q, top-k) in compiled code"
    assert html("\x1b[31mred<b>") == "\\x1b[31mred&lt;b&gt;"
