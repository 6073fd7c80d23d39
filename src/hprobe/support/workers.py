"""The probe worker: an isolated interpreter with a release's tree first on
sys.path, bounded in time, answering one JSON request (probe kernels, or read
names of a module on a faked SM). A worker that gives no answer makes every
asked cell inconclusive, with its reason."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

import hprobe
from hprobe.kernels import get_variant
from hprobe.model.outcome import Cause, HeadResult, KernelSMResult, Outcome
from hprobe.support import cache
from hprobe.support.trees import WORKER_TIMEOUT, Release
from hprobe.support.zygote import TimedOut, zygote
from hprobe.system.bounded import Timeout, run_bounded, setting_from_env, stopping
from hprobe.system.lifetime import scratch_dir


def _run_worker(release: Release, kernel_ids: list[str], sms: list[int], heads: list[int]) -> list[KernelSMResult]:
    tree = release.tree  # checked (unpacked again if damaged) on first use
    request = {"tree": str(tree), "kernels": kernel_ids, "sms": sms, "heads": heads}
    # A tree of the cache is held while the worker runs from it: a `cache
    # prune` or `clear` meanwhile leaves it (cache.held_alone).
    with cache.in_use(tree) if _in_cache(tree) else contextlib.nullcontext():
        if _in_cache(tree) and not tree.is_dir():
            reason = (
                f"flashinfer {release.version}: its tree was removed from the cache as this run began to use it "
                "(hprobe cache prune or clear); run again"
            )
            return [_inconclusive(k, sm, release.version, heads, reason) for k in kernel_ids for sm in sms]
        proc = _worker(request)
    if isinstance(proc, str):
        reason = f"flashinfer {release.version} could not be probed here: {proc}"
        return [_inconclusive(k, sm, release.version, heads, reason) for k in kernel_ids for sm in sms]
    doc = proc
    if "error" in doc:
        reason = f"flashinfer {release.version} could not be probed here: {doc['error']}"
        if release.unmet:
            reason += "; unmet requirements: " + "; ".join(map(str, release.unmet))
        return [_inconclusive(k, sm, release.version, heads, reason) for k in kernel_ids for sm in sms]
    return [KernelSMResult.from_dict(r) for r in doc["results"]]


def read_in_worker(release: Release, module: str, names: list[str], sm: int) -> dict:
    """Names of a flashinfer module, imported in a worker from the release's tree
    on a faked `sm` (see worker._read): {"values": {...}}, {"import_error": ...}
    or {"error": ...}."""
    doc = _worker({"tree": str(release.tree), "read": {"module": module, "names": names}, "sm": sm})
    return {"error": doc} if isinstance(doc, str) else doc


def _worker(request: dict) -> dict | str:
    """Run the worker on one request: its JSON answer, or why there is none."""
    # An isolated interpreter (-I: no current directory, no user site, no
    # PYTHON* variables) in a directory of its own, importing this very
    # package by path: a `probe/` in the user's working tree is never run.
    package_root = str(Path(hprobe.__file__).resolve().parent.parent)
    bootstrap = (
        f"import sys; sys.path.insert(0, {package_root!r}); from hprobe.support.worker import main; sys.exit(main())"
    )
    # Compiled bytecode never goes beside a tree the user named (`--flashinfer
    # DIR`): there it goes to hprobe's cache. A tree hprobe unpacked keeps its
    # own beside its sources, as an installed package does: a prefix applies
    # to every module, so it would also send torch and every other package of
    # the environment to be compiled again into the cache (a cold report's
    # first four workers spent 24 s each, about half of it compiling torch).
    # The worker's temp files go to its own directory, removed with it
    # however the worker ends.
    in_cache = _in_cache(Path(request["tree"]))
    pycache = None if in_cache else str(cache.root() / "pycache")
    if pycache is not None:
        bootstrap = f"import sys; sys.pycache_prefix = {pycache!r}; " + bootstrap
    if in_cache:
        # Releases fetched into the cache compile each source once between
        # them (support/bytecode.py): neighbouring releases share most files.
        request = {**request, "bytecode": str(cache.root() / "bytecode")}
    limit = setting_from_env(WORKER_TIMEOUT)
    workdir = scratch_dir(None, "hprobe-worker")  # named by its owner: a killed run's is removed later
    try:
        # Forked from the run's zygote where it can be (torch imported once,
        # support/zygote.py), else a fresh interpreter.
        forked = zygote() if not stopping() else None
        started = time.monotonic()
        try:
            proc = forked.run(request, workdir, pycache, limit) if forked is not None else None
            if proc is None:
                # What the zygote's attempt used counts against the one limit.
                left = limit - (time.monotonic() - started)
                if left <= 0:
                    raise Timeout()
                env = dict(os.environ, TMPDIR=str(workdir), HPROBE_WORKER="1")
                proc = run_bounded(
                    [sys.executable, "-I", "-c", bootstrap], left, json.dumps(request), cwd=workdir, env=env
                )
        except (Timeout, TimedOut):
            return f"the probe worker did not finish within {limit:g} s ({WORKER_TIMEOUT[0]} sets the limit)"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    try:
        doc = dict(json.loads(proc.stdout.strip().splitlines()[-1]))
        received = doc.pop("received", 0)
        if isinstance(received, int) and received > 0:
            cache.record_received("wheel members", received)
        return doc
    except (json.JSONDecodeError, IndexError):
        tail = " ".join(proc.stderr.split())[-300:]
        return {"error": f"probe worker exited {proc.returncode}: {tail}"}


def _in_cache(tree: Path) -> bool:
    """A tree hprobe unpacked into its cache (not one the user named)."""
    try:
        return tree.resolve().is_relative_to((cache.root() / "trees").resolve())
    except OSError:
        return False


def _inconclusive(key: str, sm: int, version: str, heads: list[int], reason: str) -> KernelSMResult:
    variant = get_variant(key)
    result = KernelSMResult(
        variant.probe.id,
        sm,
        version,
        notes=[f"worker: {reason}"],
        config=variant.values,
        key=variant.key,
        unanswered=True,
    )
    for h in heads:  # the release could not run here
        result.heads[h] = HeadResult(h, Outcome.INCONCLUSIVE, reason=reason, cause=Cause.ENVIRONMENT.value)
    return result
