"""hprobe under hostile input, faults and concurrency, run as a user would: the
installed `hprobe` in a subprocess, in a scratch directory of its own.

Every case asserts its exit code and, for errors, one stderr line naming the
problem; and for every case: no traceback, no hang beyond its bound, no file
written outside the cache and the outputs it names (the scratch directory and
TMPDIR are compared before and after), and no code from a --repo tree run (each
hostile tree's modules would create a marker file if executed).

Wheels, trees, tables and repos are made here. Network faults use servers on
127.0.0.1. The concurrency case fetches one real release.
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys
import threading
import time
import unicodedata
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import IO

import pytest

from .conftest import SESSION_CACHE, V4_PRO_TABLE, tmpfs
from .engine_wheels import pip_download

HPROBE = Path(sys.executable).with_name("hprobe")
RAN = "RAN"  # marker a hostile repo's code would create if it were executed
PLANT = f"open(__import__('os').path.join(__import__('os').environ['HPROBE_TEST_ARENA'], {RAN!r}), 'w').close()\n"

TABLE = V4_PRO_TABLE  # DeepSeek-V4-Pro, TP 1..16, one dsv4-sparse-mla backend on SM100
MAPPING = """
[[model]]
name = "M"
num_q_heads = 128
tp = [1, 2, 4, 8, 16]

[[class]]
name = "Rule"
kernel = "dsv4-sparse-mla"
sm = [100]
"""


@dataclass
class Case:
    id: str
    args: list[str]  # "{A}" stands for the scratch directory
    code: int
    needle: str  # in the one stderr line for an error; in stdout otherwise
    setup: Callable[[Path], None] | None = None
    env: dict[str, str] = field(default_factory=dict)
    bound_s: float = 30.0  # a generous ceiling: a hang is what it catches
    outputs: tuple[str, ...] = ()  # paths (relative to the scratch dir) the case may write
    after: Callable[[Path], None] | None = None  # further checks once it ran


def _write(rel: str, text: str | bytes) -> Callable[[Path], None]:
    def setup(arena: Path) -> None:
        path = arena / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())

    return setup


def _all(*steps: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(arena: Path) -> None:
        for step in steps:
            step(arena)

    return setup


def _fifo(rel: str) -> Callable[[Path], None]:
    def setup(arena: Path) -> None:
        (arena / rel).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(arena / rel)

    return setup


def _symlink(rel: str, target: str) -> Callable[[Path], None]:
    def setup(arena: Path) -> None:
        (arena / rel).symlink_to(arena / target)

    return setup


def _rule(body: str, extra: str = "") -> Callable[[Path], None]:
    """A repo whose padding rule has `body`; every module of it plants the marker."""
    source = (
        PLANT
        + extra
        + "class Rule:\n    @classmethod\n    def get_padded_num_q_heads(cls, n):\n"
        + "".join(f"        {line}\n" for line in body.splitlines())
    )
    return _all(_write("repo/rules.py", source), _write("repo/__init__.py", PLANT))


def _wheel(rel: str, members: dict[str, bytes], symlink: str | None = None) -> Callable[[Path], None]:
    def setup(arena: Path) -> None:
        path = arena / rel
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in members.items():
                zf.writestr(name, data)
            if symlink:
                info = zipfile.ZipInfo(symlink)
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
                zf.writestr(info, "/etc/passwd")

    return setup


def _bomb(arena: Path) -> None:
    with zipfile.ZipFile(arena / "bomb.whl", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("flashinfer/__init__.py", "")
        with zf.open("flashinfer/zeros.bin", "w", force_zip64=True) as fh:
            block = bytes(1 << 20)
            for _ in range(160):
                fh.write(block)


def _truncated_wheel(arena: Path) -> None:
    _wheel("w.whl", {"flashinfer/__init__.py": b"x = 1\n" * 1000})(arena)
    whole = (arena / "w.whl").read_bytes()
    (arena / "w.whl").write_bytes(whole[: len(whole) // 2])


def _deep_expression(terms: int) -> Callable[[Path], None]:
    return _rule("return " + " + ".join(["n"] * terms))  # one BinOp level per term


def _deep_parentheses(arena: Path) -> None:
    _rule("return " + "(" * 2000 + "n" + ")" * 2000)(arena)  # beyond Python's own parser


def _class_chain(arena: Path) -> None:
    lines = [PLANT, "class C0:\n    @classmethod\n    def get_padded_num_q_heads(cls, n):\n        return n\n"]
    lines += [f"class C{i}(C{i - 1}):\n    pass\n" for i in range(1, 3000)]
    _write("repo/chain.py", "".join(lines))(arena)


def _many_files(arena: Path) -> None:
    base = arena / "big" / "pkg"
    base.mkdir(parents=True)
    for i in range(20_001):
        (base / f"m{i}.py").write_bytes(b"")


def _settings_repo(arena: Path) -> None:
    """A rule that pads to an integer setting, beside a float one."""
    environ = (
        "class EnvInt:\n    def __init__(self, default):\n        self.default = default\n\nclass EnvFloat(EnvInt):\n  "
        "  pass\n\nclass Envs:\n    PAD = EnvInt(64)\n    SCALE = EnvFloat(1.0)\n\nenvs = Envs()\n"
    )
    rules = (
        "from .environ import envs\n\nclass Rule:\n    def get_padded_num_q_heads(self):\n        return "
        "max(self.n_local, envs.PAD.get())\n"
    )
    _write("srepo/__init__.py", PLANT)(arena)
    _write("srepo/environ.py", PLANT + environ)(arena)
    _write("srepo/rules.py", PLANT + rules)(arena)
    _write(
        "sm.toml",
        '[mapping]\nmethod = "get_padded_num_q_heads"\n\n[instance]\nn_local = "n"\n\n[settings]\nmodule = '
        '"environ"\nobject = "envs"\naccessor = "get"\n' + MAPPING,
    )(arena)


def _renamed_fake_release(arena: Path) -> None:
    """The 0.0.1 fake release under a 0.6.14 wheel's file name."""
    _fake_release(arena).rename(arena / "flashinfer_python-0.6.14-py3-none-any.whl")


NO_RULE = _all(_write("repo/__init__.py", PLANT), _write("repo/rules.py", PLANT + "X = 1\n"))

