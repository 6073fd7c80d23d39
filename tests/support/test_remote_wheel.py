"""Releases read by range requests (support/remote_wheel.py): a real wheel
(0.6.14) served by a local index that answers ranges, or not; what a probe
opens is the wheel's own bytes, checked against its RECORD, and a fraction of
the wheel crosses the network."""

from __future__ import annotations

import hashlib
import http.server
import os
import subprocess
import sys
import threading
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hprobe.model.errors import InputError
from hprobe.support import cache, remote_wheel, slim, trees

from ..conftest import pip_download

RELEASE = "0.6.14"
DIST = "flashinfer-python"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("wheel")
    pip_download(where, f"{DIST}=={RELEASE}")
    [found] = where.glob("*.whl")
    return found


@dataclass
class Index:
    """A package index on 127.0.0.1 serving one wheel: a simple page with its
    sha256, and the file, by ranges unless `ranges` is False."""

    wheel: Path
    ranges: bool = True
    served: list[tuple[int, int]] = field(default_factory=list)  # (status, bytes) per request of the file
    url: str = ""

    def handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        index = self
        data = self.wheel.read_bytes()
        sha = hashlib.sha256(data).hexdigest()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # connections kept open, as an index's are

            def do_GET(self) -> None:
                if self.path.rstrip("/") == f"/simple/{DIST}":
                    body = f'<a href="/files/{index.wheel.name}#sha256={sha}">{index.wheel.name}</a>'.encode()
                    self._send(200, body, {"Content-Type": "text/html"})
                elif self.path == f"/files/{index.wheel.name}":
                    asked = self.headers.get("Range", "")
                    if index.ranges and asked.startswith("bytes="):
                        first, _, last = asked.removeprefix("bytes=").partition("-")
                        if first == "":  # the last N bytes
                            start, end = max(0, len(data) - int(last)), len(data) - 1
                        else:
                            start, end = int(first), min(int(last or len(data) - 1), len(data) - 1)
                        part = data[start : end + 1]
                        index.served.append((206, len(part)))
                        self._send(206, part, {"Content-Range": f"bytes {start}-{end}/{len(data)}"})
                    else:
                        index.served.append((200, len(data)))
                        self._send(200, data, {})
                else:
                    self._send(404, b"", {})

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # a client that asked a range of a server answering whole stops reading

            def log_message(self, *args: object) -> None:
                pass

        return Handler


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[object]:
    """serve(wheel, ranges=True) -> Index: pip reads only that index from then on."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(wheel: Path, ranges: bool = True) -> Index:
        index = Index(wheel, ranges)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), index.handler())
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        index.url = f"http://127.0.0.1:{server.server_address[1]}"
        monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no mirror, no find-links of this machine's
        monkeypatch.setenv("PIP_INDEX_URL", f"{index.url}/simple/")
        monkeypatch.setenv("PIP_FIND_LINKS", "")
        monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
        return index

    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(remote_wheel.WHOLE_WHEELS, raising=False)
    cache.new_run()
    trees.new_run()
    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _forged(wheel: Path, dest: Path, member: str, change: Callable[[bytes], bytes]) -> Path:
    """A copy of `wheel` at `dest` whose `member` is changed, its RECORD not."""
    with zipfile.ZipFile(wheel) as zf, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as out:
        for info in zf.infolist():
            data = zf.read(info)
            out.writestr(info, change(data) if info.filename == member else data)
    return dest


def _open_in_worker(tree: Path, path: Path) -> subprocess.CompletedProcess[str]:
    """`path` opened in another process that serves `tree`, as a probe worker would."""
    code = (
        f"from pathlib import Path; from hprobe.support.slim import watch; watch(Path({str(tree)!r})); "
        f"print(open({str(path)!r}, 'rb').read().hex())"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def _data_member(wheel: Path) -> zipfile.ZipInfo:
    """A C++ source no import opens: written only when something reads it."""
    with zipfile.ZipFile(wheel) as zf:
        return next(i for i in zf.infolist() if i.filename.startswith("flashinfer/data/csrc/") and i.file_size > 4096)


@pytest.mark.slow
def test_a_tree_read_by_ranges_holds_the_wheels_own_bytes_for_a_fraction_of_it(serve, wheel):
    index = serve(wheel)
    release = trees.resolve(RELEASE)
    tree = release.tree
    assert slim.served_from_index(tree) and release.version == RELEASE
    assert release.wheel_sha256 == hashlib.sha256(wheel.read_bytes()).hexdigest()  # the index's digest names it
    assert {status for status, _ in index.served} == {206}
    fetched = sum(size for _, size in index.served)
    assert fetched < 0.5 * wheel.stat().st_size
    with zipfile.ZipFile(wheel) as zf:
        written = [p for p in tree.rglob("*.py") if not slim.placeholder(str(p)) and "__pycache__" not in p.parts]
        assert len(written) > 100  # the package's __init__ and what it imports at module level, fetched ahead
        for path in written:
            assert path.read_bytes() == zf.read(path.relative_to(tree).as_posix())
        member = _data_member(wheel)
        expected = zf.read(member)
    path = tree / member.filename
    assert slim.placeholder(str(path))
    before = len(index.served)
    opened = _open_in_worker(tree, path)
    assert opened.returncode == 0, opened.stderr[-2000:]
    assert bytes.fromhex(opened.stdout.strip()) == expected == path.read_bytes()
    assert len(index.served) > before  # from the index, in that process
    # A later run finds the tree kept, with no wheel and no request.
    trees.new_run()
    served = len(index.served)
    again = trees.resolve(RELEASE)
    assert again.location == tree and len(index.served) == served


@pytest.mark.slow
def test_a_member_unlike_its_record_is_a_fault_never_an_answer(serve, wheel, tmp_path):
    member = _data_member(wheel)
    serve(_forged(wheel, tmp_path / wheel.name, member.filename, lambda data: data.replace(b"a", b"b")))
    tree = trees.resolve(RELEASE).tree  # the metadata and imports are the wheel's: they check
    path = tree / member.filename
    opened = _open_in_worker(tree, path)
    assert opened.returncode != 0
    assert "differs from the digest the wheel's RECORD gives" in opened.stderr
    assert slim.placeholder(str(path))  # nothing was written in its place


@pytest.mark.slow
def test_a_server_that_answers_no_ranges_gets_the_whole_wheel_said_once(serve, wheel):
    index = serve(wheel, ranges=False)
    release = trees.resolve(RELEASE)
    assert not slim.served_from_index(release.tree)
    assert Path((release.tree / slim.MARKER).read_text()).name == wheel.name  # served from the whole wheel
    said = [line for line in cache.added_lines() if "read whole, not by range requests" in line]
    assert len(said) == 1 and said[0].startswith("wheels from 127.0.0.1:")
    assert any(status == 200 for status, _ in index.served)


@pytest.mark.slow
def test_whole_wheels_unpack_a_tree_read_by_ranges_anew_from_the_checked_wheel(serve, wheel, monkeypatch):
    serve(wheel)
    lazy = trees.resolve(RELEASE)
    assert slim.served_from_index(lazy.tree)
    monkeypatch.setenv(remote_wheel.WHOLE_WHEELS, "1")
    trees.new_run()
    whole = trees.resolve(RELEASE)
    assert whole.location == lazy.location and whole.wheel_sha256 == lazy.wheel_sha256
    tree = whole.tree
    assert not slim.served_from_index(tree)
    assert Path((tree / slim.MARKER).read_text()).is_file()


@pytest.mark.slow
def test_a_release_the_index_has_no_wheel_of_is_said_in_pips_words_without_pip(monkeypatch, tmp_path):
    """0.2.0.post1 is listed with no wheel: the range route's one question to
    the index says so, in the words plain `pip download` ends with."""
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(remote_wheel.WHOLE_WHEELS, raising=False)
    trees.new_run()
    started: list[list[str]] = []
    monkeypatch.setattr(trees, "run_pip", lambda cmd, what: started.append(cmd))
    trees.prefetch(["0.6.13", "0.2.0.post1"])
    with pytest.raises(InputError, match="No matching distribution found for flashinfer-python==0.2.0.post1"):
        trees.resolve("0.2.0.post1")
    assert started == []


def test_the_modules_fetched_ahead_are_those_imported_outside_functions():
    source = b"""
