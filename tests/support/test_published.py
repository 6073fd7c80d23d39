"""support/published: the releases the user's pip sees on its index, and the
two ends of a pin (with the installed release, probed in place where the pin
admits it). A package index made here, read by the real pip; an index pip
cannot reach is said as that, never as a release without wheels."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from packaging.version import Version

from hprobe.model.errors import IndexUnlisted, InputError
from hprobe.model.release import INSTALLED
from hprobe.support import published
from hprobe.system.envinfo import distribution_version

# pip runs in all but the range tests
slow = pytest.mark.slow

RELEASES = ("0.6.12", "0.6.13", "0.7.0rc1", "0.7.4")


@pytest.fixture
def index(tmp_path: Path, monkeypatch) -> Path:
    page = tmp_path / "simple" / "flashinfer-python"
    page.mkdir(parents=True)
    links = "".join(
        f'<a href="flashinfer_python-{v}-py3-none-any.whl">flashinfer_python-{v}-py3-none-any.whl</a>\n'
        for v in RELEASES
    )
    (page / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")
    for name in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # only the index made here
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "simple").as_uri())
    return tmp_path


@slow
@pytest.mark.usefixtures("index")
def test_the_published_releases_are_what_pip_lists_oldest_first() -> None:
    assert published.published_versions() == [Version("0.6.12"), Version("0.6.13"), Version("0.7.4")]
    assert published.final_releases()[-1] == Version("0.7.4")


@slow
@pytest.mark.usefixtures("index")
def test_a_pin_is_probed_at_its_two_ends_and_the_installed_release_in_place() -> None:
    installed = distribution_version("flashinfer-python")
    assert installed is not None and Version("0.6.13") < Version(installed) < Version("0.7.4")
    labels, notes = published.pinned_releases(">=0.6.13")
    assert labels == ["0.6.13", "0.7.4", INSTALLED]
    assert notes == ["pin >=0.6.13 admits 2 releases; probing the lowest and highest: 0.6.13, 0.7.4"]
    labels, notes = published.pinned_releases("<0.6.13")
    assert labels == ["0.6.12"] and any(f"the installed flashinfer {installed} does not satisfy" in n for n in notes)
    with pytest.raises(InputError, match="no published flashinfer-python release satisfies it"):
        published.pinned_releases(">=0.8")


@slow
def test_an_index_that_cannot_be_reached_is_said_so(monkeypatch) -> None:
    for name in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple/")  # nothing listens there
    monkeypatch.setenv("PIP_RETRIES", "1")  # pip names the connection error only when it retries
    monkeypatch.setenv("PIP_TIMEOUT", "5")
    with pytest.raises(IndexUnlisted, match="the package index could not be reached"):
        published.published_versions()
    assert published.listed_or_none("flashinfer-python") is None


@pytest.mark.pure
@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("0.6.10", "expected LO..HI"),
        ("0.6.x..0.7", "not release numbers"),
        ("0.7.4..0.6.14", "runs backwards"),
    ],
)
def test_a_range_is_refused_in_one_line(text, said):
    with pytest.raises(InputError, match=said):
        published.parse_release_range(text)


@pytest.mark.pure
def test_a_range_may_leave_either_end_open():
    assert published.parse_release_range(None) == (None, None)
    lo, hi = published.parse_release_range("0.6.12..")
    assert str(lo) == "0.6.12" and hi is None
    lo, hi = published.parse_release_range("..0.7.4")
    assert lo is None and str(hi) == "0.7.4"
