"""`suggest --diff` edits exactly the span it read, and never a padding rule
without the requirement that makes it safe. Each case is a tree made here, a
patch built from it, applied with `git apply`, and the applied file compared
byte for byte with the original plus the one expected change."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.version import Version

from hprobe.model.padding import PadTo
from hprobe.rules.repo.extract import extract
from hprobe.rules.repo.patch import Adoption, build_patch, git_quoted
from hprobe.rules.repo.pin import NotRewritable, find_pin, find_pins, rewrite
from hprobe.rules.repo.tree.mapping import load_mapping

MAPPING = """
[[model]]
name = "V4-Pro"
num_q_heads = 128
tp = [1, 4, 16]

[[class]]
name = "Attn"
kernel = "dsv4-sparse-mla"
sm = [100]
"""
NEW = PadTo((8, 16, 32, 64, 128))
PUBLISHED = [Version(v) for v in ("0.6.12", "0.6.13", "0.6.14", "0.7.4")]
CONSTANT = "HEADS = (64, 128)"

# (case, file text in lines joined by the case's own ending, encoding)
CONSTANT_CASES = {
    "form feed above": "\x0c\nPAGE = (1, 2)\n" + CONSTANT + "\n",
    "U+2028 in a comment": "# a\u2028b\nPAGE = (1, 2)\n" + CONSTANT + "\n",
    "U+0085 in a string": "X = 'a\u0085b'\nPAGE = (1, 2)\n" + CONSTANT + "\n",
    "\\x1c-\\x1e in a string": "X = 'a\x1c\x1d\x1eb'\nPAGE = (1, 2)\n" + CONSTANT + "\n",
    "CR-only": "PAGE = (1, 2)\r" + CONSTANT + "\r",
    "CRLF": "PAGE = (1, 2)\r\n" + CONSTANT + "\r\n",
    "tabs": "if True:\n\tPAGE = (1, 2)\n" + CONSTANT + "\n",
    "non-ASCII before the constant": "NOTE = 'größe'; " + CONSTANT + "  # déjà\n",
    "no newline at the end": "PAGE = (1, 2)\n" + CONSTANT,
}
RULE = """
class Attn:
    @classmethod
    def get_padded_num_q_heads(cls, num_heads):
        return min(h for h in HEADS if h >= num_heads)
