"""A tree's reading kept in the cache (support/readings.py): used only while
everything it rests on reads the same, never trusted when foreign."""

from __future__ import annotations

import os
import pickle
import shutil
import time
from pathlib import Path

import pytest

from hprobe.rules.repo import extract as extract_module
from hprobe.rules.repo.tree.mapping import load_mapping
from hprobe.support import readings
from hprobe.support.readings import KeptReadings

from ..conftest import ROOT

pytestmark = pytest.mark.pure

REPOS = ROOT / "tests" / "fixtures" / "repos"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    dest = tmp_path / "pre48047"
    shutil.copytree(REPOS / "pre48047", dest)
    return dest


def _summary(found) -> dict:
    doc = found.to_dict()
    return {
        **doc,
        "table": [(b.name, b.kernel, b.sms, b.rule.describe(), str(b.where)) for b in found.table.backends],
        "provenance": found.table.provenance,
    }


def _forbid_reading(monkeypatch) -> None:
    def refuse(*_a, **_k):
        raise AssertionError("the tree was read again")

    monkeypatch.setattr(readings, "extract", refuse)


def test_a_kept_reading_is_the_reading_and_parses_nothing(tree, monkeypatch):
    fresh = extract_module.extract(tree, load_mapping())
    first = KeptReadings().extract(tree, load_mapping())
    _forbid_reading(monkeypatch)
    kept = KeptReadings().extract(tree, load_mapping())
    assert _summary(kept) == _summary(first) == _summary(fresh)
    assert kept.index is None and fresh.index is not None
    # What a patch needs (the parsed tree, the rule's own nodes) is read again on demand.
    monkeypatch.undo()
    again = kept.indexed()
    assert again.index is not None and _summary(again) == _summary(fresh)
    assert {c.cls.qualname: c.function.node.lineno for c in again.classes} == {
        c.cls.qualname: c.function.node.lineno for c in fresh.classes
    }


def test_an_edit_is_seen_even_when_the_mtime_is_put_back(tree):
    source = tree / "vllm" / "models" / "deepseek_v4" / "nvidia" / "flashinfer_sparse.py"
    before = KeptReadings().extract(tree, load_mapping())
    rules = {c.cls.name: c.rule.describe() for c in before.classes}
    assert rules["DeepseekV4FlashInferMLAAttention"] == "pad_to {64, 128}"
    stat = source.stat()
    text = source.read_text()
    assert "64" in text
    source.write_text(text.replace("64", "32"))
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # as a restore from an archive would
    after = KeptReadings().extract(tree, load_mapping())
    assert {c.cls.name: c.rule.describe() for c in after.classes}[
        "DeepseekV4FlashInferMLAAttention"
    ] == "pad_to {32, 128}"


def test_a_digest_kept_by_file_identity_sees_an_edit_that_puts_size_and_mtime_back(tree, monkeypatch):
    """A warm reading stats the tree's files instead of reading them (SGLang's
    4,000 files), yet an edit that keeps the size and puts the mtime back is
    read: it changed the file's change time, which nothing can set back."""
    monkeypatch.setattr(readings._StatMemo, "RACY_S", 0.0)  # this tree was written a moment ago: count it as settled
    time.sleep(0.05)
    KeptReadings().extract(tree, load_mapping())
    opened: list[str] = []
    real = readings._prefix_digest
    monkeypatch.setattr(readings, "_prefix_digest", lambda path, limit: opened.append(path) or real(path, limit))
    KeptReadings().extract(tree, load_mapping())
    assert opened == []  # every file answered from its identity
    source = tree / "vllm" / "models" / "deepseek_v4" / "nvidia" / "flashinfer_sparse.py"
    stat = source.stat()
    time.sleep(0.05)
    source.write_text(source.read_text().replace("64", "32"))
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert source.stat().st_size == stat.st_size
    after = KeptReadings().extract(tree, load_mapping())
    assert opened == [str(source)]
    assert {c.cls.name: c.rule.describe() for c in after.classes}[
        "DeepseekV4FlashInferMLAAttention"
    ] == "pad_to {32, 128}"


def test_a_file_changed_just_now_is_never_answered_from_its_identity(tree, monkeypatch):
    """Git's racy entries: two writes within one tick of the change-time
    clock would share an identity, so a file changed less than RACY_S before
    its digest is taken is read again next time."""
    KeptReadings().extract(tree, load_mapping())  # the fixture copied every file a moment ago
    opened: list[str] = []
    real = readings._prefix_digest
    monkeypatch.setattr(readings, "_prefix_digest", lambda path, limit: opened.append(path) or real(path, limit))
    KeptReadings().extract(tree, load_mapping())
    assert sorted(opened) == sorted(str(p) for p in tree.rglob("*.py"))


