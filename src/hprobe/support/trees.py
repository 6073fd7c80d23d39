"""flashinfer releases as trees a probe can import: a release number fetched
as one wheel with the user's own pip (`--no-deps`, download only), a wheel
file or a directory, unpacked once into the per-user cache and checked
against the wheel's RECORD before use; the installed one found without
importing it. The user's environment is never modified."""

from __future__ import annotations

import contextlib
import csv
import errno
import functools
import hashlib
import importlib.util
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import zipfile
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from hprobe.model.errors import InputError
from hprobe.model.release import INSTALLED, Unmet
from hprobe.support import cache, fetch_batch
from hprobe.support.requirements import parse_requirements
from hprobe.system.bounded import Timeout, run_bounded, setting_from_env
from hprobe.system.envinfo import distribution_version
from hprobe.system.fileio import MAX_INPUT_BYTES, current_umask, read_text_or_none

if TYPE_CHECKING:
    from hprobe.support.remote_wheel import Remote, RemoteWheel

DIST = "flashinfer-python"
_WHEEL_PREFIX = "flashinfer_python-"


@dataclass
class Release:
    """One flashinfer tree ready to probe."""

    label: str  # what the user asked for: "0.6.13", a wheel path, a directory
    version: str
    location: Path  # directory that holds the `flashinfer` package, as reported
    wheel_sha256: str | None  # identity for the result cache; None for a directory
    unmet: list[Unmet] = field(default_factory=list)  # Requires-Dist not met here
    # Checking an unpacked tree against its RECORD stats ten thousand files.
    # Answers from the result cache depend on the wheel's digest alone, so the
    # check runs only when something reads the tree (a worker, a rule's import).
    # It returns where the tree is read from when that moved: a damaged tree
    # another run reads stays theirs, and this run reads a copy of its own.
    _verify: Callable[[], Path | None] | None = field(default=None, repr=False, compare=False)

    @property
    def tree(self) -> Path:
        """The tree, checked against the wheel's RECORD (and unpacked again if
        it was damaged) before its first use."""
        if self._verify is not None:
            moved = self._verify()  # raises while the tree cannot be had: asked again, never skipped
            self._verify = None
            if moved is not None:
                self.location = moved
        return self.location


def parse_spec(spec: str) -> list[str]:
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts:
        raise InputError("--flashinfer: empty")
    return parts


def resolve(item: str) -> Release:
    """A release number, a wheel file, or an unpacked directory -> a probe-able tree."""
    path = Path(item).expanduser()
    if item.endswith(".whl") or path.is_file():
        if not path.is_file():
            raise InputError(f"--flashinfer {item}: no such wheel file")
        return cache.with_fallback(lambda: _from_wheel(path, label=item))
    if path.is_dir():
        return _from_directory(path, label=item)
    try:
        Version(item)
    except InvalidVersion:
        raise InputError(f"--flashinfer {item!r}: not a release number, wheel file or directory") from None
    return cache.with_fallback(
        lambda: (
            _kept_release(item) or _lazy_release(item) or _from_wheel(fetch_wheel(item), label=item, slim=slim_trees())
        )
    )


def slim_trees() -> bool:
    """Fetched releases are unpacked slim (support/slim.py) unless
    HPROBE_SLIM_TREES=0. A wheel the user names stays whole: it may move."""
    return os.environ.get("HPROBE_SLIM_TREES", "1") != "0"


# Bounds on the subprocesses hprobe starts, in seconds (README "Releases that are not installed").
PIP_TIMEOUT = ("HPROBE_PIP_TIMEOUT", 300.0)  # one `pip download` / `pip index`
WORKER_TIMEOUT = ("HPROBE_WORKER_TIMEOUT", 900.0)  # probing one release


def download_command(folder: Path, spec: str) -> list[str]:
    """`pip download` of one wheel (no dependencies, never a build) into `folder`, with the user's pip settings."""
    return [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "-q",
        "-d",
        str(folder),
        spec,
    ]


def run_pip(cmd: list[str], what: str) -> subprocess.CompletedProcess[str]:
    """Run pip with the user's configuration, bounded in time; one line on failure."""
    limit = setting_from_env(PIP_TIMEOUT)
    try:
        return run_bounded(cmd, limit)
    except Timeout:
        raise InputError(
            f"{what}: pip did not finish within {limit:g} s (is the package index reachable? {PIP_TIMEOUT[0]} sets the "
            "limit)"
        ) from None


def prefetch(items: list[str]) -> None:
    """Start fetching, in one pip process in the background, the wheels of
    those release numbers among `items` that are not cached yet (wheel files
    and directories are the user's, not fetched): `fetch_wheel` then waits for
    its own instead of starting pip, about 2 s of CPU a release here. Only
    a head start: a cache it cannot use is left to `fetch_wheel` to report."""
    try:
        wheels = cache.directory("wheels")
    except (InputError, OSError):
        return
    missing = []
    for item in dict.fromkeys(items):
        try:
            Version(item)
        except InvalidVersion:
            continue
        if (
            not item.endswith(".whl")
            and not Path(item).expanduser().exists()
            and _cached_wheel(wheels, item) is None
            and _kept_identity(wheels, item) is None
        ):
            missing.append(item)  # a release whose wheel was removed is fetched only when a question needs it
    if missing and _lazy():
        _start_links(missing)  # read by range requests: where each wheel is, not the wheels
        return
    if len(missing) > 1:
        cache.clean_stale(wheels)

        def refuse(version: str, words: str) -> None:
            _UNFETCHABLE[_fetch_key(wheels, version)] = f"cannot fetch {DIST}=={version}: {words}"

        fetch_batch.start(DIST, missing, wheels, _publish, refuse, setting_from_env(PIP_TIMEOUT) * len(missing))