"""


def _tree(
    tmp_path: Path,
    module: bytes,
    name: str = "attention.py",
    pin: str | None = 'dependencies = ["flashinfer-python>=0.6.14"]',
) -> Path:
    root = tmp_path / "tree"
    (root / "engine").mkdir(parents=True)
    (root / "engine" / name).write_bytes(module)
    if pin is not None:
        (root / "pyproject.toml").write_text(f'[project]\nname = "e"\nversion = "0"\n{pin}\n')
    (tmp_path / "mapping.toml").write_text(MAPPING)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def _apply(root: Path, diff: bytes) -> None:
    subprocess.run(["git", "apply", "--check", "-"], cwd=root, input=diff, check=True)
    subprocess.run(["git", "apply", "-"], cwd=root, input=diff, check=True)


def _patch(tmp_path: Path, root: Path, needs: str | None = None):
    found = extract(root, load_mapping(tmp_path / "mapping.toml"))
    [item] = [c for c in found.classes if c.cls.name == "Attn"]
    return build_patch(found, {item.cls.qualname: Adoption(NEW, Version(needs) if needs else None)}, PUBLISHED)


@pytest.mark.parametrize("case", list(CONSTANT_CASES))
def test_a_constant_is_rewritten_in_place_whatever_the_file_holds(tmp_path, case):
    text = CONSTANT_CASES[case] + RULE.replace("\n", "\r" if case == "CR-only" else "\r\n" if case == "CRLF" else "\n")
    original = text.encode("utf-8")
    root = _tree(tmp_path, original)
    patch = _patch(tmp_path, root)
    assert patch.changed and not patch.not_rewritten, patch.not_rewritten
    backup = tmp_path / "before"
    shutil.copytree(root, backup)
    _apply(root, patch.diff)
    after = (root / "engine" / "attention.py").read_bytes()
    # Exactly the one span changed: every other byte (line endings included) kept.
    assert after == original.replace(b"(64, 128)", b"(8, 16, 32, 64, 128)"), after
    assert b"PAGE = (1, 2)" not in original or b"PAGE = (1, 2)" in after


def test_a_threshold_with_a_non_ascii_parameter_name_is_rewritten_and_still_compiles(tmp_path):
    text = (
        "# é\nclass Attn:\n    @classmethod\n    def get_padded_num_q_heads(cls, köpfe):\n        x = 'ü'; return 64 "
        "if köpfe <= 64 else 128\n"
    )
    root = _tree(tmp_path, text.encode("utf-8"))
    _apply(root, _patch(tmp_path, root).diff)
    after = (root / "engine" / "attention.py").read_text(encoding="utf-8")
    assert after == text.replace("64 if köpfe <= 64 else 128", "min(h for h in (8, 16, 32, 64, 128) if h >= köpfe)")
    compile(after, "attention.py", "exec")


def test_a_bom_and_a_latin1_coding_line_are_honoured(tmp_path):
    bom = b"\xef\xbb\xbf" + (CONSTANT + RULE).encode("utf-8")
    root = _tree(tmp_path / "bom", bom)
    _apply(root, _patch(tmp_path / "bom", root).diff)
    assert (root / "engine" / "attention.py").read_bytes() == bom.replace(b"(64, 128)", b"(8, 16, 32, 64, 128)")
    latin = ("# -*- coding: latin-1 -*-\nNAME = 'Größe'  # ünd\n" + CONSTANT + RULE).encode("latin-1")
    root = _tree(tmp_path / "latin", latin)
    _apply(root, _patch(tmp_path / "latin", root).diff)
    assert (root / "engine" / "attention.py").read_bytes() == latin.replace(b"(64, 128)", b"(8, 16, 32, 64, 128)")


def test_a_file_name_git_would_quote_is_quoted_in_the_headers(tmp_path):
    assert git_quoted('a/we"ird\nname é.py') == '"a/we\\"ird\\nname \\303\\251.py"'
    root = _tree(tmp_path, (CONSTANT + RULE).encode(), name="at\ntention é.py")
    patch = _patch(tmp_path, root)
    assert b'--- "a/engine/at\\ntention \\303\\251.py"' in patch.diff
    _apply(root, patch.diff)
    assert b"(8, 16, 32, 64, 128)" in (root / "engine" / "at\ntention é.py").read_bytes()


# -- the pin moves with the padding, or the padding stays ------------------------------------


def _with_requirements(tmp_path: Path, files: dict[str, str], pin: str | None = None) -> Path:
    root = _tree(tmp_path, (CONSTANT + RULE).encode(), pin=pin)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_the_requirement_read_is_the_one_raised_not_a_comment_above_it(tmp_path):
    cuda = (
        "# flashinfer-python>=0.6.0 was the floor once\n-r common.txt\ntorch==2.13.0\nflashinfer-python==0.6.13  # "
        "keep in step\nflashinfer-cubin==0.6.13\n"
    )
    root = _with_requirements(tmp_path, {"requirements/cuda.txt": cuda, "requirements/common.txt": "numpy\n"})
    patch = _patch(tmp_path, root, needs="0.6.14")
    _apply(root, patch.diff)
    assert (root / "requirements/cuda.txt").read_text() == cuda.replace(
        "flashinfer-python==0.6.13 ", "flashinfer-python==0.6.14 "
    ).replace("cubin==0.6.13", "cubin==0.6.14")
    assert b"(8, 16, 32, 64, 128)" in (root / "engine" / "attention.py").read_bytes()
    assert [p.spec for p in find_pins(root)] == ["==0.6.14"]


def test_dependencies_are_read_before_optional_dependencies_whatever_the_order(tmp_path):
    pin = '[project.optional-dependencies]\ndev = ["flashinfer-python>=0.5"]\n[project.dependencies]'
    root = _tree(tmp_path, (CONSTANT + RULE).encode(), pin=None)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "e"\nversion = "0"\noptional-dependencies = { dev = ["flashinfer-python>=0.5"] }\n'
        "dependencies = [\n  'flashinfer-python[cu13] >= 0.6.13 ; sys_platform == \"linux\"',  # flashinfer\n]\n"
    )
    del pin
    patch = _patch(tmp_path, root, needs="0.6.14")
    _apply(root, patch.diff)
    text = (root / "pyproject.toml").read_text()
    # Both requirements admitted 0.6.13: both raised, markers, extras and comments kept.
    assert "'flashinfer-python[cu13]>=0.6.14 ; sys_platform == \"linux\"',  # flashinfer" in text
    assert 'dev = ["flashinfer-python>=0.6.14"]' in text
    assert all(p.spec == ">=0.6.14" for p in find_pins(root))


@pytest.mark.parametrize(
    ("files", "pin", "why"),
    [
        ({"requirements.txt": "flashinfer-python==0.6.13 --hash=sha256:00\n"}, None, "options (--hash)"),
        ({}, None, "declares no flashinfer requirement"),
        ({}, 'dependencies = ["flashinfer-python~=0.6.13"]', "cannot be raised mechanically"),
        (
            {"e-0.dist-info/METADATA": "Metadata-Version: 2.1\nName: e\nRequires-Dist: flashinfer-python==0.6.13\n"},
            None,
            "metadata",
        ),
    ],
    ids=["hashes", "no requirement", "compatible release", "installed metadata"],
)
def test_padding_is_left_alone_when_the_requirement_cannot_move(tmp_path, files, pin, why):
    root = _with_requirements(tmp_path, files, pin)
    patch = _patch(tmp_path, root, needs="0.6.14")
    assert patch.diff == b"" and not patch.changed
    assert len(patch.not_rewritten) == 1 and why in patch.not_rewritten[0] and "0.6.14" in patch.not_rewritten[0], (
        patch.not_rewritten
    )


def test_a_rule_safe_on_every_release_the_pin_admits_needs_no_pin_change(tmp_path):
    root = _with_requirements(tmp_path, {}, 'dependencies = ["flashinfer-python>=0.6.14,<0.8"]')
    patch = _patch(tmp_path, root, needs="0.6.14")
    assert patch.changed == ["engine/attention.py:1: HEADS (constant) → pad_to {8, 16, 32, 64, 128}"]


def test_heads_on_a_table_whose_pad_map_does_not_cover_them_is_one_input_error(cli):
    """The shipped SGLang table is a pad_map over DeepSeek's per-rank counts: it
    cannot say what Kimi K3's 96/48/24/12/6 pad to, so --heads 96 is refused
    with one line, never read as the table refusing those counts."""
    from ...conftest import MATRICES

    code, out, err = cli("check", "--table", str(MATRICES / "sglang-0.5.23-dsv4.toml"), "--sm", "100", "--heads", "96")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "does not say what n=6, 12, 24, 48, 96 pads to" in err and "table-refuses" not in err


def test_several_requirements_in_one_file_are_each_raised_in_place(tmp_path):
    text = (
        'flashinfer-python>=0.6.9; platform_machine == "x86_64"\nflashinfer-python>=0.6.9; platform_machine == '
        '"aarch64"  # arm\n'
    )
    root = _with_requirements(tmp_path, {"requirements.txt": text})
    _apply(root, _patch(tmp_path, root, needs="0.6.14").diff)
    assert (root / "requirements.txt").read_text() == text.replace(">=0.6.9", ">=0.6.14")


def test_a_requirement_included_with_r_or_c_is_read_and_raised(tmp_path):
    root = _with_requirements(
        tmp_path,
        {
            "requirements.txt": "-r deps/gpu.txt\n-c constraints.txt\n",
            "deps/gpu.txt": "flashinfer-python>=0.6.9\n",
            "constraints.txt": "flashinfer-python<0.8\n",
        },
    )
    assert {(p.path.name, p.spec) for p in find_pins(root)} == {("gpu.txt", ">=0.6.9"), ("constraints.txt", "<0.8")}
    _apply(root, _patch(tmp_path, root, needs="0.6.14").diff)
    assert (root / "deps/gpu.txt").read_text() == "flashinfer-python>=0.6.14\n"
    assert (root / "constraints.txt").read_text() == "flashinfer-python>=0.6.14,<0.8\n"  # it admitted 0.6.13 too


@pytest.mark.parametrize(
    ("text", "spec", "line"),
    [
        # pip-compile output: the requirement continues onto its --hash lines.
        ("torch==2.4\nflashinfer-python==0.6.13 \\\n    --hash=sha256:aa \\\n    --hash=sha256:bb\n", "==0.6.13", 2),
        # A byte-order mark, and a line continued inside the specifier.
        ("\ufeffflashinfer-python==\\\n0.6.13\n", "==0.6.13", 1),
        # Of two marker-guarded pins the one pip installs here is the pin.
        (
            'flashinfer-python==0.6.12 ; sys_platform == "win32"\nflashinfer-python==0.6.13 ; sys_platform != '
            '"win32"\n',
            "==0.6.13",
            2,
        ),
    ],
    ids=["hashes", "bom and continuation", "markers"],
)
def test_pins_are_read_as_pip_reads_requirements(tmp_path, text, spec, line):
    root = _with_requirements(tmp_path, {"requirements.txt": text})
    problems: list[str] = []
    pin = find_pin(root, problems)
    assert pin is not None and (pin.spec, pin.line) == (spec, line), (pin, problems)
    if "win32" in text:
        assert any('its marker (sys_platform == "win32") is false here' in p for p in problems), problems


def test_a_pin_with_hashes_is_read_but_never_rewritten(tmp_path):
    text = "flashinfer-python==0.6.13 \\\n    --hash=sha256:aa\n"
    root = _with_requirements(tmp_path, {"requirements.txt": text})
    [pin] = find_pins(root)
    with pytest.raises(NotRewritable, match="carries options"):
        rewrite(pin, text, "==0.6.14")


def test_a_url_requirement_is_no_version_pin_and_an_unversioned_one_yields(tmp_path):
    root = _with_requirements(tmp_path, {"requirements.txt": "flashinfer-python @ file:///wheels/flashinfer.whl\n"})
    problems: list[str] = []
    assert find_pin(root, problems) is None
    assert problems == [
        "flashinfer-python @ file:///wheels/flashinfer.whl: names a URL, not a version pin; not read as the flashinfer "
        "pin"
    ]
    # An unversioned requirement in pyproject says nothing of the release: the
    # lock file's pin is taken, and both are said.
    (root / "requirements.txt").unlink()
    (root / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "1"\ndependencies = ["flashinfer-python"]\n')
    (root / "requirements.txt").write_text("flashinfer-python==0.6.13\n")
    problems = []
    pin = find_pin(root, problems)
    assert pin is not None and pin.spec == "==0.6.13" and pin.path.name == "requirements.txt"
    assert any(
        p.startswith("flashinfer is pinned differently in the tree: ==0.6.13 at ")
        and "the first that names a release" in p
        and ">=0 at " in p
        for p in problems
    ), problems


def test_a_pin_pip_cannot_read_is_said_never_passed_over(tmp_path):
    """`==0.6.13,,>=` is no requirement pip reads, and a lock file's version
    `latest` is no version: each is said, and neither is taken as the pin."""
    root = _with_requirements(tmp_path, {"requirements.txt": "flashinfer-python==0.6.13,,>=\n"})
    problems: list[str] = []
    assert find_pin(root, problems) is None
    assert len(problems) == 1 and problems[0].startswith(
        "flashinfer-python==0.6.13,,>=: not a requirement pip reads ("
    ), problems
    (root / "requirements.txt").unlink()
    (root / "pylock.toml").write_text(
        'lock-version = "1.0"\n\n[[packages]]\nname = "flashinfer-python"\nversion = "latest"\n'
    )
    problems = []
    assert find_pin(root, problems) is None
    assert problems == [
        f"{root / 'pylock.toml'}: flashinfer-python version 'latest' is not a version; not read as the flashinfer pin"
    ]


def test_a_rule_left_to_the_reader_is_named_for_what_it_is():
    """SGLang 0.5.20 on SM120: DSpark's inline `_PAD_NUM_HEADS` padding and an
    unpadded call were both called "a rule that branches on the SM, phase or
    settings"."""
    from hprobe.model.padding import PadMap
    from hprobe.rules.repo.patch import Adoption, _by_hand

    suggested = PadTo((8, 16, 32, 64, 128))
    unpadded = Adoption(suggested, current=PadMap(((4, 4), (8, 8), (16, 16))))
    inline = Adoption(suggested, current=PadMap(((4, 64), (8, 64), (128, 128))))
    call = "sglang.kernels.ops.attention.flash_mla_sm120.flashinfer_sparse_mla_forward"
    assert _by_hand(call, None, unpadded).startswith(
        "an unpadded call (the engine hands FlashInfer its count as it is)"
    )
    dspark = "DSparkAttention.forward (inline) -> _flash_mla_flashinfer [decode]"
    assert _by_hand(dspark, None, inline).startswith("padding written at the call itself")
    per_phase = "sglang.srt.models.deepseek_v4.MQALayer [decode] (SM120/SM121)"  # its rule read per SM and phase
    assert (
        _by_hand(per_phase, None, inline)
        == _by_hand("MQALayer", object(), inline)
        == "a rule that branches on the SM, phase or settings"
    )


