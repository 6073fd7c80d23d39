"""Probe one unpacked flashinfer tree in this (fresh) process; JSON in on stdin, out on stdout.

Run by `hprobe.support.workers` in an isolated interpreter: the tree goes first on
sys.path before anything imports flashinfer, so this process sees only it.
"""

from __future__ import annotations

import io
import json
import os
import sys
from contextlib import redirect_stdout
from itertools import islice
from pathlib import Path


def main() -> int:
    from hprobe.system import collector

    collector.tune_for_a_run()
    return answer(json.loads(sys.stdin.read()))


def answer(request: dict) -> int:
    """Answer one request on stdout, as JSON on its last line."""
    tree = Path(request["tree"]).resolve()
    from hprobe.support.slim import watch

    watch(tree)  # a slim tree's files are written from its wheel as they are opened
    if request.get("bytecode"):
        from hprobe.support.bytecode import share

        share(tree, Path(request["bytecode"]))  # what an earlier release compiled from the same bytes
    sys.path.insert(0, str(tree))
    noise = io.StringIO()  # flashinfer may print; stdout carries only our JSON
    try:
        with redirect_stdout(noise):
            doc = _read(tree, request) if "read" in request else _probe(tree, request)
    except Exception as exc:  # noqa: BLE001 - reported to the parent as data
        doc = {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:400]}"}
    from hprobe.support.slim import received

    doc["received"] = received()  # what serving a remote tree fetched: the run's count says it
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
            return {
                "version": session.version,
                "import_error": f"{type(exc).__name__}: {exc}",
                "missing": getattr(exc, "name", None),
            }
        values = {}
        for name in names:
            values[name] = _data(getattr(module, name)) if hasattr(module, name) else {"missing": True}
        return {"version": session.version, "values": values}


def _data(value: object, depth: int = 0) -> dict:
    """Plain data, tagged; an object that only iterates keeps only its iteration
    (SGLang iterates 0.7.x's dispatch envelope), one that does not iterate the
    TypeError iterating it raises (0.7.0's envelope); anything else stays opaque."""
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
        items = [_data(v, depth + 1) for v in islice(iter(value), 10_000)]  # type: ignore[call-overload]
        return {"iterable": items, "type": type(value).__name__}
    if not hasattr(type(value), "__getitem__"):
        # Nothing Python iterates by (no __iter__, no __getitem__): what an
        # engine iterating it gets is Python's own TypeError, said as Python says it.
        try:
            iter(value)  # type: ignore[call-overload]
        except TypeError as exc:
            return {"opaque": type(value).__name__, "not_iterable": str(exc)}
    return {"opaque": type(value).__name__}


# What every worker imports before a release's flashinfer: a zygote
# (support/zygote.py) imports it once and forks a worker per request.
PRELOAD = (
    "torch",
    "hprobe.device.session",
    "hprobe.probe.run",
    "hprobe.kernels",
    "hprobe.support.slim",
    "hprobe.support.bytecode",
)


def serve() -> int:
    """The zygote: preload, then fork a worker per request line on stdin.

    Request: {"id", "request", "workdir", "pycache", "env"}; answers on stdout:
    {"id", "pid"} once forked, {"id", "exit"} once it has ended. The worker
    writes its stdout and stderr to `out` and `err` in its workdir. Single
    threaded (a fork beside other threads could inherit a held lock): the
    loop polls stdin and reaps in turn."""
    import importlib
    import select

    from hprobe.system import collector

    collector.tune_for_a_run()
    with collector.paused():  # as a session imports (its objects are frozen there, in each worker)
        for name in PRELOAD:
            importlib.import_module(name)
    if any(name == "flashinfer" or name.startswith("flashinfer.") for name in sys.modules):
        _tell({"refused": "flashinfer was imported before a release's tree was on sys.path"})
        return 3
    _tell({"ready": os.getpid()})
    waiting: dict[int, int] = {}  # pid -> request id
    stdin = sys.stdin.fileno()
    pending = b""
    open_input = True
    while open_input or waiting:
        if open_input and select.select([stdin], [], [], 0.05)[0]:
            chunk = os.read(stdin, 1 << 16)
            if not chunk:
                open_input = False
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                job = json.loads(line)
                pid = _fork(job)
                waiting[pid] = job["id"]
                _tell({"id": job["id"], "pid": pid})
        elif not open_input:
            select.select([], [], [], 0.05)
        while waiting:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            if pid in waiting:
                _tell({"id": waiting.pop(pid), "exit": os.waitstatus_to_exitcode(status)})
    return 0


def _fork(job: dict) -> int:
    zygote = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    # The worker: a group of its own (killed as one), gone with the zygote,
    # its output in files, its temp files in its own directory.
    code = 70
    try:
        os.setsid()
        from hprobe.system.lifetime import die_with_parent

        die_with_parent(zygote)
        if _preloaded_from(Path(job["request"]["tree"])):
            os._exit(EXIT_NOT_FRESH)
        workdir = job["workdir"]
        os.chdir(workdir)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, name in ((1, "out"), (2, "err")):
            target = os.open(os.path.join(workdir, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(target, fd)
            os.close(target)
        import tempfile

        # The environment a fresh worker would be given now (the zygote's is
        # the one it started with).
        os.environ.clear()
        os.environ.update(job["env"])
        tempfile.tempdir = None  # gettempdir() asks TMPDIR again
        if job.get("pycache"):
            sys.pycache_prefix = job["pycache"]
        code = answer(job["request"])
    except BaseException as exc:  # noqa: BLE001 - said on stderr, ended with a code of its own
        try:
            sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
        except Exception:  # noqa: BLE001
            pass
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


# A forked worker that would not be what a fresh one is: the zygote already
# holds a module of the tree's own top-level names (a release shipping a
# package the preload imported from the environment). A plain worker answers.
EXIT_NOT_FRESH = 76


def _preloaded_from(tree: Path) -> bool:
    try:
        tops = {
            entry.name.removesuffix(".py")
            for entry in tree.iterdir()
            if not entry.name.endswith((".dist-info", ".data"))
        }
    except OSError:
        return True
    return any(name in sys.modules or any(m.startswith(name + ".") for m in sys.modules) for name in tops)


def _tell(doc: dict) -> None:
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
