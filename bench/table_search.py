"""A kernel table read out of flashinfer-cubin by range requests: the whole
central directory (what zipfile reads) against the search of it
(support/pip_download.py, `_searched`), side by side in one run, over a
local server that answers ranges after a set round-trip time and at a set
bandwidth, shared by the connections in flight. Prints wall time, bytes and requests for each, and their ratio.

    .venv/bin/python bench/table_search.py [--rounds 3]

Downloads flashinfer-cubin 0.6.13 (458 MB) once into a temporary folder.
"""

from __future__ import annotations

import argparse
import http.server
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from hprobe.support import pip_download  # noqa: E402

PACKAGE = "flashinfer_cubin/cubins/158f6fa11ef139a098cfddcdddce73ca99d164ad/fmha/trtllm-gen/"
MEMBERS = [PACKAGE + "checksums.txt", PACKAGE + "include/flashInferMetaInfo.h"]
# (round trip in seconds, bytes a second): this machine's proxy, a near CDN, a far one, a slow link.
LINKS = [(0.0, None), (0.02, 50e6), (0.05, 10e6), (0.1, 5e6)]


def serve(path: Path, link: list) -> http.server.ThreadingHTTPServer:
    size = path.stat().st_size
    # One link for every connection: parallel requests share its bandwidth.
    lock, free = threading.Lock(), [0.0]

    def send_time(length: int, rate: float) -> float:
        with lock:
            start = max(time.perf_counter(), free[0])
            free[0] = start + length / rate
            return free[0]

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args):
            pass

        def do_GET(self):
            rtt, rate = link
            time.sleep(rtt)
            first, _, last = self.headers["Range"].removeprefix("bytes=").partition("-")
            start, stop = int(first), min(int(last), size - 1)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{stop}/{size}")
            self.send_header("Content-Length", str(stop - start + 1))
            self.end_headers()
            with open(path, "rb") as file:
                file.seek(start)
                left = stop - start + 1
                while left:
                    chunk = file.read(min(left, 1 << 16))
                    if rate:
                        time.sleep(max(0.0, send_time(len(chunk), rate) - time.perf_counter()))
                    self.wfile.write(chunk)
                    left -= len(chunk)

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):
            pass  # a client that hangs up after the bytes it asked for (it reads one past them) is no error

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def read(url: str, how: str) -> tuple[float, int, int, dict[str, bytes] | None]:
    from pip._vendor import requests

    source = pip_download._Ranges.open(requests.Session(), url)
    assert source is not None
    requests_made = [0]
    fetch = source._fetch

    def counted(first: int, last: int) -> None:
        requests_made[0] += 1
        fetch(first, last)

    source._fetch = counted  # type: ignore[method-assign]
    start = time.perf_counter()
    if how == "whole":
        got, _ = pip_download._read_whole_directory(source, MEMBERS, 64 << 20)
    else:
        got = pip_download._searched(source, MEMBERS, 64 << 20)
    return time.perf_counter() - start, source.received, requests_made[0], got


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hprobe-bench-table-"))
    try:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(work), "flashinfer-cubin==0.6.13"],
            check=True,
        )
        [wheel] = work.glob("*.whl")
        link: list = [0.0, None]
        server = serve(wheel, link)
        url = f"http://127.0.0.1:{server.server_address[1]}/{wheel.name}"
        print(f"{wheel.name}, {os.path.getsize(wheel) / 2**20:.0f} MiB; {args.rounds} rounds, medians")
        for rtt, rate in LINKS:
            link[:] = [rtt, rate]
            walls: dict[str, list[float]] = {"whole": [], "search": []}
            said: dict[str, tuple[int, int]] = {}
            answers = {}
            for _ in range(args.rounds):
                for how in ("whole", "search"):
                    wall, received, made, got = read(url, how)
                    walls[how].append(wall)
                    said[how] = (received, made)
                    answers[how] = got
            same = answers["whole"] == answers["search"] and answers["whole"] is not None
            whole, search = (statistics.median(walls[h]) for h in ("whole", "search"))
            speed = "unthrottled" if rate is None else f"{rate / 1e6:.0f} MB/s"
            print(
                f"round trip {rtt * 1000:3.0f} ms, {speed:>11}:  whole directory {whole:6.2f} s "
                f"{said['whole'][0] / 2**20:4.1f} MiB {said['whole'][1]:2d} requests   search {search:6.2f} s "
                f"{said['search'][0] / 2**20:4.1f} MiB {said['search'][1]:2d} requests   "
                f"{search / whole:.2f}x  {'same bytes' if same else 'DIFFERENT'}"
            )
        server.shutdown()
        server.server_close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
