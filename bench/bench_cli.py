"""Wall time and peak memory of hprobe commands against a bare shimmed `import flashinfer`.

Runs every command in a fresh process, interleaved round by round so that
machine noise hits all of them alike, and prints medians and ratios measured
side by side in this one run.

    .venv/bin/python bench/bench_cli.py [--rounds 5] [--releases] [--report] [--suggest]
        [--page-sizes] [--engines] [--ci-step] [--cold]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
USER_CACHE = os.environ.get("HPROBE_CACHE_DIR")  # before main() gives the timed runs a cache of their own
PYTHON = sys.executable
HPROBE = [PYTHON, "-m", "hprobe"]

# The least any probe must do: make torch answer device queries, then import.
BARE_IMPORT = """
import torch
class P:
    major, minor, multi_processor_count, name = 10, 0, 148, "bench"
    total_memory = 80 * 2**30
    shared_memory_per_block_optin = 227 * 1024
torch.cuda.get_device_properties = lambda *a, **k: P()
torch.cuda.get_device_capability = lambda *a, **k: (10, 0)
import flashinfer
"""

# The shipped tables judged on the installed release only (SGLang's table pins
# another release, probed in a worker beside this process).
INSTALLED_TABLES = [arg for path in sorted((ROOT / "matrices").glob("vllm-*.toml")) for arg in ("--table", str(path))]

GQA_MATRIX = [
    "matrix",
    "-k",
    "gqa-decode",
    "-k",
    "gqa-trtllm-decode",
    "-k",
    "gqa-trtllm-context",
    "--sm",
    "90,100,103,120,121",
    "--heads",
    "1-256",
]

# `matrix --model`: four GQA/MHA models' shapes per rank (20 TP x layer rows
# each at most) against the three GQA/MHA probes.
GQA_MODELS = [
    *GQA_MATRIX[:7],
    "--sm",
    "90,100,103,120,121",
    "--model",
    "Llama-3.1-405B,Qwen3.5-27B,gpt-oss-120b,Gemma-4-31B",
]

COMMANDS = {
    "bare shimmed import": [PYTHON, "-c", BARE_IMPORT],
    "hprobe check (cold, --no-cache; vLLM tables, installed release)": HPROBE
    + ["check", "--no-cache", *INSTALLED_TABLES],
    "hprobe check (cold, --no-cache; all shipped, + SGLang's 0.7.2)": HPROBE + ["check", "--no-cache"],
    "hprobe check (warm)": HPROBE + ["check"],
    "hprobe matrix (all probes x 5 SMs x 1..256, --no-cache)": HPROBE
    + ["matrix", "--sm", "90,100,103,120,121", "--heads", "1-256", "--no-cache"],
    # The GQA/MHA probes: the CUDA-core decode, trtllm_batch_decode_with_kv_cache
    # (every backend) and trtllm-gen's context, whose SM10x counts go through the
    # ported selection on the kernel table.
    "hprobe matrix (GQA probes x 5 SMs x 1..256, --no-cache)": HPROBE + [*GQA_MATRIX, "--no-cache"],
    "hprobe matrix (GQA probes x 5 SMs x 1..256, warm)": HPROBE + GQA_MATRIX,
    "hprobe matrix --model (GQA probes x 5 SMs x 4 models, --no-cache)": HPROBE + [*GQA_MODELS, "--no-cache"],
    "hprobe matrix --model (GQA probes x 5 SMs x 4 models, warm)": HPROBE + GQA_MODELS,
}


# What each run said it added to the cache ("flashinfer X: fetched into the
# cache, N MiB added", hprobe's own count on stderr), by the last run_once.
ADDED_MIB: list[float] = []
# What the last run_once said it downloaded, MiB by kind ("fetched N MiB
# this run (wheels A MiB, kernel tables B MiB; ...)", hprobe's own count).
DOWNLOADED_MIB: dict[str, float] = {}

# The figures of the previous bench run on this machine, to print beside this
# run's; this run's replace them at the end.
LAST_RUN = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hprobe-bench" / "last.json"
PREVIOUS: dict[str, float] = {}
FIGURES: dict[str, float] = {}


def figure(name: str, value: float, unit: str = "x") -> str:
    """`value` kept under `name` for the next run, and what the previous run
    measured, as text to print beside it ("" when it has none)."""
    FIGURES[name] = value
    was = PREVIOUS.get(name)
    return f"  (previous run {was:.2f}{unit})" if was is not None else ""


def run_once(argv: list[str], ok: tuple[int, ...] = (0, 1, 3)) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one child process, which must end with
    one of the exit codes `ok`."""
    env = dict(os.environ, NO_COLOR="1")
    # As an installed hprobe runs: pip compiles a wheel's modules at install, and
    # an editable checkout writes its bytecode on the first run. Without this, an
    # environment that forbids bytecode times the compiler on every run.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if code not in ok:
        raise SystemExit(f"{argv} exited {code}: {err}")
    import re

    ADDED_MIB[:] = [
        sum(float(m.replace(",", "")) for m in re.findall(r"fetched into the cache, ([\d.,]+) MiB added", err))
    ]
    DOWNLOADED_MIB.clear()
    said = re.search(r"fetched [\d.,]+ MiB this run \(([^;]*);", err)
    for kind, mib in re.findall(r"([a-z ]+) ([\d.,]+) MiB", said.group(1) if said else ""):
        DOWNLOADED_MIB[kind.strip()] = float(mib.replace(",", ""))
    return wall, usage.ru_maxrss / 1024  # ru_maxrss is KiB on Linux


