"""The head count a call hands FlashInfer, followed back from its query
through the engine's own code (read with `ast`, never imported).

The query's head axis is the second from the end at the call (FlashInfer's
MLA entries take `[batch, q_len, heads, dim]`; a dtype view, `unsqueeze(0|1)`,
a row slice or `.contiguous()` leave it there). From the query the trail
follows, in the function and the helpers and callers around it:

- `x.view(a, b, H, d)` / `x.reshape(...)`, `torch.empty((..., H, d))`,
  `x.new_empty((rows, *x.shape[1:]))`: the count becomes the expression `H`;
- `rows, heads, dim = q.shape`, `q.shape[-2]`: a name that is a tensor's count;
- the binding of a name that reaches the call (an `if` between two is decided
  by its test, or both sides must agree), a parameter filled by every caller in
  the tree alike (followed up to MAX_TRAIL functions), a helper's `return`;
- `self.<name>` where its class stores it once, in `__init__` (or a
  `@property` returns it: attributes.py), and from there each construction
  of the class (`Core(2)`), found by the class's name; `box.q` where `box`
  is bound to a construction (`box = Box(q=...)`, a dataclass or named
  tuple, or a class whose `__init__` stores it; or `box = self.box`, the
  construction `__init__` stores), what that construction hands in;
- any other value the count depends on (`fold` of `fold * heads`) is the
  engine's expression, evaluated per count by the sound evaluator, with
  what callers hand in that hprobe cannot know kept `Opaque`;
- the tests a call on the trail runs under (the FlashInfer call's own, and
  each caller's around the call the trail crosses), evaluated with the count:
  where one is false the call is not reached with those values
  (`NotReached`), and where one that varies with the count or a run-time
  value cannot be decided, neither can the answer.

The trail starts where the engine hands its attention the layer's query:
a parameter the mapping names (`layer_query`: "forward_mqa(q)"), which
carries the model's per-rank count, heads // tp. Where the trail cannot go
on, it ends with the file:line and why, and the call is shown under a stated
assumption (paths.py): never a guess."""

from __future__ import annotations

import ast
import copy
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from hprobe.rules.repo.interpreter.evaluate import (
    Binding,
    NotEvaluable,
    Opaque,
    Raises,
    evaluate_expression,
    one_of,
)
from hprobe.rules.repo.tracing.attributes import Field, NotStored, Stored, field_of, is_self, stored
from hprobe.rules.repo.tracing.guards import guard_tests, negated
from hprobe.rules.repo.tracing.instances import (
    Confined,
    NotConfined,
    class_named,
    confine,
    dispatches_to,
    holds,
    may_be_family,
)
from hprobe.rules.repo.tracing.keywords import block_spans, call_at, class_at, enclosing_functions, function_at
from hprobe.rules.repo.tree.mapping import RunValue
from hprobe.rules.repo.tree.scan import ClassInfo, ModuleInfo, RepoIndex, resolve_relative

# How many functions (helpers and callers) a trail crosses before it ends.
MAX_TRAIL = 8
# The most modules whose calls of a function are searched past a caller whose
# trail ended, to judge the other callers each on its own.
MAX_SPLIT_MODULES = 8

Function = ast.FunctionDef | ast.AsyncFunctionDef

# Methods that give a tensor of the same leading axes, or change only the
# last one (a dtype view): the head axis, second from the end, is kept.
_SAME_HEADS = frozenset({"contiguous", "clone", "detach", "to", "float", "half", "bfloat16", "cuda"})
# Methods whose result takes the shape of the tensor they are given.
_SHAPED_AS = frozenset({"view_as", "reshape_as", "expand_as"})
_SHAPED = frozenset({"view", "reshape", "expand", "new_empty", "new_zeros", "new_ones", "new_full"})
_TORCH_SHAPED = frozenset({"empty", "zeros", "ones", "full", "randn", "rand"})
_TORCH_LIKE = frozenset({"empty_like", "zeros_like", "ones_like", "full_like"})


@dataclass(frozen=True)
class TrailEnd(NotEvaluable):
    """Where following the head count stopped (file:line), and why."""

    @property
    def why(self) -> str:
        return self.what


@dataclass(frozen=True)
class _Frame:
    """A function on the trail; `args` holds what its caller passed, when the
    trail entered it from one call (else its callers are searched)."""

    module: ModuleInfo
    function: Function | None
    owner: ClassInfo | None
    args: tuple[tuple[str, ast.expr, _Frame], ...] | None = None
    depth: int = 0
    called_from: tuple[str, str] = ("", "")  # the call that entered it: (calling function, file:line)
    # The calling function's frame and the line of its call, where the trail entered from one.
    entered_from: tuple[_Frame, int] | None = field(default=None, compare=False)

    def where(self, node: ast.AST | None = None) -> tuple[str, int]:
        line = getattr(node, "lineno", None) or (self.function.lineno if self.function else 1)
        return self.module.path, line

    def passed(self, name: str) -> tuple[ast.expr, _Frame] | None:
        for param, node, frame in self.args or ():
            if param == name:
                return node, frame
        return None


# -- what a count is made of -------------------------------------------------------------


@dataclass(frozen=True)
class _Root:
    """The layer's query: the model's per-rank count."""

    where: str


@dataclass(frozen=True)
class _Expr:
    """An expression of the engine, its free names bound to other parts."""

    node: ast.expr
    frame: _Frame = field(compare=False)
    names: tuple[tuple[str, Part], ...] = ()
    written: ast.expr | None = field(default=None, compare=False)  # the engine's own, where `node` renames parts of it


@dataclass(frozen=True)
class _Item:
    """Element `index` of a tuple another part gives."""

    of: Part
    index: int


@dataclass(frozen=True)
class _Callers:
    """A parameter as the function's several callers fill it: they must agree,
    unless the evaluation names the caller (`caller_key(where)`); `callers`
    says each in words, in the order of `parts`."""

    parts: tuple[Part, ...]
    where: str  # the function, file:line
    callers: tuple[tuple[str, str], ...] = ()  # (the calling function, the call's file:line)


@dataclass(frozen=True)
class _Ended:
    """What one caller hands in, where hprobe cannot follow it."""

    end: TrailEnd


def caller_key(where: str) -> str:
    """The key of a run's choice among the callers of the function at `where`."""
    return f"caller {where}"


@dataclass(frozen=True)
class _Cond:
    """A name bound under an `if`: the test decides; where it cannot, both sides must agree."""

    test: Part
    then: Part
    orelse: Part
    where: str


@dataclass(frozen=True)
class _Run:
    """A value the engine fills at run time that the mapping lists the values
    of (mapping.RunValue): the count is evaluated at each."""

    value: RunValue
    where: str


@dataclass(frozen=True)
class _Unknowable:
    """A value the engine fills at run time: Opaque to the evaluator."""

    why: str


@dataclass(frozen=True)
class _Guard:
    """A test a call on the trail runs under: reached only where it is
    `truthy` (or not); `varies`: it reads the count, a run-time value or a
    caller's choice, so it may hold for some answers and not others."""

    test: Part
    truthy: bool
    where: str  # file:line
    said: str  # the condition the call runs under, as Python writes it
    varies: bool
    # One of the FlashInfer call's own tests, which its findings say already (guards.py).
    own: bool = False


@dataclass(frozen=True)
class _Guarded:
    """A part reached only where its guards hold."""

    part: Part
    guards: tuple[_Guard, ...]


@dataclass(frozen=True)
class NotReached:
    """With these values a test on the trail is false: the call is not reached."""

    where: str  # file:line of the test
    said: str  # the condition the call runs under, which does not hold


Part = _Root | _Expr | _Item | _Callers | _Cond | _Run | _Unknowable | _Ended | _Guarded

# What a trail looks for: a tensor's head count, a value, or the head count of
# the tensor a dict holds at a key.
_Want = tuple[str, str | None]
_HEADS: _Want = ("heads", None)
_VALUE: _Want = ("value", None)


