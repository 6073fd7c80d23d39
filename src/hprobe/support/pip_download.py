"""Download several releases of one distribution in one process, with pip's
own configuration, finder and session: the index, find-links, certificates,
proxies and credentials `pip download --no-deps --only-binary=:all:` would
use, and the file it would choose for `==version`.

Run by hprobe.support.fetch_batch in the user's Python (stdlib and pip only:
nothing of hprobe is imported). Each `pip download` costs this machine about
2 s of CPU before it fetches a byte (starting pip, resolving, reading the
wheel three times); one process for a report's nineteen releases pays that
once. Request on stdin: {"dist", "versions", "dest"}; a line of JSON on stdout
per release as it lands, {"version", "file"}, {"version", "refused"} (the
index lists the distribution but no wheel of that release pip's finder can
take: pip's own last words for that) or {"version",
"error"}, or one {"error"} when pip's internals are not what this expects.
Whatever else it cannot fetch is fetched again by plain `pip download`: this
is only a faster road to the same file, never the one that explains a
failure it did not understand.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import sys
import zlib
from typing import Any

CHUNK = 1 << 20
# flashinfer-cubin, the largest wheel read whole (where a server answers no
# range requests), is 458 MiB.
MAX_WHEEL_BYTES = 2 << 30


def main() -> int:
    request = json.loads(sys.stdin.read())
    try:
        from pip._internal.commands import create_command
        from pip._vendor.packaging.specifiers import SpecifierSet

        command: Any = create_command("download")
        options, _ = command.parse_args(["--no-deps", "--only-binary=:all:", "-d", request["dest"], request["dist"]])
        with command.main_context():
            session = command.get_default_session(options)
            finder = command._build_package_finder(options=options, session=session)
            if "members" in request:
                return _members(request, session, finder, SpecifierSet)
            if "links" in request:
                return _links(request, options, session, finder, SpecifierSet)
            for version in request["versions"]:
                try:
                    found = finder.find_best_candidate(request["dist"], SpecifierSet(f"=={version}")).best_candidate
                    if found is None:
                        if not finder.find_all_candidates(request["dist"]):
                            # No listing at all: an index pip could not reach
                            # (its finder only warns) or a name it does not
                            # know. Plain pip download says which.
                            raise LookupError("the index listed no release of it")
                        # Listed, with no wheel of this release pip's finder
                        # can take: what `pip download` ends with (its
                        # resolver's words).
                        _say(
                            {
                                "version": version,
                                "refused": f"ERROR: No matching distribution found for {request['dist']}=={version}",
                            }
                        )
                        continue
                    path = _download(session, found.link, os.path.join(request["dest"], version))
                    _say({"version": version, "file": path})
                except Exception as exc:  # noqa: BLE001 - plain pip download fetches it again and says why
                    _say({"version": version, "error": f"{type(exc).__name__}: {exc}"})
    except Exception as exc:  # noqa: BLE001 - pip's internals differ: every release goes to plain pip download
        _say({"error": f"{type(exc).__name__}: {exc}"})
        return 3
    return 0


def _members(request: dict, session: Any, finder: Any, specifier_set: Any) -> int:
    """Named members of the first wheel, by the specifiers in order, that holds
    them all, each written to `dest`: {"spec", "wheel", "members": {name:
    path}} for that wheel; {"spec", "absent"} (and "wheel") for a specifier
    no release or a wheel without them answers; {"spec", "error"} ends it
    when a wheel could not be read. Read through HTTP
    range requests where the server answers them (a kernel table is 6 MB of
    a 458 MB flashinfer-cubin wheel), else downloaded whole. What is read is
    checked by the caller against the digests the release names."""

    unread = _IndexFailures()
    for k, spec in enumerate(request["specs"]):
        try:
            found = finder.find_best_candidate(request["dist"], specifier_set(spec)).best_candidate
            if found is None:
                if unread.reasons:
                    # Not an answer: the index was not read. Plain pip download tries again and says why.
                    _say({"spec": spec, "error": f"the index could not be read: {unread.reasons[0]}"})
                    return 3
                _say({"spec": spec, "absent": True})
                continue
            link = found.link
            if _listed_without(request, link):
                _say({"spec": spec, "wheel": link.filename, "absent": True, "received": 0, "listed": True})
                continue
            folder = os.path.join(request["dest"], str(k))
            os.makedirs(folder, exist_ok=True)
            received = 0  # bytes off the network for this wheel (a local file: none)
            if link.is_file:
                source: Any = open(link.file_path, "rb")
            else:
                source = _Ranges.open(session, link.url_without_fragment)
                if source is None:  # no range requests here: the whole file
                    whole = _download(session, link, folder)
                    received = os.path.getsize(whole)
                    source = open(whole, "rb")
            limit = request.get("max_bytes", 1 << 26)
            listing: dict[str, Any] = {}
            with source:
                # The members found by a search of the central directory where
                # its entries are in name order, else the whole directory read.
                try:
                    read = _searched(source, request["members"], limit)
                except (ValueError, struct.error, zlib.error):
                    read = None  # zipfile reads it, and says what is wrong with it if anything is
                if read is None:
                    read, names = _read_whole_directory(source, request["members"], limit)
                    suffix = request.get("listing_suffix")
                    if suffix and link.hash_name == "sha256" and link.hash:
                        # What the wheel holds of that kind, for a later request
                        # to answer from (_listed_without) without reading it again.
                        listing = {"sha256": link.hash, "listing": sorted(n for n in names if n.endswith(suffix))}
                received += getattr(source, "received", 0)
            if read is None:
                _say({"spec": spec, "wheel": link.filename, "absent": True, "received": received, **listing})
                continue
            written = {}
            for n, member in enumerate(request["members"]):
                written[member] = os.path.join(folder, f"{n}.member")
                with open(written[member], "wb") as out:
                    out.write(read[member])
            _say({"spec": spec, "wheel": link.filename, "members": written, "received": received, **listing})
            return 0
        except Exception as exc:  # noqa: BLE001 - the caller fetches the plain way
            _say({"spec": spec, "error": f"{type(exc).__name__}: {exc}"})
            return 3
    return 0


def _listed_without(request: dict, link: Any) -> bool:
    """Whether an earlier whole read of this very wheel (the same file name
    and the sha256 the index gives for it) listed what it holds of the first
    member's kind, and the first member is not among them: then the wheel
    lacks it, said without reading the wheel again."""
    suffix = request.get("listing_suffix")
    known = request.get("known", {}).get(link.filename)
    first = request["members"][0]
    return bool(
        suffix
        and first.endswith(suffix)
        and isinstance(known, dict)
        and link.hash_name == "sha256"
        and link.hash
        and known.get("sha256") == link.hash
        and isinstance(known.get("listing"), list)
        and first not in known["listing"]
    )


def _read_whole_directory(source: Any, names: list[str], limit: int) -> tuple[dict[str, bytes] | None, list[str]]:
    """The members `names` of the zip `source`, read with its whole central
    directory (None where one is missing), and the name of every member."""
    import zipfile

    with zipfile.ZipFile(source) as wheel:
        every = wheel.namelist()
        present = set(every)
        if any(m not in present for m in names):
            return None, every
        read = {}
        for member in names:
            if wheel.getinfo(member).file_size > limit:
                raise ValueError(f"{member} is larger than expected")
            read[member] = wheel.read(member)  # the member's CRC is checked
        return read, every


# The central directory of flashinfer-cubin is 3.9 MB (16,017 entries): read
# whole, it is most of what fetching a kernel table costs, though the two
# members sought are 1.3 MB. Its entries are written in name order (the
# dist-info's aside), so each member is found by a search that cuts its
# segment in _FANOUT each round, the blocks of every point of a round asked
# at once (bench/table_search.py: 1.7 MB in 7 round trips where the whole
# directory was 5.0 MB in 6). Only a member found so is read this
# way; where any is not (a directory out of order, a member absent), the
# whole directory is read as before. What is read is checked here against the
# directory's sizes and CRC and by the caller against the release's digests.
_ENTRY = b"PK\x01\x02"
_ENTRY_FIXED = 46
_LOCAL_FIXED = 30
_END = b"PK\x05\x06"
_END64_LOCATOR = b"PK\x06\x07"
_END64 = b"PK\x06\x06"
_SEARCH_WINDOW = 1 << 12
_FANOUT = 8  # a segment is cut in 8 each round: 3.9 MB to a window in three rounds
_PARALLEL = 8  # range requests in flight at once
_UNSET32 = 0xFFFFFFFF


class _Entry:
    """One central-directory entry: its name, where the next begins, and where its data lies."""

    def __init__(self, record: bytes, start: int):
        (self.method, self.crc, csize, usize, name_len, extra_len, comment_len, offset) = struct.unpack(
            "<10xH4xIIIHHH8xI", record[:_ENTRY_FIXED]
        )
        self.name = record[_ENTRY_FIXED : _ENTRY_FIXED + name_len].decode("utf-8", "replace")
        self.start, self.end = start, start + _ENTRY_FIXED + name_len + extra_len + comment_len
        extra = record[_ENTRY_FIXED + name_len : _ENTRY_FIXED + name_len + extra_len]
        wide = [v == _UNSET32 for v in (usize, csize, offset)]
        values = [usize, csize, offset]
        at = 0
        while at + 4 <= len(extra):  # ZIP64's extra field holds the values too large for 32 bits, in this order
            kind, length = struct.unpack("<HH", extra[at : at + 4])
            if kind == 1:
                field, pos = extra[at + 4 : at + 4 + length], 0
                for i, is_wide in enumerate(wide):
                    if is_wide and pos + 8 <= len(field):
                        values[i] = struct.unpack("<Q", field[pos : pos + 8])[0]
                        pos += 8
            at += 4 + length
        self.usize, self.csize, self.offset = values


class _Directory:
    """The central directory of the zip `source` (a seekable binary file), read in pieces."""

    def __init__(self, source: Any):
        self.source = source
        size = source.seek(0, 2)
        tail_start = max(0, size - (1 << 16) - 22)
        tail = self._at(tail_start, size - tail_start)
        end = tail.rfind(_END)
        if end < 0 or end + 22 > len(tail):
            raise ValueError("no end of central directory")
        cd_size, cd_offset = struct.unpack("<II", tail[end + 12 : end + 20])
        locator = end - 20
        if locator >= 0 and tail[locator : locator + 4] == _END64_LOCATOR:
            (end64,) = struct.unpack("<Q", tail[locator + 8 : locator + 16])
            record = self._at(end64, 56)
            if record[:4] != _END64:
                raise ValueError("no ZIP64 end of central directory")
            cd_size, cd_offset = struct.unpack("<QQ", record[40:56])
        self.first, self.last = cd_offset, cd_offset + cd_size
        if self.last > size:
            raise ValueError("a central directory past the end of the file")

    def _at(self, start: int, length: int) -> bytes:
        self.source.seek(start)
        data = self.source.read(length)
        if len(data) != length:
            raise ValueError("a zip shorter than its directory says")
        return data

    def entry(self, start: int) -> _Entry | None:
        """The entry that begins at `start` (None where none begins there)."""
        if start + _ENTRY_FIXED > self.last:
            return None
        fixed = self._at(start, _ENTRY_FIXED)
        if fixed[:4] != _ENTRY:
            return None
        name_len, extra_len, comment_len = struct.unpack("<HHH", fixed[28:34])
        length = _ENTRY_FIXED + name_len + extra_len + comment_len
        if start + length > self.last:
            return None
        return _Entry(fixed + self._at(start + _ENTRY_FIXED, length - _ENTRY_FIXED), start)

    def first_entry_from(self, start: int, before: int) -> _Entry | None:
        """The first entry that begins at or after `start` and before
        `before`: a signature whose entry ends where another begins (or at the
        directory's end), so that a name holding the signature's bytes is not taken for one."""
        at = start
        while at < before:
            window = self._at(at, min(_SEARCH_WINDOW, self.last - at))
            found = window.find(_ENTRY)
            while found >= 0 and at + found < before:
                entry = self.entry(at + found)
                if entry is not None and (entry.end == self.last or self.entry(entry.end) is not None):
                    return entry
                found = window.find(_ENTRY, found + 1)
            at += max(1, len(window) - len(_ENTRY) + 1)
        return None

    def prefetch(self, spans: list[tuple[int, int]]) -> None:
        prefetch = getattr(self.source, "prefetch", None)  # a local file reads as fast without
        if prefetch is not None:
            prefetch([(start, min(end, self.last)) for start, end in spans])

    def find(self, names: list[str]) -> dict[str, _Entry]:
        """The entries named `names`, searched as if the entries were in name
        order; a name not found so is absent from the answer. Each round
        looks at _FANOUT - 1 points of every name's segment at once, their
        blocks asked in parallel: a few round trips, not one per point."""
        # Per name: entries before `low` sort before it, those from `high` after it.
        segments = {name: (self.first, self.last) for name in names}
        found: dict[str, _Entry] = {}
        while True:
            open_ = {n: (lo, hi) for n, (lo, hi) in segments.items() if n not in found and hi - lo > _SEARCH_WINDOW}
            if not open_:
                break
            points = {n: [lo + (hi - lo) * i // _FANOUT for i in range(1, _FANOUT)] for n, (lo, hi) in open_.items()}
            self.prefetch([(p, p + _SEARCH_WINDOW) for ps in points.values() for p in ps])
            for name, (low, high) in open_.items():
                for point in points[name]:
                    if point < low:
                        continue
                    entry = self.first_entry_from(point, high)
                    if entry is None:
                        high = point
                        break
                    if entry.name == name:
                        found[name] = entry
                        break
                    if entry.name < name:
                        low = entry.end
                    else:
                        high = entry.start
                        break
                segments[name] = (low, high)
        rest = {n: seg for n, seg in segments.items() if n not in found}
        self.prefetch(list(rest.values()))
        for name, (at, high) in rest.items():
            while at < high:
                entry = self.entry(at)
                if entry is None:
                    break
                if entry.name == name:
                    found[name] = entry
                    break
                at = entry.end
        return found

    def read(self, entry: _Entry, limit: int) -> bytes:
        if entry.usize > limit or entry.csize > limit:
            raise ValueError(f"{entry.name} is larger than expected")
        header = self._at(entry.offset, _LOCAL_FIXED)
        if header[:4] != b"PK\x03\x04":
            raise ValueError(f"{entry.name}: no local header where the directory says")
        name_len, extra_len = struct.unpack("<HH", header[26:30])
        data = self._at(entry.offset + _LOCAL_FIXED + name_len + extra_len, entry.csize)
        if entry.method == 8:
            # Never more out than the directory says plus one byte: a stream
            # that inflates past its stated size is refused, not held.
            inflater = zlib.decompressobj(-15)
            data = inflater.decompress(data, entry.usize + 1)
            if not inflater.eof:
                raise ValueError(f"{entry.name}: its deflated stream does not end where its size says")
        elif entry.method != 0:
            raise ValueError(f"{entry.name}: compression method {entry.method}")
        if len(data) != entry.usize or zlib.crc32(data) != entry.crc:
            raise ValueError(f"{entry.name}: its size or CRC differs from the directory's")
        return data


def _searched(source: Any, names: list[str], limit: int) -> dict[str, bytes] | None:
    """The members `names` of the zip `source`, each found by a search of
    its central directory (above); None where any is not found so."""
    directory = _Directory(source)
    entries = directory.find(names)
    if any(name not in entries for name in names):
        return None
    # Each member's local header and data in one round (a header's extra field
    # past this guess is read when it is met).
    directory.prefetch(
        [(e.offset, e.offset + _LOCAL_FIXED + len(e.name.encode()) + 64 + e.csize) for e in entries.values()]
    )
    return {name: directory.read(entries[name], limit) for name in names}


class _IndexFailures(logging.Handler):
    """The pages pip's finder could not fetch: it only logs them ("Could not
    fetch URL … - skipping") and answers as if the index listed nothing."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.reasons: list[str] = []
        logger = logging.getLogger("pip._internal.index.collector")
        logger.addHandler(self)
        logger.setLevel(logging.DEBUG)

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if text.startswith("Could not fetch URL"):
            self.reasons.append(text)


def _links(request: dict, options: Any, session: Any, finder: Any, specifier_set: Any) -> int:
    """Where each release's wheel is, as pip would fetch it, for reading it by
    range requests (support/remote_wheel.py): {"version", "url", "filename",
    "sha256", "cert", "proxy"} where the index gives an https or http address
    and the wheel's sha256; {"version", "refused"} as the download mode says
    it; {"version", "whole": why} where that route does not apply (a local
    file, no digest): the wheel is then downloaded whole."""
    verify = getattr(session, "verify", True)
    for version in request["links"]:
        try:
            found = finder.find_best_candidate(request["dist"], specifier_set(f"=={version}")).best_candidate
            if found is None:
                if finder.find_all_candidates(request["dist"]):
                    # Listed, with no wheel of this release: pip download's own last words.
                    _say(
                        {
                            "version": version,
                            "refused": f"ERROR: No matching distribution found for {request['dist']}=={version}",
                        }
                    )
                else:
                    _say({"version": version, "whole": "the index listed no release of it"})  # plain pip says why
                continue
            link = found.link
            if link.is_file or not link.url.startswith(("https://", "http://")):
                _say({"version": version, "whole": "a local file"})
                continue
            if link.hash_name != "sha256" or not link.hash:
                _say({"version": version, "whole": "the index gives no sha256 of the wheel"})
                continue
            _say(
                {
                    "version": version,
                    "url": link.url_without_fragment,
                    "filename": link.filename,
                    "sha256": link.hash,
                    "cert": verify if isinstance(verify, str) else None,
                    "proxy": options.proxy or None,
                }
            )
        except Exception as exc:  # noqa: BLE001 - that release is downloaded whole
            _say({"version": version, "whole": f"{type(exc).__name__}: {exc}"})
    return 0


class _Ranges:
    """A remote file read through HTTP range requests, as a seekable binary
    file for zipfile: the central directory first, then only the members
    read, each in a few requests."""

    # Small enough that a search of a central directory (_searched) reads little
    # around each entry it looks at; a span of blocks is still one request.
    BLOCK = 1 << 13

    def __init__(self, session: Any, url: str, size: int):
        import threading

        self._session, self._url, self.size = session, url, size
        self._pos = 0
        self._blocks: dict[int, bytes] = {}
        self._lock = threading.Lock()
        self.received = 1  # the one byte of the probe that asked whether ranges are answered

    @classmethod
    def open(cls, session: Any, url: str) -> _Ranges | None:
        response = session.get(url, headers={"Range": "bytes=0-0", "Accept-Encoding": "identity"}, stream=True)
        try:
            response.raise_for_status()
            total = response.headers.get("Content-Range", "").rpartition("/")[2]
            if response.status_code != 206 or not total.isdigit():
                return None
            return cls(session, url, int(total))
        finally:
            response.close()

    def __enter__(self) -> _Ranges:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._blocks.clear()

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = offset if whence == 0 else self._pos + offset if whence == 1 else self.size + offset
        return self._pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self._pos + n)
        if end <= self._pos:
            return b""
        first, last = self._pos // self.BLOCK, (end - 1) // self.BLOCK
        missing = [b for b in range(first, last + 1) if b not in self._blocks]
        if missing:
            self._fetch(missing[0], missing[-1])
        data = b"".join(self._blocks[b] for b in range(first, last + 1))
        out = data[self._pos - first * self.BLOCK : end - first * self.BLOCK]
        self._pos = end
        return out

    def prefetch(self, spans: list[tuple[int, int]]) -> None:
        """The blocks of every [start, end) span not held yet, asked at once
        (one request per run of missing blocks, in parallel): a search that
        knows where it will read next pays one round trip, not one a span."""
        from concurrent.futures import ThreadPoolExecutor

        wanted = sorted(
            {b for start, end in spans if end > start for b in range(start // self.BLOCK, (end - 1) // self.BLOCK + 1)}
            - self._blocks.keys()
        )
        runs: list[tuple[int, int]] = []
        for b in wanted:
            if runs and runs[-1][1] == b - 1:
                runs[-1] = (runs[-1][0], b)
            else:
                runs.append((b, b))
        if len(runs) == 1:
            self._fetch(*runs[0])
        elif runs:
            with ThreadPoolExecutor(min(len(runs), _PARALLEL)) as pool:
                for done in [pool.submit(self._fetch, *run) for run in runs]:
                    done.result()

    def _fetch(self, first: int, last: int) -> None:
        start, stop = first * self.BLOCK, min(self.size, (last + 1) * self.BLOCK) - 1
        response = self._session.get(
            self._url, headers={"Range": f"bytes={start}-{stop}", "Accept-Encoding": "identity"}, stream=True
        )
        try:
            response.raise_for_status()
            # Never more than the range asked (and a byte to tell): a server
            # that answers a range with a whole file fills no memory.
            content = response.raw.read(stop - start + 2, decode_content=False)
        finally:
            response.close()
        with self._lock:
            self.received += len(content)
        if response.status_code != 206 or len(content) != stop - start + 1:
            raise OSError(f"the server answered bytes {start}-{stop} with {response.status_code}, {len(content)} bytes")
        for b in range(first, last + 1):
            offset = (b - first) * self.BLOCK
            self._blocks[b] = content[offset : offset + self.BLOCK]


def _download(session: Any, link: Any, folder: str) -> str:
    """The link's file in `folder`, checked against the hash the index gives
    (as pip checks it) and against its announced length."""
    os.makedirs(folder, exist_ok=True)
    name = os.path.basename(link.filename)
    if not name.endswith(".whl") or name in ("", ".", ".."):
        raise ValueError(f"not a wheel: {link.filename!r}")
    target = os.path.join(folder, name)
    digest = hashlib.new(link.hash_name) if link.hash_name in hashlib.algorithms_guaranteed and link.hash else None
    size = 0
    with open(target, "wb") as out:
        if link.is_file:
            with open(link.file_path, "rb") as source:
                for block in iter(lambda: source.read(CHUNK), b""):
                    size += _write(out, block, digest)
        else:
            # As pip fetches a file: no content encoding, redirects followed, errors raised.
            response = session.get(link.url_without_fragment, headers={"Accept-Encoding": "identity"}, stream=True)
            response.raise_for_status()
            for block in response.raw.stream(CHUNK, decode_content=False):
                size += _write(out, block, digest)
                if size > MAX_WHEEL_BYTES:
                    # A hostile or broken index never fills the disk: no wheel hprobe reads is this large.
                    response.close()
                    out.close()
                    os.unlink(target)
                    raise OSError(f"{name}: more than {MAX_WHEEL_BYTES >> 20} MiB, larger than any wheel hprobe reads")
            announced = response.headers.get("Content-Length")
            if announced and announced.isdigit() and int(announced) != size:
                raise OSError(f"{size} bytes of {announced} arrived")
    if digest is not None and digest.hexdigest() != link.hash:
        os.unlink(target)
        raise ValueError(f"the file's {link.hash_name} differs from the one the index gives")
    return target


def _write(out: Any, block: bytes, digest: Any) -> int:
    out.write(block)
    if digest is not None:
        digest.update(block)
    return len(block)


def _say(doc: dict) -> None:
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
