"""Where a release's trtllm-gen kernel table comes from, verified before it is read.

A release names its kernel package (`ArtifactPath.TRTLLM_GEN_FMHA`, a path that starts
with a content hash) and the sha256 of that package's `checksums.txt`
(`CheckSumHash.TRTLLM_GEN_FMHA`); `checksums.txt` gives the sha256 of the table,
`include/flashInferMetaInfo.h`. A table is read only when both digests hold, wherever
it came from, in this order:

1. `HPROBE_KERNEL_TABLE`: a flashinfer-cubin wheel, an unpacked flashinfer-cubin, or a
   directory laid out as the artifact store is (`checksums.txt`, `include/…`), for
   machines that cannot fetch;
2. hprobe's cache (`kernel-tables/`, keyed by the checksums' digest);
3. a flashinfer-cubin installed in this environment;
4. flashinfer-cubin from the package index, with the user's pip: the release's own
   version, else the newest not newer than it (one kernel package serves several
   releases); only the two files are kept, and what a wheel read whole holds of
   kernel packages (`LISTINGS`), so that another release naming a package that
   wheel lacks is answered without reading it again;
5. the artifact store the release itself downloads from (`FLASHINFER_CUBINS_REPOSITORY`).
A search of 4 and 5 that found nothing is remembered for kernel_package.MISS_TTL and said in the
same words, so that a machine that cannot reach them does not pay for trying on every
run (and a report reads the same either way).
`HPROBE_KERNEL_TABLE=off` turns compiled depth off. Nothing here imports the release.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import tempfile
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hprobe.compiled.files import TABLE_SETTING
from hprobe.compiled.table import (
    ROW_FIELDS,
    KernelTable,
    TableError,
    Tables,
    parse_table,
    parser_digest,
    plain_rows,
    rows_from_plain,
)
from hprobe.model.errors import InputError
from hprobe.support import cache, fetch_batch
from hprobe.support.kernel_package import (
    MISS_PREFIX,
    MISS_TTL,
    UNREACHED_MISS_TTL,
    Package,
    package_of,
    recent_miss,
    remember_miss,
)
from hprobe.support.trees import PIP_TIMEOUT, download_command, pip_reason, pip_unreached, run_pip
from hprobe.system.bounded import setting_from_env
from hprobe.system.parsing import parse_module

SETTING = TABLE_SETTING
CUBIN_DIST = "flashinfer-cubin"
HEADER = "include/flashInferMetaInfo.h"
CHECKSUMS = "checksums.txt"
FETCH_TIMEOUT = 20.0  # seconds, per socket operation on the artifact store
FETCH_DEADLINE = 120.0  # seconds, per file from the artifact store, all told
MAX_TABLE_BYTES = 64 * 2**20
# checksums.txt lists every cubin of the package: 2.4 MB for 0.6.13's. Anything
# far larger (a sparse file, a zip bomb) is not one, and is never read whole.
MAX_CHECKSUMS_BYTES = 16 * 2**20
CACHED = "hprobe's cache"  # the 0.6.13 table is 5.5 MB


class Unreached(str):
    """Why a source has no table where it was not reached (a network failure):
    no answer about the table, so its miss is kept only briefly."""


Found = KernelTable | str | None  # a table, why a source has none, or nothing there


def tables_for(flashinfer: Path, version: str, progress: Callable[[str], None] = lambda _message: None) -> Tables:
    """The verified kernel table of the release whose package is `flashinfer`, or why none."""
    setting = os.environ.get(SETTING, "").strip()
    if setting.lower() == "off":
        return Tables(None, f"{SETTING}=off", disabled=True)
    package = package_of(flashinfer)
    if isinstance(package, str):
        return Tables(None, package)
    # One search per kernel package at a time: releases probed in parallel
    # (0.6.12 - 0.6.17 share one package) would each download the same
    # 458 MB wheel; the first keeps the table, the rest find it cached.
    with _GUARD:
        lock = _SEARCHES.setdefault(package.checksums_sha256, threading.Lock())
    with lock:
        return _search(package, setting, flashinfer, version, progress)


def tables_if_ported(flashinfer: Path, version: str, progress: Callable[[str], None] = lambda _message: None) -> Tables:
    """tables_for, where the release's selection code has a port: one without
    is never evaluated at compiled depth (deepen stops before asking for the
    table), so its table is not fetched nor parsed (0.5.x would cost a download
    and half a second each in a pin search)."""
    from hprobe.compiled.trtllm_gen import Port, port_for

    if not isinstance(port_for(flashinfer), Port):
        return Tables(None, "not fetched: no port of this release's selection code")
    return tables_for(flashinfer, version, progress)


_GUARD = threading.Lock()
_SEARCHES: dict[str, threading.Lock] = {}


def _search(package: Package, setting: str, flashinfer: Path, version: str, progress: Callable[[str], None]) -> Tables:
    tried: list[str] = []
    here: list[Callable[[], Found]] = [lambda: _given(setting, package)] if setting else []
    here += [lambda: _cached(package), lambda: _installed_cubin(package)]
    # Fetched only when no recent search found nothing: a machine that cannot
    # reach the index's cubin or the store would pay for the attempt (a
    # second, or a connect timeout) on every warm run.
    fetched: list[Callable[[], Found]] = [
        lambda: _from_index(package, version, progress),
        lambda: _from_store(flashinfer, package, progress),
    ]
    for source in here:
        found = _tried(source, tried)
        if found is not None:
            if not found.origin.startswith(CACHED):
                _keep(package, found)
            return Tables(found)
    missed = recent_miss(package, version)
    if missed is None:
        afar: list[str] = []
        for source in fetched:
            found = _tried(source, afar)
            if found is not None:
                _keep(package, found)
                return Tables(found)
        if not setting:
            unreached = any(isinstance(why, Unreached) for why in afar)
            remember_miss(package, version, "; ".join(afar), UNREACHED_MISS_TTL if unreached else MISS_TTL)
        tried += afar
    else:
        tried.append(missed)
    why = "; ".join(tried) or "no source holds it"
    return Tables(
        None,
        f"no kernel table for trtllm-gen kernel package {package.short} could be had ({why}); "
        f"to make it reachable: {reachable_by(flashinfer, package)}",
    )


def _tried(source: Callable[[], Found], tried: list[str]) -> KernelTable | None:
    """The table `source` gives, or None with why not added to `tried`."""
    try:
        found = source()
    except (OSError, InputError, TableError, zipfile.BadZipFile, ValueError) as exc:  # URLError is an OSError
        why = " ".join(str(exc).split())[:300]
        tried.append(Unreached(why) if _not_reached(exc) else why)
        return None
    if isinstance(found, str):
        tried.append(found)
        return None
    return found


def _verified(checksums: bytes, header: bytes, package: Package, origin: str) -> KernelTable:
    if hashlib.sha256(checksums).hexdigest() != package.checksums_sha256:
        raise ValueError(f"{origin}: {CHECKSUMS} is not the one flashinfer names (sha256 differs)")
    wanted = _header_digest(checksums)
    if hashlib.sha256(header).hexdigest() != wanted:
        raise ValueError(f"{origin}: flashInferMetaInfo.h does not match its entry in {CHECKSUMS}")
    return _parsed(header, origin, checksums)


@functools.lru_cache(maxsize=4)
def _parsed(header: bytes, origin: str, checksums: bytes) -> KernelTable:
    # One kernel package serves several releases (0.6.12 - 0.6.17 share one):
    # a report probing them parses its 5.5 MB table once, not once a release;
    # and a run after the first reads the rows kept by the parse.
    digest = hashlib.sha256(header).hexdigest()
    key = _rows_key(digest)
    kept = cache.read_kept(ROWS, key)
    rows = rows_from_plain(kept.get("fields"), kept.get("rows")) if isinstance(kept, dict) else None
    if rows is not None:
        return KernelTable(rows, digest, origin, header, checksums)
    parsed = parse_table(header, origin, checksums)
    cache.keep(ROWS, key, {"fields": list(ROW_FIELDS), "rows": plain_rows(parsed)})
    return parsed


ROWS = "table-rows"


def _rows_key(header_sha256: str) -> str:
    """What a table's parsed rows rest on: the header, by content, and the
    parser (compiled/table.py), by its source."""
    return hashlib.sha256(f"{header_sha256}\0{parser_digest()}".encode()).hexdigest()


def _header_digest(checksums: bytes) -> str:
    # As flashinfer's get_meta_hash reads it: "<sha256> <path>" lines.
    for line in checksums.decode("utf-8", errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lower().rsplit("/", 1)[-1] == "flashinfermetainfo.h":
            return parts[0]
    raise ValueError(f"{CHECKSUMS} lists no flashInferMetaInfo.h")


def _keep(package: Package, table: KernelTable) -> None:
    """Keep a verified table for the next run; a cache that cannot be written costs
    only that (the table in hand is good)."""
    try:
        where = cache.directory("kernel-tables") / package.checksums_sha256
        where.mkdir(parents=True, exist_ok=True)
        cache.write_atomically(where / CHECKSUMS, table.checksums)
        cache.write_atomically(where / "flashInferMetaInfo.h", table.data)
        for miss in where.glob(f"{MISS_PREFIX}*.json"):  # a table found settles every release of the package
            cache.discard(miss)
    except OSError:
        pass


def _cached(package: Package) -> Found:
    where = cache.found("kernel-tables", package.checksums_sha256)
    if not (where / CHECKSUMS).is_file():
        return None
    return _verified(
        _bounded_read(where / CHECKSUMS, MAX_CHECKSUMS_BYTES),
        _bounded_read(where / "flashInferMetaInfo.h"),
        package,
        f"{CACHED} ({where})",
    )


def _given(setting: str, package: Package) -> Found:
    """The table HPROBE_KERNEL_TABLE names: a folder or a wheel on this
    machine. A URL is said as written (a Path would fold its `//`), with
    where a store's address goes instead."""
    if "://" in setting:
        return (
            f"{SETTING}={setting}: a folder or wheel on this machine, not a URL (an artifact store's address goes in "
            "FLASHINFER_CUBINS_REPOSITORY)"
        )
    path = Path(setting).expanduser()
    if path.suffix == ".whl" and path.is_file():
        return _from_wheel(path, package, f"{path.name}")
    for root in (
        path,
        path / package.path,
        path / "cubins" / package.path,
        path / "flashinfer_cubin" / "cubins" / package.path,
    ):
        if (root / CHECKSUMS).is_file() and (root / HEADER).is_file():
            return _verified(
                _bounded_read(root / CHECKSUMS, MAX_CHECKSUMS_BYTES), _bounded_read(root / HEADER), package, str(root)
            )
    return f"{SETTING}={setting}: holds no {CHECKSUMS} with {HEADER} for kernel package {package.short}"


