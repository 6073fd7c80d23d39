"""Releases as trees (support/trees.py): here, that the cache keeps answers,
not downloads. A run removes the wheels it read once answered; the next run
asking the same question answers from the cache without them (no index
reachable), a new question fetches the wheel again, and a wheel that is not
the one the answers are kept under is refused in one line."""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import pytest

from hprobe.compiled.files import READ, data_dir
from hprobe.support import slim, trees

RELEASE = "0.6.13"
QUESTION = ["matrix", "--flashinfer", RELEASE, "-k", "dsv4-sparse-mla", "--heads", "1-16"]
DEEP = [
    "matrix",
    "--flashinfer",
    RELEASE,
    "-k",
    "dsv4-sparse-mla",
    "--heads",
    "64",
    "--sm",
    "100",
]  # reaches trtllm-gen


@pytest.fixture(scope="module")
def session_wheel() -> Path:
    """The release's wheel in the suite's cache (fetched once per session)."""
    return trees.fetch_wheel(RELEASE)


@pytest.fixture
def own_cache(tmp_path, monkeypatch, session_wheel):
    """A cache of the test's own holding the wheel as a fetch leaves it, wheels
    removed at the end of each run, and an index that serves only `folder`."""
    cache = tmp_path / "cache"
    (cache / "wheels").mkdir(parents=True)
    for source in (session_wheel, session_wheel.with_name(session_wheel.name + ".sha256")):
        shutil.copy2(source, cache / "wheels" / source.name)
    folder = tmp_path / "index"
    folder.mkdir()
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(cache))
    monkeypatch.delenv("HPROBE_KEEP_WHEELS", raising=False)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    return cache, folder, session_wheel


def _answers(doc: dict) -> list:
    return [(r["kernel"], r["sm"], r["heads"]) for r in doc["results"]]


def test_a_wheel_is_removed_once_answered_and_the_same_question_needs_it_no_more(own_cache, cli_json):
    cache, _folder, wheel = own_cache
    code, first, err = cli_json(*QUESTION, "--sm", "100")
    assert code == 0, err
    assert not (cache / "wheels" / wheel.name).exists(), "the wheel was kept"
    assert (cache / "wheels" / f"{wheel.name}.sha256").is_file()  # what the kept answers are keyed by
    assert f"removed the wheel of flashinfer {RELEASE} once answered" in err
    # The same question: the cache answers; the index (an empty folder) is never asked.
    code, again, err = cli_json(*QUESTION, "--sm", "100")
    assert code == 0, err
    assert _answers(again) == _answers(first)
    assert not (cache / "wheels" / wheel.name).exists() and "removed the wheel" not in err


def test_a_new_question_fetches_the_wheel_again(own_cache, cli, cli_json, monkeypatch):
    cache, folder, wheel = own_cache
    assert cli_json(*QUESTION, "--sm", "100")[0] == 0
    assert not (cache / "wheels" / wheel.name).exists()
    code, _out, err = cli(*QUESTION, "--sm", "120")  # nothing kept answers SM120; the index has no wheel
    assert code == 2 and f"cannot fetch flashinfer-python=={RELEASE}" in err
    shutil.copy2(wheel, folder / wheel.name)
    code, fetched, err = cli_json(*QUESTION, "--sm", "120")
    assert code == 0, err
    monkeypatch.setenv("HPROBE_KEEP_WHEELS", "1")
    shutil.rmtree(cache / "results")  # asked afresh with the wheel in place: the same answers
    code, probed, err = cli_json(*QUESTION, "--sm", "120")
    assert code == 0 and _answers(probed) == _answers(fetched)
    assert (cache / "wheels" / wheel.name).is_file() and "removed the wheel" not in err


def test_another_wheel_under_the_same_name_is_refused(own_cache, cli, cli_json):
    _cache, folder, wheel = own_cache
    assert cli_json(*QUESTION, "--sm", "100")[0] == 0
    forged = folder / wheel.name  # the release's metadata, other contents
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(forged, "w") as out:
        for info in source.infolist():
            if ".dist-info/" in info.filename:
                out.writestr(info, source.read(info))
        out.writestr("flashinfer/__init__.py", "")
    code, _out, err = cli(*QUESTION, "--sm", "120")
    assert code == 2, err
    assert "the index now serves another wheel of it" in err and f"hprobe cache prune --release {RELEASE}" in err


