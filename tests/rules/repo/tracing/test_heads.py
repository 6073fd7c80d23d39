"""The head-count trail (rules/repo/tracing/heads.py) on engine-shaped trees made here:
a query reshaped and folded in a helper, handed down by its callers, and
trails that end with the file:line where they stopped."""

from __future__ import annotations

from pathlib import Path

import pytest

from hprobe.rules.repo.interpreter.evaluate import NotEvaluable
from hprobe.rules.repo.tracing.heads import HeadTrail, TrailEnd, trace_heads
from hprobe.rules.repo.tree.mapping import RunValue

from ..engine_tree import one_module_tree

pytestmark = pytest.mark.pure

ROOTS = {"forward_mqa": "q"}

FOLDED = """
from flashinfer.decode import trtllm_batch_decode_with_kv_cache_mla

MAX_HEADS = 128


def fold_plan(k, heads, need_lse):
    if not need_lse:
        return k, "auto"
    f = max(d for d in range(1, k + 1) if k % d == 0 and d * heads <= MAX_HEADS)
    return f, "cute-dsl"


def folded_decode(q, k, need_lse=False):
    rows, heads, dim = q.shape
    fold, planned = fold_plan(k, heads, need_lse)
    query = q.reshape(rows // fold, 1, fold * heads, dim)
    common = dict(query=query, kv_cache=None)
    return trtllm_batch_decode_with_kv_cache_mla(backend=planned, **common)


class Impl:
    def forward_mqa(self, q, kv_cache, attn_metadata, layer):
        if isinstance(q, tuple):
            q = torch.cat(q, dim=-1)
        return folded_decode(q, 4, need_lse=True)
"""


def test_a_folded_count_is_followed_through_a_helper_and_its_caller(tmp_path: Path) -> None:
    index, line = one_module_tree(tmp_path, FOLDED)
    trail = trace_heads(index, index.by_suffix("engine.attn"), line, ("query", 0), ROOTS)  # type: ignore[arg-type]
    assert isinstance(trail, HeadTrail), trail
    assert trail.said == "fold * heads"
    assert trail.root.endswith("attn.py:23")
    # k = 4 with an LSE: the largest divisor f of 4 with f * heads <= 128.
    assert [trail.evaluate(n) for n in (8, 16, 32, 48, 96)] == [32, 64, 128, 96, 96]


def test_a_count_that_depends_on_a_value_the_engine_fills_at_run_time_is_not_evaluable(tmp_path: Path) -> None:
    text = FOLDED.replace("folded_decode(q, 4, need_lse=True)", "folded_decode(q, 4, need_lse=self.needs_lse)")
    index, line = one_module_tree(tmp_path, text)
    trail = trace_heads(index, index.by_suffix("engine.attn"), line, ("query", 0), ROOTS)  # type: ignore[arg-type]
    assert isinstance(trail, HeadTrail), trail
    result = trail.evaluate(16)
    assert isinstance(result, NotEvaluable)
    # The reason names the value the engine fills at run time, and where.
    assert result.path.endswith("attn.py") and "attn.py:26" in result.what and "needs_lse" in result.what


def test_the_trail_ends_where_the_query_comes_from_code_it_does_not_follow(tmp_path: Path) -> None:
    text = FOLDED.replace("query = q.reshape(rows // fold, 1, fold * heads, dim)", "query = opaque_pad(q)")
    index, line = one_module_tree(tmp_path, text)
    trail = trace_heads(index, index.by_suffix("engine.attn"), line, ("query", 0), ROOTS)  # type: ignore[arg-type]
    assert isinstance(trail, TrailEnd)
    assert trail.path.endswith("attn.py") and trail.line == 17
    assert "opaque_pad" in trail.why


def test_a_query_without_a_caller_or_a_named_entry_ends_at_its_function(tmp_path: Path) -> None:
    index, line = one_module_tree(tmp_path, FOLDED)
    trail = trace_heads(index, index.by_suffix("engine.attn"), line, ("query", 0), {})  # type: ignore[arg-type]
    assert isinstance(trail, HeadTrail)
    result = trail.evaluate(16)
    assert isinstance(result, NotEvaluable) and "attn.py:23" in result.what and "forward_mqa" in result.what


