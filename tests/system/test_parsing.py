"""system/parsing.py: hprobe's parses, one at a time in a process, as
CPython 3.11's AST converter needs when threads parse together."""

from __future__ import annotations

import ast
import threading

import pytest

from hprobe.system import parsing

pytestmark = pytest.mark.pure


def test_parses_from_many_threads_all_come_back_whole():
    # Deep enough that building each tree recurses, many at once.
    source = "x = " + "(" * 60 + "1" + ")" * 60 + "\n" + "def f():\n    return [i for i in range(3)]\n" * 50
    want = ast.dump(ast.parse(source))
    got: list[str] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(20):
                got.append(ast.dump(parsing.parse_module(source)))
        except BaseException as exc:  # noqa: BLE001 - any failure of a thread is the test's
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and got == [want] * 160


def test_an_expression_and_a_syntax_error_pass_through():
    assert isinstance(parsing.parse_expression("n <= 16").body, ast.Compare)
    with pytest.raises(SyntaxError):
        parsing.parse_module("def (", filename="x.py")
    assert not parsing._PARSING.locked()  # a failed parse leaves the lock free
