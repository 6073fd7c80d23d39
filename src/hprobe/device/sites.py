"""Where a refusal's condition lies in flashinfer's source, so a probe can tell
whether the same check was consulted, and passed, for another target SM.

A refusal is a `raise` or `assert` line. Its *check* is the condition that
guards it: the assert itself, or the tests of the `if`/`elif` chain whose
branch holds the raise. A check that ran and let the call through on another
SM depends on the SM (an architecture check); one that refuses everywhere it
runs, or only runs on this SM's path, is about the configuration.
"""

from __future__ import annotations

import ast
import functools
import os
from dataclasses import dataclass
from types import CodeType, TracebackType

from hprobe.system.parsing import parse_module


@dataclass(frozen=True)
class CheckSite:
    filename: str  # code filename, as the interpreter reports it
    function: str  # the function that holds the check
    line: int  # the line that refused (the raise, the assert, or a call to a helper that raises)
    tests: frozenset[int]  # lines of the guarding condition(s)
    is_assert: bool
    # the condition reads a tensor's device (`x.device.type != "cuda"`,
    # `x.is_cuda`): a probe's CPU tensors fail it on every SM
    device_check: bool = False


def check_site(tb: TracebackType | None, prefix: str) -> CheckSite | None:
    """The innermost frame under `prefix` (flashinfer's directory) whose failing
    line sits in a guarded branch or is an assert; None when there is none."""
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    for frame in reversed(frames):
        code = frame.tb_frame.f_code
        if not _realpath(code.co_filename).startswith(prefix):
            continue
        site = _site_at(code, frame.tb_lasti)
        if site is not None:
            return site
    return None


@functools.lru_cache(maxsize=4096)
def _site_at(code: CodeType, lasti: int) -> CheckSite | None:
    """The check around one instruction of one function: each h_q's refusal
    raises from the same few, and turning an instruction into a line decodes
    the function's whole line table."""
    line = next((number for start, end, number in code.co_lines() if start <= lasti < end and number is not None), 0)
    found = _guard(code.co_filename, code.co_firstlineno, _last_line(code), line)
    if found is None:
        return None
    tests, is_assert, device = found
    return CheckSite(code.co_filename, code.co_name, line, tests, is_assert, device)


@functools.lru_cache(maxsize=1024)
def _realpath(filename: str) -> str:
    return os.path.realpath(filename)


def _last_line(code: CodeType) -> int:
    """The last line holding an instruction of `code` or of a function nested in it."""
    last = max((number for _, _, number in code.co_lines() if number is not None), default=code.co_firstlineno)
    nested = (_last_line(const) for const in code.co_consts if isinstance(const, CodeType))
    return max([last, *nested])


@functools.lru_cache(maxsize=4096)
def _guard(filename: str, first_line: int, last_line: int, line: int) -> tuple[frozenset[int], bool, bool] | None:
    function = _function_at(filename, first_line, last_line)
    if function is None:
        return None
    best: tuple[frozenset[int], bool] | None = None
    device = False
    innermost: ast.If | None = None
    for node in ast.walk(function):
        if isinstance(node, ast.Assert) and node.lineno <= line <= (node.end_lineno or node.lineno):
            return frozenset({node.lineno}), True, _reads_device(node.test)
        if isinstance(node, ast.If) and any(_holds(stmt, line) for stmt in node.body + node.orelse):
            # ast.walk is breadth-first, so later hits are deeper: the innermost
            # `if` wins, except that an `elif` keeps the tests of its chain.
            elif_of_last = innermost is not None and innermost.orelse == [node]
            tests = (best[0] if elif_of_last and best else frozenset()) | {node.test.lineno}
            best, innermost, device = (tests, False), node, _reads_device(node.test)
    if best is None:
        # An unconditional raise after early returns (`if cc == 10: return ...;
        # raise ...`): the `if`s before it in its block are its check.
        best = _preceding_guards(function, line)
    return (best[0], best[1], device) if best else None


def _reads_device(test: ast.expr) -> bool:
    for node in ast.walk(test):
        if isinstance(node, ast.Attribute):
            if node.attr == "is_cuda":
                return True
            inner = node.value
            if node.attr == "type" and (
                (isinstance(inner, ast.Attribute) and inner.attr == "device")
                or (isinstance(inner, ast.Name) and inner.id == "device")
            ):
                return True
    return False


def _preceding_guards(function: ast.AST, line: int) -> tuple[frozenset[int], bool] | None:
    for node in ast.walk(function):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if not isinstance(block, list):
                continue
            for index, stmt in enumerate(block):
                if (
                    isinstance(stmt, ast.stmt)
                    and _holds(stmt, line)
                    and not isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try))
                ):
                    tests = {t for prior in block[:index] if isinstance(prior, ast.If) for t in _chain_tests(prior)}
                    if tests:
                        return frozenset(tests), False
    return None


def _chain_tests(node: ast.If) -> set[int]:
    tests = {node.test.lineno}
    while len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
        node = node.orelse[0]
        tests.add(node.test.lineno)
    return tests


def _holds(stmt: ast.stmt, line: int) -> bool:
    return stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno)


# Lines past a function's last instruction that can still belong to it: the
# rest of a bracketed expression, an `else: pass`.
_TAIL_LINES = 40


@functools.lru_cache(maxsize=256)
def _function_at(filename: str, first_line: int, last_line: int) -> ast.AST | None:
    """The function's own lines parsed, not its module's (flashinfer's
    mla/_core.py is 3,000 lines; a probe placed checks in five such modules,
    about 0.1 s a process): from its first line (a decorator's) to its last
    instruction, with the lines after it that a statement cut there needs.
    A slice that parses holds the function as the module does, since a
    statement cut at a line's end does not parse. A method's indented `def`
    is parsed as the body of an `if`; a slice that never parses falls back
    to the whole module."""
    lines = _lines(filename)
    start = first_line - 1
    if not 0 <= start < len(lines):
        return None
    indented = lines[start][:1] in (" ", "\t")
    prefix, offset = ("if 1:\n", start - 1) if indented else ("", start)
    for end in range(min(last_line, len(lines)), min(last_line + _TAIL_LINES, len(lines)) + 1):
        try:
            tree = parse_module(prefix + "".join(lines[start:end]))
        except (SyntaxError, ValueError):
            continue
        ast.increment_lineno(tree, offset)
        return _defined_at(tree, first_line)
    module = _parse(filename)
    return _defined_at(module, first_line) if module is not None else None


def _defined_at(tree: ast.AST, first_line: int) -> ast.AST | None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if start == first_line or node.lineno == first_line:
                return node
    return None


@functools.lru_cache(maxsize=64)
def _lines(filename: str) -> list[str]:
    try:
        with open(filename, encoding="utf-8") as fh:
            return fh.readlines()
    except (OSError, ValueError):
        return []


@functools.lru_cache(maxsize=8)
def _parse(filename: str) -> ast.Module | None:
    """The whole module, where no slice of a function parses (each function of
    it falls back here alike)."""
    try:
        return parse_module("".join(_lines(filename)))
    except (SyntaxError, ValueError):
        return None


def passed_elsewhere(site: CheckSite, lines_run: frozenset[int], refused_here_too: bool) -> bool:
    """Whether a traced call on another SM consulted the check and got past it."""
    if refused_here_too or not site.tests & lines_run:
        return False
    # An assert is its own check; a guarded raise must not have run.
    return site.is_assert or site.line not in lines_run