def test_a_new_file_in_the_tree_is_read(tree):
    KeptReadings().extract(tree, load_mapping())
    extra = tree / "vllm" / "models" / "deepseek_v4" / "nvidia" / "another.py"
    extra.write_text(
        "from vllm.models.deepseek_v4.attention import DeepseekV4Attention\n\n\n"
        "class AnotherAttention(DeepseekV4Attention):\n"
        "    def get_padded_num_q_heads(self, num_heads):\n"
        "        return 128\n"
    )
    names = {c.cls.name for c in KeptReadings().extract(tree, load_mapping()).classes}
    assert "AnotherAttention" in names


def test_a_requirements_file_and_an_include_that_appears_are_read_again(tmp_path):
    edge = tmp_path / "edge"
    shutil.copytree(REPOS / "edge", edge)
    mapping = load_mapping(edge / "mapping.toml")
    requirements = edge / "requirements.txt"
    assert KeptReadings().extract(edge, mapping).pin.spec == "==0.6.13"
    requirements.write_text(requirements.read_text().replace("==0.6.13", "==0.6.14"))
    assert KeptReadings().extract(edge, mapping).pin.spec == "==0.6.14"
    # An include, in a folder the index does not walk, that names no file yet.
    (edge / "tests").mkdir()
    requirements.write_text("torch==2.13.0\n-r tests/more.txt\n")
    assert KeptReadings().extract(edge, mapping).pin is None
    (edge / "tests" / "more.txt").write_text("flashinfer-python>=0.6.15\n")
    assert KeptReadings().extract(edge, mapping).pin.spec == ">=0.6.15"


def test_no_cache_reads_and_keeps_nothing(tree, monkeypatch):
    stored = []
    monkeypatch.setattr(readings, "_store", lambda *a: stored.append(a))
    KeptReadings(use_cache=False).extract(tree, load_mapping())
    assert stored == []
    KeptReadings().extract(tree, load_mapping())
    assert len(stored) == 1


def test_a_foreign_or_corrupt_entry_is_discarded_never_run(tree, tmp_path):
    reader = KeptReadings()
    key = reader._key(tree, load_mapping(), (), None, None)
    assert key is not None
    entry = readings._path(key)
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    for body in (
        pickle.dumps((readings.SCHEMA, key, {}, pickle.dumps(Payload()))),
        b"not a pickle",
        pickle.dumps(("hprobe.reading/0", key, {}, b"")),
    ):
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.write_bytes(body)
        found = reader.extract(tree, load_mapping())
        assert not marker.exists()
        assert {c.cls.name for c in found.classes} >= {"DeepseekV4FlashInferMLAAttention"}
    # The last run kept a good entry in place of the foreign one.
    assert readings._load(key) is not None


class _Release:
    """A release reader whose answers are none of them kept (as when an import
    fails on this machine): readings that ask it are not kept."""

    version = "0.0.0"
    identity = "fixture"
    index = None

    def __init__(self) -> None:
        self.unkept = 0

    def import_names(self, module: str, names: list[str], sm: int | None) -> dict:
        self.unkept += 1
        return {"error": "ImportError: not on this machine"}


def test_a_reading_that_used_an_answer_not_kept_is_not_kept(monkeypatch):
    like = REPOS / "sglang_like"
    mapping = load_mapping(like / "mapping.toml")
    release = _Release()
    stored = []
    monkeypatch.setattr(readings, "_store", lambda *a: stored.append(a))
    found = KeptReadings().extract(like, mapping, (), release, None)
    assert release.unkept > 0 and stored == []
    assert any(c.problem is not None for c in found.classes) or found.paths.problems  # said, not hidden


def test_the_mapping_key_does_not_depend_on_the_hash_seed():
    """A reading is keyed by the mapping's repr: no set in it, whose order
    would change from one process to the next."""
    from dataclasses import fields, is_dataclass

    def sets_in(value, where: str) -> list[str]:
        if isinstance(value, (set, frozenset)):
            return [where]
        if is_dataclass(value) and not isinstance(value, type):
            return [s for f in fields(value) for s in sets_in(getattr(value, f.name), f"{where}.{f.name}")]
        if isinstance(value, dict):
            return [s for k, v in value.items() for s in sets_in(k, where) + sets_in(v, f"{where}[{k!r}]")]
        if isinstance(value, (list, tuple)):
            return [s for i, v in enumerate(value) for s in sets_in(v, f"{where}[{i}]")]
        return []

    mappings = [*extract_module.shipped_mappings(), load_mapping(REPOS / "sglang_like" / "mapping.toml")]
    assert [s for m in mappings for s in sets_in(m, m.path)] == []
