"""A wheel on the package index read by HTTP range requests: its central
directory, then only the members something opens, each checked against the
wheel's RECORD before anything reads it.

A probe of 0.7.4 reads about 6 MB of a 101 MB wheel (the Python it imports,
a few C++ sources and headers); downloading the whole wheel to read that is
most of a cold `suggest`. A slim tree (support/slim.py) served from here
holds every member by name and size as before; the bytes of one come from
the index the first time it is opened, with the modules its module-level
imports name fetched beside it in the same round (an import of
`flashinfer` opens several hundred modules: one round trip each would be
minutes on a slow link).

What is verified: every member against the sha256 RECORD gives (zipfile
checks its CRC too). RECORD itself comes by the same route, and the index
publishes only the whole wheel's digest, which a range read cannot check:
a server that serves a consistent forgery of RECORD and its members is not
caught here. The tree's marker says so (`verified`), and
HPROBE_WHOLE_WHEELS=1 takes the whole wheel, checked against the index's
digest, instead (docs/reference.md argues the default).

Stdlib and hprobe.system only: a worker serves its tree's placeholders from here in the
user's Python. The address, certificate bundle and proxy are pip's own
(pip_download's `links`); a server that answers no range, or this client
differently from pip (credentials pip adds), raises RangesRefused at the
first request, and the release is downloaded whole, as before.
"""

from __future__ import annotations

import ast
import base64
import csv
import hashlib
import http.client
import io
import json
import os
import re
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from hprobe.system.parsing import parse_module

WHOLE_WHEELS = "HPROBE_WHOLE_WHEELS"
# One range request, in seconds (README "Releases that are not installed").
RANGE_TIMEOUT = ("HPROBE_RANGE_TIMEOUT", 60.0)
# Ranges closer than this are asked as one (a gap costs less than a round trip).
COALESCE_GAP = 1 << 16
MAX_REQUEST = 8 << 20  # bytes in one request, at most
PARALLEL = 8  # requests in flight at once
# The end of a wheel asked first: the end-of-central-directory record and, for
# a small wheel, the whole directory in the same request.
TAIL = 1 << 16
# Single opens (not a module's imports) after which the remaining Python of
# the package comes in one round: a reader walking the whole package (a rule
# that searches flashinfer's source) would otherwise ask once per file.
SWEEP_AFTER = 48
CENTRAL_DIRECTORY = ".hprobe-central-directory"  # in a tree read by ranges: the wheel's tail, from its directory on
REMOTE_MARKER = "remote "  # how a slim tree's marker (slim.MARKER) served from here begins


def whole_wheels() -> bool:
    """Whether releases are taken as whole wheels, checked against the index's digest."""
    return os.environ.get(WHOLE_WHEELS, "").strip() == "1"


class RangesRefused(OSError):
    """The server did not answer a range request as asked: the release is downloaded whole."""


@dataclass(frozen=True)
class Remote:
    """Where a wheel is and how pip reaches it."""

    url: str
    filename: str
    sha256: str  # what the index says the whole wheel's digest is (a range read cannot check it)
    cert: str | None = None  # pip's certificate bundle
    proxy: str | None = None  # pip's --proxy, where set (else the environment's)

    def marker(self, size: int) -> str:
        """The slim tree's marker for a tree served from here (slim.MARKER):
        where the wheel is, its size, and what is verified of it."""
        doc: dict[str, object] = {**asdict(self), "size": size}
        doc["verified"] = "each member against RECORD; RECORD not against the index (it gives the whole wheel's digest)"
        return REMOTE_MARKER + json.dumps(doc, sort_keys=True)

    @classmethod
    def from_marker(cls, text: str) -> tuple[Remote, int] | None:
        """(where, size) from a marker `marker` wrote; None for another marker."""
        if not text.startswith(REMOTE_MARKER):
            return None
        try:
            doc = json.loads(text[len(REMOTE_MARKER) :])
            return cls(doc["url"], doc["filename"], doc["sha256"], doc.get("cert"), doc.get("proxy")), int(doc["size"])
        except (ValueError, KeyError, TypeError):
            return None


