"""Consumer trees as they are found: pins in setup.cfg, Poetry and pylock.toml
read; a requirement or rule file linked into the tree patched where it really
is, one linked from outside refused; a directory that cannot be read named;
table keys and recorded documents that only look like counts refused."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from packaging.version import Version

from hprobe.model.errors import InputError
from hprobe.model.outcome import KernelSMResult
from hprobe.rules.repo.patch import _pin_edits, real_path_in_tree
from hprobe.rules.repo.pin import NotRewritable, find_pin, find_pins, poetry_specifier, rewrite
from hprobe.rules.repo.tree.scan import RepoIndex
from hprobe.rules.toml_source import TomlTableSource

from .conftest import V4_PRO_TABLE

REPOS = Path(__file__).parent / "fixtures" / "repos"
PUBLISHED = [Version(v) for v in ("0.6.12", "0.6.13", "0.6.14", "0.7.4")]


def test_pins_in_setup_cfg_poetry_and_pylock_are_read(tmp_path):
    (tmp_path / "setup.cfg").write_text(
        "[metadata]\nname = x\n\n[options]\ninstall_requires =\n    numpy\n    flashinfer-python>=0.6.13\n"
    )
    (tmp_path / "pyproject.toml").write_text(
        '[tool.poetry.dependencies]\npython = "^3.11"\nflashinfer-python = '
        '"^0.6.13"\n\n[tool.poetry.group.dev.dependencies]\nflashinfer-python = { version = "~0.7.2" }\n'
    )
    (tmp_path / "pylock.toml").write_text(
        'lock-version = "1.0"\n\n[[packages]]\nname = "flashinfer-python"\nversion = "0.7.2.post1"\n'
    )
    pins = {(p.kind, p.spec, p.line) for p in find_pins(tmp_path)}
    assert ("setup.cfg", ">=0.6.13", 7) in pins
    # Poetry's caret and tilde, as the PEP 440 ranges they mean, each on its own line.
    assert ("poetry", ">=0.6.13,<0.7", 3) in pins and ("poetry", ">=0.7.2,<0.8", 6) in pins
    assert ("pylock", "==0.7.2.post1", 5) in pins


def test_uv_and_poetry_lock_files_are_read_as_the_version_they_lock(tmp_path):
    (tmp_path / "uv.lock").write_text(
        'version = 1\n\n[[package]]\nname = "numpy"\nversion = "2.0.0"\n\n'
        '[[package]]\nname = "flashinfer-python"\nversion = "0.6.13"\nsource = { registry = "https://pypi.org" }\n'
    )
    (tmp_path / "poetry.lock").write_text('[[package]]\nname = "flashinfer_python"\nversion = "0.7.2.post1"\n')
    pins = {(p.kind, p.spec, p.line) for p in find_pins(tmp_path)}
    assert pins == {("uv.lock", "==0.6.13", 9), ("poetry.lock", "==0.7.2.post1", 3)}
    # Read, never rewritten: the tool that owns a lock file writes it.
    [locked] = [p for p in find_pins(tmp_path) if p.kind == "uv.lock"]
    with pytest.raises(NotRewritable, match="uv.lock requirement"):
        rewrite(locked, (tmp_path / "uv.lock").read_text(), "==0.6.14")


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("pylock.toml", '[[packages]]\nname = "flashinfer-python"\nversion = "latest"\n', "'latest' is not a version"),
        ("requirements.txt", "flashinfer-python==0.6.13,,>=\n", "not a requirement pip reads"),
        ("requirements.txt", "numpy\n-r cuda.txt\n", "requirements.txt:2 includes cuda.txt, which is not there"),
        ("requirements.txt", "flashinfer-python @ https://example.invalid/fi.whl\n", "names a URL"),
        ("pyproject.toml", '[tool.poetry.dependencies]\nflashinfer-python = { git = "https://x" }\n', "not a Poetry"),
        ("uv.lock", '[[package]]\nname = "flashinfer-python"\nversion = "main"\n', "'main' is not a version"),
        ("uv.lock", "[[package]\n", "malformed TOML"),
    ],
)
def test_a_requirement_that_may_hold_the_pin_and_cannot_be_read_is_said_unread(tmp_path, name, text, said):
    (tmp_path / name).write_text(text)
    problems: list[str] = []
    unread: list[str] = []
    assert find_pin(tmp_path, problems, unread) is None
    assert len(unread) == 1 and said in unread[0] and unread == problems


def test_a_tree_whose_requirement_cannot_be_read_is_undecided_not_judged_on_the_installed_release(cli_json, tmp_path):
    """Judged on flashinfer 0.6.14 (installed here) the fixture passes; with a
    pin that cannot be read, which release the tree installs is unknown: every
    verdict is shown as assumed, and the gate says exit 3."""
    tree = tmp_path / "post48047"
    shutil.copytree(REPOS / "post48047", tree)
    (tree / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0"\ndependencies = ["torch"]\n')
    readable, doc, _ = cli_json("check", "--repo", str(tree), "--sm", "100")
    assert readable == 0 and doc["findings"]
    (tree / "requirements.txt").write_text("flashinfer-python==0.6.13,,>=0.6\n")
    code, doc, _ = cli_json("check", "--repo", str(tree), "--sm", "100")
    assert code == 3
    assert {f["verdict"] for f in doc["findings"]} == {"assumed"}
    assert doc["notes"][0].startswith("the flashinfer requirement cannot be read (flashinfer-python==0.6.13,,>=0.6")
    assert "judged on flashinfer 0.6.14, which the tree may not install" in doc["notes"][0]
    # --flashinfer names the release: judged again.
    named, doc, _ = cli_json("check", "--repo", str(tree), "--sm", "100", "--pin", "==0.6.14")
    assert named == 0 and "assumed" not in {f["verdict"] for f in doc["findings"]}


@pytest.mark.parametrize(
    ("constraint", "spec"),
    [
        ("^0.6.13", ">=0.6.13,<0.7"),
        ("^1.2.3", ">=1.2.3,<2"),
        ("~0.6.13", ">=0.6.13,<0.7"),
        ("0.7.2", "==0.7.2"),
        (">=0.6,<0.8", ">=0.6,<0.8"),
        ("*", None),
    ],
)
def test_poetry_constraints_mean_what_poetry_means(constraint, spec):
    assert poetry_specifier(constraint) == spec


def test_a_requirement_without_a_version_admits_every_release(tmp_path):
    (tmp_path / "requirements.txt").write_text("flashinfer-python\n")
    [pin] = find_pins(tmp_path)
    assert pin.spec == ">=0" and pin.specifier.contains("0.5.0")


def test_a_linked_requirement_is_patched_where_it_is_or_refused(tmp_path):
    root = tmp_path / "tree"
    (root / "reqs").mkdir(parents=True)
    (root / "reqs" / "cuda.txt").write_text("flashinfer-python==0.6.13\n")
    (root / "requirements.txt").symlink_to(root / "reqs" / "cuda.txt")
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("flashinfer-python==0.6.13\n")
    pins = [p for p in find_pins(root) if p.path.name == "requirements.txt"]
    files, blocked, _ = _pin_edits(pins, root, Version("0.6.14"), PUBLISHED, lambda _name: None)
    assert list(files) == ["reqs/cuda.txt"] and not blocked  # the real path, inside the tree
    (root / "requirements.txt").unlink()
    (root / "requirements.txt").symlink_to(outside)
    pins = [p for p in find_pins(root) if p.path.name == "requirements.txt"]
    files, blocked, _ = _pin_edits(pins, root, Version("0.6.14"), PUBLISHED, lambda _name: None)
    assert not files and "is a symlink to a file outside the tree" in next(iter(blocked.values()))
    assert outside.read_text() == "flashinfer-python==0.6.13\n"


def test_real_path_in_tree(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f.py").write_text("")
    (tmp_path / "link.py").symlink_to(tmp_path / "a" / "f.py")
    assert real_path_in_tree(tmp_path / "link.py", tmp_path) == "a/f.py"
    assert real_path_in_tree(tmp_path / "a" / ".." / "a" / "f.py", tmp_path) == "a/f.py"
    assert real_path_in_tree(Path("/etc/hostname"), tmp_path) is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every directory")
def test_an_unreadable_directory_is_named(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "rules.py").write_text("x = 1\n")
    locked.chmod(0)
    try:
        index = RepoIndex.build(tmp_path)
        assert any(p.startswith("locked: not read") for p in index.problems), index.problems
    finally:
        locked.chmod(0o755)


def test_an_unreadable_directory_is_named_even_as_root(tmp_path, monkeypatch):
    (tmp_path / "ok").mkdir()
    (tmp_path / "gone").mkdir()
    real_scandir = os.scandir

    def scandir(path):
        if Path(path).name == "gone":
            raise PermissionError(13, "Permission denied")
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    index = RepoIndex.build(tmp_path)
    assert any(p.startswith("gone: not read (Permission denied)") for p in index.problems), index.problems


@pytest.mark.parametrize("key", ["016", " 16", "١٦", "+16", "16 "])
def test_pad_map_keys_are_counts_as_written(tmp_path, key):
    path = tmp_path / "t.toml"
    path.write_text(V4_PRO_TABLE.format(rule=f'pad_map = {{ "{key}" = 64 }}'))
    with pytest.raises(InputError, match="is not a head count"):
        TomlTableSource(path).collect()


def test_a_recorded_result_with_a_million_counts_is_refused_before_expanding():
    runs = [{"from": 1 + i * 4096, "to": 4096 * (i + 1), "outcome": "accepted"} for i in range(250)]
    with pytest.raises(ValueError, match="more head counts than a result holds"):
        KernelSMResult.from_dict({"kernel": "trtllm-mla", "sm": 100, "flashinfer_version": "x", "runs": runs})
    with pytest.raises(ValueError, match="more than a result holds"):
        KernelSMResult.from_dict(
            {
                "kernel": "trtllm-mla",
                "sm": 100,
                "flashinfer_version": "x",
                "heads": [{"heads": 1, "outcome": "accepted"}] * 5000,
            }
        )
