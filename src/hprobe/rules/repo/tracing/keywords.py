"""What a call of a FlashInfer entry passes for the keywords that change the
entry's dispatch (its backend, a multi-CTA KV counter buffer, a sparse top-k),
read from the engine's source: spelled at the call, or carried by a `**dict`
the function builds (`dict(...)`, `{...}`, `d[k] = v`, `d.pop(k)`, under
`if`s whose tests the evaluator decides), or by a `**kwargs` parameter that
every caller in the tree fills the same way.

The probe of a call path is then the call the engine makes, never a simpler
one: a keyword hprobe cannot tell is passed or not is `unknown`, with the
file:line where the reading stopped, and the path is inconclusive.

`self.<attr>` in a test is read from the constructor of the class that holds
the call (`self.backend = backend` with `backend="trtllm-gen"` as the
parameter's default): the call as that class's own instances make it. A
subclass that reaches the same call with other constructor arguments is its
own path (the mapping names it)."""

from __future__ import annotations

import ast
import bisect
from dataclasses import dataclass, field
from typing import Any

from hprobe.model.call import CallForm
from hprobe.rules.repo.interpreter.evaluate import Binding, NotEvaluable, Raises, evaluate_expression
from hprobe.rules.repo.tree.scan import ClassInfo, ModuleInfo, RepoIndex

# How many callers deep a `**kwargs` parameter is followed.
MAX_CALLER_DEPTH = 3


@dataclass(frozen=True)
class Unknown:
    """hprobe cannot say whether (or what) the call passes for a keyword."""

    where: str  # file:line where the reading stopped
    why: str
    # set on some runs of the call and not on others (under a test hprobe does
    # not decide), rather than unreadable
    conditional: bool = False

    def __str__(self) -> str:
        return f"{self.where}: {self.why}"


# A keyword's state at the call: the expression passed, ABSENT, or Unknown.
ABSENT = "absent"
State = ast.expr | str | Unknown


@dataclass
class KeywordReading:
    """Per dispatch keyword: what the call passes (an expression), that it
    passes nothing, or why that cannot be told."""

    passed: dict[str, ast.expr] = field(default_factory=dict)
    unknown: dict[str, Unknown] = field(default_factory=dict)
    assumed: list[str] = field(default_factory=list)  # instance values read from a constructor, in words

    def value(
        self, index: RepoIndex, module: ModuleInfo, owner: ClassInfo | None, name: str, instance: dict[str, Any]
    ) -> Any:
        """The value passed for `name` as the evaluator computes it; None when absent."""
        node = self.passed.get(name)
        if node is None:
            return None
        return evaluate_expression(index, owner, module, node, {}, Binding(instance=instance)).value


@dataclass(frozen=True)
class _Scope:
    index: RepoIndex
    module: ModuleInfo
    owner: ClassInfo | None
    instance: dict[str, Any]
    names: frozenset[str]
    read: set[str] = field(default_factory=set)  # instance attributes a decided test read
    # expression text -> its value on this path (the mapping's)
    conditions: dict[str, Any] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)  # function name -> what a call of it returns on this path
    frame: dict[str, Any] = field(default_factory=dict)  # locals known before the call
    # locals last bound, on every run, to a value the walk does not read (not None)
    opaque: set[str] = field(default_factory=set)


def read_keywords(
    index: RepoIndex,
    module: ModuleInfo,
    line: int,
    names: frozenset[str],
    conditions: dict[str, Any] | None = None,
    results: dict[str, Any] | None = None,
) -> tuple[KeywordReading, dict[str, Any], ClassInfo | None]:
    """The dispatch keywords `names` of the call at `line` of `module`, with
    the instance values and class the reading assumed. `conditions`: tests
    (or parts of them) by their source text, decided as the path runs them
    (the mapping's); `results`: what calls of a function return on this path
    (an engine's backend selector, evaluated per count)."""
    function, owner = function_at(index, module, line)
    call = call_at(function or module.tree, line)
    reading = KeywordReading()
    if call is None:
        for name in names:
            reading.unknown[name] = Unknown(f"{module.path}:{line}", "the call could not be found again")
        return reading, {}, owner
    instance, assumed = _constructor_values(index, owner)
    scope = _Scope(
        index, module, owner, instance, names, conditions=dict(conditions or {}), results=dict(results or {})
    )
    states = _call_states(scope, function, call, 0)
    reading.assumed = [said for attr, said in assumed.items() if attr in scope.read]
    for name, state in states.items():
        if isinstance(state, Unknown):
            reading.unknown[name] = state
        elif isinstance(state, ast.expr):
            reading.passed[name] = state
    return reading, instance, owner


def _call_states(
    scope: _Scope, function: ast.FunctionDef | ast.AsyncFunctionDef | None, call: ast.Call, depth: int
) -> dict[str, State]:
    states: dict[str, State] = dict.fromkeys(scope.names, ABSENT)
    keywords = [*_partial_keywords(scope, function, call), *call.keywords]  # the call's own win, as in partial
    spelled = {k.arg for k in keywords if k.arg is not None}
    for keyword in keywords:
        if keyword.arg is None:
            spread = _spread(scope, function, keyword.value, call.lineno, depth)
            for name in scope.names - spelled:
                if spread[name] is not ABSENT:
                    states[name] = spread[name]
        elif keyword.arg in scope.names:
            states[keyword.arg] = _none_as_absent(
                scope, function, _narrowed(function, keyword.value, call.lineno), call.lineno
            )
    return states


