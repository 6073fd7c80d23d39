"""support/pip_download: the helper that runs in the user's Python with pip's
own finder and session. What it prints is what fetch_batch trusts: an index
that did not answer must never read as a release without wheels, and a
server that answers a range with more than asked fills no memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hprobe

pytestmark = pytest.mark.slow

PACKAGE_ROOT = str(Path(hprobe.__file__).resolve().parent.parent)


def _helper(request: dict, env: dict[str, str]) -> tuple[int, list[dict]]:
    code = (
        f"import sys; sys.path.insert(0, {PACKAGE_ROOT!r}); "
        "from hprobe.support.pip_download import main; sys.exit(main())"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env={**base, "PIP_CONFIG_FILE": os.devnull, **env},  # no mirror, no find-links: only the index given
        timeout=120,
    )
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def _members(tmp_path: Path, index: str) -> tuple[int, list[dict]]:
    request = {"dist": "flashinfer-cubin", "specs": ["==0.6.14", "<=0.6.14"], "members": ["m"], "dest": str(tmp_path)}
    return _helper(request, {"PIP_INDEX_URL": index, "PIP_RETRIES": "0", "PIP_TIMEOUT": "5"})


def test_an_index_not_reached_is_an_error_not_an_absent_release(tmp_path):
    """pip's finder only logs a page it could not fetch and answers with no
    candidates: the helper hears the log and ends with an error, so the
    caller fetches the plain way (whose words say the index was not reached)
    instead of recording that the release has no such wheel."""
    code, said = _members(tmp_path, "http://127.0.0.1:9/simple/")  # nothing listens there
    assert code == 3 and len(said) == 1, said
    assert said[0]["spec"] == "==0.6.14"
    assert said[0]["error"].startswith("the index could not be read: Could not fetch URL http://127.0.0.1:9/simple/")


def test_an_index_that_answers_without_the_release_is_absent(tmp_path):
    """An index that was read and lists no such distribution: absent, for every
    specifier, and the helper ends cleanly."""
    (tmp_path / "simple").mkdir()
    code, said = _members(tmp_path / "dest", (tmp_path / "simple").as_uri())
    assert code == 0 and said == [{"spec": "==0.6.14", "absent": True}, {"spec": "<=0.6.14", "absent": True}]


def test_a_range_answered_with_more_than_asked_fills_no_memory():
    """A server that answers a range request with a much longer body: the
    helper reads the range and one byte past it, then refuses the answer."""
    import http.server
    import threading

    from pip._vendor import requests

    from hprobe.support.pip_download import _Ranges

    sent = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *_args):
            pass

        def do_GET(self):
            self.send_response(206)
            self.send_header("Content-Range", "bytes 0-0/1000000")
            self.end_headers()
            try:
                for _ in range(64):  # 64 MiB offered for a 16 KiB range
                    self.wfile.write(b"x" * 2**20)
                    sent.append(1)
            except OSError:
                pass  # the helper hung up

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        ranges = _Ranges(requests.Session(), f"http://127.0.0.1:{server.server_address[1]}/w.whl", 1_000_000)
        with pytest.raises(OSError, match=f"with 206, {_Ranges.BLOCK + 1} bytes"):
            ranges.read(10)
        assert ranges.received == 1 + _Ranges.BLOCK + 1
    finally:
        server.shutdown()
        server.server_close()


class _Counted:
    """A seekable file that counts the bytes read from it."""

    def __init__(self, data: bytes):
        import io

        self.file, self.read_bytes = io.BytesIO(data), 0

    def seek(self, offset, whence=0):
        return self.file.seek(offset, whence)

    def tell(self):
        return self.file.tell()

    def read(self, n=-1):
        data = self.file.read(n)
        self.read_bytes += len(data)
        return data


def _zip(names: list[str], body=lambda name: name.encode() * 3, **options) -> bytes:
    import io
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, **options) as archive:
        for name in names:
            compression = zipfile.ZIP_STORED if name.endswith(".txt") else zipfile.ZIP_DEFLATED
            archive.writestr(name, body(name), compress_type=compression)
    return out.getvalue()


SOUGHT = ["pkg/cubins/b7/include/meta.h", "pkg/cubins/b7/checksums.txt"]


def test_members_are_found_by_a_search_of_an_ordered_directory_reading_a_small_part():
    """flashinfer-cubin's directory is in name order: the two members are
    found reading a few blocks around each entry looked at, and their bytes
    are zipfile's own."""
    import io
    import zipfile

    from hprobe.support.pip_download import _searched

    names = sorted([f"pkg/cubins/b{i % 10}/kernel_{i:05d}.cubin" for i in range(20000)] + SOUGHT)
    data = _zip(names)
    source = _Counted(data)
    found = _searched(source, SOUGHT, 1 << 20)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        directory = len(data) - archive.start_dir
        assert found == {name: archive.read(name) for name in SOUGHT}
    assert source.read_bytes < directory / 4, (source.read_bytes, directory)


