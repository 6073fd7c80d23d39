"""Probe one unpacked flashinfer tree in this (fresh) process; JSON in on stdin, out on stdout.

Run by `hprobe.support.workers` in an isolated interpreter: the tree goes first on
sys.path before anything imports flashinfer, so this process sees only it.
"""

from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stdout
from itertools import islice
from pathlib import Path


def main() -> int:
    request = json.loads(sys.stdin.read())
    tree = Path(request["tree"]).resolve()
    from hprobe.support.slim import watch

    watch(tree)  # a slim tree's files are written from its wheel as they are opened
    sys.path.insert(0, str(tree))
    noise = io.StringIO()  # flashinfer may print; stdout carries only our JSON
    try:
        with redirect_stdout(noise):
            doc = _read(tree, request) if "read" in request else _probe(tree, request)
    except Exception as exc:  # noqa: BLE001 - reported to the parent as data
        doc = {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:400]}"}
    sys.stdout.write(json.dumps(doc) + "\n")
    return 0


def _probe(tree: Path, request: dict) -> dict:
    from hprobe.device.session import FlashinferSession
    from hprobe.kernels import get_variant
    from hprobe.model.sm import SM
    from hprobe.probe.run import probe_kernel

    sms = [SM.from_number(n) for n in request["sms"]]
    heads = request["heads"]
    with FlashinferSession() as session:
        if not Path(session.location).resolve().is_relative_to(tree):
            return {"error": f"imported flashinfer from {session.location}, not from {tree}"}
        results: list[dict] = []
        for key in request["kernels"]:
            results.extend(r.to_dict() for r in probe_kernel(session, get_variant(key), sms, heads))
        return {"version": session.version, "location": session.location, "results": results}


def _read(tree: Path, request: dict) -> dict:
    """The values of names a consumer's rule imports from flashinfer (SGLang reads
    `_DECODE_DSV4_DISPATCH`), as data: the release imported here as it would be
    in the consumer's process, on the SM judged."""
    import importlib

    from hprobe.device.session import FlashinferSession
    from hprobe.model.sm import SM

    module_name, names = request["read"]["module"], request["read"]["names"]
    with FlashinferSession(SM.from_number(request["sm"])) as session:
        if not Path(session.location).resolve().is_relative_to(tree):
            return {"error": f"imported flashinfer from {session.location}, not from {tree}"}
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            # `missing`: the module that is not there. Only when it is the one
            # asked for (or a parent) is the release itself without it.
            return {"version": session.version, "import_error": f"{type(exc).__name__}: {exc}", "missing": getattr(exc, "name", None)}
        values = {}
        for name in names:
            values[name] = _data(getattr(module, name)) if hasattr(module, name) else {"missing": True}
        return {"version": session.version, "values": values}


def _data(value: object, depth: int = 0) -> dict:
    """Plain data, tagged; an object that only iterates keeps only its iteration
    (SGLang iterates 0.7.x's dispatch envelope); anything else stays opaque."""
    if depth > 8:
        return {"opaque": "nested too deeply"}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"value": value}
    if isinstance(value, (tuple, list, set, frozenset)):
        kind = "tuple" if isinstance(value, tuple) else "list" if isinstance(value, list) else "frozenset"
        items = sorted(value, key=repr) if kind == "frozenset" else list(value)
        return {kind: [_data(v, depth + 1) for v in items[:10_000]]}
    if isinstance(value, dict):
        return {"dict": [[_data(k, depth + 1), _data(v, depth + 1)] for k, v in list(value.items())[:10_000]]}
    if hasattr(type(value), "__iter__"):
        # islice: an endless iterator must not hang the worker until its timeout
        return {"iterable": [_data(v, depth + 1) for v in islice(iter(value), 10_000)], "type": type(value).__name__}  # type: ignore[call-overload]
    return {"opaque": type(value).__name__}


if __name__ == "__main__":
    sys.exit(main())