@dataclass(frozen=True)
class HeadTrail:
    """How a call's head count is computed from the model's per-rank count."""

    count: Part
    root: str  # where the layer's query enters, file:line
    cited: tuple[tuple[str, int], ...]  # (file, line) of each step the trail read
    said: str  # the count at the call as the engine writes it ("fold * heads")
    index: RepoIndex = field(repr=False, compare=False)
    # The run-time values the count depends on, each with where the trail met it.
    runs: tuple[tuple[RunValue, str], ...] = ()
    # The functions whose callers hand in different parts of the count: where
    # each is (file:line) and its callers in words, in the order a run's
    # `caller_key(where)` picks them by.
    splits: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    # Every shape on the trail that sets the head axis is a view or reshape of
    # the query: the count is the query's own heads regrouped (a fold), the
    # work the call does, never a padding that could be smaller.
    regrouped: bool = False

    def evaluate(
        self, n: int, binding: Binding | None = None, run: dict[str, Any] | None = None
    ) -> int | Raises | NotEvaluable | NotReached:
        """The count the call hands FlashInfer when the layer's query has `n`
        heads (and each run-time value of `runs` the value `run` gives it, by
        name); Raises when the engine raises on the way; NotEvaluable (with the
        file:line) where it depends on what hprobe cannot know; NotReached
        where a test on the trail is false with these values."""
        return self.evaluate_said(n, binding, run)[0]

    def evaluate_said(
        self, n: int, binding: Binding | None = None, run: dict[str, Any] | None = None
    ) -> tuple[int | Raises | NotEvaluable | NotReached, tuple[tuple[str, str], ...], tuple[Unsure, ...]]:
        """`evaluate`, with the tests on the way that hprobe could not decide:
        those that do not vary with the answers, as (file:line, condition) —
        the answer holds where they do, and its findings say so — and those
        that do (`Unsure`): the call may not run at all with these values, so
        only an accepted count is an answer there."""
        memo: dict[int, Any] = {}
        try:
            reading = replace(binding or Binding(), unknown_rebound=True)
            value = _value(self.count, n, self.index, reading, run or {}, memo)
        except _Stop as stop:
            return stop.result, _said(memo), _unsure(memo)
        if isinstance(value, Opaque):
            # Its reason starts with the file:line it was met at: traced.innermost reads it from there.
            return NotEvaluable(self.root.rpartition(":")[0], 0, value.why), _said(memo), _unsure(memo)
        if isinstance(value, bool) or not isinstance(value, int):
            found = NotEvaluable(self.root, 0, f"the head count is {type(value).__name__}, not an int")
            return found, _said(memo), _unsure(memo)
        return value, _said(memo), _unsure(memo)


@dataclass(frozen=True, order=True)
class Unsure:
    """A test on the trail that varies with the run and that hprobe cannot decide."""

    where: str  # file:line of the test
    said: str  # the condition the call runs under
    why: str  # why it cannot be decided
    own: bool = False  # one of the FlashInfer call's own tests, which its findings say already


# The memo's key for the tests an evaluation could not decide and says (no part's id is negative).
_SAID = -1


# The memo's key for the tests that vary with the answers and could not be decided.
_UNSURE = -2