_OPENERS: dict[tuple[str | None, str | None], urllib.request.OpenerDirector] = {}
_OPENERS_LOCK = threading.Lock()


def _opener(remote: Remote) -> urllib.request.OpenerDirector:
    key = (remote.cert, remote.proxy)
    with _OPENERS_LOCK:
        if key not in _OPENERS:
            bundle = remote.cert if remote.cert and os.path.isfile(remote.cert) else None
            context = ssl.create_default_context(cafile=bundle)
            handlers: list[urllib.request.BaseHandler] = [urllib.request.HTTPSHandler(context=context)]
            if remote.proxy:
                handlers.append(urllib.request.ProxyHandler({"http": remote.proxy, "https": remote.proxy}))
            _OPENERS[key] = urllib.request.build_opener(*handlers)
        return _OPENERS[key]


def _timeout() -> float:
    try:
        value = float(os.environ.get(RANGE_TIMEOUT[0], "") or RANGE_TIMEOUT[1])
    except ValueError:
        value = RANGE_TIMEOUT[1]
    return value if 0 < value < 1e6 else RANGE_TIMEOUT[1]


class RangeFile(io.RawIOBase):
    """The remote wheel as a seekable binary file for zipfile: bytes read
    come from what was fetched (intervals), a read outside them fetches it."""

    def __init__(self, remote: Remote, size: int, known: Iterable[tuple[int, bytes]] = ()):
        super().__init__()
        self.remote, self.size = remote, size
        self._known: list[tuple[int, bytes]] = sorted(known)
        self._pos = 0
        self._lock = threading.Lock()
        self.received = 0  # bytes off the network

    @classmethod
    def open(cls, remote: Remote) -> tuple[RangeFile, bytes]:
        """The file, with its tail (TAIL bytes) fetched: its size is the
        server's answer to that first request. RangesRefused where the
        server answers it otherwise."""
        status, content_range, body = _get(remote, f"bytes=-{TAIL}", TAIL)
        total = content_range.rpartition("/")[2]
        start = content_range.removeprefix("bytes ").partition("-")[0]
        if status != 206 or not total.isdigit() or not start.isdigit() or int(start) + len(body) != int(total):
            raise RangesRefused(f"{host(remote)} answered a range request with {status} {content_range or ''}".strip())
        made = cls(remote, int(total), [(int(start), body)])
        made.received = len(body)
        return made, body

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = offset if whence == 0 else self._pos + offset if whence == 1 else self.size + offset
        return self._pos

    def read(self, n: int | None = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self._pos + n)
        if end <= self._pos:
            return b""
        data = self._have(self._pos, end)
        if data is None:
            self.fetch([(self._pos, end)])
            data = self._have(self._pos, end)
            if data is None:
                raise OSError(f"bytes {self._pos}-{end - 1} of {self.remote.filename} did not arrive")
        self._pos = end
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def _have(self, start: int, end: int) -> bytes | None:
        """Bytes [start, end) from what was fetched (pieces that meet or
        overlap joined), None where some are missing."""
        with self._lock:
            pos, parts = start, []
            for first, block in self._known:  # sorted by where each starts
                if first > pos:
                    break
                last = first + len(block)
                if last <= pos:
                    continue
                piece = block[pos - first : min(end, last) - first]
                parts.append(piece)
                pos += len(piece)
                if pos >= end:
                    return b"".join(parts)
        return None

    def fetch(self, spans: Iterable[tuple[int, int]]) -> None:
        """Every span [start, end) not yet here, as few requests as the gaps
        allow, PARALLEL at a time."""
        wanted = sorted((s, e) for s, e in spans if e > s and self._have(s, e) is None)
        merged: list[list[int]] = []
        for start, end in wanted:
            if merged and start - merged[-1][1] <= COALESCE_GAP and end - merged[-1][0] <= MAX_REQUEST:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        if not merged:
            return
        if len(merged) == 1:
            got = [self._fetch_one(*merged[0])]
        else:
            got = list(_pool().map(lambda span: self._fetch_one(*span), merged))
        with self._lock:
            self._known.extend(got)
            self._known.sort(key=lambda item: item[0])
            self.received += sum(len(block) for _, block in got)

    def _fetch_one(self, start: int, end: int) -> tuple[int, bytes]:
        status, content_range, body = _get(self.remote, f"bytes={start}-{end - 1}", end - start)
        if status != 206 or not content_range.startswith(f"bytes {start}-{end - 1}/") or len(body) != end - start:
            raise RangesRefused(
                f"{host(self.remote)} answered bytes {start}-{end - 1} with {status}, {len(body)} bytes"
            )
        return start, body


