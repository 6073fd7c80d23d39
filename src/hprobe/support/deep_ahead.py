"""Compiled depth worked out beside the probe, in a forked child.

A cold probe of the installed release spends most of its time importing torch
and flashinfer, on one core. Compiled depth needs none of that: the kernel
table (found, verified, parsed: about 0.5 s) and the selection over every
count and shape `deepen` asks (about 1.2 s for the shipped tables) need only
the release's files. So a child forked before the import finds the table and
evaluates every call the kernels asked for can make into trtllm-gen
(`compiled.depth.evaluate_ahead`), on another core; the parent adopts what it
hands back when it deepens its results.

Only a faster road: the answers are the ones the parent would compute (same
code, table, GPU, call and count), what the child did not answer the parent
evaluates itself, and a child that fails or hands back nothing usable costs
only its work: the table is then found by the parent, as without it.
"""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path

from hprobe.compiled import depth, trtllm_gen
from hprobe.compiled.depth import Tables
from hprobe.compiled.trtllm_gen import Gate, Port
from hprobe.system.lifetime import die_with_parent


def tables_ahead(package: Path, version: str, wanted: dict[str, list[int]], heads: list[int], progress: Callable[[str], None]) -> Future[Tables] | None:
    """The release's kernel table, with the answers deepen will ask of it
    adopted, as a future; None where no child can be forked (the caller
    finds the table itself, when asked)."""
    if not hasattr(os, "fork") or os.environ.get(depth.TABLE_SETTING, "").strip().lower() == "off":
        return None
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child; what it hands back is checked by the parent
        die_with_parent(parent)
        os.close(read_fd)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)  # the parent's report and progress only
        os.dup2(devnull, 2)
        try:
            payload = pickle.dumps(_work(package, version, wanted, heads), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:  # noqa: BLE001 - the parent finds the table itself
            payload = b""
        with os.fdopen(write_fd, "wb") as out:
            out.write(payload)
        os._exit(0)
    os.close(write_fd)
    future: Future[Tables] = Future()

    def settle() -> None:
        try:
            future.set_result(_received(read_fd, pid, package) or _found_here(package, version, progress))
        except BaseException as exc:  # noqa: BLE001 - the asker gets it, whatever it is
            future.set_exception(exc)

    # A daemon thread reads the pipe as the child writes (a payload larger than
    # the pipe would otherwise hold the child until asked); nothing waits for it.
    threading.Thread(target=settle, name="hprobe-deep-ahead", daemon=True).start()
    return future


Handed = tuple[Tables, dict[depth.AnswerKey, depth.Existence], tuple[Gate | str, Port | str]]


def _work(package: Path, version: str, wanted: dict[str, list[int]], heads: list[int]) -> Handed:
    from hprobe.support.kernel_tables import tables_for

    tables = tables_for(package, version)
    answers = depth.evaluate_ahead(package, wanted, heads, tables)
    if tables.table is not None:
        # The file's bytes were kept in the cache by tables_for; the parent reads rows only.
        tables = replace(tables, table=replace(tables.table, data=b"", checksums=b""))
    return tables, answers, trtllm_gen.known(package)


def _received(read_fd: int, pid: int, package: Path) -> Tables | None:
    with os.fdopen(read_fd, "rb") as stream:
        payload = stream.read()
    os.waitpid(pid, 0)
    try:
        tables, answers, (gate, port) = pickle.loads(payload)
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError):
        return None
    if not isinstance(tables, Tables) or not isinstance(answers, dict) or not isinstance(gate, Gate | str) or not isinstance(port, Port | str):
        return None
    depth.adopt(answers)
    trtllm_gen.adopt(package, gate, port)
    return tables


def _found_here(package: Path, version: str, progress: Callable[[str], None]) -> Tables:
    from hprobe.support.kernel_tables import tables_for

    return tables_for(package, version, progress)
