"""Probing releases: the installed flashinfer in this process (its answers
cached under its RECORD digest), others fetched and probed in a worker."""

from __future__ import annotations

import contextlib
import functools
import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from hprobe.kernels import get_variant
from hprobe.model.errors import HprobeError, InputError
from hprobe.model.outcome import KernelSMResult, Outcome
from hprobe.model.release import INSTALLED, FlashinferInfo, ProbedRelease, Progress
from hprobe.model.sm import SM
from hprobe.support import cache
from hprobe.support.results import cache_per_sm, cached_per_sm, code_digest, installed_identity, probe_release
from hprobe.support.trees import Release, answered, installed_release, prefetch, resolve
from hprobe.support.workers import read_in_worker
from hprobe.system.bounded import kill_running, resume
from hprobe.system.envinfo import installed_flashinfer_info

T = TypeVar("T")

if TYPE_CHECKING:
    from hprobe.compiled.table import Tables
    from hprobe.rules.repo.tree.scan import RepoIndex


def probe_installed(
    needed: dict[str, list[int]],
    heads: list[int],
    use_cache: bool = True,
    workers: int | None = None,
    progress: Progress = lambda _m: None,
) -> ProbedRelease:
    """Probe the flashinfer importable here, in this process; answers for an
    installed distribution pip can vouch for are cached like fetched ones, so
    a warm run (a pre-commit hook) imports neither flashinfer nor torch."""
    identity = installed_identity() if use_cache else None
    cached: dict[tuple[str, int], KernelSMResult] = {}
    missing = dict(needed)
    if identity is not None:
        for key, sms in needed.items():
            hits = cached_per_sm(identity, key, sms, heads)
            cached.update({(key, sm): r for sm, r in hits.items()})
            left = [sm for sm in sms if sm not in hits]
            if left:
                missing[key] = left
            else:
                del missing[key]
    if not missing:
        info = installed_flashinfer_info()
        results = {(key, sm): cached[(key, sm)] for key, sms in needed.items() for sm in sms}
        _deepen(results, _package(info.location), info.version, progress, identity)
        return ProbedRelease(INSTALLED, info, results)
    ahead = _deep_ahead(missing, heads, progress)
    fresh = _probe_in_process(missing, heads, workers)
    if identity is not None:
        for key, sms in missing.items():
            # An inconclusive answer may be this run's accident: asked again next time.
            probed = [
                r
                for r in (fresh.results[(key, sm)] for sm in sms)
                if not any(h.outcome is Outcome.INCONCLUSIVE for h in r.heads.values())
            ]
            cache_per_sm(identity, key, heads, probed)
    merged = {**cached, **fresh.results}
    results = {(key, sm): merged[(key, sm)] for key, sms in needed.items() for sm in sms}
    package = _package(fresh.info.location)
    fetching = ahead[2] if ahead is not None and ahead[:2] == (package, fresh.info.version) else None
    _deepen(results, package, fresh.info.version, progress, identity, fetching)
    return ProbedRelease(INSTALLED, fresh.info, results)


def _deep_ahead(
    needed: dict[str, list[int]], heads: list[int], progress: Progress
) -> tuple[Path, str, Future[Tables]] | None:
    """The installed release's kernel table and compiled-depth answers, worked
    out in a child while this process imports the release (deep_ahead), where
    a kernel asked for can reach a launcher compiled depth evaluates."""
    if not any(_reaches_compiled_depth(key) for key in needed):
        return None
    from hprobe.support.deep_ahead import tables_ahead

    info = installed_flashinfer_info()
    package = _package(info.location)
    if package is None or not package.is_dir():
        return None
    future = tables_ahead(package, info.version, needed, heads, progress)
    return (package, info.version, future) if future is not None else None