def _installed_cubin(package: Package) -> Found:
    import importlib.util

    spec = importlib.util.find_spec("flashinfer_cubin")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations))) / "cubins" / package.path
    if not (root / CHECKSUMS).is_file():
        return f"the installed flashinfer-cubin has no kernel package {package.short}"
    return _verified(
        _bounded_read(root / CHECKSUMS, MAX_CHECKSUMS_BYTES),
        _bounded_read(root / HEADER),
        package,
        f"flashinfer-cubin installed at {root.parents[2]}",
    )


def _from_index(package: Package, version: str, progress: Callable[[str], None]) -> Found:
    specs = [f"=={version}", f"<={version}"]
    prefix = f"flashinfer_cubin/cubins/{package.path}"
    with tempfile.TemporaryDirectory(dir=cache.directory("kernel-tables"), prefix=".download-") as tmp:
        progress(f"reading trtllm-gen's kernel table from {CUBIN_DIST} on the index")
        # The two files read out of the wheel on the index (through range
        # requests where it answers them), not the 458 MB wheel downloaded.
        answers = fetch_batch.members(
            CUBIN_DIST,
            specs,
            [prefix + CHECKSUMS, prefix + HEADER],
            Path(tmp),
            setting_from_env(PIP_TIMEOUT),
            MAX_TABLE_BYTES,
            listing_suffix=CHECKSUMS,
            known=_listings(),
        )
        if answers is not None:
            _keep_listings(answers)
            problems: list[str] = []
            for doc in answers:
                received = doc.get("received")
                if isinstance(received, int) and not isinstance(received, bool) and received > 0:
                    cache.record_received("kernel tables", received)
                if "members" in doc:
                    files = doc["members"]
                    checksums = _bounded_read(Path(files[prefix + CHECKSUMS]), MAX_CHECKSUMS_BYTES)
                    return _verified(checksums, _bounded_read(Path(files[prefix + HEADER])), package, str(doc["wheel"]))
                wheel = doc.get("wheel")
                problems.append(
                    f"{wheel} holds no kernel package {package.short}"
                    if wheel
                    else f"{CUBIN_DIST}{doc['spec']}: not on the index"
                )
            return "; ".join(problems) or f"{CUBIN_DIST}: not on the index"
    return _downloaded(package, version, progress)