def _none_as_absent(
    scope: _Scope, function: ast.FunctionDef | ast.AsyncFunctionDef | None, state: State, line: int
) -> State:
    """A keyword spelled at the call, as the statements before `line` leave
    the locals it reads (`_passed`); the walk's own locals are kept as they were."""
    if function is None or not _may_be_none(function, state):
        return state
    kept, opaque = dict(scope.frame), set(scope.opaque)
    scope.frame.clear()
    scope.opaque.clear()
    try:
        _walk(scope, function.body, "", line, {}, conditional=None, at=None)
        return _passed(scope, function, state)
    finally:
        scope.frame.clear()
        scope.frame.update(kept)
        scope.opaque.clear()
        scope.opaque.update(opaque)


def _may_be_none(function: ast.FunctionDef | ast.AsyncFunctionDef, state: State) -> bool:
    """Whether `state` is a value `_passed` reads: `None if test else x`, or a
    local bound by plain assignments alone."""
    if isinstance(state, ast.IfExp):
        return any(_is_none(branch) for branch in (state.body, state.orelse))
    return isinstance(state, ast.Name) and _plainly_bound(function, state.id)


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _passed(scope: _Scope, function: ast.FunctionDef | ast.AsyncFunctionDef, state: State) -> State:
    """What a keyword's value passes, from the locals the walk knows where it
    is read, as flashinfer's `is not None` reads it: nothing for a local that
    holds None (SGLang's `sparse_mla_top_k_lens=sparse_mla_top_k_lens`, set
    only for a NoPE model); unknown for one bound to None and then again
    under a test the path does not decide; `None if test else x` as the path
    decides the test, unknown where it does not. Only a local bound by plain
    assignments alone is read so; any other value is passed as spelled."""
    if not _may_be_none(function, state):
        return state
    if isinstance(state, ast.IfExp):
        decided = _decide(scope, state.test)
        if decided is None:
            return Unknown(
                f"{scope.module.path}:{state.lineno}",
                f"passes None or not as `{ast.unparse(state.test)[:60]}` holds (test not decided)",
                conditional=True,
            )
        chosen = state.body if decided else state.orelse
        return ABSENT if _is_none(chosen) else _passed(scope, function, chosen)
    assert isinstance(state, ast.Name)
    if state.id in scope.frame:
        return ABSENT if scope.frame[state.id] is None else state
    if state.id in scope.opaque:
        return state
    # Plainly bound: every binding is `name = value`.
    set_to_none = [
        node.lineno
        for node in ast.walk(function)
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        and node.lineno < state.lineno
        and node.value is not None
        and _is_none(node.value)
        and any(
            isinstance(t, ast.Name) and t.id == state.id
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
    ]
    if set_to_none:
        where = f"{scope.module.path}:{min(set_to_none)}"
        return Unknown(where, f"{state.id} is None on some runs only (set again under a test not decided)", True)
    return state


def _plainly_bound(function: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """Whether every binding of `name` in `function` is `name = value` (or an
    annotated one), the only bindings the walk's locals follow: no other
    target form, loop, `with`, walrus, import, `del`, `global`/`nonlocal` or
    nested scope's parameter rebinding it."""
    plain: set[int] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            plain.update(id(t) for t in node.targets)
        elif isinstance(node, ast.AnnAssign) and node.value is not None and isinstance(node.target, ast.Name):
            plain.add(id(node.target))
    a = function.args
    own = {id(arg) for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if arg is not None}
    for node in ast.walk(function):
        if isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return False
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, (ast.Store, ast.Del)):
            if id(node) not in plain:
                return False
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (a.asname or a.name.split(".")[0]) == name for a in node.names
        ):
            return False
        if isinstance(node, ast.arg) and node.arg == name and id(node) not in own:
            return False
    return True


def _narrowed(function: ast.FunctionDef | ast.AsyncFunctionDef | None, value: State, line: int) -> State:
    """`value` as the tests around `line` fix it: a name that an enclosing
    `if name == "literal"` (alone or among the parts of an `and`) holds the
    line under, and that nothing in that `if`'s body binds again, is that
    literal there (vLLM 0.34.0's drafter: `common["backend"] = planned` under
    `if planned == "cute-dsl" and tiers:`)."""
    if function is None or not isinstance(value, ast.Name):
        return value
    found = _equal_to(function.body, value.id, line)
    if found is None:
        return value
    return ast.copy_location(ast.Constant(found), value)


def _equal_to(body: list[ast.stmt], name: str, line: int) -> str | None:
    for stmt in body:
        if not stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return None  # a nested scope: the test's name may be another
        blocks = [getattr(stmt, b, []) for b in ("body", "orelse", "finalbody")]
        blocks += [h.body for h in getattr(stmt, "handlers", [])]
        blocks += [c.body for c in getattr(stmt, "cases", [])]
        inner = next((b for b in blocks if block_spans(b, line)), None)
        if inner is None:
            return None
        deeper = _equal_to(inner, name, line)
        if deeper is not None:
            return deeper
        if isinstance(stmt, ast.If) and inner is stmt.body and not _binds_in(stmt.body, name):
            return _equality(stmt.test, name)
        return None
    return None


