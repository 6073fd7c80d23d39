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
                for _ in range(64):  # 64 MiB offered for a 256 KiB range
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