# What each flashinfer-cubin wheel read whole holds of kernel packages (its
# `checksums.txt` members), by file name with the sha256 the index gave: the
# releases from 0.6.18 on each name a package the newest cubin (0.6.13) lacks,
# and learning that costs its whole 3.9 MB directory; a run asking for several
# such releases reads it once.
LISTINGS = "cubin-listings.json"


def _listings() -> dict[str, dict]:
    try:
        kept = json.loads((cache.directory("kernel-tables") / LISTINGS).read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(kept, dict):
        return {}
    return {
        name: entry
        for name, entry in kept.items()
        if isinstance(entry, dict)
        and isinstance(entry.get("sha256"), str)
        and isinstance(entry.get("listing"), list)
        and all(isinstance(n, str) for n in entry["listing"])
    }


def _keep_listings(answers: list[dict]) -> None:
    new = {
        doc["wheel"]: {"sha256": doc["sha256"], "listing": doc["listing"]}
        for doc in answers
        if isinstance(doc.get("wheel"), str)
        and isinstance(doc.get("sha256"), str)
        and isinstance(doc.get("listing"), list)
    }
    if not new:
        return
    try:
        cache.write_atomically(
            cache.directory("kernel-tables") / LISTINGS, json.dumps({**_listings(), **new}, sort_keys=True).encode()
        )
    except OSError:
        pass  # a listing is a saving, never an answer


def _downloaded(package: Package, version: str, progress: Callable[[str], None]) -> Found:
    """The table out of flashinfer-cubin downloaded whole with plain `pip
    download` (the helper could not answer: pip's internals differ)."""
    problems: list[str] = []
    for spec in (f"{CUBIN_DIST}=={version}", f"{CUBIN_DIST}<={version}"):
        with tempfile.TemporaryDirectory(dir=cache.directory("kernel-tables"), prefix=".download-") as tmp:
            progress(f"fetching {spec} for trtllm-gen's kernel table")
            proc = run_pip(download_command(Path(tmp), spec), f"cannot fetch {spec}")
            wheels = list(Path(tmp).glob("*.whl"))
            if proc.returncode != 0 or not wheels:
                if pip_unreached(proc):
                    return Unreached(f"{spec}: {pip_reason(proc)}")
                problems.append(f"{spec}: not on the index")
                continue
            cache.record_received("kernel tables", wheels[0].stat().st_size)
            found = _from_wheel(wheels[0], package, wheels[0].name)
            if isinstance(found, KernelTable):
                return found
            problems.append(str(found))
    return "; ".join(problems)


def _from_wheel(wheel: Path, package: Package, origin: str) -> Found:
    prefix = f"flashinfer_cubin/cubins/{package.path}"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        if prefix + CHECKSUMS not in names or prefix + HEADER not in names:
            return f"{origin} holds no kernel package {package.short}"
        return _verified(
            _member(archive, prefix + CHECKSUMS, MAX_CHECKSUMS_BYTES, origin),
            _member(archive, prefix + HEADER, MAX_TABLE_BYTES, origin),
            package,
            origin,
        )


def _member(archive: zipfile.ZipFile, name: str, limit: int, origin: str) -> bytes:
    """A wheel member read only when its size is one such a file has, and never past it."""
    info = archive.getinfo(name)
    if info.file_size > limit:
        raise ValueError(f"{origin}: {name.rsplit('/', 1)[-1]} of {info.file_size} bytes, more than such a file holds")
    with archive.open(info) as member:
        data = member.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{origin}: {name.rsplit('/', 1)[-1]} larger than such a file")
    return data


def _not_reached(exc: BaseException) -> bool:
    """A failure to reach a server (no connection, a timeout), as opposed to
    one that answered (an HTTP status) or sent what is not a table."""
    import urllib.error  # only where a source failed: a warm run never is here

    return isinstance(exc, OSError) and not isinstance(exc, urllib.error.HTTPError)


# Stores this run could not reach, by address, with why: every release's
# package is asked of the same host, and on a machine that cannot resolve it
# each attempt costs the resolver's timeout (5 s here). Said in the same words.
_STORE_DOWN: dict[str, Unreached] = {}


def new_run() -> None:
    """Forget the stores an earlier run in this process could not reach."""
    with _GUARD:
        _STORE_DOWN.clear()


def _from_store(flashinfer: Path, package: Package, progress: Callable[[str], None]) -> Found:
    base = _store(flashinfer)
    if not base:
        return "the release names no artifact store"
    if problem := _unfetchable(base):
        return problem
    with _GUARD:
        down = _STORE_DOWN.get(base)
    if down is not None:
        return down
    progress(f"fetching trtllm-gen's kernel table from {base}")
    url = _package_url(base, package)
    try:
        checksums = _download(url + CHECKSUMS)
    except OSError as exc:
        if not _not_reached(exc):
            raise
        why = Unreached(" ".join(str(exc).split())[:300])
        with _GUARD:
            _STORE_DOWN.setdefault(base, why)
        return why
    return _verified(checksums, _download(url + HEADER), package, url + HEADER)


def _store(flashinfer: Path) -> str | None:
    return os.environ.get("FLASHINFER_CUBINS_REPOSITORY") or _store_default(flashinfer)


def _package_url(base: str, package: Package) -> str:
    return base.rstrip("/") + "/" + package.path


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _unfetchable(base: str) -> str | None:
    """Why hprobe will not fetch from `base`: https anywhere, plain http only from
    this machine (a mirror on loopback). What is fetched is verified by digest
    either way; the scheme keeps a table from crossing a network in the clear."""
    from urllib.parse import urlsplit

    parts = urlsplit(base)
    if parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK):
        return None
    return f"the artifact store {base!r} is neither an https URL nor http on this machine (127.0.0.1, localhost)"


