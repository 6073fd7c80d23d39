"""rules/repo/pin: the consumer's flashinfer requirement read from its own
files, most authoritative first, each remembered where it stands; and the one
rewrite a patch makes of it, which changes its version and nothing else."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hprobe.rules.repo.pin import (
    NotRewritable,
    find_pin,
    find_pins,
    poetry_specifier,
    project_folders,
    rewrite,
    with_specifier,
)

pytestmark = pytest.mark.pure


def _files(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


@pytest.mark.parametrize(
    ("constraint", "spec"),
    [
        ("^0.6.13", ">=0.6.13,<0.7"),
        ("^1.2", ">=1.2,<2"),
        ("^0.0.3", ">=0.0.3,<0.0.4"),  # the first non-zero part is the one raised
        ("~0.6.13", ">=0.6.13,<0.7"),
        ("~1", ">=1,<2"),
        ("0.6.14", "==0.6.14"),
        (">=0.6,<0.8", ">=0.6,<0.8"),
        ("*", None),
        ("^x.y", None),
        ("nonsense", None),
    ],
)
def test_poetry_constraints_read_as_pep_440(constraint, spec) -> None:
    assert poetry_specifier(constraint) == spec


def test_the_most_authoritative_source_comes_first_and_each_says_where_it_stands(tmp_path: Path) -> None:
    root = _files(
        tmp_path,
        {
            "pyproject.toml": """
                [project]
                name = "engine"
                dependencies = [
                    "torch>=2.4",
                    "flashinfer-python==0.6.13",  # the serving pin
                ]
            """,
            "requirements/cuda.txt": "# flashinfer-python==0.1 is a comment\nflashinfer-python>=0.6.12\n",
            "requirements.txt": "numpy\nflashinfer-cubin==0.6.13\n",
        },
    )
    pins = find_pins(root)
    kinds = [(p.kind, p.spec, p.path.name) for p in pins]
    assert kinds[0] == ("pyproject", "==0.6.13", "pyproject.toml")
    assert ("requirements", ">=0.6.12", "cuda.txt") in kinds
    assert not any(p.spec == "==0.1" for p in pins)  # a comment is no requirement
    first = find_pin(root)
    assert first is not None and first.source == f"{root / 'pyproject.toml'}:6"
    assert first.written == "flashinfer-python==0.6.13" and first.name == "flashinfer-python"


def test_a_requirement_pip_would_not_install_here_is_raised_but_not_judged(tmp_path: Path) -> None:
    root = _files(
        tmp_path,
        {"requirements.txt": "flashinfer-python==0.6.13; sys_platform == 'win32'\nflashinfer-python>=0.6.14\n"},
    )
    problems: list[str] = []
    pin = find_pin(root, problems)
    assert pin is not None and pin.spec == ">=0.6.14"
    assert len(find_pins(root)) == 2
    assert any("its marker" in p and "not read as the flashinfer pin" in p for p in problems), problems


def test_a_project_kept_one_level_down_is_found(tmp_path: Path) -> None:
    root = _files(
        tmp_path,
        {
            "python/pyproject.toml": '[project]\nname = "sglang"\ndependencies = ["flashinfer_python==0.6.18"]\n',
            "python/sglang/__init__.py": "",
            "docs/setup.py": "",  # a project file without a package: not the engine's
        },
    )
    assert project_folders(root) == [root / "python"]
    assert project_folders(root, "sglang") == [root / "python"] and project_folders(root, "vllm") == []
    pin = find_pin(root)
    assert pin is not None and pin.spec == "==0.6.18" and pin.path == root / "python" / "pyproject.toml"


@pytest.mark.parametrize(
    ("written", "new"),
    [
        ("flashinfer-python==0.6.13", "flashinfer-python>=0.6.14"),
        ("flashinfer-python[jit] >= 0.6.13", "flashinfer-python[jit]>=0.6.14"),  # the gap before it is not kept
        (
            'flashinfer-python==0.6.13 ; platform_machine == "x86_64"',
            'flashinfer-python>=0.6.14 ; platform_machine == "x86_64"',
        ),
    ],
)
def test_a_rewrite_changes_the_version_and_keeps_name_extras_and_marker(written, new) -> None:
    assert with_specifier(written, ">=0.6.14") == new


@pytest.mark.parametrize(
    ("written", "why"),
    [
        ("flashinfer-python @ https://example.com/f.whl", "not a name with a version specifier"),
        ("flashinfer-python (>=0.6.13)", "a parenthesised specifier"),
    ],
)
def test_a_requirement_that_is_not_a_plain_specifier_is_not_rewritten(written, why) -> None:
    with pytest.raises(NotRewritable, match=why.replace("(", r"\(")):
        with_specifier(written, ">=0.6.14")


def test_the_patch_rewrites_exactly_the_line_read_and_refuses_what_another_tool_owns(tmp_path: Path) -> None:
    text = "torch\nflashinfer-python==0.6.13  # pinned for SM100\nflashinfer-cubin==0.6.13\n"
    root = _files(tmp_path, {"requirements.txt": text})
    pins = {p.written: p for p in find_pins(root)}
    new = rewrite(pins["flashinfer-python==0.6.13"], text, ">=0.6.14")
    assert new == "torch\nflashinfer-python>=0.6.14  # pinned for SM100\nflashinfer-cubin==0.6.13\n"
    # The file changed under it since it was read: not rewritten at a guess.
    with pytest.raises(NotRewritable, match="the file changed since it was read"):
        rewrite(pins["flashinfer-python==0.6.13"], "torch\n", ">=0.6.14")
    cfg = _files(tmp_path / "cfg", {"setup.cfg": "[options]\ninstall_requires =\n    flashinfer-python==0.6.13\n"})
    [locked] = find_pins(cfg)
    with pytest.raises(NotRewritable, match="which hprobe reads but does not rewrite"):
        rewrite(locked, (cfg / "setup.cfg").read_text(), ">=0.6.14")
