"""Compiled depth worked out beside the probe, in a child process.

A cold probe of the installed release spends most of its time importing torch
and flashinfer, on one core. Compiled depth needs none of that: the kernel
table (found, verified, parsed: about 0.5 s) and the selection over every
count and shape `deepen` asks (about 1.2 s for the shipped tables) need only
the release's files. So a child started before the import finds the table and
evaluates every call the kernels asked for can make into trtllm-gen
(`compiled.depth.evaluate_ahead`), on another core; the parent adopts what it
hands back when it deepens its results.

The child is a fresh interpreter running `main` below, not a fork: threads of
the parent (a release fetched beside the probe) may hold a lock at the moment
of a fork, and the forked child would wait on it forever. It runs bounded like
every helper (its own group, the probe worker's time limit, killed with hprobe).

Only a faster road: the answers are the ones the parent would compute (same
code, table, GPU, call and count), what the child did not answer the parent
evaluates itself, and a child that fails, times out or hands back nothing
usable costs only its work: the table is then found by the parent, as without it.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path

from hprobe.compiled import depth, trtllm_gen
from hprobe.compiled.files import TABLE_SETTING
from hprobe.compiled.table import KernelMeta, RowsOnDemand, TableError, Tables
from hprobe.compiled.trtllm_gen import Gate, Port
from hprobe.support import cache


def tables_ahead(
    package: Path, version: str, wanted: dict[str, list[int]], heads: list[int], progress: Callable[[str], None]
) -> Future[Tables] | None:
    """The release's kernel table, with the answers deepen will ask of it
    adopted, as a future; None where compiled depth is off."""
    if os.environ.get(TABLE_SETTING, "").strip().lower() == "off":
        return None
    from hprobe.support.trees import WORKER_TIMEOUT
    from hprobe.system.bounded import setting_from_env

    # Bounded as a probe worker is (it may fetch the table as a worker fetches a
    # release); an invalid setting is the input error it is, here and now.
    limit = setting_from_env(WORKER_TIMEOUT)
    future: Future[Tables] = Future()

    def settle() -> None:
        try:
            future.set_result(
                _from_child(package, version, wanted, heads, limit) or _found_here(package, version, progress)
            )
        except BaseException as exc:  # noqa: BLE001 - the asker gets it, whatever it is
            future.set_exception(exc)

    # Nothing waits for this thread: a run that never asks ends without it, its child killed with it.
    threading.Thread(target=settle, name="hprobe-deep-ahead", daemon=True).start()
    return future


def _from_child(
    package: Path, version: str, wanted: dict[str, list[int]], heads: list[int], limit: float
) -> Tables | None:
    import shutil

    import hprobe
    from hprobe.system.bounded import Timeout, run_bounded
    from hprobe.system.lifetime import scratch_dir

    # This hprobe's own code first on the child's path, whatever the environment says.
    code = Path(hprobe.__file__).resolve().parent.parent
    bootstrap = f"import sys; sys.path.insert(0, {str(code)!r}); from hprobe.support.deep_ahead import main; main()"
    workdir = scratch_dir(None, "hprobe-deep-ahead")  # named by its owner: a killed run's is removed later
    try:
        out = workdir / "answers.pickle"
        request = {"package": str(package), "version": version, "wanted": wanted, "heads": heads, "out": str(out)}
        try:
            done = run_bounded(
                [sys.executable, "-I", "-c", bootstrap], limit, input_text=json.dumps(request), cwd=workdir
            )
        except Timeout:
            return None
        return _received(out.read_bytes(), package, version) if done.returncode == 0 else None
    except OSError:
        return None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# What the child hands back: the tables (the table without its rows), how
# many rows the table has, the answers worked out ahead, the release's gate and
# port, and the bytes it took off the network by kind (the parent says them at
# exit, as if it had fetched them itself).
Handed = tuple[Tables, int, dict[depth.AnswerKey, depth.Existence], tuple[Gate | str, Port | str], dict[str, int]]


def _work(package: Path, version: str, wanted: dict[str, list[int]], heads: list[int]) -> Handed:
    from hprobe.support.kernel_tables import tables_if_ported

    tables = tables_if_ported(package, version)
    answers = depth.evaluate_ahead(package, _defined_here(package, wanted), heads, tables)
    rows = 0
    if tables.table is not None:
        # The file was kept in the cache by tables_for, its rows as parsed too:
        # the parent reads them again only should it evaluate an answer itself.
        rows = len(tables.table)
        tables = replace(tables, table=replace(tables.table, rows=(), data=b"", checksums=b""))
    return tables, rows, answers, trtllm_gen.known(package), cache.received_by_kind()


def _defined_here(package: Path, wanted: dict[str, list[int]]) -> dict[str, list[int]]:
    """The variants whose entry point the release defines, read from its
    source: a probe of one it lacks stops at "absent" and asks compiled depth
    nothing (0.6.14 has no trtllm_prefill_with_kv_cache_mla: a third of the
    matrix's answers). A name this reading misses only leaves its answers to
    the parent, which evaluates what the child did not."""
    from hprobe.kernels import get_variant
    from hprobe.support.presence import entry_point_present

    present: dict[str, bool | None] = {}
    kept = {}
    for key, sms in wanted.items():
        variant = get_variant(key)
        if not variant.probe.compiled_calls(variant.values):
            continue  # asks compiled depth nothing, present or not
        entry = variant.probe.entry_point
        if entry not in present:
            present[entry] = entry_point_present(entry, str(package))
        if present[entry] is not False:
            kept[key] = sms
    return kept


def _received(payload: bytes, package: Path, version: str) -> Tables | None:
    try:
        tables, rows, answers, (gate, port), received = pickle.loads(payload)
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError):
        return None
    if (
        not isinstance(tables, Tables)
        or not isinstance(rows, int)
        or not isinstance(answers, dict)
        or not isinstance(gate, Gate | str)
        or not isinstance(port, Port | str)
        or not isinstance(received, dict)
    ):
        return None
    if tables.table is not None:
        sha256 = tables.table.sha256
        tables = replace(
            tables, table=replace(tables.table, rows=RowsOnDemand(rows, lambda: _rows(package, version, sha256)))
        )
    for kind, size in received.items():
        if isinstance(kind, str) and isinstance(size, int):
            cache.record_received(kind, size)
    depth.adopt(answers)
    trtllm_gen.adopt(package, gate, port)
    return tables


def _rows(package: Path, version: str, sha256: str) -> Sequence[KernelMeta]:
    """The rows of the table the child read, found again here (the cache
    holds it, and its rows as parsed)."""
    from hprobe.support.kernel_tables import tables_if_ported

    table = tables_if_ported(package, version).table
    if table is None or table.sha256 != sha256:
        raise TableError(f"the kernel table (sha256 {sha256[:12]}) the probe's helper read is no longer to be found")
    return table.rows


def _found_here(package: Path, version: str, progress: Callable[[str], None]) -> Tables:
    from hprobe.support.kernel_tables import tables_if_ported

    return tables_if_ported(package, version, progress)


def main() -> None:
    """The child: a request on stdin, what it worked out pickled into the file it names."""
    from hprobe.system import collector

    collector.tune_for_a_run()
    request = json.loads(sys.stdin.read())
    package = Path(request["package"])
    handed = _work(
        package,
        request["version"],
        {str(k): [int(sm) for sm in v] for k, v in request["wanted"].items()},
        [int(h) for h in request["heads"]],
    )
    Path(request["out"]).write_bytes(pickle.dumps(handed, protocol=pickle.HIGHEST_PROTOCOL))


if __name__ == "__main__":
    main()
