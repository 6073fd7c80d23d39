"""Compiled depth worked out in a child beside the probe (support/deep_ahead.py).

The child's answers must be exactly deepen's own, must cover every answer
deepen asks on a real probe of the installed release (else the speed is lost
without a word), and a child that fails must cost nothing but its work."""

from __future__ import annotations

import copy
import importlib.util
import pickle
import time
from dataclasses import replace
from pathlib import Path

import pytest

from hprobe.compiled import depth, trtllm_gen
from hprobe.compiled.table import RowsOnDemand, Tables
from hprobe.compiled.trtllm_gen.era_0_6_12 import Refusal
from hprobe.support import deep_ahead, kernel_tables
from hprobe.support.kernel_package import package_of

_SPEC = importlib.util.find_spec("flashinfer")
PACKAGE = Path(next(iter(_SPEC.submodule_search_locations)))  # type: ignore[union-attr]
# A dense and a DSv4 variant, on an SM the runner takes and one it refuses.
NEEDED = {"trtllm-mla[backend=trtllm-gen]": [100, 120], "dsv4-sparse-mla": [100]}
HEADS = list(range(1, 257))


@pytest.fixture(scope="module")
def tables(cubin_wheel) -> Tables:
    got = kernel_tables._from_wheel(cubin_wheel, package_of(PACKAGE), cubin_wheel.name)
    assert not isinstance(got, str) and got is not None
    return Tables(got)


@pytest.fixture(scope="module")
def probed():
    from hprobe.support.gather import _probe_in_process

    return _probe_in_process(NEEDED, HEADS, workers=1)


def _deepened(probed, tables: Tables) -> list[dict]:
    results = copy.deepcopy(probed.results)
    for result in results.values():
        depth.deepen(result, PACKAGE, lambda: tables)
    return [r.to_dict() for r in results.values()]


def test_answers_worked_out_ahead_are_every_answer_deepen_asks_and_the_same(probed, tables, monkeypatch):
    depth._EXISTENCES.clear()
    answers = depth.evaluate_ahead(PACKAGE, NEEDED, HEADS, tables)
    assert answers, "nothing worked out ahead"
    assert {key[2].sm for key in answers} == {100}  # SM120: the runner refuses it, no selection runs

    depth._EXISTENCES.clear()
    own = _deepened(probed, tables)
    asked = set(depth._EXISTENCES)
    assert asked and asked <= set(answers), "deepen asked for answers the child does not work out"

    depth._EXISTENCES.clear()
    depth.adopt(pickle.loads(pickle.dumps(answers)))  # as they cross the pipe

    def evaluated(*_args, **_kwargs):
        raise AssertionError("deepen evaluated a selection worked out ahead")

    monkeypatch.setattr(depth, "existence", evaluated)
    assert _deepened(probed, tables) == own
    assert any(r["depth"] == "compiled" for r in own)


def test_answers_adopted_leave_the_tables_rows_unread(probed, tables):
    """Where every answer deepen asks was worked out ahead, the parent makes no
    selection: the rows the child did not hand back are never read here."""
    depth._EXISTENCES.clear()
    depth._SELECTIONS.clear()
    own = _deepened(probed, tables)
    answers = dict(depth._EXISTENCES)

    def unread():
        raise AssertionError("the rows were read though every answer was known")

    handed = Tables(replace(tables.table, rows=RowsOnDemand(len(tables.table), unread)))  # type: ignore[arg-type,type-var]
    depth._EXISTENCES.clear()
    depth._SELECTIONS.clear()
    depth.adopt(answers)
    assert _deepened(probed, handed) == own


def test_the_child_hands_back_the_table_the_answers_and_what_the_cxx_says(cubin_wheel, tables, monkeypatch):
    monkeypatch.setenv("HPROBE_KERNEL_TABLE", str(cubin_wheel))
    depth._EXISTENCES.clear()
    trtllm_gen._PORTS.pop(PACKAGE, None)
    trtllm_gen._GATES.pop(PACKAGE, None)
    future = deep_ahead.tables_ahead(PACKAGE, "0.6.14", NEEDED, HEADS, lambda _m: None)
    assert future is not None
    handed = future.result(timeout=300)
    assert handed.table is not None and handed.table.sha256 == tables.table.sha256  # type: ignore[union-attr]
    # The rows stay with the child until a look inside: then they are the table's.
    assert isinstance(handed.table.rows, RowsOnDemand) and handed.table.rows._rows is None  # type: ignore[union-attr]
    assert len(handed.table) == len(tables.table)  # type: ignore[arg-type]
    assert tuple(handed.table.rows) == tuple(tables.table.rows)  # type: ignore[union-attr]
    assert len(depth._EXISTENCES) == 256 * 2  # each count, for each call on SM100
    assert isinstance(trtllm_gen._PORTS[PACKAGE], trtllm_gen.Port) and isinstance(
        trtllm_gen._GATES[PACKAGE], trtllm_gen.Gate
    )