import os
from . import sibling
from .pkg import (
    leaf,
    other,
)
try:
    from ..up import thing
except ImportError:
    from flashinfer.fallback import x
def f(
    a,
):
    from .lazy import never
class C:
    import flashinfer.neither
"""
    members = {
        "flashinfer/__init__.py",
        "flashinfer/sub/__init__.py",
        "flashinfer/sub/sibling.py",
        "flashinfer/sub/pkg/__init__.py",
        "flashinfer/sub/pkg/leaf.py",
        "flashinfer/up.py",
        "flashinfer/fallback.py",
        "flashinfer/sub/lazy.py",
        "flashinfer/neither.py",
    }
    found = remote_wheel.imported_members("flashinfer/sub/mod.py", source, members.__contains__)
    # Every member named but the two imported only inside a `def` and a `class`.
    assert set(found) == members - {"flashinfer/sub/lazy.py", "flashinfer/neither.py"}
    assert remote_wheel.imported_members("flashinfer/data/x.cu", source, members.__contains__) == []


def test_a_member_is_checked_against_record():
    data = b"print(1)\n"
    digest = remote_wheel.digests(f"pkg/a.py,sha256={_b64(data)},9\npkg/RECORD,,\n")
    remote_wheel.check("pkg/a.py", data, digest)
    with pytest.raises(ValueError, match="differs"):
        remote_wheel.check("pkg/a.py", data + b" ", digest)
    with pytest.raises(ValueError, match="no sha256"):
        remote_wheel.check("pkg/RECORD", b"", digest)


def _b64(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@pytest.mark.slow
def test_where_an_entry_point_exists_is_read_from_the_index_with_no_tree_made(serve, wheel, tmp_path):
    """The pin search's question (support/presence.py): the modules it opens
    come from the index, each checked against RECORD; no tree is written, and
    a forged module is a fault, never an answer."""
    from hprobe.support.presence import entry_point_in_index

    index = serve(wheel)
    assert entry_point_in_index("flashinfer.mla.trtllm_batch_decode_sparse_mla_dsv4", RELEASE) is True
    assert entry_point_in_index("flashinfer.mla.no_such_entry", RELEASE) is False
    assert entry_point_in_index("flashinfer.no_such_module.entry", RELEASE) is False
    assert not (tmp_path / "cache" / "trees").exists() or not list((tmp_path / "cache" / "trees").iterdir())
    assert all(status == 206 for status, _ in index.served)
    assert sum(size for _, size in index.served) < wheel.stat().st_size // 4
    (tmp_path / "forged").mkdir()
    module = "flashinfer/mla/__init__.py"
    forged = _forged(wheel, tmp_path / "forged" / wheel.name, module, lambda data: data + b"\n# forged\n")
    cache.new_run()
    trees.new_run()
    serve(forged)
    with pytest.raises(ValueError, match="differs from the digest the wheel's RECORD gives"):
        entry_point_in_index("flashinfer.mla.trtllm_batch_decode_sparse_mla_dsv4", RELEASE)