def reachable_by(flashinfer: Path, package: Package) -> str:
    """What makes a table hprobe could not fetch reachable: its two files, laid
    out as the store has them, named by HPROBE_KERNEL_TABLE."""
    base = _store(flashinfer)
    if not base:
        return f"{SETTING}=DIR, DIR holding {CHECKSUMS} and {HEADER} of kernel package {package.short}"
    url = _package_url(base, package)
    return (
        f"`curl -fL --create-dirs -o DIR/{CHECKSUMS} {url}{CHECKSUMS} -o DIR/{HEADER} {url}{HEADER}` "
        f"where the store answers, then {SETTING}=DIR"
    )


def _store_default(flashinfer: Path) -> str | None:
    """The default of FLASHINFER_CUBINS_REPOSITORY in the release's jit/cubin_loader.py."""
    try:
        tree = parse_module((flashinfer / "jit" / "cubin_loader.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and len(node.args) == 2 and all(isinstance(a, ast.Constant) for a in node.args):
            name, default = (a.value for a in node.args)  # type: ignore[attr-defined]
            if name == "FLASHINFER_CUBINS_REPOSITORY" and isinstance(default, str):
                return default
    return None


def _download(url: str) -> bytes:
    """One file of the artifact store: at most MAX_TABLE_BYTES, within
    FETCH_DEADLINE all told (a server that drips a byte at a time is cut off,
    not only one that stalls), never redirected off what _unfetchable allows
    (an https store sending plain http elsewhere)."""
    import time
    import urllib.request  # only where a store is fetched from: a warm run never is

    from hprobe.device.boundary import own_network

    class _Guarded(urllib.request.HTTPRedirectHandler):
        def redirect_request(
            self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
        ) -> urllib.request.Request | None:
            if problem := _unfetchable(newurl):
                raise ValueError(f"{url}: redirected to {newurl}, which hprobe does not follow ({problem})")
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    deadline = time.monotonic() + FETCH_DEADLINE
    chunks: list[bytes] = []
    size = 0
    # hprobe's own fetch, perhaps in a thread while a release is probed in this
    # process (whose network the probe refuses to flashinfer).
    with own_network(), urllib.request.build_opener(_Guarded()).open(url, timeout=FETCH_TIMEOUT) as response:
        while size <= MAX_TABLE_BYTES:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url}: not received within {FETCH_DEADLINE:g} s")
            # read1: what has arrived (at least a byte, within FETCH_TIMEOUT), so
            # the deadline is looked at as a slow body comes in: the bound is
            # FETCH_DEADLINE plus one FETCH_TIMEOUT.
            chunk = response.read1(min(1 << 16, MAX_TABLE_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    cache.record_received("kernel tables", size)
    if size > MAX_TABLE_BYTES:
        raise ValueError(f"{url}: larger than a kernel table")
    return b"".join(chunks)


def _bounded_read(path: Path, limit: int = MAX_TABLE_BYTES) -> bytes:
    """A regular file's bytes, refused unread past `limit` (a FIFO would block, a sparse file would fill memory)."""
    import stat

    st = path.stat()
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{path}: not a regular file")
    if st.st_size > limit:
        raise ValueError(f"{path}: {st.st_size} bytes, larger than such a file")
    with path.open("rb") as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path}: larger than such a file")
    return data