def _said(memo: dict[int, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(memo.get(_SAID, {}).items()))


def _unsure(memo: dict[int, Any]) -> tuple[Unsure, ...]:
    return tuple(sorted(memo.get(_UNSURE, {}).values()))


# A dict that holds nothing at the key asked (its callers' other spreads may).
_ABSENT = TrailEnd("", 0, "absent")


class _Stop(Exception):
    def __init__(self, result: Raises | NotEvaluable | NotReached):
        self.result = result


def _leaf(part: _Root | _Run | _Unknowable | _Ended, n: int, run: dict[str, Any]) -> Any:
    if isinstance(part, _Root):
        return n
    if isinstance(part, _Ended):
        return Opaque(str(part.end))
    if isinstance(part, _Run):
        if part.value.name in run:
            return run[part.value.name]
        return Opaque(f"{part.where}: `{part.value.name}` is filled at run time ({part.value.means})")
    return Opaque(part.why)


def _value(part: Part, n: int, index: RepoIndex, binding: Binding, run: dict[str, Any], memo: dict[int, Any]) -> Any:
    """The part's value with these values; `memo` keeps each part's value for
    one evaluation (a trail's parts are shared: the same caller's count in
    every test on the way)."""
    key = id(part)
    if key not in memo:
        memo[key] = _computed(part, n, index, binding, run, memo)
    return memo[key]


def _computed(part: Part, n: int, index: RepoIndex, binding: Binding, run: dict[str, Any], memo: dict[int, Any]) -> Any:
    if isinstance(part, (_Root, _Run, _Unknowable, _Ended)):
        return _leaf(part, n, run)
    if isinstance(part, _Guarded):
        return _reached(part, n, index, binding, run, memo)
    if isinstance(part, _Item):
        of = _value(part.of, n, index, binding, run, memo)
        if isinstance(of, Opaque):
            return of.plain  # an item's truth is not the whole's
        if isinstance(of, (tuple, list)) and -len(of) <= part.index < len(of):
            return of[part.index]
        return Opaque(f"unpacks {type(of).__name__} into more names than it holds")
    if isinstance(part, _Callers):
        chosen = run.get(caller_key(part.where))
        if isinstance(chosen, int):
            return _value(part.parts[chosen], n, index, binding, run, memo)
        values = [_value(p, n, index, binding, run, memo) for p in part.parts]
        opaque = next((v for v in values if isinstance(v, Opaque)), None)
        if opaque is not None:
            return opaque.plain
        if any(type(v) is not type(values[0]) or v != values[0] for v in values[1:]):
            return Opaque(
                f"{part.where}: its {len(values)} callers hand it different values "
                f"({', '.join(map(repr, values))[:80]})"
            )
        return values[0]
    if isinstance(part, _Cond):
        test = _value(part.test, n, index, binding, run, memo)
        if not isinstance(test, Opaque) or test.truth is not None:
            return _value(part.then if test else part.orelse, n, index, binding, run, memo)
        sides = [_value(side, n, index, binding, run, memo) for side in (part.then, part.orelse)]
        # The `if` decides, on what hprobe cannot know: the value where the
        # sides agree, one of them where they are plain values (a backend
        # name), else unknown for the test's reason (the trail's end).
        return one_of(test.why, *sides)
    frame = {name: _value(p, n, index, binding, run, memo) for name, p in part.names}
    result = evaluate_expression(index, part.frame.owner, part.frame.module, part.node, frame, binding).value
    if isinstance(result, Raises):
        raise _Stop(result)
    if isinstance(result, NotEvaluable):
        return Opaque(str(result))
    return result


def _reached(
    part: _Guarded, n: int, index: RepoIndex, binding: Binding, run: dict[str, Any], memo: dict[int, Any]
) -> Any:
    """The part's value where its guards hold. A false guard wins over one
    that cannot be told: the call is not reached with these values either way.
    One that cannot be told is kept with the answer: fixed for every answer,
    the answer holds where it does; varying with them, the call may not run
    with these values, which the answer carries (`Unsure`)."""
    for guard in part.guards:
        truth, why = _truth(guard, n, index, binding, run, memo)
        if truth is None:
            if not guard.varies and not guard.own:
                memo.setdefault(_SAID, {})[guard.where] = guard.said
            if guard.varies:
                memo.setdefault(_UNSURE, {}).setdefault(guard.where, Unsure(guard.where, guard.said, why, guard.own))
        elif truth != guard.truthy:
            raise _Stop(NotReached(guard.where, guard.said))
    return _value(part.part, n, index, binding, run, memo)


def _truth(
    guard: _Guard, n: int, index: RepoIndex, binding: Binding, run: dict[str, Any], memo: dict[int, Any]
) -> tuple[bool | None, str]:
    """Whether the guard's test is true with these values (None where it cannot be told, with why)."""
    value = _value(guard.test, n, index, binding, run, memo)
    if isinstance(value, Opaque):
        return value.truth, value.why
    try:
        return bool(value), ""
    except Exception:  # noqa: BLE001 - a value whose truth the subset cannot tell
        return None, f"the truth of a {type(value).__name__}"


# -- following the trail ---------------------------------------------------------------


@dataclass
class TreeCalls:
    """What the callers' search reads again and again in one tree, read once
    for every trail in it: a large tree (vLLM) has thousands of modules, and
    each trail asks per function."""

    index: RepoIndex
    _calls: dict[str, dict[str, list[tuple[Function | None, ast.Call]]]] = field(default_factory=dict)
    _shared: dict[str, bool] = field(default_factory=dict)
    _few: dict[str, bool] = field(default_factory=dict)
    _confined: dict[str, Confined | NotConfined] = field(default_factory=dict)
    _stored: dict[tuple[str, str], Stored | NotStored | None] = field(default_factory=dict)
    _sites: dict[
        tuple[str, frozenset[str] | None],
        tuple[
            list[tuple[ModuleInfo, Function | None, ast.Call]], Iterator[tuple[ModuleInfo, Function | None, ast.Call]]
        ],
    ] = field(default_factory=dict)

    def sites(
        self, name: str, within: frozenset[str] | None = None
    ) -> Iterator[tuple[ModuleInfo, Function | None, ast.Call]]:
        """Every call of `name` in the tree with its module and holder, module
        by module; with `within`, only in modules that also spell one of those
        words (where a confined class's instances can be, instances.py). A
        trail asks for the same function's callers once per parameter and
        path: what one search found is replayed, and a module is parsed only
        when some search gets that far."""
        key = (name, within)
        if key not in self._sites:
            scan = (
                (module, caller, call)
                for module in self.index.each_module_naming(name, also=within)
                for caller, call in self.calls_named(module, name)
            )
            self._sites[key] = ([], scan)
        found, rest = self._sites[key]
        at = 0
        while True:
            if at == len(found):
                site = next(rest, None)
                if site is None:
                    return
                found.append(site)
            yield found[at]
            at += 1

    def calls_named(self, module: ModuleInfo, name: str) -> list[tuple[Function | None, ast.Call]]:
        """The calls of `name` (a bare name or an attribute) in `module`, each with the function that holds it."""
        table = self._calls.get(module.path)
        if table is None:
            table = self._calls[module.path] = _calls_by_name(module.tree)
        return table.get(name, [])

    def few_callers(self, name: str) -> bool:
        """Whether the calls of `name` lie in few enough modules to search them
        all past a caller whose trail ended (a common name would parse much of
        a large tree for one answer)."""
        if name not in self._few:
            self._few[name] = self.index.count_naming(name) <= MAX_SPLIT_MODULES
        return self._few[name]

    def confined(self, owner: ClassInfo) -> Confined | NotConfined:
        """Where the instances of `owner`'s family live (instances.py), worked out once per class."""
        if owner.qualname not in self._confined:
            self._confined[owner.qualname] = confine(self.index, owner)
        return self._confined[owner.qualname]

    def stored_on(self, cls: ClassInfo, name: str) -> Stored | NotStored | None:
        """What `.<name>` holds on one construction of `cls` hprobe read (attributes.py)."""
        key = (f"{cls.qualname} constructed", name)
        if key not in self._stored:
            self._stored[key] = stored(self.index, cls, None, name)
        return self._stored[key]

    def stored(self, owner: ClassInfo, name: str) -> Stored | NotStored | None:
        """What `self.<name>` holds on `owner`'s instances (attributes.py), worked out once."""
        key = (owner.qualname, name)
        if key not in self._stored:
            self._stored[key] = stored(self.index, owner, self.confined(owner), name)
        return self._stored[key]

    def shared(self, name: str) -> bool:
        """Whether more than one class of the tree defines a method `name`
        (then `obj.name(...)` may call another class's): the files that spell
        `def name(` are parsed until a second is found."""
        if name not in self._shared:
            definers = (
                cls
                for module in self.index.each_module_mentioning({f"def {name}("})
                for cls in module.classes.values()
                if name in cls.methods
            )
            self._shared[name] = next(definers, None) is not None and next(definers, None) is not None
        return self._shared[name]


@dataclass
class _Trail:
    index: RepoIndex
    roots: dict[str, str]  # function name -> the parameter that carries the layer's query
    tree: TreeCalls  # what the trails of this tree have read of it
    run_values: tuple[RunValue, ...] = ()  # what the mapping says the engine fills at run time
    cited: list[tuple[str, int]] = field(default_factory=list)
    root: str | None = None
    shaped: set[str] = field(default_factory=set)  # how shapes on the trail set the head axis
    # The tests around each call site the trail crossed (file, line, the class of `self`), read once.
    guards: dict[tuple[str, int, str], tuple[_Guard, ...]] = field(default_factory=dict)

    def cite(self, frame: _Frame, node: ast.AST) -> None:
        self.cited.append(frame.where(node))

    # The head count of a tensor expression.
    def heads(self, node: ast.expr, frame: _Frame) -> Part | TrailEnd:
        self.cite(frame, node)
        if isinstance(node, ast.Name):
            return self._name(node.id, node, frame, _HEADS)
        if isinstance(node, ast.Subscript):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                return self.entry(node.value, node.slice.value, frame)  # `common["query"]`
            if isinstance(node.slice, ast.Tuple):
                return self._end(frame, node, f"`{_text(node)}` indexes more than the first axis")
            return self.heads(node.value, frame)
        if isinstance(node, ast.Call):
            return self._call_heads(node, frame)
        if isinstance(node, ast.Attribute) and not is_self(node.value):
            member = self.member(node, frame, _HEADS)
            if member is not None:
                return member
        if isinstance(node, ast.Attribute) and is_self(node.value):
            held = self.attribute(node, frame, _HEADS)
            if held is None:
                return self._end(frame, node, f"the query is `{_text(node)}`, which no method of its class stores")
            return held
        return self._end(frame, node, f"the query is `{_text(node)}`, which hprobe does not follow")

    def member(self, node: ast.Attribute, frame: _Frame, want: _Want) -> Part | TrailEnd | None:
        """`obj.<name>` where `obj` is bound to a construction hprobe reads
        (`box = Box(q, ...)`, or `self.box` that `__init__` stores so): what the
        construction hands the field, or what the class's `__init__` stores
        from it. None where `obj` is no construction of the tree's classes."""
        made = self._construction(node.value, frame)
        if made is None:
            return None
        call, at, cls = made
        if frame.depth >= MAX_TRAIL:
            return self._end(frame, node, f"followed {MAX_TRAIL} functions deep")
        field_ = field_of(self.index, cls, node.attr)
        if isinstance(field_, Field):
            self.cite(at, call)
            handed = next((k.value for k in call.keywords if k.arg == node.attr), None)
            if handed is None and field_.position is not None and field_.position < len(call.args):
                if any(isinstance(a, ast.Starred) for a in call.args[: field_.position + 1]):
                    return self._end(at, call, f"`{_text(call.func)}` is called with *args")
                handed = call.args[field_.position]
            if handed is None and (
                any(k.arg is None for k in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args)
            ):
                return self._end(at, call, f"`{_text(call.func)}` is called with *args or **kwargs")
            if handed is None and field_.default is not None:
                return self._follow(want, field_.default, _Frame(cls.module, None, cls, None, at.depth))
            if handed is None:
                return self._end(at, call, f"`{_text(call.func)}(...)` hands `{node.attr}` nothing")
            return self._follow(want, handed, at)
        if isinstance(field_, NotStored):
            return _not_stored(field_, at, call)
        found = self.tree.stored_on(cls, node.attr)
        if found is None:
            return None
        if isinstance(found, NotStored):
            return _not_stored(found, at, call)
        if found.function.name == "__init__" and self._init_of(cls) is not found.function:
            return self._end(at, call, f"{cls.name}(...) runs another `__init__` than the one storing `{node.attr}`")
        if found.function.name == "__init__":
            entered = _enter(
                call, found.function, True, (at.module, at.function, at.owner), at.depth + 1, found.cls.module, cls
            )
        else:
            entered = _Frame(found.cls.module, found.function, cls, None, at.depth + 1)  # a property: no arguments
        if isinstance(entered, TrailEnd):
            return entered
        self.cite(at, call)
        return self._follow(want, found.value, entered)

    def _construction(self, node: ast.expr, frame: _Frame) -> tuple[ast.Call, _Frame, ClassInfo] | None:
        """The construction of a tree class that `node` (a local, or `self.<name>`) is bound to, with its frame."""
        value: ast.expr | None = None
        at = frame
        if isinstance(node, ast.Name) and frame.function is not None:
            definition = _reaching(frame.function, node.id, node.lineno)
            if isinstance(definition, tuple) and definition[1] is None:
                value = definition[0].value
                if isinstance(value, ast.Attribute) and is_self(value.value):
                    return self._construction(value, frame)  # `box = self.box`: the construction `__init__` stores
        elif isinstance(node, ast.Attribute) and is_self(node.value) and frame.owner is not None:
            found = self.tree.stored(frame.owner, node.attr)
            if isinstance(found, Stored) and found.function.name == "__init__":
                value = found.value
                at = _Frame(found.cls.module, found.function, frame.owner, None, frame.depth + 1)
        if not isinstance(value, ast.Call):
            return None
        cls = self._class_called(at.module, value)
        return (value, at, cls) if cls is not None else None

    def attribute(self, node: ast.Attribute, frame: _Frame, want: _Want) -> Part | TrailEnd | None:
        """`self.<name>` read in a method: what its class stores there,
        followed in the `__init__` (or property) that stores it; None where
        no method stores it (a class attribute: the evaluator reads it)."""
        owner = frame.owner
        if owner is None or frame.function is None:
            return self._end(frame, node, f"`{_text(node)}` is read outside a method")
        if frame.depth >= MAX_TRAIL:
            return self._end(frame, node, f"followed {MAX_TRAIL} functions deep")
        found = self.tree.stored(owner, node.attr)
        if found is None:
            return None
        if isinstance(found, NotStored):
            return _not_stored(found, frame, node)
        stored_in = _Frame(found.cls.module, found.function, owner, None, frame.depth + 1)
        self.cite(stored_in, found.value)
        return self._follow(want, found.value, stored_in)

    def _call_heads(self, node: ast.Call, frame: _Frame) -> Part | TrailEnd:
        func = node.func
        if isinstance(func, ast.Attribute):
            method, receiver = func.attr, func.value
            if method in _SAME_HEADS:
                return self.heads(receiver, frame)
            if method in _SHAPED_AS:
                if len(node.args) != 1 or node.keywords:
                    return self._end(frame, node, f"`{_text(node)}` gives no shape hprobe can read")
                # The other tensor's shape: a view or reshape of the layer's query
                # regroups it (as `view` does), else it is another tensor's count.
                regroups = method != "expand_as" and not isinstance(self.heads(receiver, frame), TrailEnd)
                self.shaped.add("regroup" if regroups else "allocate")
                return self.heads(node.args[0], frame)
            if (
                method == "unsqueeze"
                and len(node.args) == 1
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in (0, 1)
            ):
                # An MLA query has at least [tokens, heads, dim]: a new axis at 0 or 1 is before the heads.
                return self.heads(receiver, frame)
            if method == "view" and len(node.args) == 1 and _dotted(node.args[0]).startswith("torch."):
                return self.heads(receiver, frame)  # a dtype view changes only the last axis
            if _dotted(receiver) == "torch" and method in ("cat", "concat") and _last_axis(node) and node.args:
                # Joined along the last axis: the heads of each part (of the
                # first, or of a pair such as the layer's (q_nope, q_pe)).
                parts = node.args[0]
                if isinstance(parts, (ast.List, ast.Tuple)):
                    return self.heads(parts.elts[0], frame) if parts.elts else self._end(frame, node, "an empty join")
                return self.heads(parts, frame)
            if _dotted(receiver) == "torch" and method in _TORCH_LIKE and node.args:
                return self.heads(node.args[0], frame)
            if method in _SHAPED or (_dotted(receiver) == "torch" and method in _TORCH_SHAPED):
                return self._shape_heads(node, frame, receiver if method in _SHAPED else None)
        helper = self._function(func, frame)
        if isinstance(helper, tuple):
            return self._returned(node, frame, *helper)
        return self._end(frame, node, f"the query comes from `{_text(func)}(...)`, which hprobe does not follow")

    def _shape_heads(self, node: ast.Call, frame: _Frame, receiver: ast.expr | None) -> Part | TrailEnd:
        dims: list[ast.expr] = list(node.args)
        if len(dims) == 1 and isinstance(dims[0], (ast.Tuple, ast.List)):
            dims = list(dims[0].elts)
        if len(dims) < 2:
            return self._end(frame, node, f"`{_text(node)}` gives no shape hprobe can read")
        last = dims[-1]
        if isinstance(last, ast.Starred):
            tail = _shape_tail(last.value)
            if tail is None:
                return self._end(frame, node, f"`{_text(last)}` in a shape")
            tensor, start = tail
            # `(rows, *x.shape[1:])`: the last axes are x's own, heads among them
            # when x has at least `start` + 2 axes, which a query [tokens, heads, dim] has for start <= 1.
            if start > 1:
                return self._end(frame, node, f"`{_text(last)}` in a shape")
            return self.heads(tensor, frame)
        head = dims[-2]
        if isinstance(head, ast.Starred) or (isinstance(head, ast.UnaryOp) and isinstance(head.op, ast.USub)):
            return self._end(frame, node, f"the head axis of `{_text(node)}` is inferred (`{_text(head)}`)")
        # A view or reshape keeps every element: a head axis it sets regroups
        # what it views (tokens folded into heads) and cannot pad; an
        # allocation can. What it views must itself be the layer's query
        # followed without an allocation, else the regrouped count may hold
        # padding made before it.
        regroups = isinstance(node.func, ast.Attribute) and node.func.attr in ("view", "reshape")
        if regroups and (receiver is None or isinstance(self.heads(receiver, frame), TrailEnd)):
            regroups = False
        self.shaped.add("regroup" if regroups else "allocate")
        return self.value(head, frame)

    # The value of an expression (a count, a flag, a tuple).
    def value(self, node: ast.expr, frame: _Frame) -> Part | TrailEnd:
        shape_of = _shape_axis(node)
        if shape_of is not None:
            tensor, axis = shape_of
            if axis == -2:
                return self.heads(tensor, frame)
            return _Unknowable(f"{frame.module.path}:{node.lineno}: `{_text(node)}` is not the head axis")
        if isinstance(node, ast.Name):
            return self._name(node.id, node, frame, _VALUE)
        if isinstance(node, ast.Attribute) and not is_self(node.value):
            member = self.member(node, frame, _VALUE)
            if member is not None:
                return member if not isinstance(member, TrailEnd) else _Unknowable(str(member))
        if isinstance(node, ast.Attribute) and is_self(node.value):
            found = self.attribute(node, frame, _VALUE)
            if found is None:
                return _Expr(node, frame)  # a class attribute: the evaluator reads it
            return found if not isinstance(found, TrailEnd) else _Unknowable(str(found))
        if (
            isinstance(node, ast.Call)
            and not any(isinstance(a, ast.Starred) for a in node.args)
            and all(k.arg for k in node.keywords)
        ):
            # Each argument a part of its own: one hprobe cannot know stays
            # Opaque, and matters only if the callee uses it to decide something.
            names: list[tuple[str, Part]] = []
            args: list[ast.expr] = []
            for i, arg in enumerate([*node.args, *(k.value for k in node.keywords)]):
                part = self.value(arg, frame)
                names.append((f"__arg{i}", part if not isinstance(part, TrailEnd) else _Unknowable(str(part))))
                args.append(ast.Name(f"__arg{i}", ast.Load()))
            keywords = [ast.keyword(k.arg, a) for k, a in zip(node.keywords, args[len(node.args) :], strict=True)]
            call = ast.Call(node.func, args[: len(node.args)], keywords)
            ast.copy_location(call, node)
            return _Expr(call, frame, (*self._free(node.func, frame), *names))
        rewritten, attributes = self._self_attributes(node, frame)
        return _Expr(rewritten, frame, (*self._free(node, frame), *attributes), written=node)

    def _self_attributes(self, node: ast.expr, frame: _Frame) -> tuple[ast.expr, tuple[tuple[str, Part], ...]]:
        """`node` with each `self.<name>` (and `box.<name>` of a construction)
        it reads that can be followed made a name of its own, bound to that
        part (a method called on an object is left)."""
        found: dict[str, Part] = {}
        trail = self

        class Named(ast.NodeTransformer):
            def visit_Call(self, call: ast.Call) -> ast.AST:
                func = call.func
                call.args = [self.visit(a) for a in call.args]
                call.keywords = [self.visit(k) for k in call.keywords]
                if not isinstance(func, ast.Attribute):
                    call.func = self.visit(func)
                return call

            def visit_Attribute(self, attribute: ast.Attribute) -> ast.AST:
                if not isinstance(attribute.ctx, ast.Load):
                    return self.generic_visit(attribute)
                if isinstance(attribute.value, ast.Name) and attribute.value.id != "self":
                    # `box.k`: a field of a construction the function binds.
                    name = f"__member_{attribute.value.id}_{attribute.attr}"
                    if name not in found:
                        member = trail.member(attribute, frame, _VALUE)
                        if member is None:
                            return self.generic_visit(attribute)
                        found[name] = member if not isinstance(member, TrailEnd) else _Unknowable(str(member))
                    return ast.copy_location(ast.Name(name, ast.Load()), attribute)
                if not is_self(attribute.value):
                    return self.generic_visit(attribute)
                name = f"__self_{attribute.attr}"
                if name not in found:
                    part = trail.attribute(attribute, frame, _VALUE)
                    if part is None:
                        return attribute  # a class attribute: the evaluator reads it
                    found[name] = part if not isinstance(part, TrailEnd) else _Unknowable(str(part))
                return ast.copy_location(ast.Name(name, ast.Load()), attribute)

        if not any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) for n in ast.walk(node)):
            return node, ()
        rewritten = Named().visit(copy.deepcopy(node))
        return rewritten, tuple(found.items())

    def _free(self, node: ast.expr, frame: _Frame) -> tuple[tuple[str, Part], ...]:
        """Parts for the names an expression reads that the function binds."""
        out: dict[str, Part] = {}
        for name in _loaded_names(node):
            if name in out or name in ("self", "cls") or not _binds(frame.function, name):
                continue
            part = self._name(name, node, frame, _VALUE)
            out[name] = part if not isinstance(part, TrailEnd) else _Unknowable(str(part))
        return tuple(out.items())

    def _name(self, name: str, node: ast.AST, frame: _Frame, want: _Want) -> Part | TrailEnd:
        if want == _VALUE and frame.function is not None:
            qualname = f"{frame.owner.name}.{frame.function.name}" if frame.owner else frame.function.name
            for run in self.run_values:
                if run.name == name and run.at(frame.module.name, qualname):
                    where = "{}:{}".format(*frame.where(node))
                    self.cite(frame, node)
                    return _Run(run, where)
        return self._defined(
            _reaching(frame.function, name, getattr(node, "lineno", 0) or 10**9), name, node, frame, want
        )

    def _follow(self, want: _Want, node: ast.expr, frame: _Frame) -> Part | TrailEnd:
        kind, key = want
        if kind == "heads":
            return self.heads(node, frame)
        if kind == "value":
            return self.value(node, frame)
        assert key is not None
        return self.entry(node, key, frame)

    def _defined(self, definition: Definition, name: str, node: ast.AST, frame: _Frame, want: _Want) -> Part | TrailEnd:
        tensor = want[0] != "value"
        if isinstance(definition, str) and definition != PARAMETER:
            return self._end(frame, node, definition)
        if isinstance(definition, _Chosen):
            test = self.value(definition.test.test, frame)
            chosen = [self._defined(side, name, node, frame, want) for side in (definition.body, definition.orelse)]
            ended = next((c for c in chosen if isinstance(c, TrailEnd)), None)
            if ended is not None:
                return ended
            where = f"{frame.module.path}:{definition.test.lineno}"
            return _Cond(
                test if not isinstance(test, TrailEnd) else _Unknowable(str(test)),
                chosen[0],  # type: ignore[arg-type]
                chosen[1],  # type: ignore[arg-type]
                where,
            )
        if isinstance(definition, tuple):
            stmt, position = definition
            self.cite(frame, stmt)
            value = stmt.value
            assert value is not None
            if position is None:
                return self._follow(want, value, frame)
            size, at = position
            if _dotted(value).endswith(".shape") or (
                isinstance(value, ast.Call) and _dotted(value.func).endswith(".size") and not value.args
            ):
                tensor_node = (
                    value.value if isinstance(value, ast.Attribute) else value.func.value  # type: ignore[attr-defined]
                )
                if at == size - 2 and want == _VALUE:
                    return self.heads(tensor_node, frame)
                if tensor:
                    return self._end(frame, stmt, f"`{name}` is axis {at} of {size} of `{_text(tensor_node)}`")
                return _Unknowable(
                    f"{frame.module.path}:{stmt.lineno}: `{name}` is axis {at} of `{_text(tensor_node)}`"
                )
            if want == _HEADS:
                # Unpacking iterates the first axis (or a pair like (q_nope, q_pe)
                # of the layer's query): the head axis of each part is the whole's.
                return self.heads(value, frame)
            if tensor:
                return self._end(frame, stmt, f"`{name}` is unpacked from `{_text(value)}`")
            whole = self.value(value, frame)
            return _Item(whole, at) if not isinstance(whole, TrailEnd) else whole
        if frame.function is not None and name in _parameters(frame.function):
            return self._parameter(name, frame, want)
        closure = self._closure(name, frame)
        if closure is not None:
            return self._defined(closure[0], name, node, closure[1], want)
        if tensor:
            return self._end(
                frame, node, f"`{name}` is not bound in {frame.function.name if frame.function else 'the module'}"
            )
        return _Expr(ast.Name(name, ast.Load()), frame)  # a module-level name: the evaluator reads it

    def _closure(self, name: str, frame: _Frame) -> tuple[Definition, _Frame] | None:
        """A free name of a nested function: the enclosing function's one binding
        of it (read when the nested function runs, so only a single binding is
        sure to be the one it reads)."""
        if frame.function is None:
            return None
        for outer in enclosing_functions(frame.module.tree, frame.function.lineno)[1:]:
            bindings = [node for node in _own_nodes(outer) if any(name in _target_names(t) for t in _targets(node))]
            if name in _parameters(outer) and not bindings:
                return PARAMETER, _Frame(frame.module, outer, frame.owner, None, frame.depth)
            if bindings:
                if len(bindings) > 1:
                    return (
                        f"`{name}` is bound {len(bindings)} times in {outer.name}, around the nested "
                        f"{frame.function.name}",
                        frame,
                    )
                definition = (
                    _after(bindings[0], name, PARAMETER)
                    if isinstance(bindings[0], ast.stmt)
                    else f"`{name}` is bound at line {bindings[0].lineno}"  # type: ignore[attr-defined]
                )
                return definition, _Frame(frame.module, outer, frame.owner, None, frame.depth)
        return None

    def entry(self, node: ast.expr, key: str, frame: _Frame) -> Part | TrailEnd:
        """The head count of the tensor a dict built by the engine holds at `key`
        (`dict(common, query=q)`, `{"query": q}`, a name bound to one)."""
        self.cite(frame, node)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "dict"
            and len(node.args) <= 1
        ):
            for keyword in reversed(node.keywords):
                if keyword.arg == key:
                    return self.heads(keyword.value, frame)
                if keyword.arg is None:
                    found = self.entry(keyword.value, key, frame)
                    if found is not _ABSENT:
                        return found
            return self.entry(node.args[0], key, frame) if node.args else _ABSENT
        if isinstance(node, ast.Dict):
            for dict_key, value in reversed(list(zip(node.keys, node.values, strict=True))):
                if dict_key is None:
                    found = self.entry(value, key, frame)
                    if found is not _ABSENT:
                        return found
                elif not (isinstance(dict_key, ast.Constant) and isinstance(dict_key.value, str)):
                    return self._end(frame, node, f"a key of `{_text(node)}` is not a literal string")
                elif dict_key.value == key:
                    return self.heads(value, frame)
            return _ABSENT
        if isinstance(node, ast.Name):
            changed = _dict_changes(frame.function, node.id, key)
            if changed is not None:
                return self._end(
                    frame,
                    changed,
                    f"`{node.id}` is changed at line {getattr(changed, 'lineno', 0)} in a way that may set {key!r}",
                )
            return self._name(node.id, node, frame, ("entry", key))
        return self._end(frame, node, f"`**{_text(node)}` is not a dict hprobe can read")

    def _parameter(self, name: str, frame: _Frame, want: _Want) -> Part | TrailEnd:
        assert frame.function is not None
        function = frame.function
        tensor = want[0] != "value"
        wrapped = _wrapping_decorator(function, frame.module)
        if wrapped is not None:
            # Its callers hand the decorator's wrapper what they pass; what the
            # function itself is handed is the wrapper's to say.
            why = f"{function.name} is decorated by `@{wrapped}`, which may change what it is handed"
            return self._end(frame, function, why) if tensor else _Unknowable(f"{frame.module.path}: {why}")
        passed = frame.passed(name)
        if passed is not None:
            return self._follow(want, *passed)
        if frame.args is not None:
            default = _default(function, name)
            if default is not None and not tensor:
                return self.value(default, frame)
            return self._end(
                frame, function, f"no argument for `{name}`" if default is None else f"`{name}` is its default"
            )
        if want == _HEADS and self.roots.get(function.name) == name:
            where = f"{frame.module.path}:{function.lineno}"
            self.root = where
            return _Root(where)
        if frame.depth >= MAX_TRAIL:
            return self._end(frame, function, f"followed {MAX_TRAIL} functions deep")
        parts: list[Part] = []
        callers: list[tuple[str, str]] = []
        # Callers are searched lazily: a call that may or may not be one of
        # this function (a method name other classes share), or any end of a
        # value's trail, ends the search, and the modules after it are never
        # parsed. A query a sure caller hands in where hprobe cannot follow it
        # ends that caller's trail only: the others' counts are the engine's own.
        for caller in self._callers(frame):
            if isinstance(caller, TrailEnd):
                return caller if tensor else _Unknowable(str(caller))
            part = self._from_caller(name, caller, want)
            if isinstance(part, TrailEnd):
                if not tensor or not self.tree.few_callers(function.name):
                    return part if tensor else _Unknowable(str(part))
                part = _Ended(part)
            parts.append(part)
            callers.append(caller.called_from)
        ended = [p.end for p in parts if isinstance(p, _Ended)]
        if parts and len(ended) == len(parts):
            return ended[0]
        if not parts:
            if not tensor:
                return _Unknowable(
                    f"{frame.module.path}:{function.lineno}: `{name}` of {function.name} is filled by a caller hprobe "
                    "does not follow"
                )
            return self._end(
                frame,
                function,
                f"no call of {function.name} in the tree hands it `{name}`; the engine calls it from code hprobe does "
                "not follow",
            )
        if len(parts) == 1:
            return parts[0]
        return _Callers(tuple(parts), f"{frame.module.path}:{function.lineno}", tuple(callers))

    def _from_caller(self, name: str, caller: _Frame, want: _Want) -> Part | TrailEnd:
        """What one caller hands in for `name`, under the tests its call runs under."""
        handed = caller.passed(name)
        if caller.entered_from is not None:
            calling, line = caller.entered_from
            self.cited.append((calling.module.path, line))
        part = self._follow(want, *handed) if handed else self._parameter(name, caller, want)
        if isinstance(part, TrailEnd) or caller.entered_from is None:
            return part
        return self.guarded(part, *caller.entered_from)

    def _callers(self, frame: _Frame) -> Iterator[_Frame | TrailEnd]:
        """Each call of `frame.function` in the tree, as the frame it enters
        with that call's arguments (a TrailEnd for one hprobe cannot tie to it
        or rule out)."""
        assert frame.function is not None
        function, owner = frame.function, frame.owner
        confined = self.tree.confined(owner) if owner is not None else None
        within = confined.words if isinstance(confined, Confined) else None
        if function.name == "__init__" and owner is not None:
            yield from self._constructions(frame, confined)
        for module, caller, call in self.tree.sites(function.name, within):
            if not _fits(call, function, owner is not None):
                continue  # a call with these arguments would raise TypeError: not a call of it
            caller_frame = _Frame(module, caller, class_at(module, call.lineno))
            resolved = self._function(call.func, caller_frame)
            entered = (module, caller, caller_frame.owner)
            if resolved is not None:
                if resolved[1].node is function:
                    yield _enter(call, function, owner is not None, entered, frame.depth + 1, frame.module, owner)
                continue
            if owner is None:
                # A function: a bare name bound to something else, or `obj.name(...)`, is not it.
                if isinstance(call.func, ast.Name) and not _bound_in(module, caller, call.func.id):
                    yield TrailEnd(module.path, call.lineno, f"`{_text(call.func)}` may be {function.name}")
                continue
            if not isinstance(call.func, ast.Attribute):
                continue  # a bare name never calls a method
            if _is_self_call(call.func):
                related = caller_frame.owner is not None and (
                    owner in self.index.mro(caller_frame.owner) or caller_frame.owner in self.index.mro(owner)
                )
                if related:
                    yield TrailEnd(module.path, call.lineno, f"`{_text(call.func)}(...)` may reach {function.name}")
                continue
            # Where every instance of the method's class lives is known, a
            # receiver none of them is kept in is no caller, whatever the
            # method is named; one that keeps them calls what they resolve.
            # `super()` stands for an instance of the caller's own class.
            receiver = call.func.value
            through_super = isinstance(receiver, ast.Call) and _dotted(receiver.func) == "super"
            if isinstance(confined, Confined) and not (
                through_super and may_be_family(self.index, confined, caller_frame.owner)
            ):
                held = holds(self.index, confined, receiver, module, caller, caller_frame.owner)
                if held and dispatches_to(self.index, held, function.name, function):
                    yield _enter(call, function, True, entered, frame.depth + 1, frame.module, owner)
                continue
            # Whether another class defines the name is asked last: it parses every module that mentions it.
            if self.tree.shared(function.name):
                yield TrailEnd(
                    module.path,
                    call.lineno,
                    f"`{_text(call.func)}(...)` may call {owner.name}.{function.name} or another class's "
                    f"{function.name}",
                )
                continue
            yield _enter(call, function, True, entered, frame.depth + 1, frame.module, owner)

    def _constructions(self, frame: _Frame, confined: Confined | NotConfined | None) -> Iterator[_Frame | TrailEnd]:
        """Each construction that runs this `__init__`: a call by name of a
        class of the family whose `__init__` it is (`super().__init__(...)`
        from a subclass's own is a call of it, searched as any other)."""
        assert frame.function is not None and frame.owner is not None
        if not isinstance(confined, Confined):
            yield TrailEnd(frame.module.path, frame.function.lineno, f"{frame.owner.name}'s instances: not confined")
            return
        for qualname in sorted(confined.family):
            cls = class_named(self.index, qualname)
            if cls is None:
                continue
            if self._init_of(cls) is not frame.function:
                if any(
                    c.methods.get("__init__") is not None and c.methods["__init__"].node is frame.function
                    for c in self.index.mro(cls)
                ):
                    # A subclass's own `__init__` may run this one as `Base.__init__(self, ...)`.
                    yield TrailEnd(cls.module.path, cls.node.lineno, f"{cls.name} has an `__init__` of its own")
                    return
                continue
            for module, caller, call in self.tree.sites(cls.name, confined.words):
                if not _fits(call, frame.function, True):
                    continue
                made = self._class_called(module, call)
                if made is None or made.qualname != cls.qualname:
                    continue  # another thing of that name (confinement ruled out a construction hprobe cannot name)
                entered = (module, caller, class_at(module, call.lineno))
                yield _enter(call, frame.function, True, entered, frame.depth + 1, frame.module, cls)

    def _init_of(self, cls: ClassInfo) -> Function | None:
        """The `__init__` a construction of `cls` runs (the first of its tree MRO's)."""
        runs = next((c for c in self.index.mro(cls) if "__init__" in c.methods), None)
        return runs.methods["__init__"].node if runs is not None else None

    def _class_called(self, module: ModuleInfo, call: ast.Call) -> ClassInfo | None:
        """The tree's class `call` constructs, by its name or a local import of it; None for anything else."""
        if not isinstance(call.func, (ast.Name, ast.Attribute)):
            return None
        cls = self.index.resolve_class(module, _dotted(call.func))
        if cls is None and isinstance(call.func, ast.Name):
            local = _local_import(module, call.lineno, call.func.id)
            other = self.index.by_suffix(local[0]) if local is not None else None
            found = self.index.lookup(other, local[1]) if other is not None and local is not None else None
            cls = found[1] if found is not None and found[0] == "class" else None
        return cls

    def _returned(
        self, call: ast.Call, frame: _Frame, module: ModuleInfo, helper: Any, owner: ClassInfo | None
    ) -> Part | TrailEnd:
        """A helper's returned query: every `return` must give the same count."""
        function = helper.node
        if frame.depth >= MAX_TRAIL:
            return self._end(frame, call, f"followed {MAX_TRAIL} functions deep")
        entered = _enter(
            call,
            function,
            owner is not None,
            (frame.module, frame.function, frame.owner),
            frame.depth + 1,
            module,
            owner,
        )
        if isinstance(entered, TrailEnd):
            return entered
        returns = [r for r in _own_nodes(function) if isinstance(r, ast.Return) and r.value is not None]
        if len(returns) != 1:
            return self._end(entered, function, f"{function.name} returns the query at {len(returns)} places")
        return self.heads(returns[0].value, entered)  # type: ignore[arg-type]

    def _function(self, func: ast.expr, frame: _Frame) -> tuple[ModuleInfo, Any, ClassInfo | None] | None:
        """The tree's function (or method of the frame's class) a call names."""
        if isinstance(func, ast.Attribute) and _is_self_call(func) and frame.owner is not None:
            for cls in self.index.mro(frame.owner):
                if func.attr in cls.rebound:
                    return None
                if func.attr in cls.methods:
                    return cls.module, cls.methods[func.attr], frame.owner
            return None
        if not isinstance(func, ast.Name):
            return None
        local = _local_import(frame.module, func.lineno, func.id)
        if local is not None:
            module = self.index.by_suffix(local[0])
            found = self.index.lookup(module, local[1]) if module is not None else None
        else:
            found = self.index.lookup(frame.module, func.id)
        if found is None or found[0] != "function":
            return None
        return found[2], found[1], None

    def guarded(self, part: Part, frame: _Frame, line: int, own: bool = False) -> Part:
        """`part` as reached through the call at `line` of `frame`'s function:
        under the tests that call runs under there (guards.py), each part of
        an `and` that must hold (of an `or` that must not) a test of its own;
        `own`: the FlashInfer call itself, whose findings say its tests."""
        if frame.function is None:
            return part
        # `self` in the tests is the frame's class: a base's method read for two subclasses reads two ways.
        key = (frame.module.path, line, frame.owner.qualname if frame.owner is not None else "")
        known = self.guards.get(key) if frame.args is None else None
        if known is None:
            known = self._guards(frame, line, own)
            if frame.args is None:
                self.guards[key] = known
        return _Guarded(part, known) if known else part

    def _guards(self, frame: _Frame, line: int, own: bool) -> tuple[_Guard, ...]:
        found: list[_Guard] = []
        for at, test, when_true in guard_tests(frame.module.tree, line):
            joined = isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And if when_true else ast.Or)
            for one in test.values if isinstance(test, ast.BoolOp) and joined else [test]:
                value = self.value(one, frame)
                test_part = value if not isinstance(value, TrailEnd) else _Unknowable(str(value))
                varies = any(isinstance(p, (_Root, _Run, _Callers)) for p in _parts(test_part))
                said = _text(one) if when_true else negated(one)
                found.append(_Guard(test_part, when_true, f"{frame.module.path}:{at}", said, varies, own))
        return tuple(found)

    def _end(self, frame: _Frame, node: ast.AST, why: str) -> TrailEnd:
        path, line = frame.where(node)
        return TrailEnd(path, line, why)


