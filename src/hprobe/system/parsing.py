"""`ast.parse`, one call at a time in this process.

CPython 3.11 keeps the AST converter's recursion count in interpreter-wide
state: two threads building trees at once (a garbage collection inside one
lets the other run) can end one of them with `SystemError: AST constructor
recursion depth mismatch` (python/cpython#106905). hprobe parses in threads of
its own (a kernel table's include, where an entry point first exists) while
the main thread reads an engine's tree, so each of its parses goes through
here: the parser holds the GIL anyway, so one at a time costs nothing."""

from __future__ import annotations

import ast
import os
import threading

_PARSING = threading.Lock()


def _unlocked_in_child() -> None:
    # A process forked while another thread held the lock would wait on it forever.
    global _PARSING
    _PARSING = threading.Lock()


os.register_at_fork(after_in_child=_unlocked_in_child)


def parse_module(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    with _PARSING:
        return ast.parse(source, filename=filename)


def parse_expression(source: str) -> ast.Expression:
    with _PARSING:
        return ast.parse(source, mode="eval")