def test_a_name_bound_under_an_if_is_decided_by_its_test_or_both_sides_must_agree(tmp_path: Path) -> None:
    text = """
    from flashinfer.decode import trtllm_batch_decode_with_kv_cache_mla


    class Impl:
        def forward_mqa(self, q, kv_cache, attn_metadata, layer):
            q = q.unsqueeze(1)
            if self.pad:
                q = q.new_zeros((q.shape[0], 1, 128, q.shape[-1]))
            return trtllm_batch_decode_with_kv_cache_mla(q, kv_cache)
    """
    index, line = one_module_tree(tmp_path, text)
    trail = trace_heads(index, index.by_suffix("engine.attn"), line, ("query", 0), ROOTS)  # type: ignore[arg-type]
    assert isinstance(trail, HeadTrail), trail
    assert trail.evaluate(128) == 128  # both sides agree
    undecided = trail.evaluate(16)
    assert isinstance(undecided, NotEvaluable) and "pad" in undecided.what


def _run_values(k: tuple[int, ...]) -> tuple[RunValue, ...]:
    return (
        RunValue("engine.attn", "folded_decode", "k", "k", k, "the draft block's tokens per request"),
        RunValue("engine.attn", "folded_decode", "need_lse", "lse", (False, True), "whether the decode returns an LSE"),
    )


def test_values_the_engine_fills_at_run_time_are_evaluated_at_each_value_the_mapping_lists(tmp_path: Path) -> None:
    text = FOLDED.replace("folded_decode(q, 4, need_lse=True)", "folded_decode(q, self.k, need_lse=self.needs_lse)")
    index, line = one_module_tree(tmp_path, text)
    module = index.by_suffix("engine.attn")
    assert module is not None
    # Without the mapping's run values the count stops at what the engine fills.
    bare = trace_heads(index, module, line, ("query", 0), ROOTS)
    assert isinstance(bare, HeadTrail) and isinstance(bare.evaluate(16), NotEvaluable)
    trail = trace_heads(index, module, line, ("query", 0), ROOTS, run_values=_run_values((2, 4)))
    assert isinstance(trail, HeadTrail), trail
    assert [(run.shown, where.rpartition(":")[2]) for run, where in trail.runs] == [("k", "16"), ("lse", "16")]
    # Without an LSE all k tokens fold into one row; with one, the largest divisor f of k with f * heads <= 128.
    assert trail.evaluate(48, run={"k": 4, "need_lse": False}) == 192
    assert trail.evaluate(48, run={"k": 4, "need_lse": True}) == 96
    assert trail.evaluate(48, run={"k": 2, "need_lse": True}) == 96
    assert trail.evaluate(96, run={"k": 4, "need_lse": True}) == 96
    # A value the run does not give stays what the engine fills, with where.
    missing = trail.evaluate(48, run={"k": 4})
    assert isinstance(missing, NotEvaluable) and "`need_lse` is filled at run time" in missing.what
    # A reshape keeps every element: the folded count regroups the query, it is no padding.
    assert trail.regrouped


@pytest.mark.parametrize(
    "query",
    [
        # An allocation sets the head axis: it may pad.
        "query = q.new_zeros((rows // fold, 1, fold * heads, dim))",
        # The reshape's own head axis is explicit, but what it views was
        # allocated with more heads: the count may hold padding made before it.
        "padded = q.new_zeros((rows, 128, dim))\n    query = padded.reshape(rows // fold, 1, fold * heads, dim)",
    ],
    ids=["allocated", "a view of an allocation"],
)
def test_a_count_an_allocation_may_have_padded_is_no_regrouping(tmp_path: Path, query: str) -> None:
    text = FOLDED.replace("query = q.reshape(rows // fold, 1, fold * heads, dim)", query)
    index, line = one_module_tree(tmp_path, text)
    trail = trace_heads(index, index.by_suffix("engine.attn"), line, ("query", 0), ROOTS)  # type: ignore[arg-type]
    assert isinstance(trail, HeadTrail) and trail.evaluate(16) == 64
    assert not trail.regrouped


LAYER = """
from flashinfer.decode import trtllm_batch_decode_with_kv_cache_mla
{prelude}

class Impl:
    {decorator}
    def forward_mqa(self, q, kv_cache, attn_metadata, layer):
{body}
        return trtllm_batch_decode_with_kv_cache_mla(query={query}, kv_cache=None)
"""