def test_a_wheel_the_user_names_is_never_removed(own_cache, cli_json, tmp_path):
    _cache, _folder, wheel = own_cache
    mine = tmp_path / "mine" / wheel.name
    mine.parent.mkdir()
    shutil.copy2(wheel, mine)
    code, _doc, err = cli_json(
        "matrix", "--flashinfer", str(mine), "-k", "dsv4-sparse-mla", "--heads", "1-16", "--sm", "100"
    )
    assert code == 0, err
    assert mine.is_file() and "removed the wheel" not in err


def _unwrite(path: Path) -> None:
    """`path` back to a placeholder, as a slim tree's unread files are."""
    size = path.stat().st_size
    path.unlink()
    with open(path, "wb") as out:
        out.truncate(size)
    os.utime(path, ns=(slim.PLACEHOLDER_MTIME_NS, slim.PLACEHOLDER_MTIME_NS))


def test_compiled_depth_gets_the_wheel_back_before_it_reads_an_unwritten_file(
    own_cache, cli, cli_json, cubin_wheel, monkeypatch
):
    """Kept answers (the probe's) with compiled depth to work out again, and its
    C++ never written from the wheel: the wheel is fetched before anything
    reads them (read in this process without it, the run would stop)."""
    cache, folder, wheel = own_cache
    monkeypatch.setenv("HPROBE_KERNEL_TABLE", str(cubin_wheel))  # the table 0.6.13 names
    code, first, err = cli_json(*DEEP)
    assert code == 0 and any(r["depth"] == "compiled" for r in first["results"]), err
    shutil.rmtree(cache / "deep")
    (tree,) = (cache / "trees").glob("*.slim")
    for relative in (*READ, "../artifacts.py"):
        _unwrite(data_dir(tree / "flashinfer") / relative)
    code, out, err = cli(*DEEP)
    # Asked for it, and said so: the answers stay at the validators, with the reason.
    assert code == 0 and "Traceback" not in err, err
    said = " ".join(out.split())
    assert f"not evaluated: the release's C++ cannot be read: cannot fetch flashinfer-python=={RELEASE}" in said
    shutil.copy2(wheel, folder / wheel.name)
    code, again, err = cli_json(*DEEP)
    assert code == 0 and _answers(again) == _answers(first), err


def test_a_search_reads_entry_points_from_kept_trees(own_cache, cli_json):
    """Where each kernel first exists, read from the kept tree of a release whose
    wheel was removed: nothing fetched for it (the index is an empty folder)."""
    from hprobe.support.presence import entry_point_in_kept_tree, entry_point_in_wheel

    cache, _folder, wheel = own_cache
    assert cli_json(*QUESTION, "--sm", "100")[0] == 0
    tree = trees.kept_without_wheel(RELEASE)
    assert tree is not None
    for entry in ("flashinfer.mla.trtllm_batch_decode_with_kv_cache_mla", "flashinfer.mla.no_such_entry"):
        assert entry_point_in_kept_tree(entry, tree) == entry_point_in_wheel(entry, wheel)
    _unwrite(tree / "flashinfer" / "mla" / "__init__.py")
    assert entry_point_in_kept_tree("flashinfer.mla.trtllm_batch_decode_with_kv_cache_mla", tree) is None


def test_a_run_that_keeps_no_answers_keeps_the_wheel(own_cache, cli_json):
    """--no-cache keeps no answers: the wheel is what the next such run reads, and stays."""
    cache, _folder, wheel = own_cache
    code, _doc, err = cli_json(*QUESTION, "--sm", "100", "--no-cache")
    assert code == 0, err
    assert (cache / "wheels" / wheel.name).is_file() and "removed the wheel" not in err


def test_which_kernels_a_kept_tree_defines_is_what_its_wheel_says(own_cache, cli_json, monkeypatch):
    """`kernels --releases` on a release whose wheel was removed: the files
    written before answer, a file never written has the wheel fetched again."""
    cache, folder, wheel = own_cache
    shutil.copy2(wheel, folder / wheel.name)
    monkeypatch.setenv("HPROBE_KEEP_WHEELS", "1")
    code, whole, err = cli_json("kernels", "--releases", RELEASE)
    assert code == 0, err
    monkeypatch.delenv("HPROBE_KEEP_WHEELS")
    assert cli_json(*QUESTION, "--sm", "100")[0] == 0
    assert not (cache / "wheels" / wheel.name).exists()
    code, kept, err = cli_json("kernels", "--releases", RELEASE)
    assert code == 0, err
    assert kept["kernels"] == whole["kernels"]


