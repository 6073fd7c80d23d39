"""model/release: a probed release as a report names it, and a requirement
of it this machine does not meet, said with what to do about it."""

from __future__ import annotations

import pytest

from hprobe.model.release import FlashinferInfo, ProbedRelease, Unmet

pytestmark = pytest.mark.pure


def test_a_requirement_not_installed_says_what_to_install() -> None:
    unmet = Unmet("nvidia-cudnn-frontend>=1.13", "nvidia-cudnn-frontend")
    assert str(unmet) == (
        "nvidia-cudnn-frontend>=1.13 (not installed; try `pip install 'nvidia-cudnn-frontend>=1.13'` in a "
        "separate venv)"
    )
    assert unmet.note("0.7.4").startswith("flashinfer 0.7.4 requires nvidia-cudnn-frontend>=1.13 (not installed;")


def test_a_requirement_installed_at_another_version_names_that_version() -> None:
    unmet = Unmet("torch>=2.9", "torch", "2.4.0")
    assert str(unmet) == "torch>=2.9 (installed torch 2.4.0; try a separate venv with `pip install 'torch>=2.9'`)"


def test_a_release_describes_where_it_was_read_and_its_notes() -> None:
    release = ProbedRelease("0.6.14", FlashinferInfo("0.6.14", "/cache/trees/0.6.14"), {}, notes=["n"])
    assert release.describe() == {
        "label": "0.6.14",
        "version": "0.6.14",
        "location": "/cache/trees/0.6.14",
        "notes": ["n"],
    }