def _lazy() -> bool:
    """Whether fetched releases are read by range requests (support/remote_wheel.py)."""
    from hprobe.support.remote_wheel import whole_wheels

    return slim_trees() and not whole_wheels()


# Where each release's wheel is on the index, as pip would fetch it (asked
# once per run, for every release a run is about to need): a Remote, or why
# the release is downloaded whole.
_LINKS: dict[tuple[str, str, str], Future[Remote | str]] = {}
_LINKS_LOCK = threading.Lock()


def _start_links(versions: list[str]) -> None:
    """Ask, in one pip process in the background, where each of `versions` is."""
    wheels = cache.directory("wheels")
    with _LINKS_LOCK:
        new = [v for v in dict.fromkeys(versions) if _fetch_key(wheels, v) not in _LINKS]
        futures = {v: _LINKS.setdefault(_fetch_key(wheels, v), Future()) for v in new}
    if not new:
        return

    def ask() -> None:
        answers: dict[str, dict] = {}
        try:
            answers = fetch_batch.links(DIST, new, setting_from_env(PIP_TIMEOUT))
        finally:
            for version, future in futures.items():
                doc = answers.get(version)
                if doc is not None and isinstance(doc.get("refused"), str):
                    # No wheel of it on the index: pip's words, and pip is not started for it again.
                    _UNFETCHABLE[_fetch_key(wheels, version)] = f"cannot fetch {DIST}=={version}: {doc['refused']}"
                future.set_result(_as_remote(doc))

    threading.Thread(target=ask, name="hprobe-links", daemon=True).start()


def _as_remote(doc: dict | None) -> Remote | str:
    from hprobe.support.remote_wheel import Remote

    if doc is None:
        return "pip could not say where the wheel is"
    if isinstance(doc.get("whole"), str) or isinstance(doc.get("refused"), str):
        return str(doc.get("whole") or doc.get("refused"))
    try:
        sha = str(doc["sha256"]).lower()
        if not re.fullmatch(r"[0-9a-f]{64}", sha) or _wheel_version(Path(str(doc["filename"]))) is None:
            return "the index's answer is not a wheel with a sha256"
        return Remote(str(doc["url"]), Path(str(doc["filename"])).name, sha, doc.get("cert"), doc.get("proxy"))
    except (KeyError, TypeError):
        return "the index's answer is not a wheel with a sha256"


def _remote(version: str) -> Remote | None:
    """Where `version`'s wheel is, for range requests; None where it is downloaded whole."""
    from hprobe.support.remote_wheel import Remote

    _start_links([version])
    with _LINKS_LOCK:
        future = _LINKS[_fetch_key(cache.directory("wheels"), version)]
    found = future.result()
    return found if isinstance(found, Remote) else None


_NO_RANGES: set[str] = set()  # servers that answered a range otherwise, this run


def remote_of(version: str) -> Remote | None:
    """Where `version`'s wheel is on the index, where releases are read by
    range requests here (None: its wheel is read whole: HPROBE_WHOLE_WHEELS,
    a wheel pip finds in a folder, a server that answered no range this run)."""
    from hprobe.support import remote_wheel

    if not _lazy():
        return None
    remote = _remote(version)
    if remote is None or remote_wheel.host(remote) in _NO_RANGES:
        return None  # a server that answered no range: said once for it
    return remote


def _lazy_release(item: str) -> Release | None:
    """`item` read from the index by range requests: placeholders for every
    member, the metadata and the package's `__init__.py` and what it imports
    at module level written now, the rest as it is opened. None where that
    route does not apply (HPROBE_WHOLE_WHEELS=1, slim trees off, a wheel pip
    finds in a local folder, an index without the wheel's sha256, a server
    that answers no ranges: said once), and the wheel is downloaded whole."""
    from hprobe.support import remote_wheel
    from hprobe.support import slim as slim_tree

    remote = remote_of(item)
    if remote is None:
        return None
    host = remote_wheel.host(remote)
    tree = cache.directory("trees") / f"{remote.sha256}.slim"
    made = False
    try:
        if not _published(tree, serving=False):
            tree, made = _unpack_remote_once(remote, tree, item), True
        elif not _published(tree):
            _serve_from_index(remote, tree)  # made from the whole wheel, which was removed since
    except (OSError, zipfile.BadZipFile, EOFError, ValueError, zlib.error) as exc:  # zlib: a member not inflating
        if isinstance(exc, OSError) and exc.errno in cache.UNWRITABLE:
            raise  # the cache's own failure: the caller moves to a temporary one
        why = " ".join(str(exc).split())[:200]
        if isinstance(exc, remote_wheel.RangesRefused):
            _NO_RANGES.add(host)  # the server's way: every release it serves this run is read whole
            cache.say_once(f"wheels from {host} read whole, not by range requests ({why})")
        else:
            cache.say_once(f"flashinfer {item}: read whole, not by range requests ({type(exc).__name__}: {why})")
        return None
    record = _digest_file(cache.directory("wheels") / remote.filename)
    if not record.is_file():
        # What later runs find the kept tree by (_kept_identity), with no wheel beside it.
        cache.write_atomically(record, f"{remote.sha256}\nremote\n".encode())
    slim_tree.watch(tree)
    metadata = _metadata(tree)
    version = metadata.get("Version", ["unknown"])[0]
    if not _same_version(Version(item), version):
        raise InputError(
            f"--flashinfer {item}: the index's wheel {remote.filename} says it is {version}; which release it is "
            "cannot be told, so it is not probed"
        )
    _warm_imports(tree)
    intact = None if made else functools.partial(_intact_from_index, item, remote.sha256, tree)
    return Release(item, version, tree, remote.sha256, unmet_requirements(metadata), intact)