_POOL: list[tuple[int, ThreadPoolExecutor]] = []
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """Threads that fetch ranges, kept for the process (each keeps its
    connections open); a forked worker makes its own."""
    with _POOL_LOCK:
        if not _POOL or _POOL[0][0] != os.getpid():
            _POOL[:] = [(os.getpid(), ThreadPoolExecutor(max_workers=PARALLEL, thread_name_prefix="hprobe-range"))]
        return _POOL[0][1]


def host(remote: Remote) -> str:
    """The server a remote wheel is on, as said to the user (no credentials)."""
    return urllib.parse.urlparse(remote.url).netloc.rpartition("@")[2] or remote.url


def _get(remote: Remote, ranges: str, expected: int) -> tuple[int, str, bytes]:
    """(status, Content-Range, body) of one range request; never more than
    `expected` bytes and one to tell are read (a server that answers with
    the whole file fills no memory)."""
    from hprobe.device.boundary import own_network

    # A probe refuses the network to flashinfer (device/boundary.py); the
    # bytes of a module it opens are hprobe's own fetch.
    with own_network():
        if _direct(remote):
            for attempt in (0, 1):
                try:
                    return _get_kept_alive(remote, ranges, expected)
                except _Redirected:
                    break  # urllib follows it
                except (http.client.HTTPException, ConnectionError, TimeoutError, ssl.SSLError) as exc:
                    _drop_connection(remote)
                    if attempt or isinstance(exc, TimeoutError):
                        raise OSError(f"{host(remote)}: {type(exc).__name__}: {exc}") from None
        request = urllib.request.Request(remote.url, headers={"Range": ranges, "Accept-Encoding": "identity"})
        try:
            with _opener(remote).open(request, timeout=_timeout()) as response:
                body = response.read(expected + 1)
                return response.status, response.headers.get("Content-Range", "") or "", body
        except urllib.error.HTTPError as exc:
            raise RangesRefused(f"{host(remote)} answered a range request with {exc.code} {exc.reason}") from None


class _Redirected(Exception):
    pass


def _direct(remote: Remote) -> bool:
    """Whether requests go on a connection of this thread's own, kept open
    between them: no proxy, no credentials in the address. Each new
    connection costs a TLS handshake (and, on some links, a stall of
    seconds): a tree's few hundred modules come in tens of requests on
    eight connections. Otherwise urllib, a connection per request."""
    parsed = urllib.parse.urlsplit(remote.url)
    if parsed.scheme not in ("https", "http") or parsed.username or not parsed.hostname:
        return False
    proxy = remote.proxy or urllib.request.getproxies().get(parsed.scheme)
    return not proxy or bool(urllib.request.proxy_bypass(parsed.hostname))


_THREAD = threading.local()


