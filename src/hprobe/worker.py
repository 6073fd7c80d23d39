"""Probe one unpacked flashinfer tree in this (fresh) process; JSON in on stdin, out on stdout.

Run by `hprobe.releases` in an isolated interpreter: the tree goes first on
sys.path before anything imports flashinfer, so this process sees only it.
"""

from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stdout
from pathlib import Path


def main() -> int:
    request = json.loads(sys.stdin.read())
    tree = Path(request["tree"]).resolve()
    sys.path.insert(0, str(tree))
    noise = io.StringIO()  # flashinfer may print; stdout carries only our JSON
    try:
        with redirect_stdout(noise):
            doc = _probe(tree, request)
    except Exception as exc:  # noqa: BLE001 - reported to the parent as data
        doc = {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:400]}"}
    sys.stdout.write(json.dumps(doc) + "\n")
    return 0


def _probe(tree: Path, request: dict) -> dict:
    from .kernels import get_variant
    from .matrix import probe_kernel
    from .shim import FlashinferSession
    from .sm import SM

    sms = [SM.from_number(n) for n in request["sms"]]
    heads = request["heads"]
    with FlashinferSession(sms[0]) as session:
        if not Path(session.location).resolve().is_relative_to(tree):
            return {"error": f"imported flashinfer from {session.location}, not from {tree}"}
        results: list[dict] = []
        for key in request["kernels"]:
            results.extend(r.to_dict() for r in probe_kernel(session, get_variant(key), sms, heads))
        return {"version": session.version, "location": session.location, "results": results}


if __name__ == "__main__":
    sys.exit(main())