def _equality(test: ast.expr, name: str) -> str | None:
    """The string `test` holds `name` equal to when it is true, if it says one."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    for part in parts:
        if isinstance(part, ast.Compare) and len(part.ops) == 1 and isinstance(part.ops[0], ast.Eq):
            sides = (part.left, part.comparators[0])
            for one, other in (sides, sides[::-1]):
                if (
                    isinstance(one, ast.Name)
                    and one.id == name
                    and isinstance(other, ast.Constant)
                    and isinstance(other.value, str)
                ):
                    return other.value
    return None


def _binds_in(body: list[ast.stmt], name: str) -> bool:
    """Whether anything in `body` (nested scopes included: `nonlocal`) binds `name`."""
    return any(
        isinstance(node, ast.Name)
        and node.id == name
        and isinstance(node.ctx, (ast.Store, ast.Del))
        or isinstance(node, (ast.Nonlocal, ast.Global))
        and name in node.names
        for stmt in body
        for node in ast.walk(stmt)
    )


def _partial_keywords(
    scope: _Scope, function: ast.FunctionDef | ast.AsyncFunctionDef | None, call: ast.Call
) -> list[ast.keyword]:
    """The keywords a `functools.partial` the call goes through binds
    (`run = partial(X, backend="trtllm-gen"); run(...)`), from the function
    or the module that binds the name."""
    if not isinstance(call.func, ast.Name):
        return []
    name = call.func.id
    for scope_node in (function, scope.module.tree):
        if scope_node is None:
            continue
        for node in ast.walk(scope_node):
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
                and isinstance(node.value, ast.Call)
            ):
                func = node.value.func
                if (
                    func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
                ) == "partial":
                    return list(node.value.keywords)
    return []


def _spread(
    scope: _Scope, function: ast.FunctionDef | ast.AsyncFunctionDef | None, value: ast.expr, line: int, depth: int
) -> dict[str, State]:
    where = f"{scope.module.path}:{getattr(value, 'lineno', line)}"
    packed = _packed(scope, function, value, line, depth)
    if packed is not None:
        return packed
    if isinstance(value, (ast.Dict, ast.Call)):
        built = _built(scope, value, where)
        if built is not None:
            return built
    if isinstance(value, ast.Name) and function is not None:
        return _dict_variable(scope, function, value.id, line, depth)
    return dict.fromkeys(scope.names, Unknown(where, f"**{ast.unparse(value)} is not a dict hprobe can read"))


def _packed(
    scope: _Scope, function: ast.FunctionDef | ast.AsyncFunctionDef | None, value: ast.expr, line: int, depth: int
) -> dict[str, State] | None:
    """The keys of a dict packed from another: `dict(base, k=v)` and
    `{**base, "k": v}` (base's keys, each later key over them); None for any
    other expression."""
    parts: list[tuple[str | None, ast.expr]] = []  # (key, value); None: a dict spread in
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "dict"
        and len(value.args) == 1
        and not isinstance(value.args[0], ast.Starred)
    ):
        parts = [(None, value.args[0]), *((k.arg, k.value) for k in value.keywords)]
    elif isinstance(value, ast.Dict) and any(k is None for k in value.keys):
        for key, item in zip(value.keys, value.values, strict=True):
            if key is not None and not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                return dict.fromkeys(
                    scope.names,
                    Unknown(
                        f"{scope.module.path}:{value.lineno}", f"a key of {ast.unparse(value)[:60]} is not a literal"
                    ),
                )
            parts.append((str(key.value) if isinstance(key, ast.Constant) else None, item))
    else:
        return None
    if depth >= MAX_CALLER_DEPTH:
        return dict.fromkeys(
            scope.names, Unknown(f"{scope.module.path}:{value.lineno}", f"dicts packed {MAX_CALLER_DEPTH} deep")
        )
    states: dict[str, State] = dict.fromkeys(scope.names, ABSENT)
    for written, part in parts:
        if written is None:
            spread = _spread(scope, function, part, line, depth + 1)
            states.update({name: state for name, state in spread.items() if state is not ABSENT})
        elif written in scope.names:
            states[written] = part
    return states


def _built(scope: _Scope, node: ast.expr, where: str) -> dict[str, State] | None:
    """The keys of `{...}` or `dict(...)` with literal keys; None when it is neither."""
    out: dict[str, State] = dict.fromkeys(scope.names, ABSENT)
    if isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None or not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                return dict.fromkeys(
                    scope.names, Unknown(where, f"a key of {ast.unparse(node)[:60]} is not a literal string")
                )
            if key.value in scope.names:
                out[key.value] = value
        return out
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        for keyword in node.keywords:
            if keyword.arg is None:
                return dict.fromkeys(
                    scope.names, Unknown(where, f"dict(**{ast.unparse(keyword.value)}) carries keys hprobe cannot read")
                )
            if keyword.arg in scope.names:
                out[keyword.arg] = keyword.value
        return out
    return None


def _decide(scope: _Scope, test: ast.expr) -> bool | None:
    scope.read.update(
        n.attr
        for n in ast.walk(test)
        if isinstance(n, ast.Attribute)
        and isinstance(n.value, ast.Name)
        and n.value.id == "self"
        and n.attr in scope.instance
    )
    text = ast.unparse(test)
    if text in scope.conditions:
        return bool(scope.conditions[text])
    binding = Binding(instance=scope.instance, platform=scope.conditions)
    value = evaluate_expression(scope.index, scope.owner, scope.module, test, scope.frame, binding).value
    if isinstance(value, (NotEvaluable, Raises)):
        return None
    try:
        return bool(value)
    except Exception:  # noqa: BLE001 - a value whose truth the subset cannot tell
        return None


def _dict_variable(
    scope: _Scope, function: ast.FunctionDef | ast.AsyncFunctionDef, name: str, line: int, depth: int
) -> dict[str, State]:
    """The keys `name` holds at `line`, from the statements before it."""
    where = f"{scope.module.path}:{function.lineno}"
    params = function.args
    if params.kwarg is not None and params.kwarg.arg == name:
        states = _from_callers(scope, function, depth)
    elif any(a.arg == name for a in (*params.posonlyargs, *params.args, *params.kwonlyargs)):
        states = _argument_from_callers(scope, function, name, depth)
    else:
        states = dict.fromkeys(
            scope.names, Unknown(where, f"{name} is not assigned before the call in {function.name}")
        )
    _walk(scope, function.body, name, line, states, conditional=None, at=(function, depth))
    return states


def _walk(
    scope: _Scope,
    body: list[ast.stmt],
    name: str,
    line: int,
    states: dict[str, State],
    conditional: str | None,
    leaving: bool = True,
    at: tuple[ast.FunctionDef | ast.AsyncFunctionDef, int] | None = None,
) -> None:
    """Apply the statements of `body` before `line` that touch `name`;
    `conditional` is where an undecided test encloses them (their changes to a
    dispatch keyword then make it unknown); `leaving`: a `return` or `raise`
    leaves without reaching the call (not so where the call is in a `finally`
    the return runs through); `at`: the function read and how deep the
    reading is (a dict packed from another is read from there)."""
    for stmt in body:
        if stmt.lineno >= line:
            return
        here = f"{scope.module.path}:{stmt.lineno}"
        if line <= (stmt.end_lineno or stmt.lineno) and isinstance(
            stmt, (ast.If, ast.For, ast.While, ast.With, ast.AsyncFor, ast.AsyncWith, ast.Try)
        ):
            _around(scope, stmt, name, line, states, conditional, at)
            return
        if isinstance(stmt, ast.If):
            decided = _decide(scope, stmt.test)
            inner = (
                conditional
                if decided is not None
                else conditional or f"{here} (test not decided: `{ast.unparse(stmt.test)[:60]}`)"
            )
            # A branch that always leaves the function never reaches a call after the `if`.
            if decided is not False and not (leaving and leaves(stmt.body)):
                _walk(scope, stmt.body, name, line, states, inner, leaving, at)
            if decided is not True and not (leaving and leaves(stmt.orelse)):
                _walk(scope, stmt.orelse, name, line, states, inner, leaving, at)
            continue
        if isinstance(stmt, (ast.For, ast.While, ast.With, ast.Try, ast.AsyncFor, ast.AsyncWith)):
            loop = f"{here} (inside a {type(stmt).__name__.lower()})"
            for block in ("body", "orelse", "finalbody"):
                _walk(scope, getattr(stmt, block, []), name, line, states, conditional or loop, leaving, at)
            for handler in getattr(stmt, "handlers", []):
                _walk(scope, handler.body, name, line, states, conditional or loop, leaving, at)
            continue
        _statement(scope, stmt, name, states, conditional, here, at)


def _around(
    scope: _Scope,
    stmt: ast.stmt,
    name: str,
    line: int,
    states: dict[str, State],
    conditional: str | None,
    at: tuple[ast.FunctionDef | ast.AsyncFunctionDef, int] | None,
) -> None:
    """A compound statement that holds the call: the block holding it runs
    before the call whenever the call runs, so its statements are as
    unconditional as the compound statement; in a loop, what the body does
    after the call may carry into the next pass, so that part is conditional."""
    here = f"{scope.module.path}:{stmt.lineno}"
    blocks = [getattr(stmt, b, []) for b in ("body", "orelse", "finalbody")] + [
        h.body for h in getattr(stmt, "handlers", [])
    ]
    for block in blocks:
        if block and block[0].lineno <= line <= (block[-1].end_lineno or block[-1].lineno):
            _walk(scope, block, name, line, states, conditional, at=at)
            if isinstance(stmt, (ast.For, ast.While, ast.AsyncFor)):
                later = [s for s in block if s.lineno > line]
                _walk(scope, later, name, 1 << 30, states, conditional or f"{here} (a later pass of the loop)", at=at)
        elif isinstance(stmt, ast.Try) and block is stmt.finalbody:
            continue
        elif block is getattr(stmt, "body", None) or isinstance(stmt, ast.Try):
            # A try's body (or handlers) before the one holding the call ran, or
            # partly ran; a return in them runs through a `finally` holding the call.
            in_finally = isinstance(stmt, ast.Try) and any(
                s.lineno <= line <= (s.end_lineno or s.lineno) for s in stmt.finalbody
            )
            _walk(scope, block, name, line, states, conditional or f"{here} (inside a try)", not in_finally, at)


def leaves(block: list[ast.stmt]) -> bool:
    """Whether every pass through `block` leaves the function: it ends in a
    `return` or `raise`, and no `break` or `continue` of an enclosing loop
    jumps out of it first."""
    if not block or not isinstance(block[-1], (ast.Return, ast.Raise)):
        return False
    pending: list[ast.AST] = list(block)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Break, ast.Continue)):
            return False
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            pending.extend(node.orelse)  # a loop's own break/continue stay inside it; its `else` does not
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        pending.extend(ast.iter_child_nodes(node))
    return True


def _local(scope: _Scope, stmt: ast.stmt, conditional: str | None) -> None:
    """A local a later test may read: bound to a literal, or to a call whose
    result on this path is known; otherwise (or bound differently under an
    undecided test) it is forgotten, and a test reading it stays undecided."""
    if not (isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None):
        return
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    for target in targets:
        if not isinstance(target, ast.Name):
            continue
        value: Any = _FORGOTTEN
        if isinstance(stmt.value, ast.Constant):
            value = stmt.value.value
        elif (
            isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name)
            and stmt.value.func.id in scope.results
        ):
            value = scope.results[stmt.value.func.id]
        if value is _FORGOTTEN or (conditional is not None and scope.frame.get(target.id, _FORGOTTEN) != value):
            scope.frame.pop(target.id, None)
            # Bound on every run to something other than the literal None, or
            # under a test to that while it already was: still not None.
            not_none = not (isinstance(stmt.value, ast.Constant) and stmt.value.value is None)
            if not_none and (conditional is None or target.id in scope.opaque):
                scope.opaque.add(target.id)
            else:
                scope.opaque.discard(target.id)
        else:
            scope.frame[target.id] = value
            scope.opaque.discard(target.id)


_FORGOTTEN = object()


def _statement(
    scope: _Scope,
    stmt: ast.stmt,
    name: str,
    states: dict[str, State],
    conditional: str | None,
    here: str,
    at: tuple[ast.FunctionDef | ast.AsyncFunctionDef, int] | None = None,
) -> None:
    _local(scope, stmt, conditional)
    change: dict[str, State] | None = None
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        for target in targets:
            if isinstance(target, ast.Name) and target.id == name:
                change = _assigned(scope, stmt.value, here, at)
            elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id == name:
                change = _subscript(scope, target, stmt.value, here)
    elif isinstance(stmt, ast.Delete):
        for target in stmt.targets:
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id == name:
                change = _subscript(scope, target, None, here)
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        change = _method(scope, stmt.value, name, here)
    elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
        change = dict.fromkeys(scope.names, Unknown(here, f"{name} is merged with {ast.unparse(stmt.value)[:60]}"))
    if change is None:
        change = _other_use(scope, stmt, name, here)
    if change is None:
        return
    if at is not None:
        # Only a value this statement spells is read under its tests: one a
        # packed base brought in is another function's name.
        own = {id(node) for node in ast.walk(stmt)}
        change = {
            key: _passed(scope, at[0], _narrowed(at[0], state, stmt.lineno)) if id(state) in own else state
            for key, state in change.items()
        }
    for key, state in change.items():
        if conditional is not None and not _same(state, states[key]):
            # What this run may set differs from what the others leave: set on
            # some runs only, unless what it sets cannot be read at all.
            unreadable = isinstance(state, Unknown) and not state.conditional
            states[key] = (
                state
                if unreadable
                else Unknown(
                    _set_at(scope, state, states[key], here), f"{key} is set under {conditional}", conditional=True
                )
            )
        else:
            states[key] = state


def _assigned(
    scope: _Scope, value: ast.expr, here: str, at: tuple[ast.FunctionDef | ast.AsyncFunctionDef, int] | None = None
) -> dict[str, State]:
    if isinstance(value, ast.IfExp):
        decided = _decide(scope, value.test)
        if decided is not None:
            return _assigned(scope, value.body if decided else value.orelse, here, at)
        body, orelse = _assigned(scope, value.body, here, at), _assigned(scope, value.orelse, here, at)
        why = f"test not decided: `{ast.unparse(value.test)[:60]}`"
        return {k: _either(body[k], orelse[k], Unknown(here, why, conditional=True)) for k in scope.names}
    if at is not None:
        # `args = dict(common, k=v)`: the base's keys as they stand at this
        # line, each key written here over them.
        packed = _packed(scope, at[0], value, value.lineno, at[1])
        if packed is not None:
            return packed
    built = _built(scope, value, here)
    if built is not None:
        return built
    return dict.fromkeys(
        scope.names, Unknown(here, f"assigned {ast.unparse(value)[:60]}, which hprobe cannot read as a dict")
    )


def _subscript(scope: _Scope, target: ast.Subscript, value: ast.expr | None, here: str) -> dict[str, State] | None:
    key = target.slice
    if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
        return dict.fromkeys(
            scope.names, Unknown(here, f"a key set by {ast.unparse(target)[:60]} is not a literal string")
        )
    if key.value not in scope.names:
        return None
    return {key.value: value if value is not None else ABSENT}


def _method(scope: _Scope, call: ast.Call, name: str, here: str) -> dict[str, State] | None:
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == name):
        return None
    if (
        func.attr in ("pop", "setdefault")
        and call.args
        and isinstance(call.args[0], ast.Constant)
        and isinstance(call.args[0].value, str)
    ):
        key = call.args[0].value
        if key not in scope.names:
            return None
        return {key: ABSENT} if func.attr == "pop" else dict.fromkeys([key], Unknown(here, f"{key} set by setdefault"))
    if func.attr == "update" and not call.args and all(k.arg is not None for k in call.keywords):
        return {k.arg: k.value for k in call.keywords if k.arg is not None and k.arg in scope.names} or None
    if func.attr in ("get", "copy", "items", "keys", "values"):
        return None  # reads only
    return dict.fromkeys(scope.names, Unknown(here, f"{name}.{func.attr}(...) changes keys hprobe cannot follow"))


def _other_use(scope: _Scope, stmt: ast.stmt, name: str, here: str) -> dict[str, State] | None:
    """Any other statement that may change the dict: bound by a loop, a
    `with`, a walrus, or handed to a call that may mutate it."""
    for node in ast.walk(stmt):
        if isinstance(node, ast.NamedExpr) and node.target.id == name:
            return dict.fromkeys(scope.names, Unknown(here, f"{name} rebound by :="))
        if (
            isinstance(node, ast.Call)
            and any(isinstance(a, ast.Name) and a.id == name for a in node.args)
            and not _copies(scope, node)
        ):
            return dict.fromkeys(
                scope.names, Unknown(here, f"{name} is handed to {ast.unparse(node.func)[:40]}(), which may change it")
            )
    return None


def _copies(scope: _Scope, call: ast.Call) -> bool:
    """Whether `call` is the builtin `dict(...)`, which copies the dict it is
    handed and leaves it as it was."""
    module = scope.module
    return (
        isinstance(call.func, ast.Name)
        and call.func.id == "dict"
        and not any("dict" in names for names in (module.functions, module.classes, module.imports, module.constants))
        and "dict" not in module.rebound
    )


def _set_at(scope: _Scope, new: State, old: State, here: str) -> str:
    """Where a keyword set on some runs only is set: this statement where it
    sets it, else where an earlier run set it."""
    if isinstance(new, ast.expr):
        return here
    if isinstance(old, ast.expr):
        return f"{scope.module.path}:{old.lineno}"
    if isinstance(old, Unknown) and old.conditional:
        return old.where
    return here


def _either(a: State, b: State, differ: Unknown) -> State:
    """A keyword's state where one of two runs gives `a` and the other `b`:
    the same, or unreadable where either is (that wins over `differ`, which
    says only that the two runs differ)."""
    if _same(a, b):
        return a
    return next((x for x in (a, b) if isinstance(x, Unknown) and not x.conditional), differ)


def _same(a: State, b: State) -> bool:
    if isinstance(a, ast.expr) and isinstance(b, ast.expr):
        return ast.dump(a) == ast.dump(b)
    return a == b


def _from_callers(scope: _Scope, function: ast.FunctionDef | ast.AsyncFunctionDef, depth: int) -> dict[str, State]:
    """A `**kwargs` parameter: what every call of the function in the tree puts in it."""
    where = f"{scope.module.path}:{function.lineno}"
    if depth >= MAX_CALLER_DEPTH:
        return dict.fromkeys(
            scope.names,
            Unknown(
                where,
                f"**{function.args.kwarg.arg if function.args.kwarg else ''} followed {MAX_CALLER_DEPTH} callers deep",
            ),
        )
    found: list[dict[str, State]] = []
    for module in scope.index.modules_mentioning({function.name}):
        for caller, call in _calls_of(module, function.name):
            if call is None:
                continue
            _, owner = function_at(scope.index, module, call.lineno)
            instance, _ = _constructor_values(scope.index, owner)
            inner = _Scope(scope.index, module, owner, instance, scope.names)
            found.append(_call_states(inner, caller, call, depth + 1))
    if not found:
        return dict.fromkeys(scope.names, Unknown(where, f"no call of {function.name} in the tree fills its **kwargs"))
    return _agreed(scope, found, where, f"the {len(found)} callers of {function.name} pass {{key}} differently")


def _argument_from_callers(
    scope: _Scope, function: ast.FunctionDef | ast.AsyncFunctionDef, name: str, depth: int
) -> dict[str, State]:
    """A dict parameter: the keys of what every call of the function in the
    tree hands it, where they agree."""
    where = f"{scope.module.path}:{function.lineno}"
    if depth >= MAX_CALLER_DEPTH:
        return dict.fromkeys(scope.names, Unknown(where, f"{name} followed {MAX_CALLER_DEPTH} callers deep"))
    found: list[dict[str, State]] = []
    for module in scope.index.modules_mentioning({function.name}):
        for caller, call in _calls_of(module, function.name):
            if call is None:
                continue
            handed = _handed(function, call, name)
            if handed is None:
                why = f"{module.path}:{call.lineno} hands {function.name} its {name} in a way hprobe does not read"
                return dict.fromkeys(scope.names, Unknown(where, why))
            _, owner = function_at(scope.index, module, call.lineno)
            instance, _ = _constructor_values(scope.index, owner)
            inner = _Scope(scope.index, module, owner, instance, scope.names)
            # A caller's value is kept as written: a reading takes a passed value
            # only as a literal or as words (`backend=planned`, unread), so an
            # expression of the caller's is never evaluated where it would
            # name another thing; the keyword is passed either way.
            found.append(_spread(inner, caller, handed, call.lineno, depth + 1))
    if not found:
        why = f"**{name} is a parameter of {function.name}, and no call of it in the tree hands it in"
        return dict.fromkeys(scope.names, Unknown(where, why))
    return _agreed(scope, found, where, f"the {len(found)} callers of {function.name} hand {{key}} differently")


def _agreed(scope: _Scope, found: list[dict[str, State]], where: str, differently: str) -> dict[str, State]:
    """Each key as every caller's reading has it, or unknown (`differently`,
    with `{key}` in it) where they differ."""
    out: dict[str, State] = {}
    for key in scope.names:
        first = found[0][key]
        agree = all(_same(f[key], first) for f in found[1:])
        out[key] = first if agree else Unknown(where, differently.format(key=key))
    return out


def block_spans(block: list[ast.stmt], line: int) -> bool:
    """Whether the statements of `block` hold `line`."""
    return bool(block) and block[0].lineno <= line <= (block[-1].end_lineno or block[-1].lineno)


def _handed(function: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, name: str) -> ast.expr | None:
    """The argument `call` gives `function`'s parameter `name`, or None where
    the call does not say it plainly (`*args`, `**kwargs`, left to a default)."""
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    positional = [*function.args.posonlyargs, *function.args.args]
    at = next((i for i, a in enumerate(positional) if a.arg == name), None)
    if at is None or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    if positional and positional[0].arg in ("self", "cls") and isinstance(call.func, ast.Attribute):
        at -= 1  # a bound method: the receiver is the first
    return call.args[at] if 0 <= at < len(call.args) else None


def _calls_of(
    module: ModuleInfo, name: str
) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef | None, ast.Call | None]]:
    out: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef | None, ast.Call | None]] = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if called == name:
                out.append((innermost_function(module.tree, node.lineno), node))
    return out


def innermost_function(tree: ast.AST, line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    around = enclosing_functions(tree, line)
    return around[0] if around else None


def enclosing_functions(tree: ast.AST, line: int) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions around `line`, the innermost first. Found by descending
    only into the statement that spans the line, picked by bisection in each
    block: a module of many functions is not walked whole for every question
    (a helper with 10,000 callers in one module asked it 10,000 times)."""
    around: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    node: ast.AST | None = tree
    while node is not None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            around.append(node)
        node = _statement_spanning(node, line)
    return around[::-1]