def trace_heads(
    index: RepoIndex,
    module: ModuleInfo,
    line: int,
    query: tuple[str, int],
    roots: dict[str, str],
    tree: TreeCalls | None = None,
    run_values: tuple[RunValue, ...] = (),
) -> HeadTrail | TrailEnd:
    """Follow the query of the call at `line` of `module` (passed as keyword
    `query[0]` or positionally at `query[1]`) back to the layer's query;
    `tree`: what earlier trails in the same tree have read; `run_values`: what
    the engine fills at run time, with the values to evaluate the count at."""
    function, owner = function_at(index, module, line)
    call = call_at(function or module.tree, line)
    if call is None:
        return TrailEnd(module.path, line, "the call could not be found again")
    frame = _Frame(module, function, owner)
    # Another tree's reads are not this one's.
    trail = _Trail(index, roots, tree if tree is not None and tree.index is index else TreeCalls(index), run_values)
    name, position = query
    part: Part | TrailEnd = _ABSENT
    if any(isinstance(a, ast.Starred) for a in call.args[: position + 1]):
        part = TrailEnd(
            module.path, line, f"the call passes *{_text(next(a for a in call.args if isinstance(a, ast.Starred)))}"
        )
    elif len(call.args) > position:
        part = trail.heads(call.args[position], frame)
    else:
        for keyword in reversed(call.keywords):
            if keyword.arg == name:
                part = trail.heads(keyword.value, frame)
            elif keyword.arg is None:
                part = trail.entry(keyword.value, name, frame)
            if part is not _ABSENT:
                break
    if part is _ABSENT:
        return TrailEnd(module.path, line, f"the call passes no {name} hprobe can find")
    if isinstance(part, TrailEnd):
        return part
    shown = part.part if isinstance(part, _Guarded) else part
    said = _text(shown.written or shown.node) if isinstance(shown, _Expr) else "the layer's count"
    part = trail.guarded(part, frame, line, own=True)
    cited = tuple(dict.fromkeys(trail.cited))
    # What the count is made of, in the order the trail met it (not what it
    # read on the way and left behind).
    runs: dict[str, tuple[RunValue, str]] = {}
    splits: dict[str, tuple[tuple[str, str], ...]] = {}
    for inner in _parts(part):
        if isinstance(inner, _Run):
            runs.setdefault(inner.value.name, (inner.value, inner.where))
        elif isinstance(inner, _Callers):
            splits.setdefault(inner.where, inner.callers)
    return HeadTrail(
        part,
        trail.root or f"{module.path}:{line}",
        cited,
        said,
        index,
        runs=tuple(runs.values()),
        splits=tuple(splits.items()),
        regrouped=trail.shaped == {"regroup"},
    )


