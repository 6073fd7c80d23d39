"""Where a release's kernel table comes from (support/kernel_tables.py): here,
that a table verified once is parsed once, its rows kept in the cache keyed by
the file and by the parser's own source."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from hprobe.compiled import table as table_module
from hprobe.support import cache, kernel_tables
from hprobe.support.kernel_package import package_of

_SPEC = importlib.util.find_spec("flashinfer")
PACKAGE = Path(next(iter(_SPEC.submodule_search_locations)))  # type: ignore[union-attr]


def _read(cubin_wheel):
    kernel_tables._parsed.cache_clear()  # as a new run
    got = kernel_tables._from_wheel(cubin_wheel, package_of(PACKAGE), cubin_wheel.name)
    assert not isinstance(got, str) and got is not None
    return got


def test_a_table_read_again_is_its_kept_rows_not_a_parse(cubin_wheel, tmp_path, monkeypatch):
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path))
    parsed = _read(cubin_wheel)
    assert list((tmp_path / kernel_tables.ROWS).glob("*.json")), "the parse kept no rows"

    def no_parse(*_args, **_kwargs):
        raise AssertionError("parsed again though its rows were kept")

    monkeypatch.setattr(kernel_tables, "parse_table", no_parse)
    kept = _read(cubin_wheel)
    assert kept.rows == parsed.rows and kept.sha256 == parsed.sha256
    assert kept.data == parsed.data and kept.checksums == parsed.checksums  # what _keep writes


def test_rows_kept_by_another_parser_or_damaged_are_parsed_afresh(cubin_wheel, tmp_path, monkeypatch):
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path))
    parsed = _read(cubin_wheel)
    parses = []
    real = kernel_tables.parse_table

    def counted(*args, **kwargs):
        parses.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(kernel_tables, "parse_table", counted)
    table_module.parser_digest.cache_clear()
    monkeypatch.setattr(table_module, "__file__", str(Path(table_module.__file__).with_name("files.py")))
    try:
        assert _read(cubin_wheel).rows == parsed.rows and parses == [1]
    finally:
        table_module.parser_digest.cache_clear()
    monkeypatch.undo()
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(kernel_tables, "parse_table", counted)
    key = kernel_tables._rows_key(parsed.sha256)
    kept = cache.read_kept(kernel_tables.ROWS, key)
    kept["rows"][3][0] = 2.5  # damaged, yet valid JSON
    cache.keep(kernel_tables.ROWS, key, kept)
    assert _read(cubin_wheel).rows == parsed.rows and parses == [1, 1]
    assert cache.read_kept(kernel_tables.ROWS, key)["rows"][3][0] == parsed.rows[3].dtype_q  # kept anew


@pytest.fixture(autouse=True)
def _fresh_lru():
    yield
    kernel_tables._parsed.cache_clear()


class _Hostile:
    """An artifact store on 127.0.0.1 that misbehaves as told: redirects off
    this machine, drips its body a few bytes at a time, or sends more than a
    kernel table holds."""

    def __init__(self, how: str):
        import http.server
        import threading
        import time

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *_args):
                pass

            def do_GET(self):
                if how == "redirect":
                    self.send_response(302)
                    self.send_header("Location", "http://192.0.2.1/checksums.txt")
                    self.end_headers()
                    return
                self.send_response(200)
                self.end_headers()
                try:
                    if how == "drip":
                        for _ in range(200):
                            self.wfile.write(b"x")
                            self.wfile.flush()
                            time.sleep(0.05)
                    else:
                        self.wfile.write(b"x" * 4096)
                except OSError:
                    pass  # hprobe hung up

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/checksums.txt"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize(
    ("how", "error", "said"),
    [
        ("redirect", ValueError, "redirected to http://192.0.2.1/checksums.txt, which hprobe does not follow"),
        ("drip", TimeoutError, "not received within 0.5 s"),
        ("large", ValueError, "larger than a kernel table"),
    ],
)
def test_a_store_that_misbehaves_is_cut_off_within_its_bounds(monkeypatch, how, error, said):
    """Every fetch from the store is bounded all told (FETCH_DEADLINE, not
    only per socket operation), in size (streamed, never past the cap) and
    in where it goes: plain http never leaves this machine, even by a redirect."""
    import time

    monkeypatch.setattr(kernel_tables, "FETCH_DEADLINE", 0.5)
    monkeypatch.setattr(kernel_tables, "MAX_TABLE_BYTES", 1024)
    store = _Hostile(how)
    try:
        started = time.monotonic()
        with pytest.raises(error, match=said):
            kernel_tables._download(store.url)
        assert time.monotonic() - started < 5  # the drip would take 10 s
    finally:
        store.close()


def test_an_index_and_store_not_reached_are_said_so_and_kept_briefly(tmp_path, monkeypatch):
    """With the index and the store unreachable, the search says the index was
    not reached (not that the cubin is absent from it) and keeps the miss for
    UNREACHED_MISS_TTL only: a passing network failure leaves answers undecided
    for minutes, not hours."""
    import json

    from hprobe.support import kernel_package

    flashinfer = Path(importlib.util.find_spec("flashinfer").origin).parent
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("HPROBE_KERNEL_TABLE", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_RETRIES", "1")  # pip names the connection error only when it retries
    monkeypatch.setenv("FLASHINFER_CUBINS_REPOSITORY", "http://127.0.0.1:9/")
    package = package_of(flashinfer)
    found = kernel_tables.tables_for(flashinfer, "0.6.14")
    assert found.table is None
    assert "the package index could not be reached" in str(found.missing), found.missing
    assert "not on the index" not in str(found.missing), found.missing
    record = tmp_path / "cache" / "kernel-tables" / package.checksums_sha256 / kernel_package.miss_file("0.6.14")
    assert json.loads(record.read_text())["ttl"] == kernel_package.UNREACHED_MISS_TTL


def test_a_store_not_reached_is_asked_once_a_run_for_every_package(monkeypatch) -> None:
    """Every release's package is asked of the same store: where it cannot be
    reached (a resolver's timeout costs 5 s here), later packages get the same
    words without another attempt; a new run asks again, and a store that
    answered with an HTTP status is no unreachable store."""
    import urllib.error

    from hprobe.support.kernel_package import Package

    flashinfer = Path(importlib.util.find_spec("flashinfer").origin).parent
    monkeypatch.setenv("FLASHINFER_CUBINS_REPOSITORY", "https://store.invalid/")
    attempts: list[str] = []

    def unreachable(url: str) -> bytes:
        attempts.append(url)
        raise urllib.error.URLError("[Errno -2] Name or service not known")

    monkeypatch.setattr(kernel_tables, "_download", unreachable)
    kernel_tables.new_run()
    first = kernel_tables._from_store(flashinfer, Package("a" * 40 + "/fmha/trtllm-gen/", "1" * 64), lambda _m: None)
    second = kernel_tables._from_store(flashinfer, Package("b" * 40 + "/fmha/trtllm-gen/", "2" * 64), lambda _m: None)
    assert isinstance(first, kernel_tables.Unreached) and second == first and len(attempts) == 1
    kernel_tables.new_run()
    kernel_tables._from_store(flashinfer, Package("b" * 40 + "/fmha/trtllm-gen/", "2" * 64), lambda _m: None)
    assert len(attempts) == 2

    def missing(url: str) -> bytes:
        attempts.append(url)
        raise urllib.error.HTTPError(url, 404, "Not Found", None, None)  # type: ignore[arg-type]

    monkeypatch.setattr(kernel_tables, "_download", missing)
    kernel_tables.new_run()
    for digest in ("c", "d"):
        with pytest.raises(urllib.error.HTTPError):
            kernel_tables._from_store(flashinfer, Package(digest * 40 + "/fmha/trtllm-gen/", "3" * 64), lambda _m: None)
    assert len(attempts) == 4  # each package asked: a 404 is that package's answer
    kernel_tables.new_run()