CASES: list[Case] = [
    # -- padding tables -------------------------------------------------------------
    Case("table-dev-zero", ["check", "--table", "/dev/zero"], 2, "not a regular file"),
    Case("table-fifo", ["check", "--table", "{A}/t.toml"], 2, "not a regular file", _fifo("t.toml")),
    Case("table-directory", ["check", "--table", "{A}"], 2, "is a directory"),
    Case("table-missing", ["check", "--table", "{A}/nope.toml"], 2, "no such table file"),
    Case(
        "table-too-large",
        ["check", "--table", "{A}/t.toml"],
        2,
        "larger than 16 MiB",
        _write("t.toml", "# x\n" * (5 << 20)),
    ),
    Case(
        "table-not-utf8", ["check", "--table", "{A}/t.toml"], 2, "not UTF-8", _write("t.toml", b"name = '\xff\xfe'\n")
    ),
    Case(
        "table-nul-byte",
        ["check", "--table", "{A}/t.toml"],
        2,
        "malformed TOML",
        _write("t.toml", b'[table]\nname = "a\x00"\n'),
    ),
    Case(
        "table-deep-arrays",
        ["check", "--table", "{A}/t.toml"],
        2,
        "t.toml",
        _write("t.toml", "x = " + "[" * 5000 + "]" * 5000 + "\n"),
    ),
    Case(
        "table-typo-name",
        ["check", "--table", "{A}/t.toml"],
        2,
        "unknown key 'nmae'",
        _write(
            "t.toml",
            TABLE.format(rule="pad_to = [64, 128]").replace(
                'name = "DeepSeek-V4-Pro"', 'nmae = "x"\nname = "DeepSeek-V4-Pro"'
            ),
        ),
    ),
    Case(
        "table-typo-tp",
        ["check", "--table", "{A}/t.toml"],
        2,
        "unknown key 'tpp'",
        _write("t.toml", TABLE.format(rule="pad_to = [64, 128]").replace("tp = [", "tpp = [")),
    ),
    Case(
        "table-unknown-top",
        ["check", "--table", "{A}/t.toml"],
        2,
        "unknown top-level key",
        _write("t.toml", "extra = 1\n" + TABLE.format(rule="no_padding = true")),
    ),
    Case(
        "table-max-heads-beside-pad-to",
        ["check", "--table", "{A}/t.toml"],
        2,
        "max_heads goes with pad_multiple",
        _write("t.toml", TABLE.format(rule="pad_to = [64, 128]\nmax_heads = 128")),
    ),
    Case(
        "table-huge-heads",
        ["check", "--table", "{A}/t.toml"],
        2,
        "above 4096",
        _write(
            "t.toml",
            TABLE.format(rule="no_padding = true")
            .replace("num_q_heads = 128", "num_q_heads = 4611686018427387904")
            .replace("tp = [1, 2, 4, 8, 16]", "tp = [1]"),
        ),
    ),
    Case(
        "table-huge-pad-to",
        ["check", "--table", "{A}/t.toml"],
        2,
        "above 4096",
        _write("t.toml", TABLE.format(rule="pad_to = [8, 1000000000000]")),
    ),
    Case(
        "table-huge-pad-map-key",
        ["check", "--table", "{A}/t.toml"],
        2,
        "above 4096",
        _write("t.toml", TABLE.format(rule='pad_map = { "99999999999" = 100000000000 }')),
    ),
    Case(
        "table-tp-zero",
        ["check", "--table", "{A}/t.toml"],
        2,
        "tp must be",
        _write("t.toml", TABLE.format(rule="no_padding = true").replace("tp = [1, 2, 4, 8, 16]", "tp = [0]")),
    ),
    Case(
        "table-unknown-axis",
        ["check", "--table", "{A}/t.toml"],
        2,
        "no axis 'flavour'",
        _write("t.toml", TABLE.format(rule='no_padding = true\nflavour = "x"')),
    ),
    # -- command-line values -----------------------------------------------------------
    Case("heads-huge-check", ["check", "--heads", "300000000"], 2, "above 4096"),
    Case("heads-zero-check", ["check", "--heads", "0"], 2, "must be positive"),
    Case("heads-huge-range-matrix", ["matrix", "--heads", "1-10000000000"], 2, "above 4096"),
    Case("heads-backwards-matrix", ["matrix", "--heads", "9-1"], 2, "runs backwards"),
    Case("heads-garbage-matrix", ["matrix", "--heads", "a-b"], 2, "expected counts"),
    Case(
        "heads-huge-bisect",
        ["bisect", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "1000000000"],
        2,
        "from 1 to 4096",
    ),
    Case("tp-zero", ["check", "--tp", "0"], 2, "--tp"),
    Case("tp-huge", ["check", "--tp", "100000000000"], 2, "up to 4096"),
    Case("flashinfer-empty", ["check", "--flashinfer", ""], 2, "--flashinfer: empty"),
    Case("flashinfer-empty-matrix", ["matrix", "--flashinfer", " , "], 2, "--flashinfer: empty"),
    Case("flashinfer-garbage", ["check", "--flashinfer", "not-a-release"], 2, "not a release number"),
    Case("pin-empty", ["check", "--pin", ""], 2, "empty"),
    Case("pin-other-package", ["check", "--pin", "torch>=2"], 2, "names torch, not flashinfer-python"),
    Case("pin-garbage", ["check", "--pin", "flashinfer-python>>=(("], 2, "not a requirement"),
    Case("pin-and-flashinfer", ["check", "--pin", ">=0.6", "--flashinfer", "0.6.14"], 2, "give one"),
    Case("sm-no-gpu", ["matrix", "--sm", "999"], 2, "999"),
    Case("format-unknown", ["check", "--format", "yaml"], 2, "--format 'yaml'"),
    Case("kernel-unknown", ["matrix", "-k", "nope"], 2, "nope"),
    Case("axis-unknown", ["matrix", "--flavour", "x"], 2, "no such option: --flavour"),
    Case(
        "worker-timeout-bad",
        ["matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "8", "--flashinfer", "{A}/fi"],
        2,
        "HPROBE_WORKER_TIMEOUT",
        _write("fi/flashinfer/__init__.py", ""),
        {"HPROBE_WORKER_TIMEOUT": "-1"},
    ),
    Case(
        "pad-fn-timeout-bad",
        ["check", "--pad-fn", "{A}/r.py:pad", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "128"],
        2,
        "HPROBE_PAD_FN_TIMEOUT",
        _write("r.py", "def pad(n):\n    return n\n"),
        {"HPROBE_PAD_FN_TIMEOUT": "0"},
    ),
    Case(
        "unpack-limit-bad",
        ["matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "8", "--flashinfer", "{A}/w.whl"],
        2,
        "HPROBE_MAX_UNPACK_MB",
        _wheel("w.whl", {"flashinfer/__init__.py": b""}),
        {"HPROBE_MAX_UNPACK_MB": "lots"},
    ),
    # -- output paths ------------------------------------------------------------------
    Case(
        "junit-missing-dir",
        ["check", "--table", "{A}/t.toml", "--junit", "{A}/no/such/dir/r.xml"],
        2,
        "does not exist",
        _write("t.toml", TABLE.format(rule="no_padding = true")),
    ),
    Case(
        "junit-directory",
        ["check", "--table", "{A}/t.toml", "--junit", "{A}"],
        2,
        "not a regular file",
        _write("t.toml", TABLE.format(rule="no_padding = true")),
    ),
    Case(
        "junit-symlink",
        ["check", "--table", "{A}/t.toml", "--junit", "{A}/link.xml"],
        2,
        "is a symlink",
        _all(
            _write("t.toml", TABLE.format(rule="no_padding = true")),
            _write("target.xml", "keep"),
            _symlink("link.xml", "target.xml"),
        ),
    ),
    Case(
        "junit-fifo",
        ["check", "--table", "{A}/t.toml", "--junit", "{A}/r.xml"],
        2,
        "not a regular file",
        _all(_write("t.toml", TABLE.format(rule="no_padding = true")), _fifo("r.xml")),
    ),
    Case(
        "junit-dev-null",
        ["check", "--table", "{A}/t.toml", "--junit", "/dev/null"],
        0,
        "5 ok",
        _write("t.toml", TABLE.format(rule="pad_to = [8, 16, 32, 64, 128]")),
        bound_s=120,
        after=lambda a: _dev_null_intact(a),
    ),
    Case(
        "junit-written",
        ["check", "--table", "{A}/t.toml", "--junit", "{A}/r.xml"],
        0,
        "5 ok",
        _write("t.toml", TABLE.format(rule="pad_to = [8, 16, 32, 64, 128]")),
        bound_s=120,
        outputs=("r.xml",),
        after=lambda a: _junit_parses(a),
    ),
    Case(
        "extract-output-missing-dir",
        ["table", "extract", "--repo", "{A}/repo", "-o", "{A}/missing/x.toml"],
        2,
        "does not exist",
        _rule("return n"),
    ),
    Case(
        "extract-output-exists",
        ["table", "extract", "--repo", "{A}/repo", "-o", "{A}/x.toml"],
        2,
        "pass --force",
        _all(_rule("return n"), _write("x.toml", "mine")),
    ),
    Case(
        "extract-output-symlink",
        ["table", "extract", "--repo", "{A}/repo", "-o", "{A}/x.toml", "--force"],
        2,
        "is a symlink",
        _all(_rule("return n"), _write("mine.toml", "mine"), _symlink("x.toml", "mine.toml")),
    ),
    Case(
        "suggest-output-missing-dir",
        ["suggest", "--table", "{A}/t.toml", "-o", "{A}/missing/x.toml"],
        2,
        "does not exist",
        _write("t.toml", TABLE.format(rule="no_padding = true")),
    ),
    Case(
        "suggest-output-exists",
        ["suggest", "--table", "{A}/t.toml", "-o", "{A}/t.toml"],
        2,
        "pass --force",
        _write("t.toml", TABLE.format(rule="no_padding = true")),
    ),
    Case("suggest-output-needs-one-table", ["suggest", "-o", "{A}/x.toml"], 2, "--output writes one table"),
    Case(
        "extract-output-written",
        ["table", "extract", "--repo", "{A}/repo", "-o", "{A}/x.toml"],
        0,
        "",
        _rule("return n"),
        outputs=("x.toml",),
    ),
    # -- baselines ---------------------------------------------------------------------
    Case(
        "baseline-not-utf8",
        ["check", "--table", "{A}/t.toml", "--baseline", "{A}/b.json"],
        2,
        "not UTF-8",
        _all(_write("t.toml", TABLE.format(rule="no_padding = true")), _write("b.json", b"\xff\xfe{}")),
    ),
    Case(
        "baseline-dev-zero",
        ["check", "--table", "{A}/t.toml", "--baseline", "/dev/zero"],
        2,
        "not a regular file",
        _write("t.toml", TABLE.format(rule="no_padding = true")),
    ),
    Case(
        "baseline-deep-json",
        ["check", "--table", "{A}/t.toml", "--baseline", "{A}/b.json"],
        2,
        "--baseline",
        _all(_write("t.toml", TABLE.format(rule="no_padding = true")), _write("b.json", "[" * 200000 + "]" * 200000)),
    ),
    # -- hostile --repo trees (never imported: the marker must not appear) --------------
    Case("repo-dev-zero", ["check", "--repo", "/dev/zero"], 2, "neither a directory nor a .py file"),
    Case(
        "repo-fifo-requirements",
        ["check", "--repo", "{A}/repo"],
        2,
        "requirements.txt: not a regular file",
        _all(_rule("return n"), _fifo("repo/requirements.txt")),
    ),
    Case(
        "repo-fifo-metadata",
        ["check", "--repo", "{A}/repo"],
        2,
        "METADATA: not a regular file",
        _all(_rule("return n"), _fifo("repo/x-1.0.dist-info/METADATA")),
    ),
    Case(
        "repo-malformed-pyproject",
        ["check", "--repo", "{A}/repo"],
        2,
        "pyproject.toml:1: malformed TOML",
        _all(_rule("return n"), _write("repo/pyproject.toml", "[project\n")),
    ),
    Case(
        "repo-pyproject-wrong-types",
        ["check", "--repo", "{A}/repo"],
        2,
        "pyproject.toml",
        _all(_rule("return n"), _write("repo/pyproject.toml", "[project]\ndependencies = 'flashinfer'\n")),
    ),
    Case(
        "repo-mapping-malformed",
        ["check", "--repo", "{A}/repo", "--mapping", "{A}/m.toml"],
        2,
        "m.toml:1: malformed TOML",
        _all(_rule("return n"), _write("m.toml", "[[class]\n")),
    ),
    Case(
        "repo-mapping-unknown-key",
        ["check", "--repo", "{A}/repo", "--mapping", "{A}/m.toml"],
        2,
        "unknown top-level key 'clas'",
        _all(_rule("return n"), _write("m.toml", "[[clas]]\nname = 'x'\n")),
    ),
    Case(
        "repo-mapping-bad-value",
        ["check", "--repo", "{A}/repo", "--mapping", "{A}/m.toml"],
        2,
        "class Rule",
        _all(_rule("return n"), _write("m.toml", MAPPING + "backend = { a = 1 }\n")),
    ),
    Case(
        "repo-mapping-fifo",
        ["check", "--repo", "{A}/repo", "--mapping", "{A}/m.toml"],
        2,
        "not a regular file",
        _all(_rule("return n"), _fifo("m.toml")),
    ),
    Case(
        "repo-syntax-error",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        3,
        "rules.py:2: not parsed",
        _write("repo/rules.py", PLANT + "class Rule(:\n    def get_padded_num_q_heads(cls, n): return n\n"),
    ),
    Case(
        "repo-nul-byte",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        3,
        "rules.py: not parsed",
        _write(
            "repo/rules.py", (PLANT + "class Rule:\n    def get_padded_num_q_heads(cls, n): return n\x00\n").encode()
        ),
    ),
    Case(
        "repo-no-rule",
        ["table", "extract", "--repo", "{A}/repo", "-o", "{A}/t.toml"],
        3,
        "no class defines or inherits `get_padded_num_q_heads` (vllm.toml), `_kernel_num_heads` (sglang.toml, "
        "sglang-0.5.18.toml) and nothing calls a FlashInfer entry hprobe probes (2 Python files read); give --mapping",
        NO_RULE,
    ),
    Case("repo-no-rule-check", ["check", "--repo", "{A}/repo"], 3, "no class defines or inherits", NO_RULE),
    Case(
        "repo-deep-expression",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        3,
        "nested deeper than 120",
        _deep_expression(1500),
    ),
    Case(
        "repo-deeper-than-ast",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        3,
        "rules.py: not parsed: nested too deeply",
        _deep_expression(5000),
    ),
    Case(
        "repo-deep-parentheses",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        3,
        "rules.py:5: not parsed: too many nested parentheses",
        _deep_parentheses,
    ),
    # Round four: bounds checked before the work, however the size hides.
    Case(
        "repo-fstring-doubling",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        "an f-string of more than",
        _rule('s = "x" * 1000\nfor i in range(20):\n    s = f"{s}{s}"\nreturn n'),
    ),
    Case(
        "repo-bytes-repeat",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        "a repetition to more than",
        _rule('b = b"x" * 10**9\nreturn n'),
    ),
    Case(
        "repo-nested-tuple-str",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        "more than 100000 items",
        _rule("t = ((0,) * 12000,) * 12000\nreturn n + len(str(t))"),
    ),
    Case(
        "repo-nested-tuple-fstring",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        "more than 100000 items",
        _rule('t = ((0,) * 12000,) * 12000\nreturn n + len(f"{t}")'),
    ),
    Case(
        "repo-percent-width",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        "a %-format width or precision of 200000000",
        _rule('return n + len("%0200000000d" % n)'),
    ),
    Case(
        "repo-nested-comprehension",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        "more than 100000",
        _rule("return n + len([[i for i in range(100000)] for j in range(100000)])"),
    ),
    Case(
        "repo-tuple-chain",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        "a value of more than 100000 items",
        _rule("t = (0,)\nfor i in range(200):\n    t = (t, t)\nreturn n"),
    ),
    Case(
        "repo-max-identical",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        "more than 100000",
        _rule("t = (tuple(range(60000)),)\nu = t + t\nreturn n if max(u) else n"),
    ),
    Case(
        "repo-eq-identical",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        "more than 100000",
        _rule("t = (tuple(range(90000)),)\nreturn n if t == (tuple(range(90000)),) else n"),
    ),
    Case(
        "repo-huge-list-file",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        3,
        "at most 1 MiB",
        _write(
            "repo/rules.py",
            PLANT
            + "HEADS = ["
            + "1, " * 2_200_000
            + "]\nclass Rule:\n    @classmethod\n    def get_padded_num_q_heads(cls, n):\n        return n\n",
        ),
    ),
    Case(
        "repo-deep-binop-under-bound",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        '"rule": "no padding"',
        _rule("return " + " + ".join(["n"] + ["0"] * 110)),
    ),
    Case(
        "repo-deep-raise",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        3,
        "nested deeper than 120",
        _rule("raise ValueError(" + "-" * 450 + "n)"),
    ),
    Case(
        "repo-deep-bases",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        3,
        "nested deeper than 120",
        _write(
            "repo/rules.py",
            PLANT
            + "class Rule("
            + "a." * 450
            + "b):\n    @classmethod\n    def get_padded_num_q_heads(cls, n):\n        return n\n",
        ),
    ),
    Case(
        "repo-deep-decorator",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        3,
        "nested deeper than 120",
        _write(
            "repo/rules.py",
            PLANT
            + "class Rule:\n    @x"
            + "(" * 1
            + "1"
            + " + 1" * 450
            + ")\n    def get_padded_num_q_heads(cls, n):\n        return n\n",
        ),
    ),
    Case(
        "repo-deep-unary",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        3,
        "rules.py: not parsed: nested too deeply",
        _rule("return " + "-" * 100_000 + "n"),
    ),
    Case(
        "repo-deep-setup-py",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        '"status"',
        _all(_rule("return n"), _write("repo/setup.py", "setup(install_requires=[" + "a." * 100_000 + "b])\n")),
    ),
    Case(
        "mapping-deep-platform",
        ["table", "extract", "--repo", "{A}/repo", "--mapping", "{A}/m.toml"],
        2,
        "nested deeper than 120",
        _all(_rule("return n"), _write("m.toml", MAPPING + '[[platform]]\nexpr = "' + "-" * 450 + 'x"\nsm = [120]\n')),
    ),
    Case(
        "repo-pow-assign",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        "a power of about",
        _rule("x = n\nx **= 10**9\nreturn x"),
    ),
    Case(
        "repo-all-range",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        "a range of",
        _rule("return n if all(range(1, 10**12)) else 0"),
    ),
    Case(
        "repo-min-range",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        "a range of",
        _rule("return n + min(range(10**12))"),
    ),
    Case(
        "repo-list-range",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        "a range of",
        _rule("return n + len(list(range(10**12)))"),
    ),
    Case(
        "repo-format-width",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        "format width",
        _rule('return len(f"{n:>2000000000}")'),
    ),
    Case(
        "repo-repeat-in",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        "a repetition to",
        _rule("return n if 'x' in 'a' * 10**9 else n"),
    ),
    Case(
        "repo-repeat-memory",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        "a repetition to",
        _rule("s = 'a' * 10**10\nreturn n"),
    ),
    Case(
        "repo-shift-assign",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        "a shift to about",
        _rule("x = 1\nx <<= 10**11\nreturn n"),
    ),
    Case(
        "repo-huge-fstring-int",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        "a power of about",
        _rule('return len(f"{10**4300}") + n'),
    ),
    Case(
        "repo-self-constant",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        "too deep",
        _rule("return A", extra="A = A\n"),
    ),
    Case(
        "repo-class-chain",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        '"class": "C0"',
        _class_chain,
        bound_s=60,
    ),
    Case(
        "repo-rule-raises-index",
        ["check", "--repo", "{A}/repo", "--mapping", "{A}/m.toml", "--json"],
        0,
        "table-refuses",
        _all(_rule("return (8, 16, 32, 64, 128)[n]"), _write("m.toml", MAPPING)),
        bound_s=120,
    ),
    Case(
        "repo-rule-raises-type",
        ["table", "extract", "--repo", "{A}/repo", "--json"],
        0,
        '"classes"',
        _rule('return 64 if n < "64" else n'),
    ),
    Case(
        "repo-probe-package-in-cwd",
        ["check", "--repo", "{A}", "--mapping", "{A}/m.toml", "--flashinfer", "{A}/fi", "--sm", "100"],
        3,
        "",
        _all(
            _rule("return n"),
            _write("m.toml", MAPPING),
            _write("probe/__init__.py", PLANT),
            _write("probe/worker.py", PLANT),
            _write("hprobe/__init__.py", PLANT),
            _write("sitecustomize.py", PLANT),
            _write("fi/flashinfer/__init__.py", "raise ImportError('not a real release')\n"),
        ),
        bound_s=120,
    ),
    # -- --pad-fn (an explicit opt-in to running the user's code, contained) ------------
    Case(
        "pad-fn-sys-exit-0",
        ["check", "--pad-fn", "{A}/r.py:pad", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "128"],
        2,
        "the process ended while called for 8 heads (exit code 0)",
        _write("r.py", "import sys\ndef pad(n):\n    sys.exit(0)\n"),
    ),
    Case(
        "pad-fn-os-exit-0",
        ["check", "--pad-fn", "{A}/r.py:pad", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "128"],
        2,
        "exit code 0",
        _write("r.py", "import os\ndef pad(n):\n    os._exit(0)\n"),
    ),
    Case(
        "pad-fn-sys-exit-msg",
        ["check", "--pad-fn", "{A}/r.py:pad", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "128"],
        2,
        "exit code 1",
        _write("r.py", "import sys\ndef pad(n):\n    sys.exit('msg')\n"),
    ),
    Case(
        "pad-fn-exits-on-import",
        ["check", "--pad-fn", "{A}/r.py:pad", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "128"],
        2,
        "importing",
        _write("r.py", "import sys\nsys.exit(0)\n"),
    ),
    Case(
        "pad-fn-hangs",
        ["check", "--pad-fn", "{A}/r.py:pad", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "128"],
        2,
        "did not return within 3 s",
        _write("r.py", "def pad(n):\n    while True:\n        pass\n"),
        {"HPROBE_PAD_FN_TIMEOUT": "3"},
    ),
    Case(
        "pad-fn-wrong-signature",
        ["check", "--pad-fn", "{A}/r.py:pad", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "128"],
        2,
        "cannot be called with one head count",
        _write("r.py", "def pad(a, b):\n    return a\n"),
    ),
    Case(
        "pad-fn-returns-text",
        ["check", "--pad-fn", "{A}/r.py:pad", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "128"],
        2,
        "returned 'x' for 8",
        _write("r.py", "def pad(n):\n    return 'x'\n"),
    ),
    Case(
        "pad-fn-returns-fewer",
        ["check", "--pad-fn", "{A}/r.py:pad", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "128"],
        2,
        "returned 7 for 8",
        _write("r.py", "def pad(n):\n    return n - 1\n"),
    ),
    Case(
        "pad-fn-returns-huge",
        ["check", "--pad-fn", "{A}/r.py:pad", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "128"],
        2,
        "above 4096",
        _write("r.py", "def pad(n):\n    return 10**9\n"),
    ),
    Case(
        "pad-fn-no-such-file",
        ["check", "--pad-fn", "{A}/none.py:pad", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "128"],
        2,
        "no such file",
    ),
    Case(
        "pad-fn-no-such-module",
        ["check", "--pad-fn", "hprobe_no_such_module:pad", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "128"],
        2,
        "ModuleNotFoundError",
    ),
    Case(
        "pad-fn-bad-spec",
        ["check", "--pad-fn", "nocolon", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "128"],
        2,
        "expected MODULE:QUALNAME",
    ),
    Case(
        "pad-fn-raises-always",
        ["check", "--pad-fn", "{A}/r.py:pad", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "128", "--json"],
        0,
        "table-refuses",
        _write("r.py", "def pad(n):\n    raise ValueError('no')\n"),
        bound_s=120,
    ),
    Case(
        "pad-fn-prints-json-intact",
        ["check", "--pad-fn", "{A}/r.py:pad", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "128", "--json"],
        0,
        '"schema": "hprobe.check/2"',
        _write("r.py", "def pad(n):\n    print('noise', n)\n    return 128\n"),
        bound_s=120,
    ),
    # -- wheels and trees (made here) --------------------------------------------------
    Case(
        "wheel-not-a-zip",
        ["matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "8", "--flashinfer", "{A}/w.whl"],
        2,
        "not a valid wheel",
        _write("w.whl", b"not a zip at all"),
    ),
    Case(
        "wheel-truncated",
        ["matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "8", "--flashinfer", "{A}/w.whl"],
        2,
        "not a valid wheel",
        _truncated_wheel,
    ),
    Case(
        "wheel-traversal",
        ["matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "8", "--flashinfer", "{A}/w.whl"],
        2,
        "outside the tree",
        _wheel("w.whl", {"flashinfer/__init__.py": b"", "../../escaped.py": b"x"}),
    ),
    Case(
        "wheel-absolute",
        ["matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "8", "--flashinfer", "{A}/w.whl"],
        2,
        "outside the tree",
        _wheel("w.whl", {"flashinfer/__init__.py": b"", "/tmp/hprobe-escaped.py": b"x"}),
    ),
    Case(
        "wheel-symlink",
        ["matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "8", "--flashinfer", "{A}/w.whl"],
        2,
        "symlink member",
        _wheel("w.whl", {"flashinfer/__init__.py": b""}, symlink="flashinfer/link"),
    ),
    Case(
        "wheel-bomb",
        ["matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "8", "--flashinfer", "{A}/bomb.whl"],
        2,
        "would unpack to 160 MiB",
        _bomb,
    ),
    Case(
        "wheel-no-flashinfer",
        ["matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "8", "--flashinfer", "{A}/w.whl"],
        2,
        "holds no flashinfer package",
        _wheel("w.whl", {"other/__init__.py": b""}),
    ),
    Case(
        "wheel-hanging-import",
        ["check", "--table", "{A}/t.toml", "--flashinfer", "{A}/w.whl"],
        3,
        "did not finish within 3 s",
        _all(
            _write("t.toml", TABLE.format(rule="no_padding = true")),
            _wheel("w.whl", {"flashinfer/__init__.py": b"import time\ntime.sleep(600)\n"}),
        ),
        {"HPROBE_WORKER_TIMEOUT": "3"},
        bound_s=60,
    ),
    Case(
        "wheel-exits-on-import",
        ["check", "--table", "{A}/t.toml", "--flashinfer", "{A}/w.whl"],
        3,
        "could not be probed here",
        _all(
            _write("t.toml", TABLE.format(rule="no_padding = true")),
            _wheel("w.whl", {"flashinfer/__init__.py": b"import os\nos._exit(0)\n"}),
        ),
    ),
    Case(
        "directory-is-a-fifo-package",
        ["matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "8", "--flashinfer", "{A}/fi"],
        2,
        "no flashinfer package",
        _fifo("fi/flashinfer/__init__.py"),
    ),
    # -- the cache -------------------------------------------------------------------------
    Case(
        "cache-dir-is-a-file",
        ["check", "--table", "{A}/t.toml", "--flashinfer", "{A}/w.whl"],
        2,
        "HPROBE_CACHE_DIR",
        _all(
            _write("t.toml", TABLE.format(rule="no_padding = true")),
            _wheel("w.whl", {"flashinfer/__init__.py": b""}),
            _write("cachefile", "x"),
        ),
        {"HPROBE_CACHE_DIR": "{A}/cachefile"},
    ),
    Case(
        "cache-dir-empty-setting",
        ["check", "--table", "{A}/t.toml", "--flashinfer", "{A}/w.whl"],
        2,
        "HPROBE_CACHE_DIR is set but empty",
        _all(
            _write("t.toml", TABLE.format(rule="no_padding = true")), _wheel("w.whl", {"flashinfer/__init__.py": b""})
        ),
        {"HPROBE_CACHE_DIR": ""},
    ),
    Case(
        "cache-unwritable",
        ["check", "--table", "{A}/t.toml", "--flashinfer", "{A}/w.whl"],
        1,
        "cannot be written",
        _all(
            _write("t.toml", TABLE.format(rule="no_padding = true")), _wheel("w.whl", {"flashinfer/__init__.py": b""})
        ),
        {"HPROBE_CACHE_DIR": "/proc/hprobe-cache"},
        bound_s=60,
    ),
    # -- round three: failures the user or the machine causes, each one line ----------------
    Case(
        "repo-too-many-files",
        ["check", "--repo", "{A}/big"],
        2,
        "more than 20,000 Python files",
        _many_files,
        bound_s=120,
    ),
    Case("repo-proc", ["check", "--repo", "/proc"], 3, "0 Python files read"),
    Case("table-through-a-file", ["check", "--table", "{A}/f/t.toml"], 2, "Not a directory", _write("f", "x")),
    Case(
        "table-symlink-loop",
        ["check", "--table", "{A}/loop"],
        2,
        "Too many levels of symbolic links",
        _symlink("loop", "loop"),
    ),
    Case("output-empty-report", ["report", "--releases", "0.6.14", "-o", ""], 2, "empty path"),
    Case("output-empty-junit", ["check", "--junit", ""], 2, "empty path"),
    Case("output-empty-repo", ["check", "--repo", ""], 2, "empty path"),
    Case(
        "report-dangling-symlink",
        ["report", "--releases", "0.6.14", "-o", "{A}/site"],
        2,
        "is a symlink",
        _symlink("site", "nowhere"),
        bound_s=15,
    ),
    Case(
        "report-under-proc",
        ["report", "--releases", "0.6.14", "-o", "/proc/hprobe-site"],
        2,
        "cannot create it",
        bound_s=15,
    ),
    Case(
        "report-existing-files",
        ["report", "--releases", "0.6.14", "-o", "{A}/site"],
        2,
        "pass --force",
        _write("site/matrix.md", "mine"),
        bound_s=15,
    ),
    Case(
        "rule-result-above-bound",
        ["check", "--repo", "{A}/repo", "--mapping", "{A}/m.toml"],
        3,
        "returns 100000000 for 8 heads, above 4096",
        _all(_rule("return 10**8 if n == 8 else max(n, 64)"), _write("m.toml", MAPPING)),
        bound_s=120,
    ),
    Case(
        "set-integer-too-large",
        ["check", "--repo", "{A}/srepo", "--mapping", "{A}/sm.toml", "--set", "PAD=" + "9" * 4000],
        2,
        "more than 4096",
        lambda a: _settings_repo(a),
    ),
    Case(
        "set-makes-rule-ask-100000",
        ["check", "--repo", "{A}/srepo", "--mapping", "{A}/sm.toml", "--set", "PAD=100000"],
        3,
        "returns 100000 for",
        lambda a: _settings_repo(a),
        bound_s=120,
    ),
    Case(
        "set-float-not-finite",
        ["check", "--repo", "{A}/srepo", "--mapping", "{A}/sm.toml", "--set", "SCALE=1e999"],
        2,
        "not a value of its type",
        lambda a: _settings_repo(a),
    ),
    Case(
        "wheel-name-and-metadata-differ",
        [
            "matrix",
            "-k",
            "dsv4-sparse-mla",
            "--sm",
            "100",
            "--heads",
            "8",
            "--flashinfer",
            "{A}/flashinfer_python-0.6.14-py3-none-any.whl",
        ],
        2,
        "file name says 0.6.14 but its METADATA says 0.0.1",
        lambda a: _renamed_fake_release(a),
    ),
    Case(
        "matrix-all-inconclusive",
        ["matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--heads", "8", "--flashinfer", "{A}/fi"],
        3,
        "inconclusive",
        _write("fi/flashinfer/__init__.py", "raise ImportError('not a real release')\n"),
        bound_s=120,
    ),
    Case(
        "columns-zero",
        ["check", "--table", "{A}/t.toml"],
        0,
        "5 ok",
        _write("t.toml", TABLE.format(rule="pad_to = [8, 16, 32, 64, 128]")),
        {"COLUMNS": "0"},
        bound_s=120,
    ),
    Case(
        "ascii-stdout",
        ["check", "--table", "{A}/t.toml", "--details"],
        0,
        "\\u2192",
        lambda a: _hostile_table(a),
        {"PYTHONIOENCODING": "ascii", "LC_ALL": "C"},
        bound_s=120,
    ),
]


def _snapshot(*roots: Path) -> dict[str, tuple]:
    seen = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if not (Path(dirpath) == root and d in ("cache", "tmp"))]
            for name in dirnames + filenames:
                path = Path(dirpath) / name
                info = path.lstat()
                seen[str(path)] = (stat.S_IFMT(info.st_mode), info.st_size, info.st_mtime_ns)
    return seen


def run_hprobe(
    args: list[str], arena: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, NO_COLOR="1", COLUMNS="200", HPROBE_TEST_ARENA=str(arena), TMPDIR=str(arena / "tmp"))
    full["HPROBE_CACHE_DIR"] = str(arena / "cache")  # each case its own cache, whatever the session's is
    full.update({k: v.replace("{A}", str(arena)) for k, v in (env or {}).items()})
    full["HPROBE_CACHE_DIR"] = full["HPROBE_CACHE_DIR"].replace("{A}", str(arena))
    return subprocess.run(
        [str(HPROBE), *[a.replace("{A}", str(arena)) for a in args]],
        cwd=arena,
        env=full,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
    )


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input(case: Case, tmp_path: Path):
    arena = tmp_path / "arena"
    (arena / "tmp").mkdir(parents=True)
    if case.setup:
        case.setup(arena)
    before = _snapshot(arena)
    start = time.monotonic()
    try:
        proc = run_hprobe(case.args, arena, case.env, timeout=case.bound_s)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung: no answer within {case.bound_s:g} s")
    elapsed = time.monotonic() - start
    both = proc.stdout + proc.stderr
    assert "Traceback" not in both, both[-2000:]
    assert proc.returncode == case.code, (proc.returncode, both[-2000:])
    if case.code == 2 or (case.code and not proc.stdout):
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("hprobe: error: "), proc.stderr
        assert case.needle in lines[0], lines[0]
        assert proc.stdout == "", "an input error prints no report"
    else:
        assert "internal error" not in both, both
        assert case.needle in proc.stdout + proc.stderr, both[-2000:]
    if "--json" in case.args and proc.stdout.strip().startswith("{"):
        doc = json.loads(proc.stdout)
        if "exit_code" in doc:
            assert doc["exit_code"] == proc.returncode
    assert not (arena / RAN).exists(), "code from the repo or working directory ran"
    after = _snapshot(arena)
    allowed = {str(arena / o) for o in case.outputs}
    changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)} - allowed
    assert not changed, f"wrote outside the cache and its outputs: {sorted(changed)}"
    assert not list((arena / "tmp").iterdir()), "temp files left behind"
    assert elapsed < case.bound_s
    if case.after:
        case.after(arena)


def _dev_null_intact(_arena: Path) -> None:
    # As root (common in CI containers) a rename over /dev/null would replace the device.
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def _junit_parses(arena: Path) -> None:
    import xml.etree.ElementTree as ET

    root = ET.parse(arena / "r.xml").getroot()
    assert root.get("tests") == "5" and root.get("failures") == "0"


# -- network faults: a refused and a trickling package index on 127.0.0.1 -------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_index_is_named(tmp_path):
    (tmp_path / "tmp").mkdir()
    env = {
        "PIP_INDEX_URL": f"http://127.0.0.1:{_free_port()}/simple",
        "PIP_RETRIES": "1",
        "PIP_TIMEOUT": "2",
        "PIP_NO_CACHE_DIR": "1",
        "PIP_FIND_LINKS": "",
    }
    proc = run_hprobe(["check", "--flashinfer", "0.6.99", "--sm", "100"], tmp_path, env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("hprobe: error: cannot fetch flashinfer-python==0.6.99") and "could not be reached" in line


def test_a_trickling_index_is_cut_off_at_the_pip_timeout(tmp_path):
    (tmp_path / "tmp").mkdir()
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    stop = threading.Event()

    def trickle() -> None:
        server.settimeout(0.5)
        clients = []
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000000\r\n\r\n")
                clients.append(conn)
            except TimeoutError:
                pass
            for conn in clients:
                try:
                    conn.sendall(b" ")
                except OSError:
                    pass
        for conn in clients:
            conn.close()

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        env = {
            "PIP_INDEX_URL": f"http://127.0.0.1:{port}/simple",
            "PIP_NO_CACHE_DIR": "1",
            "HPROBE_PIP_TIMEOUT": "4",
            "PIP_FIND_LINKS": "",
        }
        start = time.monotonic()
        proc = run_hprobe(["check", "--flashinfer", "0.6.99", "--sm", "100"], tmp_path, env, timeout=60)
        elapsed = time.monotonic() - start
    finally:
        stop.set()
        thread.join()
        server.close()
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert "pip did not finish within 4 s" in line and "reachable" in line
    assert elapsed < 30


# -- cache damage and concurrency --------------------------------------------------------------


def _fake_release(arena: Path) -> Path:
    """A wheel whose flashinfer has no kernels: every probe is `absent`, fast."""
    init = b"__version__ = '0.0.1'\n"
    record = f"flashinfer/__init__.py,,{len(init)}\nflashinfer_python-0.0.1.dist-info/RECORD,,\n"
    _wheel(
        "fake.whl",
        {
            "flashinfer/__init__.py": init,
            "flashinfer_python-0.0.1.dist-info/METADATA": (
                b"Metadata-Version: 2.1\nName: flashinfer-python\nVersion: 0.0.1\n"
            ),
            "flashinfer_python-0.0.1.dist-info/RECORD": record.encode(),
        },
    )(arena)
    return arena / "fake.whl"


def test_damaged_cache_entries_heal(tmp_path):
    arena = tmp_path
    (arena / "tmp").mkdir()
    _fake_release(arena)
    _write("t.toml", TABLE.format(rule="no_padding = true"))(arena)
    args = ["check", "--table", "{A}/t.toml", "--flashinfer", "{A}/fake.whl", "--json"]
    first = run_hprobe(args, arena)
    assert first.returncode == 1 and json.loads(first.stdout)["findings"][0]["verdict"] == "broken"  # absent kernel
    # A result entry that claims nothing, an emptied file in the tree, a stale unpack dir.
    [entry] = (arena / "cache" / "results").glob("*.json")
    doc = json.loads(entry.read_text())
    entry.write_text(json.dumps({**doc, "results": []}))
    [init] = (arena / "cache" / "trees").glob("*/flashinfer/__init__.py")
    init.write_text("")
    stale = arena / "cache" / "trees" / ".unpack-killed"
    stale.mkdir()
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    again = run_hprobe(args, arena)
    assert again.returncode == 1 and "Traceback" not in again.stderr, again.stderr
    assert json.loads(again.stdout)["findings"] == json.loads(first.stdout)["findings"]
    assert init.read_bytes() == b"__version__ = '0.0.1'\n"  # unpacked again
    assert not stale.exists()
    assert not list((arena / "tmp").iterdir()), "temp files left behind"


@pytest.mark.slow
def test_four_concurrent_runs_on_one_wheel_and_an_empty_cache(tmp_path):
    (tmp_path / "tmp").mkdir()
    wheels = tmp_path / "wheel"
    pip_download(wheels, "flashinfer-python==0.6.14", timeout=300)
    [wheel] = wheels.glob("*.whl")
    args = ["matrix", "-k", "dsv4-sparse-mla", "--sm", "100", "--flashinfer", str(wheel), "--json"]
    env = dict(os.environ, NO_COLOR="1", HPROBE_CACHE_DIR=str(tmp_path / "cache"), TMPDIR=str(tmp_path / "tmp"))
    procs = [
        subprocess.Popen(
            [str(HPROBE), *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [o[1] for o in outs]
    # One document, byte for byte, whichever run fetched: what a run added to
    # the cache is said on its stderr, by the run that unpacked the wheel only.
    assert all(o[0] == outs[0][0] for o in outs), [o[0][:300] for o in outs]
    assert "fetched into the cache" not in outs[0][0]
    added = [o[1] for o in outs if "fetched into the cache" in o[1]]
    assert len(added) <= 1
    accepted = {r["sm"]: r["accepted"] for r in json.loads(outs[0][0])["results"]}
    assert accepted == {100: [8, 16, 32, 64, 128]}
    trees = tmp_path / "cache" / "trees"
    assert [p.name for p in trees.iterdir() if not p.name.endswith(".lock")] == [_sha256(wheel)]
    assert not [p for p in (tmp_path / "cache" / "results").iterdir() if p.suffix != ".json"]
    assert not list((tmp_path / "tmp").iterdir())


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "signame, code, said",
    [
        ("SIGTERM", 143, "hprobe: terminated"),
        ("SIGHUP", 129, "hprobe: stopped by SIGHUP"),
        ("SIGQUIT", 131, "hprobe: stopped by SIGQUIT"),
        ("SIGINT", 130, "hprobe: interrupted"),
    ],
)
def test_every_ending_signal_leaves_no_worker_behind(tmp_path, signame, code, said):
    """A CI job cancelled (TERM), a terminal closed (HUP), Ctrl-\\ (QUIT) or Ctrl-C
    ends hprobe with 128+signal and takes the release worker, hanging in a
    flashinfer import, with it."""
    import signal

    (tmp_path / "tmp").mkdir()
    pid_file = tmp_path / "worker.pid"
    init = f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n"
    _write("fi/flashinfer/__init__.py", init)(tmp_path)
    env = dict(os.environ, NO_COLOR="1", HPROBE_CACHE_DIR=str(tmp_path / "cache"), TMPDIR=str(tmp_path / "tmp"))
    proc = subprocess.Popen(
        [
            str(HPROBE),
            "matrix",
            "-k",
            "dsv4-sparse-mla",
            "--sm",
            "100",
            "--heads",
            "8",
            "--flashinfer",
            str(tmp_path / "fi"),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal: a suite started as a background job of a shell
        # without job control inherits SIGINT ignored, and Python (rightly)
        # keeps an ignored SIGINT ignored, so Ctrl-C could not reach hprobe.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and proc.poll() is None, "the worker never started"
        time.sleep(0.1)
    worker = int(pid_file.read_text())
    proc.send_signal(getattr(signal, signame))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code and err.strip() == said, (proc.returncode, err)
    with pytest.raises(ProcessLookupError):
        os.kill(worker, 0)
    assert not list((tmp_path / "tmp").iterdir())


@pytest.mark.slow
def test_a_damaged_cached_wheel_is_fetched_again(tmp_path):
    """A truncated wheel in the cache (a killed download, a full disk) no longer
    blocks that release: its digest differs from the one recorded, so it is
    discarded and fetched again."""
    (tmp_path / "tmp").mkdir()
    whole = {"HPROBE_WHOLE_WHEELS": "1"}  # downloaded whole (a tree read by ranges: test_remote_wheel)
    first = run_hprobe(["kernels", "--releases", "0.6.14", "--json"], tmp_path, env=whole, timeout=300)
    assert first.returncode == 0, first.stderr
    [wheel] = (tmp_path / "cache" / "wheels").glob("*.whl")
    good = wheel.read_bytes()
    wheel.write_bytes(good[: len(good) // 3])
    again = run_hprobe(["kernels", "--releases", "0.6.14", "--json"], tmp_path, env=whole, timeout=300)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == json.loads(first.stdout)
    assert wheel.read_bytes() == good


# == Round three: every output format against a corpus of hostile strings ====================
#
# Each class below is a property of a format or a writer, checked across every
# field a consumer controls (table, model, backend and source names in a table;
# a --repo directory, a mapping's model, a setting's declared default; paths and
# values in error lines), so a field or a format added later cannot skip it.

HOSTILE = (
    "\n::error::injected%0A::warning::pct\r\n  ::stop-commands::tok\r::notice::cr ##[error]v1 "
    "[/] [bold red]mk[/] [link=https://e.x]l[/link] \x1b[31mred\x1b]8;;http://e.x\x07 "
    "\x00\x07\x0b\x0c\x7f\x85\x9b\u2028\u202e\ufffe `tick`` a|b <script>alert(1)</script> &amp; *em* _u_ ~~s~~ "
    "\U0001f600 end\\"
)
VISIBLE = "\\x1b[31mred"  # how the text formats show the corpus's ESC sequence
# What hprobe's own annotations look like; any other line a runner would read as a command is an injection.
OWN_ANNOTATION = re.compile(r"::(error|warning|notice) file=[^,\r\n]*(,line=\d+)?,title=hprobe%3A [^,:\r\n]*::[^\r\n]*")


def _toml_string(text: str) -> str:
    """A TOML basic string for any text (escapes written independently of hprobe's own writer)."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") or ch in "\ufffe\uffff":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _hostile_table(arena: Path) -> None:
    q = _toml_string
    body = (
        f"[table]\nname = {q('T' + HOSTILE)}\nsource = {q('S' + HOSTILE)}\n\n"
        f"[model]\nname = {q('M' + HOSTILE)}\nnum_q_heads = 128\ntp = [1, 2, 4, 8, 16]\n\n"
        f'[[backend]]\nname = {q("B" + HOSTILE)}\nkernel = "dsv4-sparse-mla"\nsm = [100]\npad_to = [64, 128]\n'
    )
    _write("t.toml", body)(arena)


HOSTILE_DIR = "r\n::error::dir ##[error]d"


def _hostile_repo(arena: Path) -> None:
    """A tree whose directory name, mapping model and setting default are the corpus."""
    root = arena / HOSTILE_DIR
    environ = (
        PLANT
        + "class EnvStr:\n    def __init__(self, default):\n        self.default = default\n\n"
        + f"class Envs:\n    MODE = EnvStr({HOSTILE!r})\n\nenvs = Envs()\n"
    )
    rules = PLANT + (
        "from .environ import envs\n\nclass Rule:\n    def get_padded_num_q_heads(self):\n        if "
        "envs.MODE.get() == 'unpadded':\n            return self.n_local\n        return max(self.n_local, 64)\n"
    )
    _write(f"{HOSTILE_DIR}/__init__.py", PLANT)(arena)
    _write(f"{HOSTILE_DIR}/environ.py", environ)(arena)
    _write(f"{HOSTILE_DIR}/rules.py", rules)(arena)
    mapping = (
        '[mapping]\nmethod = "get_padded_num_q_heads"\n\n[instance]\nn_local = "n"\n\n'
        '[settings]\nmodule = "environ"\nobject = "envs"\naccessor = "get"\n\n'
        f"[[model]]\nname = {_toml_string('M' + HOSTILE)}\nnum_q_heads = 128\ntp = [1, 2, 4, 8, 16]\n\n"
        '[[class]]\nname = "Rule"\nkernel = "dsv4-sparse-mla"\nsm = [100]\n'
    )
    _write("m.toml", mapping)(arena)
    assert root.is_dir()


def _runner_commands(text: str, annotations_allowed: bool) -> list[str]:
    """Lines a GitHub runner would execute as workflow commands (v2 after leading
    white space, v1 `##[` anywhere), less hprobe's own annotations when allowed."""
    found = []
    for line in re.split(r"\r\n|\n|\r", text):
        body = line.lstrip()
        if body.startswith("::") and not (annotations_allowed and OWN_ANNOTATION.fullmatch(line)):
            found.append(line)
        elif "##[" in line:
            found.append(line)
    return found


def _shown_as_text(output: str) -> None:
    """Text output: no control character but newline (NO_COLOR, a pipe: Rich sends
    no styling), the corpus shown, markup shown rather than read."""
    bad = [
        hex(ord(c)) for c in output if (unicodedata.category(c) == "Cc" and c not in "\n") or c in "\u2028\u2029\u202e"
    ]
    assert not bad, bad[:10]
    assert VISIBLE in output and "[bold red]mk[/]" in output and "[link=https://e.x]l[/link]" in output


def _rendered_markdown(text: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(text)


class _Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[int] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "tr":
            self.rows.append(0)
        elif tag in ("td", "th") and self.rows:
            self.rows[-1] += 1


def _markdown_holds(text: str, holds_corpus: bool = True) -> None:
    html_out = _rendered_markdown(text)
    parser = _Cells()
    parser.feed(html_out)
    # Only hprobe's own markup: bold, code, its tables, lists and <details>.
    assert set(parser.tags) <= {
        "h2",
        "h3",
        "p",
        "strong",
        "code",
        "ul",
        "li",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "details",
        "summary",
    }, set(parser.tags)
    widths = set(parser.rows)
    assert len(widths) <= 2, f"table rows of differing widths: {widths}"  # the findings table and the ok table
    assert "<script" not in html_out and ("alert(1)" in html_out) == holds_corpus


class TestEveryFormatEscapesEveryField:
    """One run per format over a table whose every name is the corpus."""

    @pytest.mark.parametrize("fmt", ["text", "markdown", "json", "sarif"])
    def test_check_output(self, tmp_path, fmt):
        arena = tmp_path
        (arena / "tmp").mkdir()
        _hostile_table(arena)
        proc = run_hprobe(["check", "--table", "{A}/t.toml", "--format", fmt, "--details"], arena)
        # The exit code and the summary line say why, where the log's tail would not.
        summary = [row for row in proc.stderr.splitlines() if "→ exit" in row or row.startswith("note:")]
        assert proc.returncode == 0 and "Traceback" not in proc.stderr and "internal error" not in proc.stderr, (
            proc.returncode,
            summary[-6:],
            proc.stderr[-1000:],
        )
        assert not _runner_commands(proc.stdout + proc.stderr, annotations_allowed=False)
        if fmt == "text":
            _shown_as_text(proc.stdout)
        elif fmt == "markdown":
            _markdown_holds(proc.stdout)
        elif fmt == "json":
            doc = json.loads(proc.stdout)
            assert {f["model"] for f in doc["findings"]} == {"M" + HOSTILE}  # data formats keep the string exactly
        else:
            [run] = json.loads(proc.stdout)["runs"]
            counts = [c for r in run["results"] for c in r["properties"]["counts"]]
            assert counts and {c["model"] for c in counts} == {"M" + HOSTILE}
            assert all("M" + HOSTILE in r["message"]["text"] for r in run["results"])

    def test_github_annotations_and_junit(self, tmp_path):
        arena = tmp_path
        (arena / "tmp").mkdir()
        _hostile_table(arena)
        proc = run_hprobe(
            ["check", "--table", "{A}/t.toml", "--junit", "{A}/r.xml"], arena, env={"GITHUB_ACTIONS": "true"}
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        annotations = [line for line in proc.stderr.splitlines() if line.startswith("::")]
        assert annotations and all(OWN_ANNOTATION.fullmatch(line) for line in annotations), annotations
        assert not _runner_commands(proc.stdout + proc.stderr, annotations_allowed=True)
        import xml.etree.ElementTree as ET

        root = ET.parse(arena / "r.xml").getroot()  # XML 1.0 whatever the names hold
        names = [case.get("name") or "" for case in root.iter("testcase")]
        assert len(names) == 5 and all(VISIBLE in name for name in names)

    def test_report_page(self, tmp_path):
        arena = tmp_path
        (arena / "tmp").mkdir()
        _hostile_table(arena)
        proc = run_hprobe(
            [
                "report",
                "--releases",
                "0.6.14",
                "-k",
                "dsv4-sparse-mla",
                "--sm",
                "100",
                "--heads",
                "1-16",
                "--table",
                "{A}/t.toml",
                "-o",
                "{A}/site",
            ],
            arena,
            env={"HPROBE_CACHE_DIR": str(_user_cache())},
            timeout=900,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        page = (arena / "site" / "index.html").read_text()
        parser = _Cells()
        parser.feed(page)
        assert "script" not in parser.tags and "<script" not in page and "&lt;script&gt;" in page
        assert "[bold red]mk[/]" in page and "\x1b" not in page and "\x00" not in page
        _markdown_holds((arena / "site" / "matrix.md").read_text(), holds_corpus=False)  # the matrix names no table

    def test_toml_written_reads_back_equal(self, tmp_path):
        """suggest -o writes the table hprobe reads back with every name equal."""
        arena = tmp_path
        (arena / "tmp").mkdir()
        _hostile_table(arena)
        # The releases the pin search asks come from the session's cache: the
        # names are the subject here, not a fresh fetch of every release.
        proc = run_hprobe(
            ["suggest", "--table", "{A}/t.toml", "-o", "{A}/out.toml"],
            arena,
            env={"HPROBE_CACHE_DIR": str(SESSION_CACHE)},
        )
        assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-2000:])
        import tomllib

        original = tomllib.loads((arena / "t.toml").read_text())
        written = tomllib.loads((arena / "out.toml").read_text())
        assert written["model"][0]["name"] == original["model"]["name"] == "M" + HOSTILE
        assert [b["name"] for b in written["backend"]] == [original["backend"][0]["name"]]
        # Judged on the validators' word where a release's kernel table is not at hand: the names are the subject.
        again = run_hprobe(["check", "--table", "{A}/out.toml", "--format", "json", "--trust-validators"], arena)
        assert again.returncode == 0 and {f["backend"] for f in json.loads(again.stdout)["findings"]} == {"B" + HOSTILE}

    @pytest.mark.parametrize("fmt", ["text", "markdown"])
    def test_repo_names_settings_and_mapping_texts(self, tmp_path, fmt):
        arena = tmp_path
        (arena / "tmp").mkdir()
        _hostile_repo(arena)
        proc = run_hprobe(
            ["check", "--repo", "{A}/" + HOSTILE_DIR, "--mapping", "{A}/m.toml", "--format", fmt, "--details"],
            arena,
            env={"GITHUB_ACTIONS": "true"},
        )
        assert proc.returncode in (0, 3) and "Traceback" not in proc.stderr and "internal error" not in proc.stderr, (
            proc.stderr[-2000:]
        )
        assert not _runner_commands(proc.stdout + proc.stderr, annotations_allowed=True)
        assert "\\x0a::error::dir" in proc.stdout + proc.stderr  # the directory, shown
        assert "MODE=\\x0a::error::injected" in proc.stdout  # the setting's declared default, shown as the branch taken
        if fmt == "markdown":
            _markdown_holds(proc.stdout)
        assert not (arena / RAN).exists()
        extract = run_hprobe(
            ["table", "extract", "--repo", "{A}/" + HOSTILE_DIR, "--mapping", "{A}/m.toml", "-o", "{A}/x.toml"], arena
        )
        assert extract.returncode == 0, extract.stderr
        import tomllib

        assert tomllib.loads((arena / "x.toml").read_text())["model"][0]["name"] == "M" + HOSTILE


def _user_cache() -> Path:
    """The session's cache (see conftest), where earlier tests' releases are already unpacked."""
    return Path(os.environ["HPROBE_CACHE_DIR"])


class TestErrorLinesEscapeWhatTheyQuote:
    """An error line quoting a path or a value from the user is still one line,
    and no runner command."""

    @pytest.mark.parametrize(
        "args",
        [
            ["check", "--table", "{A}/x\n::error::path.toml"],
            ["check", "--tp", "\n::error::value"],
            ["check", "--repo", "{A}/repo", "--set", "no-equals\n::error::set"],
            ["matrix", "-k", "\n::error::kernel"],
            ["check", "--pin", "flashinfer-python==\n::error::pin"],
            ["check", "--flashinfer", "\n::error::release"],
        ],
        ids=["path", "int-value", "set-value", "kernel", "pin", "release"],
    )
    def test_one_line_no_command(self, tmp_path, args):
        (tmp_path / "tmp").mkdir()
        _rule("return n")(tmp_path)
        proc = run_hprobe(args, tmp_path)
        assert proc.returncode == 2 and proc.stdout == ""
        [line] = proc.stderr.splitlines()
        assert line.startswith("hprobe: error: ") and "::error::" in line  # quoted, within the one line
        assert not _runner_commands(proc.stderr, annotations_allowed=False)


class TestStreamsAndWriters:
    """What hprobe writes to: a full stdout, a closed pipe, stdout by name, a
    site on a disk that fills, a cache on a full disk."""

    def _into(self, arena: Path, args: list[str], stdout: IO[str] | int) -> subprocess.CompletedProcess[str]:
        """hprobe `args` run in `arena` with its stdout the file (or descriptor) given."""
        return subprocess.run(
            [str(HPROBE), *args],
            cwd=arena,
            env=self._env(arena),
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )

    def _env(self, arena: Path, **extra: str) -> dict[str, str]:
        # A log, not a terminal: no width from the environment wraps a line these tests read whole.
        env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
        return (
            env
            | {
                "NO_COLOR": "1",
                "HPROBE_CACHE_DIR": str(arena / "cache"),
                "TMPDIR": str(arena / "tmp"),
                "HPROBE_TEST_ARENA": str(arena),
            }
            | extra
        )

    def test_a_full_stdout_is_one_line(self, tmp_path):
        (tmp_path / "tmp").mkdir()
        with open("/dev/full", "w") as full:
            proc = self._into(tmp_path, ["kernels"], full)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.splitlines() == ["hprobe: error: stdout: No space left on device (ENOSPC)"]

    def test_a_closed_pipe_ends_quietly(self, tmp_path):
        (tmp_path / "tmp").mkdir()
        for args in (["kernels"], ["kernels", "--json"]):
            read_end, write_end = os.pipe()
            os.close(read_end)  # the reader is gone before the first byte (`| head` that already ended)
            try:
                proc = self._into(tmp_path, args, write_end)
            finally:
                os.close(write_end)
            assert proc.returncode == 141 and proc.stderr == "", (args, proc.returncode, proc.stderr)

    def test_a_reader_that_leaves_mid_output_is_a_broken_pipe_not_a_pass(self, tmp_path):
        """`hprobe matrix --json | head -c 10`: the reader goes once the pipe
        holds 64 KiB of a 3 MB document. The text stream took that part of the
        one write and dropped the rest without an error: exit 0 over a cut
        document. Every byte is written or the run ends 141."""
        (tmp_path / "tmp").mkdir()
        args = [str(HPROBE), "matrix", "--sm", "90,100", "--json"]
        proc = subprocess.Popen(
            args, cwd=tmp_path, env=self._env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.read(10)
        proc.stdout.close()
        err = proc.stderr.read()
        assert proc.wait(timeout=300) == 141 and first == b'{\n  "schem', err
        whole = subprocess.run(args, cwd=tmp_path, env=self._env(tmp_path), capture_output=True, timeout=300)
        assert whole.returncode == 0 and len(whole.stdout) > 2**20  # far more than a pipe holds

    def test_stdout_by_name_is_written_in_place(self, tmp_path):
        (tmp_path / "tmp").mkdir()
        _write("t.toml", TABLE.format(rule="pad_to = [8, 16, 32, 64, 128]"))(tmp_path)
        with open(tmp_path / "out.txt", "w") as out:
            proc = self._into(tmp_path, ["check", "--table", str(tmp_path / "t.toml"), "--junit", "/dev/stdout"], out)
        assert proc.returncode == 0, proc.stderr
        written = (tmp_path / "out.txt").read_text()
        assert "hprobe check" in written and "<testsuites" in written  # the report kept, the XML after it

    def test_junit_on_stdout_beside_a_document_for_tools_is_refused(self, tmp_path):
        """XML after a JSON document breaks the document a tool reads: refused
        before probing, exit 2; beside text (for people) it is written after."""
        (tmp_path / "tmp").mkdir()
        _write("t.toml", TABLE.format(rule="pad_to = [8, 16, 32, 64, 128]"))(tmp_path)
        with open(tmp_path / "out.json", "w") as out:
            proc = self._into(
                tmp_path,
                ["check", "--table", str(tmp_path / "t.toml"), "--junit", "/dev/stdout", "--format", "json"],
                out,
            )
        assert proc.returncode == 2 and (tmp_path / "out.json").read_text() == ""
        assert proc.stderr.splitlines() == [
            "hprobe: error: --junit /dev/stdout: stdout carries the json document; write the JUnit to a file"
        ]

    def test_python_m_does_not_probe_the_working_directory(self, tmp_path):
        (tmp_path / "tmp").mkdir()
        _write("flashinfer/__init__.py", PLANT + "raise ImportError('the tree being checked, not a release')\n")(
            tmp_path
        )
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "hprobe",
                "matrix",
                "-k",
                "dsv4-sparse-mla",
                "--sm",
                "100",
                "--heads",
                "8",
                "--json",
            ],
            cwd=tmp_path,
            env=self._env(tmp_path),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["results"][0]["accepted"] == [8]
        assert not (tmp_path / RAN).exists()

    def test_a_site_that_cannot_be_written_whole_is_left_as_it_was(self, tmp_path, small_disk):
        """The disk fills while the new site is written: the old one stays,
        every file of it, and no temporary file is left."""
        (tmp_path / "tmp").mkdir()
        site = small_disk / "site"
        site.mkdir()
        old = {name: f"old {name}" for name in ("index.html", "matrix.md", "matrix.json")}
        for name, text in old.items():
            (site / name).write_text(text)
        args = ["report", "--releases", "0.6.14", "-k", "dsv4-sparse-mla", "--sm", "100", "-o", str(site), "--force"]
        proc = subprocess.run(
            [str(HPROBE), *args],
            cwd=tmp_path,
            env=self._env(tmp_path, HPROBE_CACHE_DIR=str(_user_cache())),
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert proc.returncode == 2, proc.stderr
        [line] = proc.stderr.splitlines()
        assert "No space left on device" in line and "unchanged" in line
        assert {p.name: p.read_text() for p in site.iterdir()} == old

    def test_a_full_cache_disk_falls_back_to_a_temporary_cache(self, tmp_path, small_disk):
        (tmp_path / "tmp").mkdir()
        _write("t.toml", TABLE.format(rule="no_padding = true"))(tmp_path)
        wheel = tmp_path / "big.whl"
        with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as zf:
            zf.writestr("flashinfer/__init__.py", "raise ImportError('not a real release')\n")
            zf.writestr("flashinfer/data.bin", os.urandom(200_000))  # more than the disk holds
        proc = subprocess.run(
            [str(HPROBE), "check", "--table", str(tmp_path / "t.toml"), "--flashinfer", str(wheel), "--details"],
            cwd=tmp_path,
            env=self._env(tmp_path, HPROBE_CACHE_DIR=str(small_disk / "cache")),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 3, proc.stderr  # the fake release cannot be probed: inconclusive, not an error
        said = " ".join(proc.stdout.split())  # a note is wrapped to the page's width
        assert (
            "cannot be written (No space left on device): this run read what it holds and kept nothing new" in said
        ), proc.stdout
        assert not list((tmp_path / "tmp").iterdir()), "the temporary cache is removed at exit"


@pytest.fixture
def small_disk(tmp_path):
    """A 16 KiB tmpfs: room for a few small files, not for a site or a release."""
    with tmpfs(tmp_path / "disk", "16k", "a full disk") as mount:
        yield mount