def _statement_spanning(node: ast.AST, line: int) -> ast.AST | None:
    """The statement (or handler, or match case) directly under `node` whose
    lines hold `line`, or None."""
    for _, value in ast.iter_fields(node):
        if not (isinstance(value, list) and value and isinstance(value[0], _BLOCK_ITEMS)):
            continue
        at = bisect.bisect_right(value, line, key=_first_line) - 1
        if at >= 0 and line <= _last_line(value[at]):
            return value[at]
    return None


def _last_line(node: ast.AST) -> int:
    if isinstance(node, ast.match_case):
        return _last_line(node.body[-1])
    return node.end_lineno or node.lineno  # type: ignore[attr-defined]


_BLOCK_ITEMS = (ast.stmt, ast.excepthandler, ast.match_case)


def _first_line(node: ast.AST) -> int:
    # A match case has no position of its own: its pattern's.
    return node.pattern.lineno if isinstance(node, ast.match_case) else node.lineno  # type: ignore[attr-defined]


def function_at(
    index: RepoIndex, module: ModuleInfo, line: int
) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef | None, ClassInfo | None]:
    return innermost_function(module.tree, line), class_at(module, line)


def class_at(module: ModuleInfo, line: int) -> ClassInfo | None:
    """The top-level class whose body holds `line`."""
    return next(
        (cls for cls in module.classes.values() if cls.node.lineno <= line <= (cls.node.end_lineno or cls.node.lineno)),
        None,
    )