def _intact_from_index(item: str, sha: str, tree: Path) -> Path | None:
    """Where a tree read by range requests is read from, checked as a
    fetched one is before its first use (_ensure_intact): None where it is
    intact; else unpacked anew from the index (or, where another run holds
    the damaged one, a copy of this run's own)."""
    from hprobe.support import slim as slim_tree

    if _tree_intact(tree, discard=False):
        return None
    remote = _remote(item)
    if remote is None or remote.sha256 != sha:
        raise InputError(
            f"--flashinfer {item}: its tree in the cache is damaged, and the index does not serve the wheel its "
            f"answers are kept under ({sha[:12]}) by range requests; `hprobe cache prune --release {item}` lets it "
            "be fetched anew"
        )
    with cache.held_alone(tree) as alone:
        if alone:
            # Held alone under the tree's lock file: unpacked here, not by
            # _unpack_remote_once, which would wait on that same lock.
            cache.discard(tree)
            cache.clean_stale(tree.parent)
            _unpack_remote(remote, tree, item)
            read = tree
        else:
            read = _private_scratch() / tree.name
            _unpack_remote(remote, read, item)
    slim_tree.watch(read)
    return read


def _warm_imports(tree: Path) -> None:
    """What the package's `__init__.py` imports at module level, fetched in
    a few rounds now (a worker importing it would ask one module at a time).
    Only a head start: whatever fails here is asked again when opened."""
    from hprobe.support import slim as slim_tree

    source = slim_tree.source_of(tree)
    if source is None:
        return
    try:
        source.serve("", imports_of=("flashinfer/__init__.py",))
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, zlib.error):
        pass
    cache.record_received("wheel members", source.take_received())


def _unpack_remote_once(remote: Remote, tree: Path, label: str) -> Path:
    """`remote` unpacked slim into `tree`, one process at a time (as _unpack_once)."""
    _unpack_under_lock(tree, remote.sha256, lambda: _unpack_remote(remote, tree, label))
    return tree


def _unpack_remote(remote: Remote, tree: Path, label: str) -> None:
    """`remote` unpacked slim into `tree`: its directory and eager members fetched, then written."""
    from hprobe.support import remote_wheel
    from hprobe.support.slim import eager

    wheel = remote_wheel.open_wheel(remote)
    wheel.read([info.filename for info in wheel.zip.infolist() if eager(info.filename)])
    cache.record_received("wheel members", wheel.file.received)
    _unpack(wheel, tree, label)


def _serve_from_index(remote: Remote, tree: Path) -> None:
    """A published slim tree whose wheel is gone, served from the index from
    now on: its members are checked against its own RECORD, which came from
    the whole wheel checked against the index's digest."""
    from hprobe.support import remote_wheel
    from hprobe.support.slim import MARKER

    wheel = remote_wheel.open_wheel(remote)
    directory = wheel.central_directory
    cache.record_received("wheel members", wheel.file.received)
    cache.write_atomically(tree / remote_wheel.CENTRAL_DIRECTORY, directory)
    cache.write_atomically(tree / MARKER, remote.marker(wheel.file.size).encode())