def _probe_in_process(needed: dict[str, list[int]], heads: list[int], workers: int | None = None) -> ProbedRelease:
    # Imported here: a warm run answers from the cache without the probe machinery.
    from hprobe.device.session import FlashinferSession
    from hprobe.probe.parallel import probe_split
    from hprobe.probe.run import probe_kernel

    session = FlashinferSession()
    session.open()
    try:

        def job(keys: list[str]) -> list[KernelSMResult]:
            out: list[KernelSMResult] = []
            for key in keys:
                out.extend(probe_kernel(session, get_variant(key), [SM.from_number(s) for s in needed[key]], heads))
            return out

        probed = probe_split(list(needed), job, workers)
        by_key = {(r.key, r.sm): r for r in probed}
        # The order asked for, whichever process probed what.
        results = {(key, sm): by_key[(key, sm)] for key, sms in needed.items() for sm in sms}
        info = FlashinferInfo(session.version, session.location)
    finally:
        session.close()
    return ProbedRelease(INSTALLED, info, results)


def probe_named(
    item: str, needed: dict[str, list[int]], heads: list[int], use_cache: bool, progress: Progress
) -> ProbedRelease:
    """Probe a release that is not installed: fetched, cached and run in a
    subprocess; or the answer of the same probe started ahead (probe_ahead)."""
    if use_cache:
        with _AHEAD_LOCK:
            ahead = _AHEAD.pop(_ahead_key(item, needed, heads), None)
        if ahead is not None:
            try:
                return ahead.result()
            except InputError:
                pass  # probed here again, which says why
    return _probe_named(item, needed, heads, use_cache, progress)


def _probe_named(
    item: str, needed: dict[str, list[int]], heads: list[int], use_cache: bool, progress: Progress
) -> ProbedRelease:
    progress(f"fetching flashinfer {item}")
    release = resolve(item)
    progress(f"probing flashinfer {release.version}")
    sms = sorted({sm for sms in needed.values() for sm in sms})
    results: dict[tuple[str, int], KernelSMResult] = {}
    package = release.location / "flashinfer"
    tables: list[Future[Tables]] = []

    def fetch_tables(probed: list[str]) -> None:
        # Its kernel table, where a kernel probed can reach a launcher compiled
        # depth evaluates, is fetched while the worker probes: fetched after,
        # a cold report's first releases waited 3-4 s each on the index, every
        # core idle. A table no answer needs is kept in the cache, not waited for.
        if any(_reaches_compiled_depth(key) for key in probed):
            tables.append(_tables_alongside(package, release.version, progress))

    for result in probe_release(release, list(needed), sms, heads, use_cache=use_cache, on_probe=fetch_tables):
        if result.key in needed and result.sm in needed[result.key]:
            results[(result.key, result.sm)] = result
    if use_cache and not any(r.unanswered for r in results.values()):
        answered(release)  # kept: its wheel need not be
    _deepen(
        results,
        package,
        release.version,
        progress,
        f"wheel {release.wheel_sha256}" if use_cache and release.wheel_sha256 else None,
        tables[0] if tables else None,
        lambda: release.tree,  # a tree whose wheel was removed gets it back before its files are read
    )
    notes = [u.note(release.version) for u in release.unmet[:MAX_UNMET_NOTES]]
    if len(release.unmet) > MAX_UNMET_NOTES:
        rest = release.unmet[MAX_UNMET_NOTES:]
        notes.append(
            f"flashinfer {release.version}: {len(rest)} more requirements not met here "
            f"({', '.join(u.name for u in rest[:5])}, ...)"
        )
    cache_note = cache.note()
    if cache_note:
        notes.append(cache_note)  # the temporary cache this run used is gone at exit: nothing was added
    # What this run added to the cache is run state, not an answer: said on
    # stderr at the end (cache.added_lines), never in a document, so runs
    # that found the release cached print the same report.
    return ProbedRelease(item, FlashinferInfo(release.version, str(release.location)), results, notes, release.unmet)


def _reaches_compiled_depth(key: str) -> bool:
    """Whether the kernel's probe names launchers compiled depth evaluates
    (it overrides `compiled_call`)."""
    from hprobe.kernels.base import KernelProbe

    return type(get_variant(key).probe).compiled_call is not KernelProbe.compiled_call


def _tables_alongside(package: Path, version: str, progress: Progress) -> Future[Tables]:
    """The release's kernel table, fetched in a thread not waited for (a run
    that never asks ends without it; its helpers end with hprobe)."""
    from hprobe.support.kernel_tables import tables_if_ported

    future: Future[Tables] = Future()
    _settle_unwaited(future, lambda: tables_if_ported(package, version, progress), "hprobe-tables")
    return future