def _parts(part: Part) -> Iterator[Part]:
    """`part` and every part it is made of, outermost first."""
    yield part
    if isinstance(part, _Expr):
        for _, inner in part.names:
            yield from _parts(inner)
    elif isinstance(part, _Item):
        yield from _parts(part.of)
    elif isinstance(part, _Callers):
        for inner in part.parts:
            yield from _parts(inner)
    elif isinstance(part, _Cond):
        for inner in (part.test, part.then, part.orelse):
            yield from _parts(inner)
    elif isinstance(part, _Guarded):
        for guard in part.guards:
            yield from _parts(guard.test)
        yield from _parts(part.part)


# -- reading the source ----------------------------------------------------------------


def _enter(
    call: ast.Call,
    function: Function,
    method: bool,
    caller: tuple[ModuleInfo, Function | None, ClassInfo | None],
    depth: int,
    module: ModuleInfo,
    owner: ClassInfo | None,
) -> _Frame | TrailEnd:
    """The frame `function` (defined in `module`) runs in when `call`, in the caller's frame, calls it."""
    caller_module, caller_function, caller_owner = caller
    caller_frame = _Frame(caller_module, caller_function, caller_owner, None, depth - 1)
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return TrailEnd(caller_module.path, call.lineno, f"`{_text(call.func)}` is called with *args or **kwargs")
    params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    if method and params and params[0] in ("self", "cls"):
        params = params[1:]
    if len(call.args) > len(params):
        return TrailEnd(
            caller_module.path, call.lineno, f"`{_text(call.func)}` takes its arguments in a way hprobe does not follow"
        )
    args = [(p, a, caller_frame) for p, a in zip(params, call.args, strict=False)]
    args += [(str(k.arg), k.value, caller_frame) for k in call.keywords]
    called_from = (caller_function.name if caller_function else "module level", f"{caller_module.path}:{call.lineno}")
    return _Frame(module, function, owner, tuple(args), depth, called_from, (caller_frame, call.lineno))