def fetch_wheel(version: str) -> Path:
    """The cached wheel of `version`, downloading it once with the user's pip."""
    wheels = cache.directory("wheels")
    cached = _cached_wheel(wheels, version)
    if cached:
        return cached
    fetch_batch.wait(DIST, version, wheels)  # a batch of this run may be fetching it
    cached = _cached_wheel(wheels, version)
    if cached:
        return cached
    refused = _UNFETCHABLE.get(_fetch_key(wheels, version))
    if refused is not None:
        # Refused by this run's batch, or asked again in the same run (a
        # search reads, then probes): pip's answer, not another second of pip.
        raise InputError(refused)
    cache.clean_stale(wheels)
    # A temp dir of this process's own, then an atomic rename: concurrent
    # fetches of one release publish identical files, whichever lands last.
    with tempfile.TemporaryDirectory(dir=wheels, prefix=".download-") as tmp:
        proc = run_pip(download_command(Path(tmp), f"{DIST}=={version}"), f"cannot fetch {DIST}=={version}")
        got = list(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 and ("[Errno 28]" in proc.stderr or "No space left" in proc.stderr):
            raise OSError(errno.ENOSPC, f"no space left in {wheels}")  # the cache's disk, not the index
        if proc.returncode != 0 or not got:
            _UNFETCHABLE[_fetch_key(wheels, version)] = f"cannot fetch {DIST}=={version}: {pip_reason(proc)}"
            raise InputError(_UNFETCHABLE[_fetch_key(wheels, version)])
        return _publish(got[0], version)


# Releases pip could not fetch in this run (no wheel for this platform, not
# on the index), by cache, version and pip's settings in the environment.
_UNFETCHABLE: dict[tuple[str, str, str], str] = {}


def new_run() -> None:
    """Forget an earlier run's refusals and the wheels it read (a host that
    runs hprobe's commands in-process runs several: a release the index lacked
    then may be there now)."""
    _UNFETCHABLE.clear()
    _NO_RANGES.clear()
    _LINKS.clear()
    _SERVED_BY.clear()
    _ANSWERED_FROM.clear()


def _fetch_key(wheels: Path, version: str) -> tuple[str, str, str]:
    settings = sorted((k, v) for k, v in os.environ.items() if k.startswith("PIP_"))
    return (str(wheels), version, repr(settings))


def _publish(downloaded: Path, version: str) -> Path:
    """A wheel pip just downloaded, moved into the cache of wheels."""
    target = cache.directory("wheels") / downloaded.name
    # pip checked the index's hash while downloading; record the digest so
    # later runs can tell a damaged cached wheel from a good one.
    _record_digest(downloaded, _digest_file(target))
    os.replace(downloaded, target)  # a rename keeps the size and mtime the record was stamped with
    size = target.stat().st_size
    cache.record_added(version, size)
    cache.record_received("wheels", size)  # a wheel arrives whole: its size is what crossed the network
    return target


def pip_reason(proc: subprocess.CompletedProcess[str]) -> str:
    """pip's last words on a failure, and whether the index was reached at all."""
    lines = [
        ln.strip()
        for ln in proc.stderr.splitlines()
        if ln.strip() and "is ignored" not in ln and "experimental" not in ln
    ]
    why = lines[-1] if lines else f"pip exited {proc.returncode}"
    if pip_unreached(proc):
        why += " (the package index could not be reached; check the network or pip's index-url)"
    return why


def pip_unreached(proc: subprocess.CompletedProcess[str]) -> bool:
    """Whether pip failed to reach the index (a fact of the network at that
    moment), as opposed to an index that answered."""
    unreachable = (
        "NewConnectionError",
        "Connection refused",
        "Max retries exceeded",
        "Failed to establish",
        "ReadTimeoutError",
        "Name or service not known",
        "Temporary failure in name resolution",
    )
    return any(marker in proc.stderr for marker in unreachable)


def _digest_file(wheel: Path) -> Path:
    return wheel.with_name(wheel.name + ".sha256")


def _stamp(info: os.stat_result) -> str:
    return f"{info.st_size} {info.st_mtime_ns}"


def _record_digest(wheel: Path, record: Path) -> None:
    """The wheel's digest, stamped with the size and mtime it was computed at:
    while both hold, later runs take the digest without hashing 100 MB again."""
    info = wheel.stat()
    cache.write_atomically(record, f"{_sha256(wheel)}\n{_stamp(info)}\n".encode())


def fetched_versions() -> set[Version]:
    """The releases whose wheel the cache holds, or whose digest it recorded
    (its wheel removed once answered, a question the cache answers needs none):
    by file name, what a search will likely not download again."""
    wheels = cache.root() / "wheels"
    found: set[Version] = set()
    for wheel in wheels.glob(f"{_WHEEL_PREFIX}*.whl*") if wheels.is_dir() else []:
        version = _wheel_version(wheel.with_name(wheel.name.removesuffix(".sha256")))
        if version is not None:
            found.add(version)
    return found


def _cached_wheel(wheels: Path, version: str) -> Path | None:
    """A cached wheel of `version` whose digest matches the one recorded when it
    was fetched; a damaged one is discarded, so the caller fetches it again. A
    wheel whose size and mtime are those the record was stamped with is not
    hashed again (a write that truncates or replaces it changes both)."""
    for wheel in wheels.glob(f"{_WHEEL_PREFIX}*.whl"):
        if _wheel_version(wheel) != Version(version):
            continue
        try:
            recorded, _, stamp = _digest_file(wheel).read_text().strip().partition("\n")
            info = wheel.stat()
        except OSError:
            recorded, stamp, info = "", "", None
        if info is not None and recorded and stamp.strip() == _stamp(info):
            _DIGESTS[(str(wheel), info.st_size, info.st_mtime_ns)] = recorded
            return wheel
        if not recorded and _zip_intact(wheel):
            # Fetched before digests were recorded: check it once, then record.
            _record_digest(wheel, _digest_file(wheel))
            return wheel
        if recorded and _sha256(wheel) == recorded:
            _record_digest(wheel, _digest_file(wheel))  # stamped, as records written before stamps were not
            return wheel
        cache.discard(wheel)
        cache.discard(_digest_file(wheel))
    return None


def _zip_intact(wheel: Path) -> bool:
    try:
        with zipfile.ZipFile(wheel) as zf:
            return zf.testzip() is None
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        return False


def _wheel_version(wheel: Path) -> Version | None:
    """The version a wheel's file name gives, when it is a wheel name at all."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        return parse_wheel_filename(wheel.name)[1]
    except (InvalidWheelFilename, InvalidVersion):
        return None


_DIGESTS: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256


def _sha256(path: Path) -> str:
    """The file's digest, computed once per state of the file: the cached-wheel
    check and the tree lookup both ask for it, and a wheel is 100 MB."""
    info = path.stat()
    key = (str(path), info.st_size, info.st_mtime_ns)
    if key not in _DIGESTS:
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


# Bounds on unpacking a wheel (README "Releases that are not installed"). The
# largest real release, 0.7.4, is 101 MB unpacking to 682 MiB in 14,705 members.
MAX_UNPACK_MB = ("HPROBE_MAX_UNPACK_MB", 4096.0)
MAX_MEMBERS = 100_000
MAX_RATIO = 100  # unpacked / packed size; flashinfer's wheels are about 7


def _from_wheel(wheel: Path, label: str, slim: bool = False) -> Release:
    from hprobe.support import slim as slim_tree

    sha = _sha256(wheel)
    # A slim tree has a name of its own: an hprobe from before slim trees,
    # sharing this cache, never finds one and reads its placeholders.
    tree = cache.directory("trees") / (f"{sha}.slim" if slim else sha)
    verified = False
    if not _published(tree):
        tree = _unpack_once(wheel, tree, sha, label)
        verified = True
    # This process's own reads of it (sources, metadata) are served too; a
    # cached wheel another run removes meanwhile is fetched again on a read.
    named = _wheel_version(wheel)
    ours = slim and named is not None and wheel.parent == cache.directory("wheels")
    slim_tree.watch(tree, functools.partial(_fetch_again, str(named), sha, tree) if ours else None)
    metadata = _metadata(tree)
    version = metadata.get("Version", ["unknown"])[0]
    if not verified and named is not None and not _same_version(named, version):
        # A damaged METADATA, not yet a verdict on the wheel: check the tree first.
        tree = _ensure_intact(wheel, tree, sha, label)
        verified = True
        metadata = _metadata(tree)
        version = metadata.get("Version", ["unknown"])[0]
    if named is not None and not _same_version(named, version):
        raise InputError(
            f"--flashinfer {label}: the wheel's file name says {named} but its METADATA says {version}; which release "
            "it is cannot be told, so it is not probed"
        )
    verify = None if verified else functools.partial(_ensure_intact, wheel, tree, sha, label)
    if slim and wheel.parent == cache.directory("wheels"):
        _SERVED_BY[tree] = wheel
    return Release(label, version, tree, sha, unmet_requirements(metadata), verify)


# The fetched wheel each slim tree this run resolved is served from, and those
# of them whose release's answers the run kept (answered): removed at the end
# of the run (drop_fetched_wheels) unless KEEP_WHEELS.
_SERVED_BY: dict[Path, Path] = {}
_ANSWERED_FROM: dict[Path, tuple[str, Path]] = {}
KEEP_WHEELS = "HPROBE_KEEP_WHEELS"


def answered(release: Release) -> None:
    """The run kept `release`'s answers: a wheel of the cache it was resolved
    from may go at the end of the run. A run whose answers are not kept
    (--no-cache, an inconclusive answer) keeps the wheel it would need again."""
    wheel = _SERVED_BY.get(release.location)
    if wheel is not None:
        _ANSWERED_FROM[wheel] = (release.version, release.location)


def drop_fetched_wheels() -> list[tuple[str, int]]:
    """Remove the wheels this run fetched or read from the cache once their
    slim trees are published: the cache keeps answers and the files probes
    read, not the downloads (a question no answer covers fetches the wheel
    again, checked against the digest its answers are kept under). A tree
    another run holds keeps its wheel. (release, bytes freed) for each."""
    if os.environ.get(KEEP_WHEELS, "").strip() == "1":
        return []
    dropped = []
    for wheel, (version, tree) in list(_ANSWERED_FROM.items()):
        del _ANSWERED_FROM[wheel]
        if not _digest_file(wheel).is_file() or not _published(tree):
            continue  # no record of its digest (answers found without it), or the tree was not published
        with cache.held_alone(tree) as alone:
            if not alone:
                continue
            try:
                size = wheel.stat().st_size
                wheel.unlink()
            except OSError:
                continue
        dropped.append((version, size))
    return dropped


def _kept_identity(wheels: Path, version: str) -> tuple[Path, str, Path] | None:
    """(the wheel's place, its digest, its slim tree) for a release whose wheel
    was removed after answering (drop_fetched_wheels), its tree still published."""
    try:
        wanted = Version(version)
    except InvalidVersion:
        return None
    for record in wheels.glob(f"{_WHEEL_PREFIX}*.whl.sha256"):
        wheel = record.with_name(record.name.removesuffix(".sha256"))
        if _wheel_version(wheel) != wanted or wheel.exists():
            continue
        try:
            sha = record.read_text().split("\n", 1)[0].strip()
        except OSError:
            continue
        if not re.fullmatch(r"[0-9a-f]{64}", sha):
            continue
        tree = cache.directory("trees") / f"{sha}.slim"
        if _published(tree, serving=False):
            return wheel, sha, tree
    return None


def kept_without_wheel(version: str) -> Path | None:
    """`version`'s published slim tree, where the cache holds it with its wheel
    removed once answered; None otherwise."""
    try:
        wheels = cache.directory("wheels")
    except (InputError, OSError):
        return None
    kept = _without_wheel(wheels, version)
    return kept[2] if kept is not None else None


def _without_wheel(wheels: Path, version: str) -> tuple[Path, str, Path] | None:
    """`_kept_identity`, where no wheel of `version` is cached (a cached one is the release)."""
    return _kept_identity(wheels, version) if _cached_wheel(wheels, version) is None else None


def _kept_release(item: str) -> Release | None:
    """A release number whose wheel was removed after answering, as its kept
    slim tree: cached answers (keyed by the wheel's digest) need nothing more.
    Reading the tree (a worker, a rule's import) fetches the wheel first."""
    if not slim_trees():
        return None
    kept = _without_wheel(cache.directory("wheels"), item)
    if kept is None:
        return None
    _, sha, tree = kept
    metadata = _metadata(tree)
    version = metadata.get("Version", ["unknown"])[0]
    if not _same_version(Version(item), version):
        return None  # a damaged METADATA: fetched and unpacked as if nothing were kept
    from hprobe.support import slim as slim_tree

    if slim_tree.served_from_index(tree):
        if not _lazy():
            return None  # read by range requests: a whole wheel, checked, is asked for instead (unpacked anew)
        slim_tree.watch(tree)
        intact = functools.partial(_intact_from_index, item, sha, tree)
        return Release(item, version, tree, sha, unmet_requirements(metadata), intact)
    fetch_again = functools.partial(_fetch_again, item, sha, tree)
    slim_tree.watch(tree, fetch_again)  # any reader in this process, not only `Release.tree`, brings the wheel back
    return Release(item, version, tree, sha, unmet_requirements(metadata), fetch_again)


_FETCHING_AGAIN: dict[Path, threading.Lock] = {}
_FETCHING_AGAIN_LOCK = threading.Lock()


def _fetch_again(item: str, sha: str, tree: Path) -> Path:
    """The wheel of a kept tree, fetched again before anything reads the tree:
    the same file the answers are kept under, or no answer from it. One
    thread fetches (`Release.tree` and a placeholder's reader may ask at
    once); the others find the wheel it fetched."""
    with _FETCHING_AGAIN_LOCK:
        lock = _FETCHING_AGAIN.setdefault(tree, threading.Lock())
    with lock:
        return _fetch_again_alone(item, sha, tree)


def _fetch_again_alone(item: str, sha: str, tree: Path) -> Path:
    wheel = fetch_wheel(item)
    served = _sha256(wheel)
    if served != sha:
        raise InputError(
            f"--flashinfer {item}: the index now serves another wheel of it (sha256 {served[:12]}) than the "
            f"one whose answers and tree are kept ({sha[:12]}); `hprobe cache prune --release {item}` lets it be "
            "fetched anew"
        )
    read = _ensure_intact(wheel, tree, sha, item)
    _SERVED_BY[read] = wheel
    return read


def _ensure_intact(wheel: Path, tree: Path, sha: str, label: str) -> Path:
    """Where the tree of `wheel` is read from: `tree`, unpacked again if it
    was damaged; or, where another run reads the damaged `tree`, a copy of
    this run's own (see _unpack_once)."""
    if _tree_intact(tree, discard=False):
        return tree
    return _unpack_once(wheel, tree, sha, label)


def _unpack_once(wheel: Path, tree: Path, sha: str, label: str) -> Path:
    """Unpack `wheel` into `tree` unless another process has just done it;
    the tree to read. A published tree is replaced only while no other run
    holds it (`cache.in_use`): where one does and the tree is damaged, theirs
    stays where it is (pulled from under it, their reads would fail, and
    waiting would last their whole run) and this run unpacks a private copy,
    removed with its scratch folder."""

    if _published(tree, serving=False):
        with cache.held_alone(tree) as alone:
            if alone:
                if not _tree_intact(tree, discard=True):
                    cache.clean_stale(tree.parent)
                    _unpack(wheel, tree, label)
                return tree
        if _tree_intact(tree, discard=False):
            return tree
        private = _private_scratch() / tree.name
        _unpack(wheel, private, label)
        return private
    _unpack_under_lock(tree, sha, lambda: _unpack(wheel, tree, label))
    return tree


def _unpack_under_lock(tree: Path, sha: str, unpack: Callable[[], None]) -> None:
    """`unpack()` into `tree` unless it is there intact: one process
    unpacks, the others wait for it and find the tree published. Without
    the lock (timeout, a filesystem without locks) unpacking is still safe,
    only done twice."""
    with cache.exclusive(tree.parent / f".{sha}.lock", setting_from_env(WORKER_TIMEOUT)) as waited:
        if not _tree_intact(tree, discard=waited is not None):
            cache.clean_stale(tree.parent)
            unpack()


_PRIVATE: list[Path] = []


def _private_scratch() -> Path:
    """This run's folder for trees it cannot share (one per process, removed by
    a later run once this one is gone)."""
    from hprobe.system.lifetime import scratch_dir

    if not _PRIVATE:
        _PRIVATE.append(scratch_dir(None, "hprobe-trees"))
    return _PRIVATE[0]


def _same_version(named: Version, written: str) -> bool:
    try:
        return Version(written) == named
    except InvalidVersion:
        return False


_COMPLETE = ".hprobe-unpacked"  # written last into a tree before it is published


def _published(tree: Path, serving: bool = True) -> bool:
    """Unpacked completely once (what a cached answer needs of a tree), and
    for a slim tree, with its wheel still there to serve it (unless `serving`
    is False: a tree whose wheel was removed, fetched again before it is read)."""
    from hprobe.support.slim import MARKER

    if not ((tree / _COMPLETE).is_file() and (tree / "flashinfer" / "__init__.py").is_file()):
        return False
    if tree.name.endswith(".slim") and serving:
        try:
            marker = (tree / MARKER).read_text().strip()
        except OSError:
            return False
        from hprobe.support.remote_wheel import REMOTE_MARKER

        if marker.startswith(REMOTE_MARKER):
            return _lazy()  # served from the index; a run that asks for whole wheels unpacks it anew
        return Path(marker).is_file()
    return True


def _tree_intact(tree: Path, discard: bool) -> bool:
    """Published completely, and every file the wheel's RECORD lists has the
    size RECORD gives (an emptied or truncated file sends it back to unpacking).
    `discard`: a damaged tree is moved aside (the caller holds it alone)."""
    if not _published(tree):
        if tree.exists() and discard:
            cache.discard(tree)
        return False
    records = sorted(tree.glob("flashinfer_python-*.dist-info/RECORD"))
    try:
        lines = records[0].read_text(encoding="utf-8").splitlines() if records else []
        base = str(tree)
        for row in csv.reader(lines):
            # os.stat on joined strings: ten thousand files, every run (pathlib is 3x slower here)
            if len(row) == 3 and row[2].isdigit() and os.stat(os.path.join(base, row[0])).st_size != int(row[2]):
                raise OSError(f"{row[0]} differs from RECORD")
    except (OSError, csv.Error, UnicodeDecodeError):
        if discard:
            cache.discard(tree)
        return False
    return True


def _unpack(wheel: Path | RemoteWheel, tree: Path, label: str) -> None:
    """`wheel` unpacked into `tree` (a slim tree where its name says so); a
    remote wheel (read by range requests) always slim, its eager members
    fetched before and checked against its RECORD here."""
    limit_mb = setting_from_env(MAX_UNPACK_MB, "MiB")
    try:
        with _opened(wheel) as (zf, packed, marker):
            members = zf.infolist()
            _check_members(members, packed, limit_mb, label, wheel)
            tmp = Path(tempfile.mkdtemp(dir=tree.parent, prefix=".unpack-"))
            try:
                if tree.name.endswith(".slim"):
                    from hprobe.support.slim import write_placeholders

                    write_placeholders(zf, members, tmp, marker)
                    if not isinstance(wheel, Path):
                        _check_eager(wheel, tmp)
                else:
                    zf.extractall(tmp)
                if not (tmp / "flashinfer" / "__init__.py").is_file():
                    raise InputError(f"--flashinfer {label}: {wheel} holds no flashinfer package")
                (tmp / _COMPLETE).write_text(wheel.name if isinstance(wheel, Path) else wheel.file.remote.filename)
                os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp's 0700 would hide a shared cache from other users
                try:
                    os.rename(tmp, tree)
                    from hprobe.support.slim import eager

                    slim = tree.name.endswith(".slim")
                    cache.record_added(label, sum(m.file_size for m in members if not slim or eager(m.filename)))
                except OSError:
                    # Another process published the same tree first: keep theirs.
                    if not _tree_intact(tree, discard=False):
                        raise
                    shutil.rmtree(tmp, ignore_errors=True)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
    except (zipfile.BadZipFile, EOFError, zipfile.LargeZipFile, NotImplementedError, ValueError, RuntimeError) as exc:
        raise InputError(f"--flashinfer {label}: {wheel} is not a valid wheel ({type(exc).__name__}: {exc})") from None
    except OSError as exc:
        if exc.errno in cache.UNWRITABLE:
            raise  # the cache's own failure: the caller moves to a temporary one
        raise InputError(
            f"--flashinfer {label}: cannot unpack {wheel} into {tree.parent}: {exc.strerror or exc}"
        ) from None


@contextlib.contextmanager
def _opened(wheel: Path | RemoteWheel) -> Iterator[tuple[zipfile.ZipFile, int, Path | str]]:
    """(the zip, its size, what its slim tree's marker says) of a wheel file or a remote wheel."""
    if isinstance(wheel, Path):
        with zipfile.ZipFile(wheel) as zf:
            yield zf, wheel.stat().st_size, wheel
    else:
        yield wheel.zip, wheel.file.size, wheel.file.remote.marker(wheel.file.size)


def _check_eager(wheel: RemoteWheel, tmp: Path) -> None:
    """The members written at unpacking checked against RECORD, and the
    wheel's central directory kept beside them (a worker serving the tree
    opens the wheel from it without asking the index)."""
    from hprobe.support import remote_wheel
    from hprobe.support.slim import eager

    record, digests = remote_wheel.tree_record(tmp)
    for info in wheel.zip.infolist():
        if eager(info.filename) and not info.is_dir() and info.filename != record:
            if not info.filename.endswith((".dist-info/RECORD.jws", ".dist-info/RECORD.p7s")):
                remote_wheel.check(info.filename, (tmp / info.filename).read_bytes(), digests)
    (tmp / remote_wheel.CENTRAL_DIRECTORY).write_bytes(wheel.central_directory)


# Folders in one member's path: flashinfer's deepest is about 12; thousands
# made extraction recurse until Python's stack ran out.
MAX_MEMBER_DEPTH = 64


def _check_members(
    members: list[zipfile.ZipInfo], packed: int, limit_mb: float, label: str, wheel: Path | RemoteWheel
) -> None:
    if len(members) > MAX_MEMBERS:
        raise InputError(
            f"--flashinfer {label}: {wheel} has {len(members)} members, more than {MAX_MEMBERS}; not unpacked"
        )
    total = 0
    for info in members:
        name = info.filename
        if info.flag_bits & 0x1:
            raise InputError(
                f"--flashinfer {label}: {wheel} has an encrypted member ({name!r}), which no wheel holds; not unpacked"
            )
        if name.count("/") > MAX_MEMBER_DEPTH:
            raise InputError(
                f"--flashinfer {label}: {wheel} has a member {name.count('/')} folders deep, more than "
                f"{MAX_MEMBER_DEPTH}; not unpacked"
            )
        if name.startswith(("/", "\\")) or ".." in Path(name).parts or ":" in name.split("/")[0]:
            raise InputError(f"--flashinfer {label}: {wheel} has a member outside the tree ({name!r}); not unpacked")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise InputError(
                f"--flashinfer {label}: {wheel} has a symlink member ({name!r}), which no wheel may hold; not unpacked"
            )
        total += info.file_size
    if total > limit_mb * (1 << 20) or total > MAX_RATIO * max(packed, 1):
        raise InputError(
            f"--flashinfer {label}: {wheel} would unpack to {total >> 20} MiB from {packed >> 20} MiB; "
            f"more than {limit_mb:g} MiB or {MAX_RATIO}x ({MAX_UNPACK_MB[0]} sets the size limit)"
        )


def _from_directory(path: Path, label: str) -> Release:
    root = path
    if (path / "__init__.py").is_file() and path.name == "flashinfer":
        root = path.parent
    if not (root / "flashinfer" / "__init__.py").is_file():
        raise InputError(f"--flashinfer {label}: no flashinfer package in that directory")
    version = "unknown"
    version_file = root / "flashinfer" / "_build_meta.py"
    for candidate in (version_file, root / "flashinfer" / "version.py"):
        text = read_text_or_none(candidate, MAX_INPUT_BYTES)
        if text is not None:
            m = re.search(r"""__version__\s*=\s*["']([^"']+)""", text)
            if m:
                version = m.group(1)
                break
    metadata = _metadata(root)
    if version == "unknown" and "Version" in metadata:
        version = metadata["Version"][0]
    return Release(label, version, root, None, unmet_requirements(metadata))


def _metadata(tree: Path) -> dict[str, list[str]]:
    found = sorted(tree.glob("flashinfer_python-*.dist-info/METADATA"))
    if not found:
        return {}
    text = read_text_or_none(found[0], MAX_INPUT_BYTES)
    if text is None:
        raise InputError(
            f"{found[0]}: not a regular file of at most {MAX_INPUT_BYTES >> 20} MiB, so not read as package metadata"
        )
    return _metadata_fields(text)


def _metadata_fields(text: str) -> dict[str, list[str]]:
    """A METADATA file's headers, each name with its values in order."""
    fields: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # headers end at the first blank line
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), []).append(value.strip())
    return fields


def unmet_requirements(metadata: dict[str, list[str]]) -> list[Unmet]:
    """Requires-Dist entries this environment does not satisfy."""
    from packaging.specifiers import SpecifierSet

    unmet = []
    for req in parse_requirements(metadata.get("Requires-Dist", [])):
        if req is None or not req.applies:
            continue
        have = distribution_version(req.name)
        if have is None:
            unmet.append(Unmet(req.text, req.name))
        elif req.specifier and not SpecifierSet(req.specifier).contains(have, prereleases=True):
            unmet.append(Unmet(req.text, req.name, have))
    return unmet


def installed_release() -> Release:
    """The flashinfer importable here, as a tree a worker can import from (found
    without importing it)."""
    spec = importlib.util.find_spec("flashinfer")
    if spec is None or not spec.submodule_search_locations:
        raise InputError("flashinfer is not installed here: name a release with --flashinfer")
    package = Path(list(spec.submodule_search_locations)[0])
    return Release(INSTALLED, distribution_version("flashinfer-python") or "installed", package.parent, None)