def call_at(tree: ast.AST, line: int) -> ast.Call | None:
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.lineno == line]
    # The outermost call on the line is the one the site names (an argument's call starts after it).
    return min(calls, key=lambda c: c.col_offset) if calls else None


def _constructor_values(index: RepoIndex, owner: ClassInfo | None) -> tuple[dict[str, Any], dict[str, str]]:
    """`self.<attr>` values the constructors of `owner`'s hierarchy set from a
    literal or a parameter's literal default, each set once in the hierarchy."""
    if owner is None:
        return {}, {}
    seen: dict[str, list[tuple[Any, str]]] = {}
    for cls in index.mro(owner):
        init = cls.methods.get("__init__")
        if init is None:
            continue
        defaults = _defaults(init.node)
        for node in ast.walk(init.node):
            if not isinstance(node, ast.Assign):
                continue
            for target in node.targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                ):
                    value = _literal(node.value, defaults)
                    seen.setdefault(target.attr, []).append((value, f"{cls.module.path}:{node.lineno}"))
    instance: dict[str, Any] = {}
    said: dict[str, str] = {}
    for attr, values in seen.items():
        if len(values) == 1 and values[0][0] is not _NOT_LITERAL:
            instance[attr] = values[0][0]
            said[attr] = f"self.{attr} = {values[0][0]!r} ({owner.name}'s constructor, {values[0][1]})"
    return instance, said


