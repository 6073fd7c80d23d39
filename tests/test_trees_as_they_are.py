"""Consumer trees as they are found: pins in setup.cfg, Poetry and pylock.toml
read; a requirement or rule file linked into the tree patched where it really
is, one linked from outside refused; a directory that cannot be read named;
table keys and recorded documents that only look like counts refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from packaging.version import Version

from hprobe.model.errors import InputError
from hprobe.model.outcome import KernelSMResult
from hprobe.rules.repo.patch import _pin_edits, real_path_in_tree
from hprobe.rules.repo.pin import find_pins, poetry_specifier
from hprobe.rules.repo.tree.scan import RepoIndex
from hprobe.rules.toml_source import TomlTableSource

from .conftest import V4_PRO_TABLE

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
