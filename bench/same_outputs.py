"""Whether the bench's commands print the same bytes at two revisions: an
earlier hprobe (a git revision, checked out into a temporary worktree) and
this checkout, run side by side in one run on one cache of fetched releases
(answers are keyed by hprobe's code, so each revision probes for itself).

Compared per command: the exit code, stdout, and every file it writes (the
report's site, suggest's diff). A difference is printed as a unified diff of
its first lines; the script exits 1 when any command differs.

Both revisions unpack releases whole (HPROBE_SLIM_TREES=0): a slim tree lives
at a path of its own, which JSON documents name as the release's location;
that slim and whole trees give the same answers is bench/slim_trees.py's to show.
The note "fetched into the cache, N MiB added" is set aside: the cache of
fetched releases is shared, so only whichever revision runs first says it.

    .venv/bin/python bench/same_outputs.py [--base REV] [--engines] [--report] [--suggest] [--only TEXT]
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from bench_cli import COMMANDS, ENGINES, REPORT_RELEASES  # noqa: E402 - the bench's own commands

HPROBE_ARGS = {name: argv[3:] for name, argv in COMMANDS.items() if argv[1:3] == ["-m", "hprobe"]}


def commands(work: Path, engines: bool, report: bool, suggest: bool) -> dict[str, tuple[list[str], list[str]]]:
    """name -> (hprobe arguments, files it writes, relative to its output folder {OUT})."""
    out: dict[str, tuple[list[str], list[str]]] = {name: (args, []) for name, args in HPROBE_ARGS.items()}
    tables = [
        a for a in HPROBE_ARGS["hprobe check (cold, --no-cache; vLLM tables, installed release)"] if a != "--no-cache"
    ]
    for fmt in ("json", "markdown"):
        out[f"hprobe check --format {fmt}"] = ([*tables, "--format", fmt], [])
    out["hprobe check --junit"] = ([*tables, "--junit", "{OUT}/junit.xml"], ["junit.xml"])
    out["hprobe matrix --grid"] = (
        ["matrix", "-k", "dsv4-sparse-mla", "--sm", "100,120", "--heads", "1-128", "--grid"],
        [],
    )
    if engines:
        sys.path.insert(0, str(ROOT / "tests"))
        from engine_wheels import download_engine  # the tests' own downloader: source only, never imported

        for distribution, version, sms, release in ENGINES:
            tree = download_engine(work / f"{distribution}-{version}", distribution, version)
            asked = ["--repo", str(tree), "--sm", sms, *(["--flashinfer", release] if release else [])]
            out[f"check --repo {distribution} {version}"] = (["check", *asked], [])
            out[f"check --repo {distribution} {version} --format json"] = (["check", *asked, "--format", "json"], [])
            if suggest:
                out[f"suggest --repo {distribution} {version}"] = (["suggest", *asked], [])
    if report:
        out["report (ten releases)"] = (
            [
                "report",
                "-k",
                "dsv4-sparse-mla,trtllm-mla",
                "--sm",
                "100,120",
                "--releases",
                REPORT_RELEASES,
                "-o",
                "{OUT}/site",
                "--force",
            ],
            ["site/index.html", "site/matrix.md", "site/matrix.json"],
        )
    if suggest:
        fixture = str(ROOT / "tests" / "fixtures" / "repos" / "pre48047_helper")
        out["suggest --repo --diff"] = (
            ["suggest", "--repo", fixture, "--sm", "100,103", "--diff", "{OUT}/fix.diff", "--force"],
            ["fix.diff"],
        )
    return out


def run(source: Path, args: list[str], out: Path, files: list[str]) -> dict[str, bytes]:
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(source / "src"), HPROBE_SLIM_TREES="0")
    argv = [sys.executable, "-m", "hprobe", *[a.replace("{OUT}", str(out)) for a in args]]
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=3600)
    got = {"exit code": str(proc.returncode).encode(), "stdout": _comparable(proc.stdout, out)}
    for name in files:
        path = out / name
        got[name] = _comparable(path.read_bytes(), out) if path.exists() else b"(not written)"
    return got


# In a JSON document, the note as a string of a list; in text, a whole line
# (one holding no quote: a compact JSON document is one line).
_FETCHED = re.compile(
    rb'(?m),?\s*"flashinfer [^"]*: fetched into the cache, [^"]*"|^[^"\n]*: fetched into the cache, [^\n]*\n'
)


def _comparable(data: bytes, out: Path) -> bytes:
    """The output with its folder named {OUT}, and without the note on what
    this run fetched (see above)."""
    return _FETCHED.sub(b"", data.replace(str(out).encode(), b"{OUT}"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--base",
        default="68f4d04",
        help="the earlier revision (default: before data flowed one way through the format registry)",
    )
    parser.add_argument(
        "--engines",
        action="store_true",
        help="also check --repo on SGLang 0.5.23, vLLM 0.33.0 and 0.34.0 (downloaded, never imported);"
        " with --suggest, suggest --repo on each too",
    )
    parser.add_argument("--report", action="store_true", help="also the ten-release report's three files")
    parser.add_argument(
        "--suggest", action="store_true", help="also suggest --diff on the pre-#48047 fixture (and on each engine tree)"
    )
    parser.add_argument("--only", default="", help="only the commands whose name holds this text")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hprobe-same-outputs-"))
    base = work / "base"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base), args.base], check=True)
    os.environ["HPROBE_CACHE_DIR"] = str(
        work / "cache"
    )  # shared: fetched wheels and trees do not depend on hprobe's code
    differ = 0
    try:
        jobs = {
            name: job
            for name, job in commands(work, args.engines, args.report, args.suggest).items()
            if args.only in name
        }
        print(f"{len(jobs)} commands, {args.base} against this checkout, one run")
        for name, (hargs, files) in jobs.items():
            before = run(base, hargs, work / "out-base", files)
            after = run(ROOT, hargs, work / "out-now", files)
            same = before == after
            differ += not same
            print(
                f"{'same' if same else 'DIFFERS':<8} {name}  ({sum(len(v) for v in after.values()):,} bytes compared)"
            )
            for part in after:
                if before.get(part) != after[part]:
                    lines = difflib.unified_diff(
                        before.get(part, b"").decode(errors="replace").splitlines(),
                        after[part].decode(errors="replace").splitlines(),
                        f"{args.base}: {part}",
                        f"now: {part}",
                        lineterm="",
                        n=1,
                    )
                    print("\n".join(list(lines)[:40]))
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
        shutil.rmtree(work, ignore_errors=True)
    print(f"{differ} of {len(jobs)} differ")
    raise SystemExit(1 if differ else 0)


if __name__ == "__main__":
    main()
