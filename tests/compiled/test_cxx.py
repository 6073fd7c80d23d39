"""compiled/cxx: C++ read as text — definitions found by name, comments blanked,
digests that see code and not layout, and where a port's functions or a check
stand in a release. On fixtures shaped like trtllm-gen's C++, and a release
laid out as `flashinfer/data` in a temporary directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from hprobe.compiled.cxx import SourceFile, differences, located, matching_era

pytestmark = pytest.mark.pure

FIXTURES = Path(__file__).parent.parent / "fixtures" / "compiled"


def test_definitions_are_told_from_calls_and_declarations():
    source = SourceFile(FIXTURES / "snippet.cuh")
    helper = source.definitions("helper")
    assert len(helper) == 1 and "return x + 1" in helper[0].text  # the declaration and the calls are not definitions
    assert helper[0].line == 9
    compute = source.definitions("compute")
    assert len(compute) == 2  # the member and the overload; the recursive call is neither
    assert "total += compute(n - 1)" in compute[0].text and "static_cast<int>(x)" in compute[1].text
    widget = source.definitions("Widget")
    assert len(widget) == 1 and "mB{b}" in widget[0].text  # an initializer list with a brace initializer
    assert source.definitions("nothing") == [] and source.digest("nothing") is None


def test_a_digest_ignores_layout_and_comments_and_sees_code(tmp_path):
    original = (FIXTURES / "snippet.cuh").read_text()
    relaid = original.replace("  return x + 1;", "  // reworded\n      return   x + 1;")
    changed = original.replace("  return x + 1;", "  return x + 2;")
    digest = SourceFile(FIXTURES / "snippet.cuh").digest("helper")
    assert SourceFile(tmp_path / "a.cuh", relaid).digest("helper") == digest
    assert SourceFile(tmp_path / "b.cuh", changed).digest("helper") != digest


def test_a_brace_in_a_string_or_a_comment_does_not_end_a_body():
    """compute's body holds `"not a { brace"` and helper's a comment with `}`:
    each definition still runs to its own closing brace."""
    source = SourceFile(FIXTURES / "snippet.cuh")
    [helper] = source.definitions("helper")
    assert helper.text.rstrip().endswith("}") and "return x + 1;" in helper.text
    member = source.definitions("compute")[0]
    assert member.text.count("{") - member.text.count('"not a { brace"') == member.text.count("}")


def test_a_macro_is_a_definition_of_its_name(tmp_path):
    text = (
        "#define DISPATCH_GROUP(n, ...) \\\n  switch (n) { case 1: break; }\n\n"
        "int other() { return DISPATCH_GROUP(2); }\n"
    )
    source = SourceFile(tmp_path / "m.cuh", text)
    [macro] = source.definitions("DISPATCH_GROUP")
    assert macro.line == 1 and "switch (n)" in macro.text


def test_line_of_finds_a_needle_at_or_after_a_line(tmp_path):
    source = SourceFile(tmp_path / "l.cu", 'check("a");\nint x;\ncheck("a");\n')
    assert source.line_of('check("a")') == 1
    assert source.line_of('check("a")', after=2) == 3
    assert source.line_of("missing") is None


def _release(root: Path, files: dict[str, str]) -> Path:
    package = root / "flashinfer"
    for relative, text in files.items():
        path = package / "data" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


def test_differences_name_each_function_a_release_defines_otherwise_or_not_at_all(tmp_path):
    snippet = (FIXTURES / "snippet.cuh").read_text()
    package = _release(tmp_path, {"include/k.cuh": snippet})
    ported = SourceFile(FIXTURES / "snippet.cuh")
    fingerprint = {
        "include/k.cuh": {"helper": (ported.digest("helper"),), "Widget": ("0" * 16,), "absent": ("1" * 16,)},
        "csrc/missing.cu": {"launcher": ("2" * 16,)},
    }
    assert differences(package, fingerprint) == ["k.cuh Widget", "k.cuh absent", "missing.cu launcher"]
    # A digest among several a port accepts is a match.
    assert differences(package, {"include/k.cuh": {"Widget": ("x", ported.digest("Widget"))}}) == []


def test_the_first_era_whose_every_digest_matches_is_the_releases_else_the_nearest_says_why(tmp_path):
    package = _release(tmp_path, {"include/k.cuh": (FIXTURES / "snippet.cuh").read_text()})
    ported = SourceFile(FIXTURES / "snippet.cuh")
    helper, widget = ported.digest("helper"), ported.digest("Widget")
    newest = ("newest", {"include/k.cuh": {"helper": ("0" * 16,), "Widget": (widget,)}})
    older = ("older", {"include/k.cuh": {"helper": (helper,), "Widget": (widget,)}})
    oldest = ("oldest", {"include/k.cuh": {"helper": (helper,)}})
    assert matching_era(package, [newest, older, oldest], lambda era: era[1]) == older  # newest first
    unmatched = matching_era(package, [("a", {"include/k.cuh": {"x": ("0",), "y": ("0",)}}), newest], lambda e: e[1])
    assert unmatched == ("no port of its C++ in hprobe (k.cuh helper read differently from the nearest ported release)")


def test_located_cites_the_needle_after_its_definition_and_the_file_alone_without_one(tmp_path):
    text = 'void first() { FAIL("refused"); }\n\nvoid second() {\n  FAIL("refused");\n}\n'
    package = _release(tmp_path, {"csrc/x.cu": text})
    assert located(package, "csrc/x.cu", "second", "refused") == "flashinfer/data/csrc/x.cu:4"
    assert located(package, "csrc/x.cu", "first", "refused") == "flashinfer/data/csrc/x.cu:1"
    # A needle only before the definition is still found (the file's first).
    assert located(package, "csrc/x.cu", "second", "void first") == "flashinfer/data/csrc/x.cu:1"
    assert located(package, "csrc/absent.cu", "second", "refused") == "flashinfer/data/csrc/absent.cu"