def test_a_lock_held_by_a_thread_of_the_parent_does_not_hold_the_child(cubin_wheel, tables, monkeypatch):
    """A release fetched beside the probe runs in a thread: a child forked while
    it held a lock waited on that lock forever (a check hung). The child is a
    fresh interpreter, so a lock held here is not held there."""
    monkeypatch.setenv("HPROBE_KERNEL_TABLE", str(cubin_wheel))
    depth._EXISTENCES.clear()
    with kernel_tables._GUARD:  # what tables_for takes first
        future = deep_ahead.tables_ahead(PACKAGE, "0.6.14", NEEDED, HEADS, lambda _m: None)
        assert future is not None
        deadline = time.monotonic() + 300
        while not depth._EXISTENCES and time.monotonic() < deadline and not future.done():
            time.sleep(0.2)  # adopted by the reading thread once the child is done
        assert depth._EXISTENCES, "the child never answered while a lock of the parent was held"
    assert future.result(timeout=300).table is not None


def test_a_child_past_its_limit_leaves_the_table_to_the_parent(cubin_wheel, tables, monkeypatch):
    monkeypatch.setenv("HPROBE_KERNEL_TABLE", str(cubin_wheel))
    monkeypatch.setenv("HPROBE_WORKER_TIMEOUT", "0.01")
    depth._EXISTENCES.clear()
    future = deep_ahead.tables_ahead(PACKAGE, "0.6.14", NEEDED, HEADS, lambda _m: None)
    assert future is not None
    found = future.result(timeout=300)
    assert found.table is not None and found.table.sha256 == tables.table.sha256  # type: ignore[union-attr]
    assert not depth._EXISTENCES  # nothing adopted: deepen evaluates as without a child


def test_what_a_child_hands_back_is_adopted_only_when_whole():
    depth._EXISTENCES.clear()
    for payload in (b"", b"not a pickle", pickle.dumps(("tables", {}, ("gate", "port"))), pickle.dumps([1, 2])):
        assert deep_ahead._received(payload, PACKAGE, "0.6.14") is None
    assert not depth._EXISTENCES


def test_no_child_where_compiled_depth_is_off(monkeypatch):
    monkeypatch.setenv("HPROBE_KERNEL_TABLE", "off")
    assert deep_ahead.tables_ahead(PACKAGE, "0.6.14", NEEDED, HEADS, lambda _m: None) is None


def test_a_refusal_crosses_a_pipe_whole():
    refusal = Refusal(
        "trtllm_paged_attention_launcher",
        "Missing TRTLLM-GEN kernel (decode): x",
        "fmha/launcher.cu",
        "Missing TRTLLM-GEN kernel",
    )
    back = pickle.loads(pickle.dumps(refusal))
    assert (back.function, back.message, back.file, back.needle) == (
        refusal.function,
        refusal.message,
        refusal.file,
        refusal.needle,
    )
    assert str(back) == str(refusal)


def test_the_child_skips_variants_whose_entry_point_the_release_lacks():
    """0.6.14 defines no trtllm_prefill_with_kv_cache_mla: its probe stops at
    "absent" and asks compiled depth nothing, so the child works nothing out
    for it; a variant that makes no trtllm-gen call is left out too."""
    from hprobe.support.presence import entry_point_present

    prefill = "trtllm-mla-prefill[backend=trtllm-gen]"
    assert entry_point_present("flashinfer.mla.trtllm_prefill_with_kv_cache_mla", str(PACKAGE)) is False
    wanted = {**NEEDED, prefill: [100], "batch-mla[backend=fa2]": [100]}
    assert deep_ahead._defined_here(PACKAGE, wanted) == NEEDED