def _connection(remote: Remote) -> http.client.HTTPConnection:
    parsed = urllib.parse.urlsplit(remote.url)
    connections: dict[tuple[str, str | None], http.client.HTTPConnection] = _THREAD.__dict__.setdefault(
        "connections", {}
    )
    key = (f"{parsed.scheme}://{parsed.netloc}", remote.cert)
    if key not in connections:
        host, port = parsed.hostname or "", parsed.port
        if parsed.scheme == "https":
            bundle = remote.cert if remote.cert and os.path.isfile(remote.cert) else None
            context = ssl.create_default_context(cafile=bundle)
            connections[key] = http.client.HTTPSConnection(host, port, context=context, timeout=_timeout())
        else:
            connections[key] = http.client.HTTPConnection(host, port, timeout=_timeout())
    return connections[key]


def _drop_connection(remote: Remote) -> None:
    parsed = urllib.parse.urlsplit(remote.url)
    connection = _THREAD.__dict__.get("connections", {}).pop((f"{parsed.scheme}://{parsed.netloc}", remote.cert), None)
    if connection is not None:
        connection.close()


def _get_kept_alive(remote: Remote, ranges: str, expected: int) -> tuple[int, str, bytes]:
    parsed = urllib.parse.urlsplit(remote.url)
    target = parsed.path + (f"?{parsed.query}" if parsed.query else "")
    connection = _connection(remote)
    connection.request("GET", target, headers={"Range": ranges, "Accept-Encoding": "identity"})
    response = connection.getresponse()
    if response.status in (301, 302, 303, 307, 308):
        _drop_connection(remote)
        raise _Redirected()
    body = response.read(expected + 1)
    if response.status >= 400:
        _drop_connection(remote)
        raise RangesRefused(f"{host(remote)} answered a range request with {response.status} {response.reason}")
    if response.will_close or not response.isclosed():
        _drop_connection(remote)  # more than asked, or the server closes: a new connection next time
    return response.status, response.getheader("Content-Range", "") or "", body


class RemoteWheel:
    """The members of a remote wheel, read as zipfile reads them."""

    def __init__(self, file: RangeFile):
        self.file = file
        self.zip = zipfile.ZipFile(file)  # reads the central directory (fetched where the tail did not hold it)
        infos = sorted(self.zip.infolist(), key=lambda info: info.header_offset)
        self.infos = {info.filename: info for info in infos}
        ends = [info.header_offset for info in infos[1:]] + [self.zip.start_dir]
        # A member's local record runs to the next one's: its header, name,
        # extra field and data, asked in one range.
        self.spans = {info.filename: (info.header_offset, end) for info, end in zip(infos, ends, strict=True)}

    def __str__(self) -> str:
        return self.file.remote.url

    @property
    def central_directory(self) -> bytes:
        """The wheel's bytes from its central directory to its end (what opens it again without the network)."""
        start = self.zip.start_dir
        self.file.fetch([(start, self.file.size)])
        data = self.file._have(start, self.file.size)
        assert data is not None
        return data

    def read(self, names: list[str]) -> dict[str, bytes]:
        """The members `names`, fetched in one round."""
        self.file.fetch(self.spans[name] for name in names)
        return {name: self.zip.read(name) for name in names}  # each member's CRC is checked


def open_wheel(remote: Remote) -> RemoteWheel:
    file, _ = RangeFile.open(remote)
    return RemoteWheel(file)


def reopen(remote: Remote, directory: bytes, size: int) -> RemoteWheel:
    """The wheel opened from its kept central directory (no request)."""
    return RemoteWheel(RangeFile(remote, size, [(size - len(directory), directory)]))


def digests(record: str) -> dict[str, str]:
    """RECORD's sha256 digests (urlsafe base64, unpadded) by member."""
    found = {}
    for row in csv.reader(record.splitlines()):
        if len(row) >= 2 and row[1].startswith("sha256="):
            found[row[0]] = row[1].removeprefix("sha256=")
    return found


def tree_record(root: Path) -> tuple[str, dict[str, str]]:
    """(RECORD's member name, its digests) in a tree unpacked from a wheel:
    what its other members are checked against."""
    records = sorted(root.glob("*.dist-info/RECORD"))
    if not records:
        raise ValueError("the wheel has no RECORD to check its members against")
    return records[0].relative_to(root).as_posix(), digests(records[0].read_text(encoding="utf-8"))