@pytest.mark.parametrize(
    ("cubin_releases", "cubin_after", "left"),
    [
        # The index has it: the companion moves with flashinfer-python.
        ((Version("0.6.13"), Version("0.7.4")), "flashinfer-cubin==0.7.4", False),
        # The index stops before it (as flashinfer-cubin stops at 0.6.13): an
        # exact pin on a release nobody can install is never written.
        ((Version("0.6.12"), Version("0.6.13")), "flashinfer-cubin==0.6.13", True),
        # The index could not be listed: it moves, as before a listing existed.
        (None, "flashinfer-cubin==0.7.4", False),
    ],
    ids=["published", "not published", "index unlisted"],
)
def test_a_companion_pin_moves_only_to_a_release_the_index_has(tmp_path, cubin_releases, cubin_after, left):
    cuda = "flashinfer-python==0.6.13\nflashinfer-cubin==0.6.13\n"
    root = _with_requirements(tmp_path, {"requirements/cuda.txt": cuda})
    found = extract(root, load_mapping(tmp_path / "mapping.toml"))
    [item] = [c for c in found.classes if c.cls.name == "Attn"]
    asked: list[str] = []

    def companions(name: str):
        asked.append(name)
        return cubin_releases

    patch = build_patch(found, {item.cls.qualname: Adoption(NEW, Version("0.7.4"))}, PUBLISHED, companions)
    _apply(root, patch.diff)
    assert (root / "requirements/cuda.txt").read_text() == f"flashinfer-python==0.7.4\n{cubin_after}\n"
    assert asked == ["flashinfer-cubin"]
    said = [line for line in patch.not_rewritten if "flashinfer-cubin" in line]
    if left:
        assert said == [
            "requirements/cuda.txt:2: flashinfer-cubin==0.6.13 left as it is: the index has no flashinfer-cubin "
            "0.7.4 (newest 0.6.13); change or drop it by hand"
        ]
    else:
        assert said == [] and any("flashinfer-cubin requirement ==0.6.13 → ==0.7.4" in c for c in patch.changed)
    # The raised pin says which path needs the release.
    assert any(
        c.startswith("requirements/cuda.txt:1: flashinfer requirement ==0.6.13 → ==0.7.4 (") for c in patch.changed
    )


