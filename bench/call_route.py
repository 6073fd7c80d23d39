"""How a command's request travels through hprobe's layers, followed call by
call in a real run: every place in a command's code (a module under
`src/hprobe/commands/`) that calls a function of another module, once per
place however often it runs, and which layer that function sits in
(tests/test_layers.py's order).

A call from a command into a lower layer comes back up once it returns: each
such place is one climb back to a higher layer. A call into another module of
`commands/` is a command's code running another's (`across`). A request that
flows down once (rules → answers → verdicts → advice → report) climbs once
per step.

    .venv/bin/python bench/call_route.py [--base REV] [-- HPROBE ARGS...]

Without arguments: `suggest --repo --diff` on the pre-#48047 fixture
(SM100/103: the rules judged, the pin searched, the patch written; `{WORK}`
in an argument is a temporary folder), warm, on this checkout and, with --base, on an earlier
revision checked out into a temporary worktree, side by side in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from test_layers import LAYERS  # noqa: E402 - the layers as the layer test holds them

DEFAULT = [
    "suggest",
    "--repo",
    str(ROOT / "tests" / "fixtures" / "repos" / "pre48047_helper"),
    "--sm",
    "100,103",
    "--diff",
    "{WORK}/fix.diff",
    "--force",
]

# Run in a child with the revision's own `src` first on the path: the app
# invoked as the console script would, every call event seen, the places in
# commands/ that call out of their module kept.
TRACER = r"""
import json, sys
from pathlib import Path
src = Path(sys.argv[1]).resolve()
out = sys.argv[2]
commands = str(src / "hprobe" / "commands") + "/"
package = str(src / "hprobe") + "/"
sites = {}

def module(filename):
    return filename[len(package):-3].replace("/", ".")

def profile(frame, event, arg):
    if event != "call":
        return
    callee = frame.f_code.co_filename
    caller = frame.f_back
    if caller is None or not callee.startswith(package) or not caller.f_code.co_filename.startswith(commands):
        return
    if callee == caller.f_code.co_filename:
        return
    where = f"{module(caller.f_code.co_filename)}:{caller.f_lineno}"
    sites[f"{where} -> {module(callee)}.{frame.f_code.co_name}"] = None

from hprobe.cli.app import app
sys.setprofile(profile)
try:
    app(sys.argv[3:], prog_name="hprobe", standalone_mode=False)
except SystemExit:
    pass
finally:
    sys.setprofile(None)
Path(out).write_text(json.dumps(sorted(sites)))
"""


def layer(module: str) -> int:
    return LAYERS.index(module.split(".")[0])


def route(source: Path, args: list[str], work: Path) -> dict[str, str]:
    """caller's place -> the function it calls (a place calling two is two entries)."""
    out = work / "sites.json"
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(source / "src"))
    subprocess.run(
        [sys.executable, "-c", TRACER, str(source / "src"), str(out), *(a.replace("{WORK}", str(work)) for a in args)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        timeout=3600,
        check=False,
    )
    return {
        f"{where} #{i}": callee
        for i, (where, callee) in enumerate(s.split(" -> ") for s in json.loads(out.read_text()))
    }


def show(name: str, sites: dict[str, str]) -> None:
    commands = LAYERS.index("commands")
    down = {w: c for w, c in sites.items() if layer(c) < commands}
    across = {w: c for w, c in sites.items() if layer(c) == commands}
    print(f"{name}: {len(down)} climbs back (calls from commands/ into a lower layer), {len(across)} across commands/")
    for where, callee in sorted(sites.items()):
        print(f"  {'down  ' if where in down else 'across'}  {where.split(' #')[0]:<32} -> {callee}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", help="an earlier revision to follow beside this checkout")
    parser.add_argument("args", nargs="*", help="hprobe's arguments (default: suggest --repo on a fixture)")
    options = parser.parse_args()
    args = options.args or DEFAULT
    work = Path(tempfile.mkdtemp(prefix="hprobe-route-"))
    try:
        route(ROOT, args, work)  # once first, so both followed runs are warm
        if options.base:
            base = work / "base"
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base), options.base], check=True
            )
            try:
                route(base, args, work)
                show(options.base, route(base, args, work))
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
        show("this checkout", route(ROOT, args, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