def _last_axis(call: ast.Call) -> bool:
    dims = [k.value for k in call.keywords if k.arg == "dim"] + call.args[1:2]
    return len(dims) == 1 and _literal_int(dims[0]) == -1


def _dict_changes(function: Function | None, name: str, key: str) -> ast.AST | None:
    """A statement that may put `key` into dict `name` after it is built."""
    if function is None:
        return None
    for node in _own_nodes(function):
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id == name:
                    literal = target.slice.value if isinstance(target.slice, ast.Constant) else None
                    if not isinstance(literal, str) or literal == key:
                        return node
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == name
        ):
            if node.func.attr in ("update", "setdefault", "__setitem__", "__ior__"):
                if node.args or any(k.arg in (None, key) for k in node.keywords):
                    return node
    return None


def _parameters(function: Function) -> set[str]:
    a = function.args
    return (
        {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
        | ({a.vararg.arg} if a.vararg else set())
        | ({a.kwarg.arg} if a.kwarg else set())
    )


def _default(function: Function, name: str) -> ast.expr | None:
    a = function.args
    positional = [*a.posonlyargs, *a.args]
    for param, default in zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True):
        if param.arg == name:
            return default
    for param, kw_default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        if param.arg == name:
            return kw_default
    return None


def _own_nodes(function: Function | ast.Module) -> Iterator[ast.AST]:
    """The nodes of a function's own body, not of functions or classes nested in it."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _binds(function: Function | None, name: str) -> bool:
    """Whether the function binds `name` (a parameter or a target in its own body)."""
    if function is None:
        return False
    bound = _BOUND.get(function)
    if bound is None:
        # Asked once per name an expression reads, on every step of every trail: read the body once.
        bound = _parameters(function) | {
            target for node in _own_nodes(function) for t in _targets(node) for target in _target_names(t)
        }
        _BOUND[function] = bound
    return name in bound


_BOUND: weakref.WeakKeyDictionary[ast.AST, set[str]] = weakref.WeakKeyDictionary()


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.NamedExpr)):
        return [node.target]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [i.optional_vars for i in node.items if i.optional_vars is not None]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [ast.Name((a.asname or a.name).split(".")[0]) for a in node.names]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [ast.Name(node.name)]
    return []


def _target_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _target_names(e.value if isinstance(e, ast.Starred) else e)]
    return []


# A name's definition where it is used: the statement that binds it (with
# its place in a tuple target), PARAMETER (none before the use), an `if`
# that decides between two definitions, or why it is not one value.
PARAMETER = "parameter"


@dataclass(frozen=True)
class _Chosen:
    test: ast.If
    body: Definition
    orelse: Definition


Definition = tuple[ast.Assign | ast.AnnAssign, tuple[int, int] | None] | _Chosen | str


def _reaching(function: Function | None, name: str, line: int) -> Definition:
    """The definition of `name` that reaches `line` in `function`'s body."""
    if function is None:
        return PARAMETER
    changed = _changed_unseen(function, name)
    if changed is not None:
        return changed
    return _through(function.body, name, line, PARAMETER)