def _settle_unwaited(future: Future[T], work: Callable[[], T], name: str) -> None:
    """`work()` in a daemon thread that nothing waits for, its answer (or
    whatever it raised: the asker gets it) set on `future`."""

    def run() -> None:
        try:
            future.set_result(work())
        except BaseException as exc:  # noqa: BLE001 - the asker gets it, whatever it is
            future.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()


def _deepen(
    results: dict[tuple[str, int], KernelSMResult],
    package: Path | None,
    version: str,
    progress: Progress = lambda _m: None,
    identity: str | None = None,
    fetching: Future[Tables] | None = None,
    readable: Callable[[], object] = lambda: None,
) -> None:
    """Take each result past the validators where its h_q reached compiled code
    hprobe evaluates (compiled/depth.py). The results cache holds what the probe
    saw; this runs on every read, so a table found later deepens cached answers.
    `fetching`: the table, already being fetched.

    What it concludes is kept too, keyed by everything it rests on (`identity`:
    the release's content; hprobe's code; the results as probed; the table
    setting), once the release's kernel table was in hand: evaluating the port
    over the table again costs seconds a warm run should not pay.

    `readable()`: makes every file of the release readable (a slim tree whose
    wheel was removed fetches it again): called before a file not yet written
    from the wheel is read, and before any evaluation."""
    if package is None or not package.is_dir():
        _pending([r for r in results.values() if _reaches_launcher(r)], "the release's C++ is not at hand")
        _entries_unread(list(results.values()), "the release's C++ is not at hand")
        return
    _check_entries(list(results.values()), package, readable)
    needs = [(k, r) for k, r in results.items() if _reaches_launcher(r)]
    if not needs:
        return
    from hprobe.compiled.files import READ, data_dir
    from hprobe.support.slim import unwritten

    read = [package / "artifacts.py", *(data_dir(package) / relative for relative in READ)]
    if unwritten(read) and not _made_readable(readable, [r for _, r in needs], _unread_selection):
        return  # what the keys below read cannot be had
    # One memo per result (kernel variant x SM), as the answers are kept: a run
    # for a subset of SMs reads what a wider run concluded.
    from hprobe.support.kernel_package import miss_settled

    # A table a recent search could not find settles, until the next search, what
    # is concluded without it: kept under that search's time.
    settled = miss_settled(package, version)
    cxx = _cxx_digest(package) if identity else ""
    memos = {k: _deep_key([r], identity, package, settled, cxx) for k, r in needs} if identity else {}
    left = []
    for k, result in needs:
        hit = cache.read_kept("deep", memos[k]) if k in memos else None
        if isinstance(hit, dict):
            results[k] = KernelSMResult.from_dict(hit)
        else:
            left.append((k, result))
    if not left:
        return
    if not _made_readable(readable, [r for _, r in left], _unread_selection):
        return
    from hprobe.support.kernel_tables import tables_for

    found: list[Tables] = []

    def get_tables() -> Tables:
        if not found:
            found.append(fetching.result() if fetching is not None else tables_for(package, version, progress))
        return found[0]

    if not _deepened([r for _, r in left], package, get_tables):
        return
    # Kept once the table was in hand, or not needed (no port, no route): a
    # table that could not be had this time may be found the next.
    if memos and (not found or found[0].table is not None or found[0].disabled or settled):
        for k, result in left:
            cache.keep("deep", memos[k], result.to_dict())


def _made_readable(
    readable: Callable[[], object],
    results: list[KernelSMResult],
    unread: Callable[[list[KernelSMResult], str], None],
) -> bool:
    """`readable()`, or False with `unread(results, why)` done: a release whose
    wheel was removed and cannot be had again answers at the validators."""
    try:
        readable()
    except (HprobeError, OSError) as exc:
        unread(results, f"the release's C++ cannot be read: {exc}")
        return False
    return True


def _unread_selection(results: list[KernelSMResult], why: str) -> None:
    """trtllm-gen's selection left undone for `results`, said in a note and pending on each count."""
    for result in results:
        result.not_deepened(why)
    _pending(results, "the release's C++ cannot be read (a note says why)")