def _layer(tmp_path: Path, body: str, query: str = "q", decorator: str = "", prelude: str = ""):
    text = LAYER.format(
        body="\n".join("        " + row for row in body.splitlines()) or "        pass",
        query=query,
        decorator=decorator,
        prelude=prelude,
    )
    tmp_path.mkdir(parents=True, exist_ok=True)
    index, line = one_module_tree(tmp_path, text)
    return trace_heads(index, index.by_suffix("engine.attn"), line, ("query", 0), ROOTS)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("body", "decorator", "prelude", "why"),
    [
        ("def grow():\n    nonlocal q\n    q = torch.cat([q, q], dim=1)\ngrow()", "", "", "`nonlocal` at line"),
        ("q.resize_(q.shape[0], q.shape[1] * 2, q.shape[2])", "", "", "changed in place by `q.resize_("),
        ("q.unsqueeze_(1)", "", "", "changed in place by `q.unsqueeze_(1)`"),
        ("q.transpose_(0, 1)", "", "", "changed in place by `q.transpose_(0, 1)`"),
        ("q.set_(torch.cat([q, q], dim=1))", "", "", "changed in place by `q.set_("),
        ("q.data = torch.cat([q, q], dim=1)", "", "", "`q.data` is replaced"),
        ("torch.cat([q, q], dim=1, out=q)", "", "", "out=q)`"),
        ("if (q := torch.cat([q, q], dim=1)) is not None:\n    pass", "", "", "bound by `:=`"),
        ("match q:\n    case (a, b):\n        q = torch.cat([a, a], dim=1)", "", "", "bound inside the `match`"),
        (
            "",
            "@doubled",
            "def doubled(fn):\n    return lambda self, q, *a: fn(self, torch.cat([q, q], dim=1), *a)",
            "decorated by `@doubled`",
        ),
        # A name a plain decorator has, but the engine's own (not functools'):
        # it may change what the function is handed.
        (
            "",
            "@cache",
            "def cache(fn):\n    return lambda self, q, *a: fn(self, torch.cat([q, q], dim=1), *a)",
            "decorated by `@cache`",
        ),
        ("", "@torch.no_grad()", "", "decorated by `@torch.no_grad()`"),  # `torch` is not imported here
    ],
)
def test_a_query_changed_where_the_trail_does_not_read_ends_it(tmp_path: Path, body, decorator, prelude, why) -> None:
    """Each of these hands FlashInfer another count than the layer's: the
    trail ends (the row is assumed, with the place), never judged at the
    layer's count."""
    trail = _layer(tmp_path, body, decorator=decorator, prelude=prelude)
    assert isinstance(trail, TrailEnd), trail
    assert why in trail.why


def test_what_keeps_the_query_or_says_its_shape_is_followed(tmp_path: Path) -> None:
    """A decorator known to pass arguments through, an element write, and
    `view_as` (the other tensor's shape, itself followed) stay judged."""
    plain = _layer(tmp_path / "a", "q[0] = 1\nq.mul_(2)", decorator="@torch.no_grad()", prelude="import torch")
    assert isinstance(plain, HeadTrail) and plain.said == "the layer's count"
    as_other = _layer(
        tmp_path / "b", "rows, heads, dim = q.shape\nother = q.new_empty(rows, 2 * heads, dim)", "q.view_as(other)"
    )
    assert isinstance(as_other, HeadTrail), as_other
    assert [as_other.evaluate(n) for n in (8, 16)] == [16, 32]