# Tensor methods that change the tensor's own shape in place: a query such a
# call reaches is not the shape its definition says.
_RESHAPED_IN_PLACE = frozenset(
    {
        "resize_",
        "resize_as_",
        "unsqueeze_",
        "squeeze_",
        "transpose_",
        "t_",
        "swapdims_",
        "swapaxes_",
        "set_",
        "as_strided_",
    }
)


# Asked at every name a trail reads: one walk per function and name, kept no
# longer than the function's tree is.
_CHANGED: weakref.WeakKeyDictionary[ast.AST, dict[str, str | None]] = weakref.WeakKeyDictionary()


def _changed_unseen(function: Function, name: str) -> str | None:
    per_name = _CHANGED.setdefault(function, {})
    if name not in per_name:
        per_name[name] = _changed_in(function, name)
    return per_name[name]


def _changed_in(function: Function, name: str) -> str | None:
    """Why `name` in `function` may not be what the statements binding it say,
    in words, or None: a nested function rebinds it (`nonlocal`), or the
    tensor it names is changed in place (`resize_`, `unsqueeze_`, `.data = …`,
    `out=`), here or in a function nested in this one. Wherever it happens in
    the function: before or after the use, the trail does not weigh it."""
    for node in ast.walk(function):
        if node is not function and isinstance(node, ast.Nonlocal) and name in node.names:
            return f"`{name}` is rebound by a nested function (`nonlocal` at line {node.lineno})"
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == name
            and node.func.attr in _RESHAPED_IN_PLACE
        ):
            return f"`{name}` is changed in place by `{_text(node)}` at line {node.lineno}"
        if isinstance(node, ast.Call) and any(
            k.arg == "out" and isinstance(k.value, ast.Name) and k.value.id == name for k in node.keywords
        ):
            return f"`{name}` is written by `{_text(node.func)}(..., out={name})` at line {node.lineno}"
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and any(
            isinstance(t, ast.Attribute) and t.attr == "data" and isinstance(t.value, ast.Name) and t.value.id == name
            for t in _targets(node)
        ):
            return f"`{name}.data` is replaced at line {node.lineno}"
    return None


def _through(body: list[ast.stmt], name: str, line: int, current: Definition) -> Definition:
    """Walk a statement list up to `line`, `current` the definition on entry."""
    for stmt in body:
        if stmt.lineno >= line:
            break
        if (stmt.end_lineno or stmt.lineno) >= line:
            return _inside(stmt, name, line, current)  # the use is in this statement
        current = _after(stmt, name, current)
    return current


