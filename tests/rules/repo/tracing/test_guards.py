"""The tests under which a call runs inside its function
(rules/repo/tracing/guards.py), and a finding on that call saying them."""

from __future__ import annotations

import ast
import textwrap

import pytest

from hprobe.rules.repo.tracing.guards import guards

from .test_calls import ENTRY, _mapping, _tree


def _guards(source: str, marker: str = "call(") -> list[tuple[int, str]]:
    text = textwrap.dedent(source)
    line = next(n for n, row in enumerate(text.splitlines(), start=1) if marker in row)
    return guards(ast.parse(text), line)


@pytest.mark.pure
def test_an_early_return_guards_what_follows_it_said_as_one_would_write_it():
    # SGLang 0.5.17's DCP decode: the call after `if cp_world <= 1: return ...`.
    assert _guards(
        """
        def decode(q, cp_world, causal):
            if cp_world <= 1:
                return other(q)
            if causal is None:
                raise ValueError("needs causal")
            log(q)
            return call(q)
        """
    ) == [(3, "cp_world > 1"), (5, "causal is not None")]


@pytest.mark.pure
def test_the_branches_around_a_call_are_its_tests_and_an_else_their_negation():
    assert _guards(
        """
        def f(a, b, items):
            if a:
                pass
            elif not b:
                for item in items:
                    with ctx():
                        call(item)
        """
    ) == [(3, "not a"), (5, "not b")]
    assert _guards(
        """
        def g(a, b):
            if a and b:
                return call()
        """
    ) == [(3, "a and b")]
    assert _guards(
        """
        def h(x):
            if x in ("a", "b"):
                y = 1
            else:
                call()
        """
    ) == [(3, "x not in ('a', 'b')")]


@pytest.mark.pure
def test_what_leaves_either_way_or_on_neither_branch_guards_nothing():
    assert (
        _guards(
            """
        def f(a):
            if a:
                x = 1
            else:
                x = 2
            try:
                return call(x)
            except KeyError:
                return None
        """
        )
        == []
    )
    assert _guards("call()\n") == []  # module level
    # A branch that leaves only through a loop's `break` does not leave the function.
    assert (
        _guards(
            """
        def g(xs):
            for x in xs:
                if x:
                    break
            call()
        """
        )
        == []
    )


@pytest.mark.pure
def test_a_match_ends_the_reading_its_cases_unsaid():
    assert _guards(
        """
        def f(kind, ready):
            if not ready:
                return None
            match kind:
                case "a":
                    return call()
        """
    ) == [(3, "ready")]


def test_a_finding_on_a_guarded_call_names_where_it_runs(cli_json, cli, tmp_path):
    """24 heads to trtllm-mla, reached only past an early return: broken, and
    the summary and JSON say it holds where cp_world > 1."""
    _tree(
        tmp_path,
        {
            "engine/attn.py": f"""
                from flashinfer.decode import {ENTRY}


                def forward(q, cp_world):
                    if cp_world <= 1:
                        return None
                    return {ENTRY}(ARGS)
                """
        },
    )
    mapping = _mapping(tmp_path, "engine.attn:forward")
    args = ("check", "--repo", str(tmp_path), "--mapping", str(mapping), "--sm", "100", "--trust-validators")
    code, doc, err = cli_json(*args)
    broken = [f for f in doc["findings"] if f["n"] == 24]
    assert code == 1 and broken and broken[0]["verdict"] == "broken", err
    assert {f["guard"] for f in doc["findings"]} == {"cp_world > 1 (attn.py:6)"}
    _, out, _ = cli(*args)
    assert "where cp_world > 1 (attn.py:6): broken" in " ".join(out.split())