def _pending(results: list[KernelSMResult], why: str) -> None:
    """Compiled selection left undone for `results`: their accepted counts stay undecided for a verdict."""
    if not results:
        return
    from hprobe.compiled.depth import launcher_calls, leave_pending

    for result in results:
        leave_pending(result, launcher_calls(result), why)


def _deepened(results: list[KernelSMResult], package: Path, get_tables: Callable[[], Tables]) -> bool:
    """Each result taken past the validators; False where the release's C++
    could not be read (its wheel gone and not to be had again, met by a reader
    of its own): the answers stay at the validators, said, and nothing
    concluded without it is kept."""
    from hprobe.compiled.depth import deepen
    from hprobe.support.slim import TreeUnreadable

    for done, result in enumerate(results):
        try:
            deepen(result, package, get_tables)
        except TreeUnreadable as exc:
            # This result and those after it: the ones before were taken past the validators.
            result.not_deepened(str(exc).removeprefix("hprobe: "))
            _pending(results[done:], "the release's C++ cannot be read (a note says why)")
            return False
    return True


def _check_entries(results: list[KernelSMResult], package: Path, readable: Callable[[], object]) -> None:
    """The compiled entry checks (compiled/sm120_sparse, compiled/gqa_decode,
    compiled/cutlass_prefill) of each result a count of which reached such an entry; the release's C++
    made readable first (a slim tree whose wheel was removed)."""
    # Which results to check, read without importing the ports (a warm run reads
    # thousands of answers, most of them at other entries): only a call into
    # such an entry carries what it handed it.
    results = [r for r in results if any(h.launch for h in r.heads.values())]
    if not results:
        return
    from hprobe.compiled import cutlass_prefill, gqa_decode, sm120_sparse
    from hprobe.compiled.files import CUTLASS_PREFILL_READ, DECODE_PLAN_READ, ENTRY_READ, data_dir
    from hprobe.support.slim import TreeUnreadable, unwritten

    read = [data_dir(package) / relative for relative in (*ENTRY_READ, *DECODE_PLAN_READ, *CUTLASS_PREFILL_READ)]
    if unwritten(read) and not _made_readable(readable, results, _entries_unread):
        return
    for result in results:
        try:
            sm120_sparse.check_entries(result, package)
            gqa_decode.check_entries(result, package)
            cutlass_prefill.check_entries(result, package)
        except TreeUnreadable as exc:
            _entries_unread([result], str(exc).removeprefix("hprobe: "))


def _entries_unread(results: list[KernelSMResult], why: str) -> None:
    """The compiled entry checks left undone: the counts that reached such an entry stay pending."""
    from hprobe.compiled import cutlass_prefill, gqa_decode, sm120_sparse

    for result in results:
        sm120_sparse.leave_unread(result, why)
        gqa_decode.leave_unread(result, why)
        cutlass_prefill.leave_unread(result, why)


def _reaches_launcher(result: KernelSMResult) -> bool:
    """Whether an h_q of `result` reached a launcher compiled depth evaluates
    (each distinct entry asked once: a result holds hundreds of counts, most
    at a handful of entries)."""
    probe = get_variant(result.key).probe
    entries = {h.entry for h in result.heads.values() if h.entry}
    return any(probe.compiled_call(entry, result.config) for entry in entries)


def _deep_key(
    probed: list[KernelSMResult], identity: str, package: Path, settled: str = "", cxx: str | None = None
) -> str:
    """`cxx`: _cxx_digest(package), where the caller keys several results at once."""
    import hashlib
    import os

    from hprobe.compiled.files import TABLE_SETTING

    digest = hashlib.sha256()
    for part in (
        identity,
        code_digest(),
        os.environ.get(TABLE_SETTING, ""),
        settled,
        json.dumps([r.to_dict() for r in probed], sort_keys=True),
        cxx if cxx is not None else _cxx_digest(package),
    ):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()