def wheel_record(wheel: RemoteWheel) -> dict[str, str]:
    """The digests the remote wheel's RECORD gives (fetched from it)."""
    records = [name for name in wheel.spans if name.endswith(".dist-info/RECORD")]
    if len(records) != 1:
        raise ValueError(f"{wheel.file.remote.filename} has {len(records)} RECORD files")
    return digests(wheel.read(records)[records[0]].decode("utf-8", errors="replace"))


def check(name: str, data: bytes, record: dict[str, str]) -> None:
    """`data` is the member RECORD lists, or ValueError."""
    want = record.get(name)
    if want is None:
        raise ValueError(f"{name} has no sha256 in the wheel's RECORD")
    got = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    if got != want:
        raise ValueError(f"{name} differs from the digest the wheel's RECORD gives")


def imported_members(name: str, source: bytes, members: Callable[[str], bool]) -> list[str]:
    """The package's members a module's module-level imports name (the ones
    importing it runs at once), each as a file of the wheel `members`
    answers for: `pkg/mod.py` or `pkg/mod/__init__.py`, and the packages on
    the way. Only what to fetch ahead, never what anything concludes: a
    module is not parsed whole (that cost 3 s of CPU over 0.7.4's imports),
    its import statements outside `def` and `class` bodies are, and one
    missed is fetched when it is opened."""
    if not name.endswith(".py"):
        return []
    parts = name.removesuffix(".py").split("/")
    package, top = parts[:-1], parts[0]
    dotted: list[str] = []
    for statement in _module_level_imports(source.decode("utf-8", errors="replace")):
        if isinstance(statement, ast.Import):
            dotted.extend(alias.name for alias in statement.names)
            continue
        if statement.level:
            if statement.level - 1 > len(package):
                continue
            base = package[: len(package) - (statement.level - 1)]
            module = ".".join([*base, *(statement.module.split(".") if statement.module else [])])
        else:
            module = statement.module or ""
        dotted.append(module)
        dotted.extend(f"{module}.{alias.name}" for alias in statement.names if alias.name != "*")
    found: list[str] = []
    for module in dotted:
        pieces = module.split(".")
        if pieces[0] != top:
            continue
        for k in range(1, len(pieces) + 1):
            path = "/".join(pieces[:k])
            for candidate in (f"{path}/__init__.py", f"{path}.py") if k > 1 else (f"{path}/__init__.py",):
                if members(candidate):
                    found.append(candidate)
    return list(dict.fromkeys(found))


_BLOCK = re.compile(r"(?:async\s+def|def|class)\b|@")
_IMPORT = re.compile(r"(?:from\s+[\w.]+\s+import|import)\b")


def _module_level_imports(text: str) -> Iterable[ast.Import | ast.ImportFrom]:
    """Import statements outside any `def` or `class` (inside a module-level
    `if`, `try` or `with` too), each parsed alone."""
    lines = text.splitlines()
    in_body = False
    k = 0
    while k < len(lines):
        line = lines[k]
        stripped = line.lstrip()
        k += 1
        if not stripped or stripped.startswith("#"):
            continue
        if not line[0].isspace() and stripped[0] not in ")]}":  # a closing bracket ends a signature, not a body
            in_body = bool(_BLOCK.match(stripped))
        if in_body or not _IMPORT.match(stripped):
            continue
        statement = stripped
        while (statement.count("(") > statement.count(")") or statement.endswith("\\")) and k < len(lines):
            statement = statement.removesuffix("\\") + " " + lines[k].strip()
            k += 1
        try:
            # Under hprobe's one parsing lock: ast in two threads at once trips CPython 3.11's
            # "AST constructor recursion depth mismatch" (system/parsing.py).
            parsed = parse_module(statement).body
        except SyntaxError:
            continue
        for node in parsed:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node