def test_a_directory_out_of_order_or_a_member_absent_falls_back_to_the_whole_directory():
    """A member the search does not meet (the entries out of order, or none
    of that name) is never called absent by the search: the whole directory
    is read, and answers."""
    import io

    from hprobe.support.pip_download import _read_whole_directory, _searched

    names = sorted(f"pkg/cubins/k_{i:05d}.cubin" for i in range(5000))
    data = _zip([SOUGHT[0], *names, SOUGHT[1]])  # "pkg/cubins/b7/…" written first and last: out of order
    assert _searched(_Counted(data), SOUGHT, 1 << 20) is None
    whole, every = _read_whole_directory(io.BytesIO(data), SOUGHT, 1 << 20)
    assert whole is not None and whole[SOUGHT[1]] == SOUGHT[1].encode() * 3 and len(every) == 5002
    assert _searched(_Counted(data), ["pkg/cubins/zz"], 1 << 20) is None
    assert _read_whole_directory(io.BytesIO(data), ["pkg/cubins/zz"], 1 << 20)[0] is None


def test_zip64_records_and_names_holding_the_entry_signature_are_read(monkeypatch):
    """ZIP64 (its end record, and sizes and offsets in the extra field, forced
    here by a low limit) and names that hold the directory entry's signature
    bytes, which a search landing inside a name must not take for an entry."""
    import io
    import zipfile

    from hprobe.support.pip_download import _searched

    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 8)
    names = sorted([f"pkg/PK\x01\x02{i:05d}" for i in range(3000)] + SOUGHT)
    data = _zip(names, body=lambda name: name.encode() * 40)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        expected = {name: archive.read(name) for name in SOUGHT}
    assert b"PK\x06\x06" in data[-200:]  # the ZIP64 end record
    assert _searched(_Counted(data), SOUGHT, 1 << 20) == expected


def test_a_member_whose_bytes_differ_from_the_directory_is_refused():
    """A member whose deflated bytes are damaged (its CRC or its stream) or
    that is larger than the caller allows is refused, never handed on."""
    import zlib

    from hprobe.support.pip_download import _searched

    names = sorted(f"pkg/m_{i:04d}.bin" for i in range(500))
    data = bytearray(_zip(names, body=lambda name: b"deflated " * 20 + name.encode()))
    # The member's data follows its local header's name (no extra field).
    at = data.index(b"pkg/m_0250.bin") + len("pkg/m_0250.bin") + 4
    data[at] ^= 0xFF
    with pytest.raises((ValueError, zlib.error)):
        _searched(_Counted(bytes(data)), ["pkg/m_0250.bin"], 1 << 20)
    assert _searched(_Counted(bytes(_zip(names))), ["pkg/m_0250.bin"], 1 << 20) is not None
    with pytest.raises(ValueError, match="larger than expected"):
        _searched(_Counted(bytes(_zip(names))), ["pkg/m_0001.bin"], 4)
    # A stream that inflates past the size its directory entry states (a
    # bomb's shape) is refused at that size plus one byte.
    import struct

    bomb = bytearray(_zip(["pkg/z.bin"], body=lambda name: bytes(1 << 20)))
    entry = bomb.rindex(b"PK\x01\x02")
    bomb[entry + 24 : entry + 28] = struct.pack("<I", 100)
    with pytest.raises(ValueError, match="does not end where its size says"):
        _searched(_Counted(bytes(bomb)), ["pkg/z.bin"], 1 << 30)


def test_flashinfer_cubins_table_is_read_by_search_as_zipfile_reads_it(cubin_wheel):
    """The real wheel (flashinfer-cubin 0.6.13, 16,017 entries, a 3.9 MB
    directory): its kernel table's two members, by search, read with under
    half the bytes of the directory alone."""
    import zipfile

    from hprobe.support.pip_download import _searched

    prefix = "flashinfer_cubin/cubins/158f6fa11ef139a098cfddcdddce73ca99d164ad/fmha/trtllm-gen/"
    names = [prefix + "checksums.txt", prefix + "include/flashInferMetaInfo.h"]
    source = _Counted(cubin_wheel.read_bytes())
    found = _searched(source, names, 64 << 20)
    with zipfile.ZipFile(cubin_wheel) as archive:
        directory = cubin_wheel.stat().st_size - archive.start_dir
        assert found == {name: archive.read(name) for name in names}
    members = sum(archive.getinfo(name).compress_size for name in names)
    assert source.read_bytes - members < directory / 4, (source.read_bytes, members, directory)


