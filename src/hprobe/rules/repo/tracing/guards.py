"""The tests under which a call runs inside the function that holds it: a
finding on that call holds only where they do, and says so (SGLang 0.5.17's
DCP decode passes `enable_dcp` only after `if cp_world <= 1: return ...`, so
a release without that keyword crashes only where context parallelism is on).

Read from the function's own statements: each `if` around the call (its test,
or `not` it in the `else`), and each earlier `if` on the way whose branch
always leaves the function (`return`, `raise`): the call runs only where that
branch is not taken. Loops, `with` and `try` around the call are passed
through (the call may run inside them); a `match` ends the reading there, its
cases are not said."""

from __future__ import annotations

import ast

from hprobe.rules.repo.tracing.keywords import enclosing_functions, leaves


def guards(tree: ast.Module, line: int) -> list[tuple[int, str]]:
    """(line of the test, the condition as Python writes it) for the call at
    `line`, outermost first; [] at module level or where no test guards it."""
    return [(at, ast.unparse(test) if holds else negated(test)) for at, test, holds in guard_tests(tree, line)]


def guard_tests(tree: ast.Module, line: int) -> list[tuple[int, ast.expr, bool]]:
    """The tests `guards` says, as (line, test, whether the call runs where
    it is true rather than false)."""
    around = enclosing_functions(tree, line)
    if not around:
        return []
    found: list[tuple[int, ast.expr, bool]] = []
    block: list[ast.stmt] = around[0].body
    while block:
        holding = next((s for s in block if s.lineno <= line <= (s.end_lineno or s.lineno)), None)
        for stmt in block:
            if stmt is holding or stmt.lineno > line:
                break
            if isinstance(stmt, ast.If):
                if leaves(stmt.body) and not leaves(stmt.orelse):
                    found.append((stmt.lineno, stmt.test, False))
                elif stmt.orelse and leaves(stmt.orelse) and not leaves(stmt.body):
                    found.append((stmt.lineno, stmt.test, True))
        if holding is None or holding.lineno == line and not isinstance(holding, ast.If | ast.For | ast.While):
            break
        if isinstance(holding, ast.If):
            in_body = bool(holding.body) and holding.body[0].lineno <= line <= (holding.body[-1].end_lineno or 0)
            if holding.test.lineno <= line <= (holding.test.end_lineno or holding.test.lineno):
                break  # the call is in the test itself
            found.append((holding.lineno, holding.test, in_body))
            block = holding.body if in_body else holding.orelse
        elif isinstance(holding, ast.For | ast.AsyncFor | ast.While | ast.With | ast.AsyncWith | ast.Try):
            parts = [holding.body, getattr(holding, "orelse", []), getattr(holding, "finalbody", [])]
            parts += [handler.body for handler in getattr(holding, "handlers", [])]
            block = next((p for p in parts if p and p[0].lineno <= line <= (p[-1].end_lineno or 0)), [])
        else:
            break  # a match, a nested definition, or the call's own statement
    return found


# A comparison's negation, as one would write it (`cp_world > 1`, not `not cp_world <= 1`).
_OPPOSITE: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.GtE,
    ast.LtE: ast.Gt,
    ast.Gt: ast.LtE,
    ast.GtE: ast.Lt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}


def negated(test: ast.expr) -> str:
    """`not test`, as one would write it."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return ast.unparse(test.operand)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        opposite = _OPPOSITE[type(test.ops[0])]()
        return ast.unparse(ast.Compare(test.left, [opposite], test.comparators))
    return ast.unparse(ast.UnaryOp(ast.Not(), test))