def test_the_functions_around_a_line_are_those_a_full_walk_finds(tmp_path: Path) -> None:
    """`enclosing_functions` descends by bisection (a helper with 10,000 callers in one
    module asked it 10,000 times, each a walk of the whole module): on every
    line of every module of hprobe's own source, and through match cases,
    handlers, classes and decorators, it finds what a walk of the whole tree finds."""
    import ast as ast_

    from hprobe.rules.repo.tracing.keywords import enclosing_functions

    def walked(functions: list[ast_.AST], line: int) -> list[int]:
        around = [n for n in functions if n.lineno <= line <= (n.end_lineno or n.lineno)]  # type: ignore[attr-defined]
        return [id(n) for n in sorted(around, key=lambda n: n.lineno, reverse=True)]  # type: ignore[attr-defined]

    shapes = (
        "def a():\n    match x:\n        case 1:\n            def b():\n                return 1\n        case _:\n"
        "            pass\n    try:\n        pass\n    except E:\n        def c():\n            pass\n"
        "    class K:\n        @dec\n        def m(self):\n            async def inner():\n                return 2\n"
        "            return inner\n"
    )
    sources = [shapes, *(p.read_text() for p in sorted(Path(__file__).parents[4].joinpath("src").rglob("*.py")))]
    compared = 0
    for text in sources:
        tree = ast_.parse(text)
        functions = [n for n in ast_.walk(tree) if isinstance(n, (ast_.FunctionDef, ast_.AsyncFunctionDef))]
        for line in range(1, text.count("\n") + 2):
            assert [id(f) for f in enclosing_functions(tree, line)] == walked(functions, line), (text[:60], line)
            compared += 1
    assert compared > 20_000


# FOLDED's fold_plan, then a helper its caller reaches only under tests.
GUARDED = (
    FOLDED[: FOLDED.index("def folded_decode")]
    + """def split(common, wide):
    if wide:
        return None
    return trtllm_batch_decode_with_kv_cache_mla(**common)


def folded_decode(q, k, need_lse, tiers):
    rows, heads, dim = q.shape
    fold, planned = fold_plan(k, heads, need_lse)
    query = q.reshape(rows // fold, 1, fold * heads, dim)
    common = dict(query=query, kv_cache=None)
    if planned == "cute-dsl" and tiers:
        return split(common, fold * heads > 64)
    return None


class Impl:
    def forward_mqa(self, q, kv_cache, attn_metadata, layer):
        return folded_decode(q, self.k, self.needs_lse, self.tiers)
"""
)


def test_the_tests_a_call_on_the_trail_runs_under_decide_whether_it_is_reached(tmp_path: Path) -> None:
    """The call in `split` is reached only through `if planned == "cute-dsl"
    and tiers` in its caller (planned is "cute-dsl" only with an LSE) and,
    inside it, only where `fold * heads > 64` is false. A false test is no
    answer (NotReached), never a count; one that varies with what the answers
    vary over and cannot be told is carried with the count (Unsure: the call
    may not run, so only an accepted count concludes); one that does not vary
    (`tiers`, the engine's own) is said with the finding."""
    from hprobe.rules.repo.tracing.heads import NotReached

    index, line = one_module_tree(tmp_path, GUARDED)
    module = index.by_suffix("engine.attn")
    assert module is not None
    trail = trace_heads(index, module, line, ("query", 0), ROOTS, run_values=_run_values((2, 4)))
    assert isinstance(trail, HeadTrail), trail
    # Without an LSE the caller's test is false: the count it would give (k * heads) is no answer.
    unreached = trail.evaluate(16, run={"k": 4, "need_lse": False})
    assert isinstance(unreached, NotReached) and unreached.said == "planned == 'cute-dsl'"
    assert unreached.where.endswith("attn.py:25")
    # With one: f * heads, reached where it is at most 64, and where `tiers`
    # (the engine's own, fixed for every answer) holds: said with the answer.
    assert trail.evaluate_said(16, run={"k": 4, "need_lse": True}) == (64, (("engine/attn.py:25", "tiers"),), ())
    wide = trail.evaluate(48, run={"k": 4, "need_lse": True})
    assert isinstance(wide, NotReached) and wide.said == "not wide"
    assert wide.where.endswith("attn.py:15")
    # A varying test hprobe cannot tell: the count, with the test, its place and why.
    opaque = GUARDED.replace('if planned == "cute-dsl" and tiers:', 'if planned == "cute-dsl" or layer_of(heads):')
    (tmp_path / "b").mkdir()
    index, line = one_module_tree(tmp_path / "b", opaque)
    module = index.by_suffix("engine.attn")
    assert module is not None
    trail = trace_heads(index, module, line, ("query", 0), ROOTS, run_values=_run_values((2, 4)))
    assert isinstance(trail, HeadTrail), trail
    count, said, unsure = trail.evaluate_said(16, run={"k": 4, "need_lse": False})
    assert count == 64 and said == ()
    [test] = unsure
    assert test.where == "engine/attn.py:25" and test.said == "planned == 'cute-dsl' or layer_of(heads)"
    assert "layer_of" in test.why and not test.own