_NOT_LITERAL = object()


def _defaults(function: ast.FunctionDef) -> dict[str, Any]:
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    out: dict[str, Any] = {}
    for arg, default in zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True):
        if isinstance(default, ast.Constant):
            out[arg.arg] = default.value
    for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if isinstance(kw_default, ast.Constant):
            out[arg.arg] = kw_default.value
    return out


def _literal(node: ast.expr, defaults: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id in defaults:
        return defaults[node.id]
    return _NOT_LITERAL


def call_form(index: RepoIndex, module: ModuleInfo, line: int, entry: str, where: str) -> CallForm:
    """The arguments the call at `line` hands `entry`, as far as the source
    says: positional ones (before any `*args`), the keywords spelled or
    carried by a `**dict` the reader follows (those passed on some runs only,
    apart), and why the rest cannot be told where something cannot be read.
    `where`: the call's file:line as the user named the tree."""
    function, owner = function_at(index, module, line)
    call = call_at(function or module.tree, line)
    if call is None:
        return CallForm(entry, where, 0, (), unknown="the call could not be found again")
    unknown: list[str] = []
    starred = [a for a in call.args if isinstance(a, ast.Starred)]
    if starred:
        unknown.append(f"it passes *{ast.unparse(starred[0].value)[:40]}")
    positional = len(call.args) - len(starred) if not starred else call.args.index(starred[0])
    instance, _ = _constructor_values(index, owner)
    scope = _Scope(index, module, owner, instance, frozenset())
    file = where.rpartition(":")[0]  # the call's file as the user named the tree
    given = [k for k in [*_partial_keywords(scope, function, call), *call.keywords] if k.arg is not None]
    keywords = list(dict.fromkeys(k.arg for k in given if k.arg is not None))
    places = {k.arg: f"{file}:{k.lineno}" for k in given if k.arg is not None and k.lineno != line}
    conditional: list[tuple[str, str]] = []
    if any(k.arg is None for k in call.keywords):
        candidates = _literal_keys(function or module.tree, module.tree)
        forwarded = _forwarded_keys(index, function, call)
        if isinstance(forwarded, str):
            unknown.append(forwarded)
        else:
            candidates |= forwarded
        # ANY_KEY is no keyword a dict can carry: where it comes back unknown,
        # a ** carries keys the reading cannot list, whatever they are.
        names = frozenset(candidates - set(keywords)) | {ANY_KEY}
        reading, _, _ = read_keywords(index, module, line, names)
        reading.passed.pop(ANY_KEY, None)
        keywords.extend(sorted(reading.passed))
        # Where a key is written in this module (a caller's key, read through
        # a `**kwargs` parameter, is another file's: the call's place stands).
        here = {id(node) for node in ast.walk(module.tree)}
        places.update({k: f"{file}:{node.lineno}" for k, node in reading.passed.items() if id(node) in here})
        for name, why in sorted(reading.unknown.items()):
            if name == ANY_KEY and why.conditional:
                continue  # keys the reading listed are set on some runs: said of each of them
            if why.conditional:
                conditional.append((name, f"on some runs only ({why})"))
                set_in, _, at = why.where.rpartition(":")
                if set_in == module.path:
                    places.setdefault(name, f"{file}:{at}")
            elif not unknown:
                unknown.append(f"which keywords a ** of it carries: {why}")
    return CallForm(
        entry,
        where,
        positional,
        tuple(keywords),
        tuple(conditional),
        "; ".join(unknown) or None,
        tuple(sorted(places.items())),
    )


# Stands for every key a reading was not asked about (not an identifier, so no
# keyword of a call can be it).
ANY_KEY = "<any key>"


def _forwarded_keys(
    index: RepoIndex, function: ast.FunctionDef | ast.AsyncFunctionDef | None, call: ast.Call
) -> set[str] | str:
    """The keywords the callers of `function` put in a `**kwargs` parameter the
    call spreads (what the reader then follows, as it follows a dict); why
    they cannot be told where a caller forwards a `**` of its own."""
    kwarg = function.args.kwarg.arg if function is not None and function.args.kwarg is not None else None
    if kwarg is None or not any(
        k.arg is None and isinstance(k.value, ast.Name) and k.value.id == kwarg for k in call.keywords
    ):
        return set()
    assert function is not None
    keys: set[str] = set()
    for module in index.modules_mentioning({function.name}):
        for caller, found in _calls_of(module, function.name):
            if found is None:
                continue
            keys.update(k.arg for k in found.keywords if k.arg is not None)
            if any(k.arg is None for k in found.keywords):
                if caller is not None and caller.args.kwarg is not None:
                    return (
                        f"**{kwarg} carries what {function.name}'s callers forward from their own callers "
                        f"({module.path}:{found.lineno})"
                    )
                keys |= _literal_keys(caller or module.tree)
    return keys


def _literal_keys(*scopes: ast.AST) -> set[str]:
    """Every string a dict built in `scopes` may hold as a key: `{"k": …}`,
    `dict(k=…)`, `d["k"] = …`, `d.update(k=…)`, `d.setdefault("k", …)`. A
    `**dict` the reader can follow holds no other (one it cannot follow is
    said so, whatever its keys)."""
    keys: set[str] = set()
    for scope in scopes:
        for node in ast.walk(scope):
            if isinstance(node, ast.Dict):
                keys.update(k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
            elif isinstance(node, ast.Call):
                if (
                    isinstance(node.func, ast.Name)
                    and node.func.id == "dict"
                    or (isinstance(node.func, ast.Attribute) and node.func.attr == "update")
                ):
                    keys.update(k.arg for k in node.keywords if k.arg is not None)
                if isinstance(node.func, ast.Attribute) and node.func.attr in ("setdefault", "pop") and node.args:
                    first = node.args[0]
                    if isinstance(first, ast.Constant) and isinstance(first.value, str):
                        keys.add(first.value)
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
                if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                    keys.add(node.slice.value)
    return keys
