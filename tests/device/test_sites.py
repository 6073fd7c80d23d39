"""Where a refusal's check lies: a function's own lines, parsed alone, give the
check the whole module gives."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest

from hprobe.device import sites

pytestmark = pytest.mark.pure

SOURCE = '''\
import functools


def plain(h):
    if h not in (64, 128):
        raise ValueError(
            f"Expected 64 or 128 query heads, got {h}"
        )
    return h


class Wrapper:
    @functools.cache
    def plan(self, h, sm):
        """A docstring
whose lines sit left of the def."""
        assert h % 8 == 0, "multiple of 8"
        if sm == 100:
            return 1
        elif sm == 120:
            raise RuntimeError("not on SM120")
        raise RuntimeError("unsupported")
        return None  # never reached: no instruction of its own

    def nested(self, h):
        def inner():
            if h > 128:
                raise ValueError("too many")
        return inner
'''


def _code_objects(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _every_check(path: Path, whole_module: bool) -> dict[tuple[str, int], object]:
    """Each function's check at each of its instruction lines."""
    text = path.read_text(encoding="utf-8")
    module = ast.parse(text)
    found = {}
    for code in _code_objects(compile(text, str(path), "exec")):
        if code.co_name.startswith("<"):
            continue
        last = sites._last_line(code)
        for line in sorted({number for _, _, number in code.co_lines() if number}):
            sites._guard.cache_clear()
            if whole_module:
                function = sites._defined_at(module, code.co_firstlineno)
                found[(code.co_qualname, line)] = _guard_of(function, line)
            else:
                found[(code.co_qualname, line)] = sites._guard(str(path), code.co_firstlineno, last, line)
    return found


def _guard_of(function, line):
    real = sites._function_at
    sites._function_at = lambda *_: function
    try:
        sites._guard.cache_clear()
        return sites._guard("", 0, 0, line)
    finally:
        sites._function_at = real
        sites._guard.cache_clear()


def test_a_function_parsed_alone_is_the_function_the_module_holds(tmp_path):
    path = tmp_path / "checks.py"
    path.write_text(SOURCE)
    module = ast.parse(SOURCE)
    code = compile(SOURCE, str(path), "exec")
    functions = [c for c in _code_objects(code) if not c.co_name.startswith("<")]
    assert {c.co_name for c in functions} == {"plain", "plan", "nested", "inner", "Wrapper"}
    for c in functions:
        if c.co_name == "Wrapper":
            continue
        alone = sites._function_at(str(path), c.co_firstlineno, sites._last_line(c))
        whole = sites._defined_at(module, c.co_firstlineno)
        assert alone is not None and whole is not None
        if c.co_name == "plan":
            # The unreachable `return None` after the last instruction is not
            # read; every line that can run is.
            assert len(alone.body) == len(whole.body) - 1
            for mine, theirs in zip(alone.body, whole.body[:-1], strict=True):
                assert ast.dump(mine, include_attributes=True) == ast.dump(theirs, include_attributes=True)
        else:
            assert ast.dump(alone, include_attributes=True) == ast.dump(whole, include_attributes=True)


def test_the_checks_found_are_those_the_whole_module_gives(tmp_path):
    path = tmp_path / "checks.py"
    path.write_text(SOURCE)
    alone, whole = _every_check(path, False), _every_check(path, True)
    assert alone == whole
    # The refusals themselves, placed: the `if` of plain's raise, plan's assert
    # and its elif chain, the nested function's own `if`.
    assert alone[("plain", 6)] == (frozenset({5}), False, False)
    assert alone[("Wrapper.plan", 17)] == (frozenset({17}), True, False)
    assert alone[("Wrapper.plan", 21)] == (frozenset({18, 20}), False, False)
    assert alone[("Wrapper.nested.<locals>.inner", 28)] == (frozenset({27}), False, False)


def test_on_flashinfers_own_mla_module_every_line_keeps_its_check():
    """The module probes place most checks in, every instruction line of every function."""
    import importlib.util

    spec = importlib.util.find_spec("flashinfer")  # found, not imported
    assert spec is not None and spec.origin is not None
    path = Path(spec.origin).parent / "mla" / "_core.py"
    alone, whole = _every_check(path, False), _every_check(path, True)
    assert len(alone) > 1000
    assert alone == whole


def test_a_slice_that_never_parses_falls_back_to_the_module(tmp_path):
    # A last instruction (line 4) inside brackets that close past the tail read after it.
    path = tmp_path / "long.py"
    tail = "\n".join(
        ["    x = (1,"] + ["        1," for _ in range(sites._TAIL_LINES + 5)] + ["    )", "    return x", ""]
    )
    path.write_text("def f():\n    if True:\n        raise ValueError('no')\n" + tail)
    code = compile(path.read_text(), str(path), "exec").co_consts[0]
    found = sites._function_at(str(path), code.co_firstlineno, 4)
    assert isinstance(found, ast.FunctionDef) and found.name == "f"
    assert found.end_lineno == len(path.read_text().splitlines())