def _cxx_digest(package: Path) -> str:
    """The C++ compiled depth reads, by content: an installed release's identity
    leaves its C++ out (no probe compiles it), and an edit there must not
    reuse an old conclusion."""
    import hashlib

    from hprobe.compiled.files import ENTRY_READ, READ, data_dir

    digest = hashlib.sha256()
    for relative in (*READ, *ENTRY_READ):
        try:
            digest.update((data_dir(package) / relative).read_bytes())
        except OSError:
            digest.update(b"absent")
        digest.update(b"\0")
    return digest.hexdigest()


def _package(location: str | None) -> Path | None:
    """The flashinfer package directory an installed release reports (its location is the package's)."""
    return Path(location) if location else None


# A release whose metadata lists thousands of requirements gets a few notes, not thousands.
MAX_UNMET_NOTES = 8


def gather(
    labels: list[str],
    needed: dict[str, list[int]],
    heads: list[int],
    use_cache: bool,
    progress: Progress,
    ahead: tuple[str, ...] = (),
) -> dict[str, ProbedRelease]:
    """Every release probed, in the order given. Releases that are not installed
    are fetched and probed by worker processes while this one probes the
    installed release: a check of the installed release beside a pinned one
    costs about the longer of the two, not their sum.

    `ahead`: releases a later step of the command will ask with the same
    kernels, SMs and counts (suggest's pin search always asks the newest),
    probed from now on in the background (probe_ahead) where the cores and
    memory allow more probes than `labels` need. Not returned and not waited
    for; a failure there is said by the step that asks. Only with the cache,
    which keeps the answer should the step come later."""
    order = list(dict.fromkeys(labels))
    named = [label for label in order if label != INSTALLED]
    # Ahead only on a core (and the memory) the check leaves idle.
    idle = max(0, search_width() - len(named) - (INSTALLED in order)) if use_cache and ahead else 0
    extra = [label for label in dict.fromkeys(ahead) if label not in order][:idle]
    if named or extra:
        prefetch(named + extra)  # one pip for every wheel not cached, in the order they are probed
    probe_ahead(extra, needed, heads, progress)
    out: dict[str, ProbedRelease] = {}
    if not named:
        return {INSTALLED: probe_installed(needed, heads, use_cache, progress=progress)} if order else {}
    with _release_threads(len(named), "hprobe-release") as (pool, submitted):
        futures = {
            label: pool.submit(probe_named, label, needed, heads, use_cache, _counted(progress, k, len(order)))
            for k, label in enumerate(named, 1 + (INSTALLED in order))
        }
        submitted.extend(futures.values())
        if INSTALLED in order:
            # Forking beside these threads is safe: they wait on a pipe or
            # read the cache, and the once-per-process locks they may hold
            # are made new in a forked child (results.code_digest, envinfo).
            out[INSTALLED] = probe_installed(needed, heads, use_cache, progress=progress)
        for label in named:
            out[label] = futures[label].result()  # the first failure in the order given is the one raised
    return {label: out[label] for label in order}


@contextlib.contextmanager
def _release_threads(items: int, name: str) -> Iterator[tuple[ThreadPoolExecutor, list[Future[Any]]]]:
    """Threads that each wait on a release's worker process (at most four);
    Ctrl-C, SIGTERM or a failure stops them all, their workers with them."""
    pool = ThreadPoolExecutor(max_workers=min(items, 4), thread_name_prefix=name)
    futures: list[Future[Any]] = []
    try:
        yield pool, futures
    except BaseException:
        for future in futures:
            future.cancel()
        kill_running()
        raise
    finally:
        pool.shutdown(wait=True)
        resume()


# Probes started ahead in this run: (release, request, cache) -> the answer to come.
_AHEAD: dict[tuple[str, str, str], Future[ProbedRelease]] = {}
_AHEAD_LOCK = threading.Lock()


def _ahead_key(label: str, needed: dict[str, list[int]], heads: list[int]) -> tuple[str, str, str]:
    return (label, json.dumps([needed, heads], sort_keys=True), str(cache.configured_root()))


def probe_ahead(labels: list[str], needed: dict[str, list[int]], heads: list[int], progress: Progress) -> None:
    """Start probing `labels` (with the cache) in threads of their own, not
    waited for: `probe_named` asked the same later takes that answer, waiting
    for it if it is still coming. A run that never asks ends without waiting
    (its worker ends with hprobe)."""
    for label in labels:
        key = _ahead_key(label, needed, heads)
        with _AHEAD_LOCK:
            if key in _AHEAD:
                continue
            future: Future[ProbedRelease] = Future()
            _AHEAD[key] = future

        _settle_unwaited(
            future,
            functools.partial(_probe_named, label, needed, heads, True, lambda message: progress(f"ahead: {message}")),
            "hprobe-ahead",
        )