def test_a_wheel_read_whole_once_answers_for_what_it_lacks_without_being_read_again(tmp_path):
    """flashinfer 0.6.18 on each names a kernel package the newest cubin lacks,
    which only its whole directory tells. A whole read lists the wheel's
    `checksums.txt` members with the sha256 the index gives; a later request
    handed that listing answers "absent" for a package not in it without
    opening the wheel (garbage now, to show it), and only for that very file."""
    import hashlib

    name = "flashinfer_cubin-0.6.13-py3-none-any.whl"
    files, project = tmp_path / "files", tmp_path / "simple" / "flashinfer-cubin"
    files.mkdir()
    project.mkdir(parents=True)
    held = "flashinfer_cubin/cubins/aaa/fmha/trtllm-gen/"
    # Out of name order, so that the search finds nothing and the whole directory is read.
    data = _zip(
        [held + "include/meta.h", *(f"flashinfer_cubin/cubins/k{i:03d}" for i in range(500)), held + "checksums.txt"]
    )
    (files / name).write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    (project / "index.html").write_text(f'<a href="{(files / name).as_uri()}#sha256={digest}">{name}</a>')
    index = {"PIP_INDEX_URL": (tmp_path / "simple").as_uri(), "PIP_RETRIES": "0"}

    def ask(package: str, known: dict) -> tuple[int, list[dict]]:
        members = [
            f"flashinfer_cubin/cubins/{package}/fmha/trtllm-gen/{m}" for m in ("checksums.txt", "include/meta.h")
        ]
        request = {"dist": "flashinfer-cubin", "specs": ["<=0.7.4"], "members": members, "dest": str(tmp_path / "d")}
        return _helper({**request, "listing_suffix": "checksums.txt", "known": known}, index)

    code, said = ask("aaa", {})
    assert code == 0 and "members" in said[0], said
    assert said[0]["sha256"] == digest and said[0]["listing"] == [held + "checksums.txt"]
    code, said = ask("bbb", {})
    assert code == 0 and said[0]["absent"] and "listed" not in said[0], said
    known = {name: {"sha256": digest, "listing": said[0]["listing"]}}

    (files / name).write_bytes(b"not a zip" * 100)  # a read of it now fails
    code, said = ask("bbb", known)
    assert code == 0 and said == [{"spec": "<=0.7.4", "wheel": name, "absent": True, "received": 0, "listed": True}]
    code, said = ask("aaa", known)  # listed as held: read, and the read fails
    assert code == 3 and "error" in said[0], said
    code, said = ask("bbb", {name: {"sha256": "0" * 64, "listing": []}})  # another file under that name
    assert code == 3 and "error" in said[0], said


def test_spans_asked_together_are_one_round_of_requests_and_then_read_without_more():
    """A search knows the points it looks at next: their blocks are asked at
    once, one request per run of missing blocks, and reading them afterwards
    asks nothing more."""
    import http.server
    import threading

    from pip._vendor import requests

    from hprobe.support.pip_download import _Ranges

    body = bytes(range(256)) * 4096  # 1 MiB
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args):
            pass

        def do_GET(self):
            asked.append(self.headers["Range"])
            first, _, last = self.headers["Range"].removeprefix("bytes=").partition("-")
            start, stop = int(first), min(int(last), len(body) - 1)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{stop}/{len(body)}")
            self.send_header("Content-Length", str(stop - start + 1))
            self.end_headers()
            self.wfile.write(body[start : stop + 1])

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        ranges = _Ranges(requests.Session(), f"http://127.0.0.1:{server.server_address[1]}/w.whl", len(body))
        block = _Ranges.BLOCK
        spans = [(10, 20), (5 * block + 1, 7 * block), (7 * block, 7 * block + 5), (100 * block, 100 * block + 1)]
        ranges.prefetch(spans)
        # Blocks 0, 5-7 (one run) and 100: three requests, in one round.
        assert sorted(asked) == sorted(
            [f"bytes=0-{block - 1}", f"bytes={5 * block}-{8 * block - 1}", f"bytes={100 * block}-{101 * block - 1}"]
        )
        for start, end in spans:
            ranges.seek(start)
            assert ranges.read(end - start) == body[start:end]
        assert len(asked) == 3
        assert ranges.received == 1 + 5 * block
    finally:
        server.shutdown()
        server.server_close()
