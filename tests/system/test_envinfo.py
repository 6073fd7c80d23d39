"""system/envinfo: the versions of installed distributions, read from the
`.dist-info` names sys.path lists (one listing, not a METADATA parse per
question), equal to what importlib.metadata says for every distribution
here; where a place cannot be listed (a zip, an egg), importlib.metadata is
asked instead."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.pure


def test_installed_versions_read_from_directory_names_match_the_metadata():
    """envinfo reads versions from `.dist-info` directory names (one listing,
    not a METADATA parse per question); for every distribution here it gives
    what importlib.metadata gives, and None for one that is not installed."""
    import importlib.metadata as md

    from hprobe.system.envinfo import _listed, distribution_version

    names = {d.metadata["Name"] for d in md.distributions()}
    assert len(names) > 20 and len(_listed().found) > 20
    for name in names:
        assert distribution_version(name) == md.version(name), name
    assert distribution_version("Flashinfer_Python") == md.version("flashinfer-python")
    assert distribution_version("no-such-distribution-here") is None


def test_a_name_the_listing_cannot_see_is_asked_of_the_metadata(monkeypatch, tmp_path):
    """A zip or an egg on sys.path is not listed, so the listing is partial and
    a name it does not hold goes to importlib.metadata, which reads both; an
    egg-info is left to it too. With every place listed, a name found nowhere is not
    installed, and importlib.metadata agrees."""
    import importlib.metadata as md
    import sys
    import zipfile

    from hprobe.system import envinfo

    archive = tmp_path / "packed.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zipped_pkg-1.2.dist-info/METADATA", "Metadata-Version: 2.1\nName: zipped-pkg\nVersion: 1.2\n")
    eggs = tmp_path / "eggs"
    (eggs / "egged_pkg.egg-info").mkdir(parents=True)
    (eggs / "egged_pkg.egg-info" / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: egged-pkg\nVersion: 3.4\n")

    envinfo._listed.cache_clear()
    monkeypatch.setattr(sys, "path", [*sys.path, str(eggs)])
    assert envinfo._listed().partial is False
    assert envinfo.distribution_version("egged-pkg") == md.version("egged-pkg") == "3.4"
    assert envinfo.distribution_version("zipped-pkg") is None
    with pytest.raises(md.PackageNotFoundError):
        md.version("zipped-pkg")

    envinfo._listed.cache_clear()
    monkeypatch.setattr(sys, "path", [*sys.path, str(archive)])
    assert envinfo._listed().partial is True
    assert envinfo.distribution_version("zipped-pkg") == "1.2"

    egg = tmp_path / "laid_egg-5.6-py3.11.egg"
    (egg / "EGG-INFO").mkdir(parents=True)
    (egg / "EGG-INFO" / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: laid-egg\nVersion: 5.6\n")
    envinfo._listed.cache_clear()
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(archive)] + [str(egg)])
    assert envinfo._listed().partial is True
    assert envinfo.distribution_version("laid-egg") == md.version("laid-egg") == "5.6"
    monkeypatch.undo()
    envinfo._listed.cache_clear()  # the next caller lists the real sys.path