@contextlib.contextmanager
def alongside(work: Callable[[], T]) -> Iterator[Future[T]]:
    """`work()` in a thread while the caller goes on (its answer is the
    future's); Ctrl-C, SIGTERM or a failure stops it, its helpers with it."""
    with _release_threads(1, "hprobe-alongside") as (pool, futures):
        future = pool.submit(work)
        futures.append(future)
        yield future


def search_width() -> int:
    """Releases a search asks at once: one per core, as memory allows (a worker
    importing torch and flashinfer peaks near 2 GiB), at most four."""
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    available = None
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
    except OSError:
        pass
    by_memory = max(1, available // (3 << 30)) if available else cores
    return max(1, min(cores, by_memory, 4))


def each_at_once(items: list[str], work: Callable[[str], None]) -> None:
    """`work(item)` for every item, in threads (each waits on its own worker
    process or download); a failure or Ctrl-C stops them all."""
    prefetch(items)
    with _release_threads(len(items), "hprobe-search") as (pool, futures):
        futures.extend(pool.submit(work, item) for item in items)
        for future in futures:
            future.result()


def _counted(progress: Progress, k: int, total: int) -> Progress:
    """Messages about the k-th of `total` releases, said as such."""
    if total < 2:
        return progress
    return lambda message: progress(f"[{k}/{total}] {message}")


class ReleaseReader:
    """A flashinfer release as a consumer's rule reads it (repo/evaluate.py's
    FlashinferSource): its package indexed with ast, and names imported in a
    worker on a faked SM where the source does not spell them out. Worker
    answers are kept per module, names and SM for the reader's lifetime."""

    def __init__(self, release: Release):
        self.release = release
        self.version = release.version
        self._answers: dict[tuple[str, tuple[str, ...], int | None], dict] = {}
        # Answers given that are not kept (an import error may be this
        # machine's): a reading that used one is not kept either.
        self.unkept = 0

    @functools.cached_property
    def index(self) -> RepoIndex | None:
        """The package indexed for static reads; built when a rule first reads
        it (a reading kept in the cache reads nothing)."""
        from hprobe.rules.repo.tree.scan import RepoIndex

        package = self.release.tree / "flashinfer"
        return RepoIndex.build(package, excludes=("tests", "test")) if package.is_dir() else None

    @functools.cached_property
    def identity(self) -> str | None:
        """What the release's answers rest on (its wheel's digest, or the
        installed distribution's), None when that cannot be known."""
        identity = self.release.wheel_sha256 and f"wheel {self.release.wheel_sha256}"
        if identity is None and self.release.label == INSTALLED:
            identity = installed_identity()
        return identity

    def import_names(self, module: str, names: list[str], sm: int | None) -> dict:
        key = (module, tuple(names), sm)
        if key not in self._answers:
            self._answers[key] = self._read(module, names, sm or 100)
        return self._answers[key]

    def _read(self, module: str, names: list[str], sm: int) -> dict:
        """A worker's answer, kept on disk with the release's answers when it
        read the names (an import error may be this machine's, and is asked
        again): a warm `check --repo` starts no worker."""
        identity = self.identity
        if identity is None:
            self.unkept += 1
            return read_in_worker(self.release, module, names, sm)
        import hashlib

        key = hashlib.sha256("\0".join([identity, code_digest(), module, *names, str(sm)]).encode()).hexdigest()
        kept = cache.read_kept("names", key)
        if isinstance(kept, dict):
            return kept
        answer = read_in_worker(self.release, module, names, sm)
        if "values" in answer:
            cache.keep("names", key, answer)
        else:
            self.unkept += 1
        return answer


def release_reader(label: str) -> ReleaseReader:
    """The reader for a release label (`installed` or a version, wheel, dir)."""
    return ReleaseReader(installed_release() if label == INSTALLED else resolve(label))