# A first question whose kernel reaches no launcher compiled depth reads: the
# release's C++ is never written into its tree.
FIRST = ["matrix", "--flashinfer", RELEASE, "-k", "xqa-mla", "--sm", "90", "--heads", "1-16"]


def test_a_second_question_read_in_this_process_gets_the_wheel_back(own_cache, cli_json):
    """The first question never wrote the release's C++; after its wheel was
    removed, a reader in the main process (compiled depth's port lookup, as the
    kernel-table thread makes it) opens that C++ without asking the release
    for its tree first: the wheel is fetched again (verified) and the file
    written from it, never a TreeUnreadable out of the command."""
    from hprobe.compiled.trtllm_gen import Port, _read_port

    cache, folder, wheel = own_cache
    assert cli_json(*FIRST)[0] == 0
    assert not (cache / "wheels" / wheel.name).exists()
    shutil.copy2(wheel, folder / wheel.name)
    release = trees.resolve(RELEASE)
    package = release.location / "flashinfer"
    assert slim.unwritten([data_dir(package) / relative for relative in READ])  # never read before
    assert isinstance(_read_port(package), Port)  # read here, not through `release.tree`
    assert (cache / "wheels" / wheel.name).is_file()
    assert not slim.unwritten([data_dir(package) / relative for relative in READ])


def test_a_wheel_that_cannot_be_had_again_stops_the_read(own_cache, cli_json):
    """The same reader with the index empty: the read stops with
    TreeUnreadable, and no half-written file is seen (a command that meets it
    answers at the validators with the reason: the test before this one)."""
    from hprobe.compiled.trtllm_gen import _read_port

    cache, _folder, _wheel = own_cache
    assert cli_json(*FIRST)[0] == 0
    package = trees.resolve(RELEASE).location / "flashinfer"
    with pytest.raises(slim.TreeUnreadable, match=f"cannot fetch flashinfer-python=={RELEASE}"):
        _read_port(package)
    assert slim.unwritten([data_dir(package) / relative for relative in READ])


def _small_wheel(folder: Path) -> Path:
    """A wheel whose RECORD gives its files' sizes, so an emptied file is damage."""
    init = b"__version__ = '0.0.1'\n"
    wheel = folder / "flashinfer_python-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("flashinfer/__init__.py", init)
        zf.writestr(
            "flashinfer_python-0.0.1.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: flashinfer-python\nVersion: 0.0.1\n",
        )
        zf.writestr(
            "flashinfer_python-0.0.1.dist-info/RECORD",
            f"flashinfer/__init__.py,,{len(init)}\nflashinfer_python-0.0.1.dist-info/RECORD,,\n",
        )
    return wheel


@pytest.mark.pure
def test_a_damaged_tree_another_run_reads_stays_theirs_and_this_run_reads_its_own(tmp_path, monkeypatch):
    """Two runs on one damaged tree: the one that finds it damaged while the
    other holds it (`cache.in_use`) unpacks a private copy, leaving theirs in
    place; with no other reader it is unpacked again where it is."""
    from hprobe.support import cache

    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setattr(trees, "_PRIVATE", [])
    wheel = _small_wheel(tmp_path)
    shared = trees.resolve(str(wheel)).tree
    init = shared / "flashinfer" / "__init__.py"
    init.write_text("")  # damaged: RECORD gives another size
    with cache.in_use(shared):
        again = trees.resolve(str(wheel)).tree
        assert again != shared and again.parent.parent == tmp_path / "tmp"
        assert (again / "flashinfer" / "__init__.py").read_bytes() == b"__version__ = '0.0.1'\n"
        assert init.is_file() and init.read_text() == ""  # the other run's tree is where it was
    # Held by no run: unpacked again in place.
    healed = trees.resolve(str(wheel)).tree
    assert healed == shared and init.read_bytes() == b"__version__ = '0.0.1'\n"