def _after(stmt: ast.stmt, name: str, current: Definition) -> Definition:
    """The definition after `stmt` runs (the use is past it)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return f"`{name}` is bound by the definition at line {stmt.lineno}" if stmt.name == name else current
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if not any(name in _target_names(t) for t in targets):
            return current if not _binds_inside(stmt, name) else f"`{name}` is bound inside line {stmt.lineno}"
        if len(targets) != 1:
            return f"`{name}` is bound with other names at line {stmt.lineno}"
        target = targets[0]
        if isinstance(target, ast.Name):
            return stmt, None
        if isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
            at = next(i for i, e in enumerate(target.elts) if isinstance(e, ast.Name) and e.id == name)
            return stmt, (len(target.elts), at)
        return f"`{name}` is bound by `{_text(target)}` at line {stmt.lineno}"
    if isinstance(stmt, (ast.If, ast.With, ast.AsyncWith)) and _walrus_binds(stmt, name):
        return f"`{name}` is bound by `:=` at line {stmt.lineno}"
    if isinstance(stmt, ast.If):
        body, orelse = _through(stmt.body, name, 10**9, current), _through(stmt.orelse, name, 10**9, current)
        return current if body is current and orelse is current else _Chosen(stmt, body, orelse)
    if isinstance(stmt, (ast.With, ast.AsyncWith)) and not any(
        i.optional_vars is not None and name in _target_names(i.optional_vars) for i in stmt.items
    ):
        return _through(stmt.body, name, 10**9, current)
    if _binds_inside(stmt, name):
        return f"`{name}` is bound inside the `{type(stmt).__name__.lower()}` at line {stmt.lineno}"
    return current


def _inside(stmt: ast.stmt, name: str, line: int, current: Definition) -> Definition:
    """The definition at `line`, inside the compound statement `stmt`."""
    if isinstance(stmt, (ast.If, ast.With, ast.AsyncWith)) and _walrus_binds(stmt, name):
        return f"`{name}` is bound by `:=` at line {stmt.lineno}"
    if isinstance(stmt, ast.If):
        branch = stmt.body if block_spans(stmt.body, line) else stmt.orelse
        return _through(branch, name, line, current)
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return _through(stmt.body, name, line, current)
    if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
        loop_binds = _binds_inside(stmt, name)
        entry = f"`{name}` is bound again in the loop at line {stmt.lineno}" if loop_binds else current
        return _through(stmt.body if block_spans(stmt.body, line) else stmt.orelse, name, line, entry)
    if isinstance(stmt, ast.Try):
        if block_spans(stmt.body, line):
            return _through(stmt.body, name, line, current)
        entry = f"`{name}` is bound in the `try` at line {stmt.lineno}" if _binds_inside(stmt, name) else current
        for block in (*(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody):
            if block_spans(block, line):
                return _through(block, name, line, entry)
    # The use is in the statement itself (a call's argument on a later line).
    return current


# Decorators that hand a function the arguments its callers pass, unchanged.
_PLAIN_DECORATORS = frozenset(
    {
        "staticmethod",
        "classmethod",
        "abstractmethod",
        "override",
        "overload",
        "final",
        "no_grad",
        "inference_mode",
        "enable_grad",
        "compile",
        "disable",
        "cache",
        "lru_cache",
        "cached_property",
        "property",
        "wraps",
        "jit",
        "script",
        "custom_op",
        "register_fake",
        "nvtx_range",
    }
)


# Where a plain decorator comes from: Python's own (`staticmethod`, `property`)
# or these libraries. An engine's own decorator of the same name is no such.
_PLAIN_SOURCES = frozenset({"builtins", "functools", "abc", "typing", "typing_extensions", "torch", "triton"})
_BUILTIN_DECORATORS = frozenset({"staticmethod", "classmethod", "property"})


def _wrapping_decorator(function: Function, module: ModuleInfo) -> str | None:
    """The first decorator of `function` that is not known to pass its
    arguments through unchanged, as written; None where there is none. Known:
    a name of `_PLAIN_DECORATORS` (the last name of it: `torch.no_grad()` is
    `no_grad`) that comes from Python or a library of `_PLAIN_SOURCES`, by the
    module's imports (`from functools import cache`, `import torch`)."""
    if not function.decorator_list:
        return None
    imports = {**module.imports, **_imports_in(module.tree)}
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else None
        if name not in _PLAIN_DECORATORS or not _from_a_plain_source(target, imports, module):
            return _text(decorator)
    return None


def _from_a_plain_source(target: ast.expr, imports: dict[str, tuple[str, str | None]], module: ModuleInfo) -> bool:
    root = target
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name):
        return False
    bound = imports.get(root.id)
    if bound is None:
        # A bare Python builtin the module does not bind to something else.
        own = (module.functions, module.classes, module.constants, module.rebound)
        return root is target and root.id in _BUILTIN_DECORATORS and not any(root.id in names for names in own)
    return bound[0].split(".")[0] in _PLAIN_SOURCES


def _imports_in(tree: ast.Module) -> dict[str, tuple[str, str | None]]:
    """Every import of a module, at any level (`import torch` inside a function too)."""
    out: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.update({(a.asname or a.name): (node.module, a.name) for a in node.names if a.name != "*"})
        elif isinstance(node, ast.Import):
            out.update({(a.asname or a.name.split(".")[0]): (a.name, None) for a in node.names})
    return out


def _walrus_binds(stmt: ast.If | ast.With | ast.AsyncWith, name: str) -> bool:
    """Whether the test of an `if` or the items of a `with` bind `name` with `:=`."""
    heads = [stmt.test] if isinstance(stmt, ast.If) else [i.context_expr for i in stmt.items]
    return any(isinstance(node, ast.NamedExpr) and node.target.id == name for head in heads for node in ast.walk(head))


def _binds_inside(stmt: ast.stmt, name: str) -> bool:
    nodes = [stmt, *_own_nodes(stmt)]  # type: ignore[arg-type]
    return any(name in _target_names(t) for node in nodes for t in _targets(node))


def _shape_axis(node: ast.expr) -> tuple[ast.expr, int] | None:
    """`x.shape[i]` or `x.size(i)` with a literal axis: (x, i)."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        axis = _literal_int(node.slice)
        return (node.value.value, axis) if axis is not None else None
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "size"
        and len(node.args) == 1
    ):
        axis = _literal_int(node.args[0])
        return (node.func.value, axis) if axis is not None else None
    return None


def _shape_tail(node: ast.expr) -> tuple[ast.expr, int] | None:
    """`x.shape[k:]`: (x, k)."""
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "shape"
        and isinstance(node.slice, ast.Slice)
    ):
        s = node.slice
        if s.upper is None and s.step is None:
            start = _literal_int(s.lower) if s.lower is not None else 0
            return (node.value.value, start) if start is not None else None
    return None


def _literal_int(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and isinstance(node.operand.value, int)
    ):
        return -node.operand.value
    return None


def _loaded_names(node: ast.expr) -> list[str]:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]


def _calls_by_name(tree: ast.Module) -> dict[str, list[tuple[Function | None, ast.Call]]]:
    """Every call in `tree` by the name it calls (`f(...)`, `x.f(...)`), with
    the innermost function that holds it: one walk of the module."""
    table: dict[str, list[tuple[Function | None, ast.Call]]] = {}

    def visit(node: ast.AST, holder: Function | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Call):
                func = child.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
                if name is not None:
                    table.setdefault(name, []).append((holder, child))
            visit(child, child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else holder)

    visit(tree, None)
    return table


def _fits(call: ast.Call, function: Function, method: bool) -> bool:
    """Whether `call`'s arguments bind to `function`'s parameters (a call that
    would raise TypeError is not one of its calls); spreads may fit anything."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return True
    a = function.args
    positional = [p.arg for p in (*a.posonlyargs, *a.args)]
    if method and positional and positional[0] in ("self", "cls"):
        positional = positional[1:]
    if len(call.args) > len(positional) and a.vararg is None:
        return False
    names = set(positional) | {p.arg for p in a.kwonlyargs}
    given = set(positional[: len(call.args)]) | {str(k.arg) for k in call.keywords}
    if a.kwarg is None and any(str(k.arg) not in names for k in call.keywords):
        return False
    required = positional[: len(positional) - len(a.defaults)] + [
        p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is None
    ]
    return all(r in given for r in required)


def _bound_in(module: ModuleInfo, function: Function | None, name: str) -> bool:
    """Whether `name` is bound in the module or the function (so a call of it is of that binding)."""
    if name in module.functions or name in module.classes or name in module.imports or name in module.constants:
        return True
    return _binds(function, name)


def _not_stored(found: NotStored, frame: _Frame, node: ast.AST) -> TrailEnd:
    """The trail's end where an attribute's value cannot be told: at the place
    that says why, else at the read."""
    path, _, line = found.where.rpartition(":")
    if not path or not line.isdigit():
        return TrailEnd(*frame.where(node), found.why)
    return TrailEnd(path, int(line), found.why)


def _is_self_call(func: ast.Attribute) -> bool:
    return isinstance(func.value, ast.Name) and func.value.id in ("self", "cls")


def _local_import(module: ModuleInfo, line: int, name: str) -> tuple[str, str] | None:
    """`from X import name` in a function around `line` (the innermost first): (X, the imported name)."""
    package = module.name if module.path.endswith("__init__.py") else module.name.rpartition(".")[0]
    for function in enclosing_functions(module.tree, line):
        for node in _own_nodes(function):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        return resolve_relative(package, node.module, node.level), alias.name
    return None


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _text(node: ast.AST) -> str:
    return ast.unparse(node)[:80]
