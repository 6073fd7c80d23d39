"""advise/patch: the plan `suggest --diff` writes — each rule adopted with the
release it is safe from, a rule whose answers are undecided left as it is and
said, and nothing to change said as that. On the pre-#48047 fixture tree, read
as `check --repo` reads it; the suggestions written here."""

from __future__ import annotations

import shutil

import pytest
from packaging.version import Version

from hprobe.advise.history import FirstTrue
from hprobe.advise.patch import patch_for
from hprobe.advise.pins import CountPin, PinAdvice
from hprobe.advise.suggest import BackendSuggestion
from hprobe.model.advice import CountChange
from hprobe.model.padding import PadTo
from hprobe.rules.repo.extract import extract
from hprobe.rules.repo.tree.mapping import load_mapping

from ..conftest import ROOT

pytestmark = pytest.mark.pure

PRE = ROOT / "tests" / "fixtures" / "repos" / "pre48047"
MLA = "vllm.models.deepseek_v4.nvidia.flashinfer_sparse.DeepseekV4FlashInferMLAAttention"
RULE = PadTo((8, 16, 32, 64, 128))


def _suggestion(found, *, safe_from: str | None, inconclusive: list[str] | None = None) -> BackendSuggestion:
    [backend] = [b for b in found.table.backends if b.name == MLA]
    pins = PinAdvice(
        (100, 103),
        ("0.6.13", "0.7.4"),
        None,
        rule_counts={
            c: CountPin(c, FirstTrue(Version(safe_from) if safe_from else None, None, False, (), ()))
            for c in RULE.values
        },
    )
    # DeepSeek-V4-Pro at TP 4 and 8: 32 and 16 heads per rank, padded to 64 now.
    changes = [CountChange("DeepSeek-V4-Pro", 4, 32, 64, 32), CountChange("DeepSeek-V4-Pro", 8, 16, 64, 16)]
    return BackendSuggestion(
        "t", backend, (100, 103), ("0.6.14",), RULE, pins=pins, changes=changes, inconclusive=inconclusive or []
    )


def test_an_adopted_rule_and_its_pin_are_one_change_or_none(tmp_path):
    """With the tree's requirement pinned below the release the rule needs,
    the rule and the pin are rewritten together; where the tree names no
    requirement, neither is, and the line to add is said."""
    bare = patch_for(
        extract(PRE, load_mapping()),
        [_suggestion(extract(PRE, load_mapping()), safe_from="0.6.14")],
        [Version("0.6.13"), Version("0.6.14")],
        None,
        "fix.diff",
    )
    assert bare.diff == b"" and "add 'flashinfer-python>=0.6.14'" in bare.not_rewritten[0]
    tree = tmp_path / "tree"
    shutil.copytree(PRE, tree)
    (tree / "requirements.txt").write_text("flashinfer-python==0.6.13\n")
    found = extract(tree, load_mapping())
    patch = patch_for(
        found, [_suggestion(found, safe_from="0.6.14")], [Version("0.6.13"), Version("0.6.14")], None, "fix.diff"
    )
    assert "-        return 64 if num_heads <= 64 else 128" in patch.text
    assert "+        return min(h for h in (8, 16, 32, 64, 128) if h >= num_heads)" in patch.text
    assert "-flashinfer-python==0.6.13" in patch.text and "+flashinfer-python==0.6.14" in patch.text
    assert not patch.nothing_needed


def test_a_rule_with_no_safe_release_is_left_as_it_is_and_said():
    found = extract(PRE, load_mapping())
    why = "0.7.4: the kernel table could not be had"
    patch = patch_for(found, [_suggestion(found, safe_from=None, inconclusive=[why])], [], None, "fix.diff")
    assert patch.diff == b""
    assert f"{MLA}: not rewritten: undecided ({why})" in patch.not_rewritten
    assert "--diff fix.diff: nothing to rewrite, not written" in patch.not_rewritten
    assert not patch.nothing_needed


def test_no_suggestion_is_nothing_to_change():
    patch = patch_for(extract(PRE, load_mapping()), [], [], None, "fix.diff")
    assert patch.diff == b"" and patch.not_rewritten == [] and patch.nothing_needed