RELEASES = "0.6.12,0.6.13,0.6.14,0.6.18,0.7.4"


def releases_bench(rounds: int) -> None:
    """Cold (empty result cache, wheels already fetched) vs warm five-release matrix."""
    import shutil
    import tempfile

    argv = HPROBE + ["matrix", "--sm", "100,120", "--flashinfer", RELEASES]
    cache = Path(tempfile.mkdtemp(prefix="hprobe-bench-"))
    os.environ["HPROBE_CACHE_DIR"] = str(cache)
    run_once(argv)  # fetch the wheels once; downloads are not what is measured
    cold, warm = [], []
    for _ in range(rounds):
        shutil.rmtree(cache / "results", ignore_errors=True)
        cold.append(run_once(argv))
        warm.append(run_once(argv))
    shutil.rmtree(cache, ignore_errors=True)
    cold_wall = statistics.median(w for w, _ in cold)
    warm_wall = statistics.median(w for w, _ in warm)
    print(f"\nmatrix over 5 releases ({RELEASES}), SM100+SM120, 1..256")
    print(f"{'cold (probe every release)':<34} {cold_wall:>8.2f}")
    print(f"{'warm (result cache)':<34} {warm_wall:>8.2f} {warm_wall / cold_wall:>6.2f}x of cold")


REPORT_RELEASES = "0.6.13,0.6.14,0.6.15,0.6.16,0.6.17,0.6.18,0.7.0,0.7.1,0.7.2,0.7.4"


def side_by_side(
    rounds: int,
    title: str,
    base: tuple[str, list[str]],
    other: tuple[str, list[str]],
    fill: list[str] | None = None,
) -> None:
    """Two commands, warm (`fill`, by default `other`, runs once first to fill
    the caches), timed in alternation; the median of `other` as a ratio of `base`'s."""
    run_once(fill or other[1])
    times: dict[str, list[float]] = {base[0]: [], other[0]: []}
    for _ in range(rounds):
        for name, argv in (base, other):
            times[name].append(run_once(argv)[0])
    b, o = statistics.median(times[base[0]]), statistics.median(times[other[0]])
    print(f"\n{title}")
    print(f"{base[0]:<34} {b:>8.2f}")
    was = figure(f"{title}: {other[0]}", o / b)
    print(f"{other[0]:<34} {o:>8.2f} {o / b:>6.2f}x of {base[0].split()[0]}{was}")