def test_the_pin_moves_only_to_a_release_every_other_rule_is_shown_safe_at(tmp_path):
    """`Other`, kept as it is, is first safe at 0.7.4; `Attn`'s new rule is
    safe from 0.6.14 but undecided at 0.7.4 (its kernel table is not
    reachable there, say). Raising the pin to 0.7.4 would trade Attn's decided
    answers for undecided ones: the pin moves to 0.6.14 and Other is said
    with why it does not take the pin further."""
    two = MAPPING + '\n[[class]]\nname = "Other"\nkernel = "dsv4-sparse-mla"\nsm = [100]\n'
    module = (
        CONSTANT + "\n" + RULE + "\n\nclass Other:\n    @classmethod\n"
        "    def get_padded_num_q_heads(cls, num_heads):\n        return 128\n"
    ).encode()
    root = _tree(tmp_path, module, pin='dependencies = ["flashinfer-python==0.6.13"]')
    (tmp_path / "mapping.toml").write_text(two)
    found = extract(root, load_mapping(tmp_path / "mapping.toml"))
    names = {c.cls.name: c.cls.qualname for c in found.classes}
    adopted = {
        names["Attn"]: Adoption(NEW, Version("0.6.14")),
        names["Other"]: Adoption(PadTo((128,)), Version("0.7.4"), changes=False),
    }

    def holds(qualname: str, v: Version) -> bool | None:
        return None if qualname == names["Attn"] and v >= Version("0.7.4") else True

    unchecked = build_patch(found, dict(adopted), PUBLISHED)
    assert b'+dependencies = ["flashinfer-python==0.7.4"]' in unchecked.diff  # what the floor alone asks for
    patch = build_patch(found, dict(adopted), PUBLISHED, holds=holds)
    assert b'+dependencies = ["flashinfer-python==0.6.14"]' in patch.diff and b"0.7.4" not in patch.diff
    [other] = [w for w in patch.not_rewritten if w.startswith(names["Other"])]
    assert "needs flashinfer >= 0.7.4" in other and "at flashinfer 0.7.4 attention.Attn is not shown safe" in other
    # Where the requirement already admits only releases from the floor on, no
    # pin moves, so nothing is traded: a rule that needs the floor is rewritten
    # though another is not shown safe there (it is not, today, either).
    (root / "pyproject.toml").write_text(
        '[project]\nname = "e"\nversion = "0"\ndependencies = ["flashinfer-python>=0.7.4"]\n'
    )
    found = extract(root, load_mapping(tmp_path / "mapping.toml"))
    raised = {
        names["Attn"]: Adoption(NEW, Version("0.7.4")),
        names["Other"]: Adoption(PadTo((128,)), Version("0.6.14"), changes=False),
    }

    def other_unknown(qualname: str, v: Version) -> bool | None:
        return None if qualname == names["Other"] and v >= Version("0.7.4") else True

    kept = build_patch(found, raised, PUBLISHED, holds=other_unknown)
    assert b"+HEADS = (8, 16, 32, 64, 128)" in kept.diff and b"pyproject.toml" not in kept.diff, kept.not_rewritten