def report_bench(rounds: int) -> None:
    """A ten-release `report` against the same ten-release `matrix`, both warm."""
    import tempfile

    common = ["-k", "dsv4-sparse-mla,trtllm-mla", "--sm", "100,120"]
    site = tempfile.mkdtemp(prefix="hprobe-bench-site-")
    side_by_side(
        rounds,
        f"ten releases ({REPORT_RELEASES}), dsv4-sparse-mla + trtllm-mla, SM100+SM120, warm",
        ("matrix", HPROBE + ["matrix", *common, "--flashinfer", REPORT_RELEASES]),
        (
            "report (index.html, md, json)",
            HPROBE + ["report", *common, "--releases", REPORT_RELEASES, "-o", site, "--force"],
        ),
    )
    print(f"{'site written':<34} {site_sizes(site)}")


def site_sizes(site: str) -> str:
    return ", ".join(
        f"{name} {os.path.getsize(os.path.join(site, name)) / 1024:.0f} KB"
        for name in ("index.html", "matrix.md", "matrix.json")
    )


def page_sizes() -> None:
    """The report's weight at the two sizes people pass around: one kernel x 2
    SMs over every release from 0.5.0, and every default variant x 5 SMs."""
    import tempfile

    print("\nreport page sizes (0.5.0..0.7.4)")
    for label, args in (
        ("dsv4-sparse-mla x SM100,SM120", ["-k", "dsv4-sparse-mla", "--sm", "100,120"]),
        ("every default variant x 5 SMs", ["--sm", "90,100,103,120,121"]),
    ):
        site = tempfile.mkdtemp(prefix="hprobe-bench-page-")
        # The user's own cache: sizes do not depend on it, and nineteen releases probed cold take long.
        env = {k: v for k, v in os.environ.items() if k != "HPROBE_CACHE_DIR"} | (
            {"HPROBE_CACHE_DIR": USER_CACHE} if USER_CACHE else {}
        )
        proc = subprocess.run(
            HPROBE + ["report", "--releases", "0.5.0..0.7.4", *args, "-o", site, "--force"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        if proc.returncode != 0:
            raise SystemExit(f"hprobe report exited {proc.returncode}: {proc.stderr}")
        print(f"{label:<34} {site_sizes(site)}")


def suggest_bench(rounds: int) -> None:
    """`suggest` against `check` on the same repo and pin, both warm: suggest
    adds the pin search over published releases (cached answers) and the patch."""
    import tempfile

    common = ["--repo", str(ROOT / "tests" / "fixtures" / "repos" / "pre48047_helper"), "--sm", "100,103"]
    patch = Path(tempfile.mkdtemp(prefix="hprobe-bench-diff-")) / "fix.diff"
    side_by_side(
        rounds,
        "pre-#48047 fixture (pin >=0.6.13), SM100+SM103, warm",
        ("check --repo", HPROBE + ["check", *common]),
        ("suggest --repo --diff", HPROBE + ["suggest", *common, "--diff", str(patch), "--force"]),
    )


# (distribution, version, SMs, the release judged: None for the tree's own pin).
# vLLM 0.34.0 pins 0.7.3, which the index does not serve: judged on 0.7.4.
ENGINES = (
    ("sglang", "0.5.23", "100", None),
    ("vllm", "0.33.0", "100,120", None),
    ("vllm", "0.34.0", "90,100,120", "0.7.4"),
)


def engines_bench(rounds: int) -> None:
    """A warm `check --repo` on real engine releases against a bare shimmed import."""
    import tempfile

    sys.path.insert(0, str(ROOT / "tests"))
    from engine_wheels import download_engine  # the tests' own downloader: source only, never imported

    where = Path(tempfile.mkdtemp(prefix="hprobe-bench-engines-"))
    for distribution, version, sms, release in ENGINES:
        tree = download_engine(where / f"{distribution}-{version}", distribution, version)
        judged = ["--flashinfer", release] if release else []
        every_sm = HPROBE + ["check", "--repo", str(tree), "--sm", sms, *judged]
        side_by_side(
            rounds,
            f"{distribution} {version} ({f'on flashinfer {release}' if release else 'its own pin'}), SM{sms}, warm",
            ("bare shimmed import", COMMANDS["bare shimmed import"]),
            (f"check --repo {distribution}", every_sm),
        )
        if "," in sms:
            # Answers are kept per SM: a run for one SM reads what the run for all of them kept.
            one = sms.split(",")[0]
            side_by_side(
                rounds,
                f"{distribution} {version}, SM{one} alone after the SM{sms} run, warm",
                ("bare shimmed import", COMMANDS["bare shimmed import"]),
                (f"check --repo {distribution} --sm {one}", every_sm[: every_sm.index("--sm") + 1] + [one, *judged]),
                fill=every_sm,
            )


def refetch_bench(rounds: int) -> None:
    """What removing wheels once answered costs a later run that needs the
    files again: `check --no-cache` on every shipped table (SGLang's pin, 0.7.2,
    is a fetched release) right after a warm `check` removed its wheel, against
    the same run with the wheel kept (HPROBE_KEEP_WHEELS=1), interleaved."""
    cold = COMMANDS["hprobe check (cold, --no-cache; all shipped, + SGLang's 0.7.2)"]
    refetched, kept = [], []
    for _ in range(rounds):
        run_once(COMMANDS["hprobe check (warm)"])  # answered from the cache: removes the wheel it read
        refetched.append(run_once(cold)[0])  # fetches it again, and keeps it (it kept no answers)
        os.environ["HPROBE_KEEP_WHEELS"] = "1"
        try:
            kept.append(run_once(cold)[0])
        finally:
            del os.environ["HPROBE_KEEP_WHEELS"]
    fetched_wall, kept_wall = statistics.median(refetched), statistics.median(kept)
    print("\ncheck --no-cache, every shipped table, after a warm check removed SGLang's 0.7.2 wheel")
    print(f"{'wheel fetched again':<34} {fetched_wall:>8.2f} {fetched_wall / kept_wall:>6.2f}x of kept")
    print(f"{'wheel kept (HPROBE_KEEP_WHEELS=1)':<34} {kept_wall:>8.2f}")


def cold_bench() -> None:
    """Cold runs, each on an empty cache of its own (releases fetched from the
    index, unpacked, probed): `suggest --diff` against `check` on vLLM 0.25.0's
    source; and a report over 0.6.12..0.7.4 (one kernel, SM100 and SM120)
    against the sum of each release's bare shimmed import divided by the cores
    (the least that probing every release in parallel could cost)."""
    import shutil
    import tempfile

    sys.path.insert(0, str(ROOT / "tests"))
    from engine_wheels import as_checkout, download_engine  # the tests' own downloader: source only, never imported

    work = Path(tempfile.mkdtemp(prefix="hprobe-bench-cold-"))
    try:
        vllm = as_checkout(download_engine(work / "vllm-0.25.0", "vllm", "0.25.0"), work / "vllm-checkout")

        def cold(name: str, argv: list[str]) -> float:
            os.environ["HPROBE_CACHE_DIR"] = str(work / f"cache-{name}")
            return run_once(argv)[0]

        network = cold("network", HPROBE + ["check"])
        downloaded = dict(DOWNLOADED_MIB)
        beyond = sum(mib for kind, mib in downloaded.items() if kind != "wheels")
        print("\ncheck on the shipped tables, cold (an empty cache): what hprobe downloaded, by its own count")
        print(f"{'wall s':<34} {network:>8.2f}")
        for kind, mib in sorted(downloaded.items()):
            print(f"{kind:<34} {mib:>8.1f} MiB")
        print(
            f"{'beyond the release wheels':<34} {beyond:>8.1f} MiB (goal <= 30 "
            f"MB){figure('network beyond wheels MiB', beyond, ' MiB')}"
        )
        check = cold("check", HPROBE + ["check", "--repo", str(vllm)])
        check_added = ADDED_MIB[0]
        suggest = cold("suggest", HPROBE + ["suggest", "--repo", str(vllm), "--diff", str(work / "fix.diff")])
        suggest_added = ADDED_MIB[0]
        print(
            "\nvLLM 0.25.0 (pins flashinfer 0.6.13), cold: an empty cache each (wall s; MiB the run added to its cache)"
        )
        print(f"{'check --repo':<34} {check:>8.2f}          {check_added:>8.1f} MiB")
        print(f"{'suggest --repo --diff':<34} {suggest:>8.2f} {suggest / check:>6.2f}x {suggest_added:>8.1f} MiB")

        report = cold(
            "report",
            HPROBE
            + [
                "report",
                "--releases",
                "0.6.12..0.7.4",
                "-k",
                "dsv4-sparse-mla",
                "--sm",
                "100,120",
                "-o",
                str(work / "site"),
                "--force",
            ],
        )
        trees = sorted(p for p in (work / "cache-report" / "trees").iterdir() if p.is_dir())
        imports = 0.0
        for tree in trees:
            # The release's own first import, shimmed, from its tree: compiled
            # from source as any first import of a fetched release is (the
            # bytecode the report wrote is set aside, none written).
            for compiled in list(tree.rglob("__pycache__")):
                shutil.rmtree(compiled)
            code = (
                "import sys; sys.dont_write_bytecode = True; from pathlib import Path; from hprobe.support.slim "
                f"import watch; watch(Path({str(tree)!r})); sys.path.insert(0, {str(tree)!r})\n" + BARE_IMPORT
            )
            imports += run_once([PYTHON, "-c", code])[0]
        cores = len(os.sched_getaffinity(0))
        floor = imports / cores
        print(f"\nreport 0.6.12..0.7.4 ({len(trees)} releases), dsv4-sparse-mla, SM100+SM120, cold")
        print(f"{'bare shimmed imports, summed':<34} {imports:>8.2f}  / {cores} cores = {floor:.2f}")
        print(f"{'report (fetch, unpack, probe)':<34} {report:>8.2f} {report / floor:>6.2f}x of that")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def ci_step() -> None:
    """The CI recipe's step as a repeated run sees it: hprobe cloned afresh to
    the same place (the runner's temp directory), `scripts/setup` (a new venv;
    pip's download cache warm), then `hprobe check` on a warm hprobe cache (the
    directory the recipe caches between runs)."""
    import shutil
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="hprobe-bench-ci-"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV")}
    env["HPROBE_CACHE_DIR"] = str(work / "hprobe-cache")
    clone = work / "hprobe"

    def step() -> tuple[float, float]:
        shutil.rmtree(clone, ignore_errors=True)  # each CI run starts from a clean runner
        start = time.perf_counter()
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        subprocess.run([str(clone / "scripts" / "setup")], check=True, stdout=subprocess.DEVNULL, env=env)
        setup = time.perf_counter() - start
        proc = subprocess.run(
            [str(clone / ".venv" / "bin" / "hprobe"), "check"], check=False, stdout=subprocess.DEVNULL, env=env
        )
        if proc.returncode not in (0, 1):
            raise SystemExit(f"hprobe check exited {proc.returncode}")
        return setup, time.perf_counter() - start - setup

    try:
        step()  # the first CI run: fills hprobe's cache
        setup, check = step()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\nCI step, repeated (pip's download cache and hprobe's cache warm)")
    print(f"{'clone + scripts/setup (new venv)':<34} {setup:>8.2f}")
    print(f"{'hprobe check (warm cache)':<34} {check:>8.2f}")
    print(f"{'the step':<34} {setup + check:>8.2f}")


def search_start_bench() -> None:
    """Cold `suggest --repo --diff` on SGLang 0.5.21's source (pins
    flashinfer_python==0.6.18; judged on 0.6.17, whose kernel table is at
    hand) with the default search, which starts one release below the pin's
    floor, against `--since first`, which starts where the kernels' entry
    points first exist: each on an empty cache of its own, one after the
    other in this run."""
    import shutil
    import tempfile

    sys.path.insert(0, str(ROOT / "tests"))
    from engine_wheels import download_engine  # the tests' own downloader: source only, never imported

    work = Path(tempfile.mkdtemp(prefix="hprobe-bench-start-"))
    try:
        sglang = download_engine(work / "sglang-0.5.21", "sglang", "0.5.21") / "sglang"
        rows = []
        for name, extra in (("default (the pin's floor)", []), ("--since first", ["--since", "first"])):
            os.environ["HPROBE_CACHE_DIR"] = str(work / f"cache-{len(rows)}")
            argv = HPROBE + ["suggest", "--repo", str(sglang), "--sm", "100", "--flashinfer", "0.6.17"]
            # Exit 2: the rules this tree needs changed are behind a flag hprobe does not rewrite.
            wall = run_once([*argv, "--diff", str(work / "fix.diff"), *extra], ok=(0, 1, 2, 3))[0]
            rows.append((name, wall, DOWNLOADED_MIB.get("wheels", 0.0)))
        print(
            "\nSGLang 0.5.21 (pins ==0.6.18), cold suggest --repo --diff --sm 100 --flashinfer 0.6.17: "
            "where the search starts"
        )
        base = rows[1][1]
        for name, wall, wheels in rows:
            print(f"{name:<34} {wall:>8.2f} {wall / base:>6.2f}x {wheels:>8.1f} MiB of wheels fetched")
        figure("suggest from the pin floor / from first", rows[0][1] / base, "x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def many_callers_bench(rounds: int) -> None:
    """Reading a tree whose one FlashInfer call sits in a helper that N
    functions of one module call (none of them reached from a layer: each
    caller is asked for its own callers), at N = 1,000 and N = 10,000, side by
    side: a reading linear in N takes about 10x, a quadratic one 100x."""
    import shutil
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="hprobe-callers-"))
    code = (
        "import sys, time; from pathlib import Path; "
        "from hprobe.rules.repo.extract import extract; from hprobe.rules.repo.tree.mapping import load_mapping; "
        "root = Path(sys.argv[1]); t = time.perf_counter(); extract(root, load_mapping(root / 'mapping.toml')); "
        "print(time.perf_counter() - t)"
    )
    try:
        walls: dict[int, float] = {}
        for n in (1_000, 10_000):
            root = work / f"n{n}"
            (root / "engine").mkdir(parents=True)
            (root / "engine" / "__init__.py").write_text("")
            calls = "".join(f"\ndef f{i}(q):\n    return helper(q)\n" for i in range(n))
            (root / "engine" / "attn.py").write_text(
                "from flashinfer.decode import trtllm_batch_decode_with_kv_cache_mla\n\n"
                "def helper(q):\n    return trtllm_batch_decode_with_kv_cache_mla(query=q, kv_cache=None)\n" + calls
            )
            (root / "mapping.toml").write_text(
                '[mapping]\nmethod = "get_padded_num_q_heads"\nlayer_query = ["forward_mqa(q)"]\n\n'
                '[[model]]\nname = "Dense-96"\nnum_q_heads = 96\ntp = [1, 4]\n'
            )
            times = [
                float(
                    subprocess.run(
                        [sys.executable, "-c", code, str(root)], check=True, capture_output=True, text=True, cwd=ROOT
                    ).stdout
                )
                for _ in range(rounds)
            ]
            walls[n] = statistics.median(times)
            print(f"{'reading, helper with ' + format(n, ',') + ' callers':<66} {walls[n]:>8.2f}")
        ratio = walls[10_000] / walls[1_000]
        print(
            f"{'10,000 callers / 1,000 callers (linear: about 10x)':<66} {ratio:>8.2f}x{figure('callers 10x', ratio)}"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--releases", action="store_true", help="also time a five-release matrix, cold and warm")
    parser.add_argument(
        "--report", action="store_true", help="also time a ten-release report against the same matrix, warm"
    )
    parser.add_argument(
        "--suggest", action="store_true", help="also time suggest (pin search, patch) against check on one repo, warm"
    )
    parser.add_argument(
        "--page-sizes",
        action="store_true",
        help=(
            "also write the report for every release from 0.5.0 (one kernel x 2 SMs; every variant x 5 SMs) and print "
            "its size"
        ),
    )
    parser.add_argument(
        "--engines",
        action="store_true",
        help="also time a warm check --repo on SGLang 0.5.23, vLLM 0.33.0 and vLLM 0.34.0 against the bare import",
    )
    parser.add_argument(
        "--ci-step",
        action="store_true",
        help="also time the CI recipe's step repeated on warm caches: clone, scripts/setup, check",
    )
    parser.add_argument(
        "--refetch",
        action="store_true",
        help=(
            "also time check --no-cache on every shipped table right after a warm check removed the wheel it read, "
            "against the same with wheels kept"
        ),
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help=(
            "also time cold suggest --diff against cold check (vLLM 0.25.0), and a cold report over 0.6.12..0.7.4 "
            "against the releases' imports"
        ),
    )
    parser.add_argument(
        "--search-start",
        action="store_true",
        help="also time cold suggest --diff on SGLang 0.5.21 searching from the pin's floor against --since first",
    )
    parser.add_argument(
        "--many-callers",
        action="store_true",
        help="also time reading a tree whose helper 10,000 functions call against one with 1,000",
    )
    args = parser.parse_args()
    try:
        PREVIOUS.update(json.loads(LAST_RUN.read_text()))
    except (OSError, ValueError):
        pass  # a first run: nothing to compare with
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    import tempfile

    # A cache of this run's own; one check fills it so "warm" is warm from round 1.
    os.environ["HPROBE_CACHE_DIR"] = tempfile.mkdtemp(prefix="hprobe-bench-")
    # The cold rows time probing with the releases' wheels in the cache, as
    # they say: interleaved with warm runs, which remove the wheels they read
    # once answered, each would fetch SGLang's 62 MB wheel again first
    # (--refetch times that on its own).
    os.environ["HPROBE_KEEP_WHEELS"] = "1"
    run_once(COMMANDS["bare shimmed import"])  # warm the OS file cache once
    run_once(COMMANDS["hprobe check (warm)"])
    for _ in range(args.rounds):
        for name, argv in COMMANDS.items():
            samples[name].append(run_once(argv))
    del os.environ["HPROBE_KEEP_WHEELS"]
    base_wall = statistics.median(w for w, _ in samples["bare shimmed import"])
    base_rss = statistics.median(r for _, r in samples["bare shimmed import"])
    print(f"{args.rounds} rounds, interleaved; medians; python {sys.version.split()[0]}")
    print(f"{'command':<66} {'wall s':>8} {'ratio':>7} {'peak MiB':>9} {'ratio':>7}")
    for name, values in samples.items():
        wall = statistics.median(w for w, _ in values)
        rss = statistics.median(r for _, r in values)
        was = figure(name, wall / base_wall)
        print(f"{name:<66} {wall:>8.2f} {wall / base_wall:>6.2f}x {rss:>9.0f} {rss / base_rss:>6.2f}x{was}")
    if args.releases:
        releases_bench(max(1, args.rounds // 2))
    if args.report:
        report_bench(args.rounds)
    if args.suggest:
        suggest_bench(args.rounds)
    if args.page_sizes:
        page_sizes()
    if args.engines:
        engines_bench(args.rounds)
    if args.ci_step:
        ci_step()
    if args.refetch:
        refetch_bench(args.rounds)
    if args.cold:
        cold_bench()
    if args.search_start:
        search_start_bench()
    if args.many_callers:
        many_callers_bench(args.rounds)
    LAST_RUN.parent.mkdir(parents=True, exist_ok=True)
    LAST_RUN.write_text(json.dumps({**PREVIOUS, **FIGURES}, indent=1))


if __name__ == "__main__":
    main()
