"""Evaluate a padding function for one head count by reading its AST, never running it.

A small, safe subset of Python is interpreted: literals, tuples/lists/sets,
names bound to constants in the same module (or imported from another module
of the repo), `if`/`for`/`return`/`raise`/`assert`, assignments, comparisons,
`break`/`continue`, arithmetic, `min`/`max`/`len`/`range`/`int`/`abs`/`sorted`/`any`/`all`,
f-strings, and calls to other functions of the repo that stay in the subset
(`cls.helper(n)` resolves through the class hierarchy), `try`/`except`,
tuple unpacking, and imports inside functions. Anything else is `NotEvaluable`
with its file and line: reported, never guessed.

A rule may read more than its head-count argument (SGLang's does): a `Binding`
supplies instance attributes (`self.n_local_heads`), extra arguments
(`num_tokens`), platform predicates by their source text
(`get_platform().is_sm120`), settings from the consumer's own registry
(`envs.NAME.get()`), and the flashinfer release being judged, whose modules
are read with `ast` too: an import of a name the release lacks raises
ImportError, as it would in the consumer's process.
"""

from __future__ import annotations

import ast
import builtins
import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from hprobe.model.padding import MAX_HEADS
from hprobe.rules.repo.tree.operators import COMPARISONS
from hprobe.rules.repo.tree.scan import (
    TRANSPARENT_METHOD_DECORATORS,
    ClassInfo,
    FunctionInfo,
    ModuleInfo,
    RepoIndex,
    resolve_relative,
)

# Work bounds. Steps count statements and expressions plus the items every
# builtin walks, and sizes are checked *before* an operation computes them, so
# `all(range(10**12))`, `'a' * 10**10` or `x **= 10**9` are refused at once.
MAX_STEPS = 100_000  # per evaluation: no loop runs away
MAX_DEPTH = 16  # nested calls
MAX_ITEMS = 100_000  # length of one range, string, list or tuple
MAX_INT_BITS = 4096  # size of one integer
MAX_FORMAT_WIDTH = 1_000  # width or precision in an f-string


@dataclass(frozen=True)
class Raises:
    """The consumer's function raises for this count."""

    error_type: str
    message: str
    # Python's own error on a flashinfer object the engine uses as that
    # release's object does not allow (iterating one that does not iterate),
    # not a raise the engine wrote: where (the module's path in the tree, the
    # line). The engine crashes there, whatever the kernel would say.
    crash_at: tuple[str, int] | None = None

    def crash(self, shown: Callable[[str], str]) -> str | None:
        """The crash in words, its path as `shown` prints the tree's paths;
        None for a raise the engine wrote."""
        if self.crash_at is None:
            return None
        path, line = self.crash_at
        return f"the engine's code raises {self.error_type} at {shown(path)}:{line}: {self.message}"


@dataclass(frozen=True)
class NotEvaluable:
    """A construct outside the subset, and where it is."""

    path: str
    line: int
    what: str
    # It reads flashinfer and no release was given: evaluable once per
    # release judged (check --repo reads the tree again against each).
    needs_release: bool = False

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


class _Unsupported(Exception):
    def __init__(self, node: ast.AST, what: str, needs_release: bool = False):
        super().__init__(what)
        self.node, self.what = node, what
        self.module: ModuleInfo | None = None  # where `node` is: set as it leaves the function holding it
        self.needs_release = needs_release  # NotEvaluable.needs_release


class _Raised(Exception):
    def __init__(self, error_type: str, message: str, foreign: bool = False):
        super().__init__(message)
        self.error_type, self.message = error_type, message
        # Raised by a flashinfer object's own behaviour (NotIterable): where
        # the engine's code met it, set by the statement that did.
        self.foreign = foreign
        self.at: tuple[str, int] | None = None

    def raises(self) -> Raises:
        return Raises(self.error_type, self.message, self.at if self.foreign else None)


class _Caught:
    """`except E as e`: the exception as the subset sees it. `str(e)` and
    `repr(e)` read as Python's; its attributes are not modelled (reading one
    is not evaluable, never guessed)."""

    def __init__(self, error_type: str, message: str):
        self.error_type, self.message = error_type, message

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{self.error_type}({self.message!r})"

    def __format__(self, spec: str) -> str:
        return format(self.message, spec)


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Return(Exception):
    def __init__(self, value: Any):
        self.value = value


@dataclass
class _Callable:
    """A repo function the interpreter may enter."""

    function: FunctionInfo
    owner: ClassInfo | None = None


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.Div: operator.truediv,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
}
_BUILTINS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "len": len,
    "range": range,
    "int": int,
    "abs": abs,
    "sorted": sorted,
    "any": any,
    "all": all,
    "tuple": tuple,
    "list": list,
    "set": set,
    "frozenset": frozenset,
    "bool": bool,
    "str": str,
}
_MATH = {"ceil": math.ceil, "floor": math.floor, "log2": math.log2, "gcd": math.gcd}
_LOG_METHODS = frozenset(
    {"debug", "info", "warning", "warn", "error", "exception", "critical", "debug_once", "info_once", "warning_once"}
)
_LOGGER_FACTORIES = frozenset({"init_logger", "getLogger", "get_logger"})
_EXCEPTIONS = {
    "ValueError",
    "RuntimeError",
    "NotImplementedError",
    "AssertionError",
    "TypeError",
    "KeyError",
    "ImportError",
    "AttributeError",
}


@dataclass(frozen=True)
class Settings:
    """The consumer's settings registry (`envs.NAME.get()`): each NAME's value is
    the default its registry declares (`NAME = EnvStr("flashinfer")`) unless
    overridden (`--set NAME=VALUE`)."""

    object_name: str  # the registry instance as the rule names it: "envs"
    accessor: str  # the method that reads a value: "get"
    values: dict[str, Any] = field(default_factory=dict)  # NAME -> value (defaults, then overrides)
    problems: dict[str, str] = field(default_factory=dict)  # NAME -> why its default is unknown


class FlashinferSource(Protocol):
    """The flashinfer release a rule is evaluated against: its tree indexed for
    static reads, and a worker that imports names the tree does not spell out."""

    version: str

    @property
    def index(self) -> RepoIndex | None: ...

    def import_names(self, module: str, names: list[str], sm: int | None) -> dict: ...


class _ReleaseObject:
    """A flashinfer object the worker saw only in part: asking it what was not
    seen (`in`, `len`) is not evaluable, since the object may answer
    differently than hprobe would guess."""

    unseen = ""  # why, after the object's name

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __contains__(self, item: object) -> bool:
        raise _OpaqueUse(f"`in` on flashinfer's {self.type_name}, {self.unseen}")

    def __len__(self) -> int:
        raise _OpaqueUse(f"len() of flashinfer's {self.type_name}, {self.unseen}")


class Iterated(_ReleaseObject):
    """A flashinfer object that a worker could only iterate (0.7.x's dispatch
    envelope): iteration is what it was seen to give."""

    unseen = "seen only by iterating it"

    def __init__(self, items: list[Any], type_name: str):
        super().__init__(type_name)
        self.items = items

    def __iter__(self):
        return iter(self.items)


class NotIterable(_ReleaseObject):
    """A flashinfer object that does not iterate (0.7.0's dispatch envelope has
    only `__contains__`): iterating it raises the TypeError the worker saw
    Python raise on the release's own object."""

    unseen = "which hprobe does not ask the release"

    def __init__(self, type_name: str, message: str):
        super().__init__(type_name)
        self.message = message

    def __iter__(self):
        raise _Raised("TypeError", self.message, foreign=True)


class _OpaqueUse(Exception):
    pass


class Opaque:
    """A value hprobe cannot know statically (astroid's `Uninferable`): a
    caller hands it in (the head-count trail binds a parameter the engine
    fills at run time). Expressions over it are Opaque; any use that decides
    something (a branch, a loop, a count, a key) is not evaluable, with why."""

    def __init__(self, why: str, truth: bool | None = None, choices: tuple[Any, ...] | None = None):
        self.why = why
        # The values it may be, where that is known though which is not:
        # `"cake" if ok else "auto"` with `ok` unknown (a comparison with each
        # decides where they agree).
        self.choices = choices
        if truth is None and choices:
            truths = {bool(c) for c in choices}
            truth = truths.pop() if len(truths) == 1 else None
        # Whether it is true, where that is known though the value is not:
        # `x and ()` is false whatever `x` is. Only the expression that knew it
        # gives one; any value computed from it is a plain Opaque again.
        self.truth = truth

    @property
    def plain(self) -> Opaque:
        """The same unknown, without what was known of it."""
        return self if self.truth is None and self.choices is None else Opaque(self.why)

    def _used(self, *_: Any) -> Any:
        raise _OpaqueUse(self.why)

    def __bool__(self) -> bool:
        if self.truth is None:
            self._used()
        return bool(self.truth)

    # str() too: a message or f-string built from it would say "Opaque(...)".
    __iter__ = __len__ = __index__ = __int__ = __hash__ = __contains__ = __format__ = __str__ = _used

    def __eq__(self, other: object) -> bool:
        return self._used()

    def __repr__(self) -> str:
        return f"Opaque({self.why!r}, truth={self.truth}, choices={self.choices})"


# The values an Opaque's choices may be: compared by value, never containers.
_CHOICE = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class Binding:
    """What a rule reads besides its head-count argument."""

    head_arg: bool = True  # n is the first positional argument (vLLM); else an instance attribute
    instance: dict[str, Any] = field(default_factory=dict)  # self.<name> -> value
    args: dict[str, Any] = field(default_factory=dict)  # extra parameters by name
    platform: dict[str, bool] = field(default_factory=dict)  # expression source text -> value on the SM judged
    settings: Settings | None = None
    flashinfer: FlashinferSource | None = None  # the release judged; None: not given
    sm: int | None = None  # the SM the rule is evaluated for (a worker fakes it)
    # A name the tree binds other than its definition says (a platform object
    # bound late) is a value not known, not the end of the evaluation: the
    # head-count trail's reading, where what the engine does with it is taken
    # not to raise (an engine that raises there never reaches FlashInfer). A
    # padding rule's answer may be that it raises: there it ends the reading.
    unknown_rebound: bool = False


@dataclass(frozen=True)
class Evaluation:
    value: Any  # a count for a rule; any value for `evaluate_call`; or Raises / NotEvaluable
    returned_at: int | None = None  # line of the rule's own `return` that gave the value
    reads_flashinfer: bool = False  # the rule imported from flashinfer: it depends on the release
    settings_read: tuple[tuple[str, Any], ...] = ()  # settings the rule read, with their values
    platform_read: tuple[tuple[str, bool], ...] = ()  # platform predicates it tested


def evaluate(index: RepoIndex, owner: ClassInfo | None, function: FunctionInfo, n: int) -> int | Raises | NotEvaluable:
    """The padded count `function` returns for `n` heads, what it raises, or why
    it cannot be evaluated statically."""
    return evaluate_bound(index, owner, function, n, Binding()).value


def evaluate_bound(
    index: RepoIndex, owner: ClassInfo | None, function: FunctionInfo, n: int, binding: Binding
) -> Evaluation:
    """As `evaluate`, with what the rule reads besides `n`, and which branch
    (the line of its `return`) gave the answer."""
    args = [n] if binding.head_arg else []
    evaluation = evaluate_call(index, owner, function, args, binding)
    value = evaluation.value
    if not isinstance(value, (Raises, NotEvaluable)):
        value = _as_count(value, function.module.path, evaluation.returned_at or function.node.lineno, n)
    return replace(evaluation, value=value)


def _as_count(result: Any, path: str, line: int, n: int) -> int | NotEvaluable:
    if isinstance(result, Opaque):
        return NotEvaluable(path, line, result.why)
    if isinstance(result, bool) or not isinstance(result, int):
        return NotEvaluable(path, line, f"returned {type(result).__name__}, not an int")
    if result > MAX_HEADS:
        # A bound on what a rule may ask to launch, applied before any set of counts is built from it.
        return NotEvaluable(path, line, f"returns {result} for {n} heads, above {MAX_HEADS}")
    return result


def evaluate_call(
    index: RepoIndex, owner: ClassInfo | None, function: FunctionInfo, args: list[Any], binding: Binding
) -> Evaluation:
    """What `function(*args)` returns (any value the subset computes: a count,
    a backend name, None), what it raises, or why it cannot be evaluated."""
    interp = _Interpreter(index, binding)
    value: Any
    try:
        value = interp.call(_Callable(function, owner), list(args), dict(binding.args), depth=0)
    except _Raised as exc:
        value = exc.raises()
    except _Unsupported as exc:
        module = exc.module or interp.where or function.module
        value = NotEvaluable(
            module.path, getattr(exc.node, "lineno", function.node.lineno), exc.what, exc.needs_release
        )
    except (RecursionError, MemoryError) as exc:
        # Constants defined through each other without end, or too deep to follow.
        module = interp.where or function.module
        value = NotEvaluable(
            module.path, function.node.lineno, f"evaluation too deep or too large ({type(exc).__name__})"
        )
    except _OpaqueUse as exc:
        module = interp.where or function.module
        value = NotEvaluable(module.path, function.node.lineno, str(exc))
    return Evaluation(
        value,
        interp.returned_at,
        interp.reads_flashinfer,
        tuple(interp.settings_read.items()),
        tuple(interp.platform_read.items()),
    )


def evaluate_expression(
    index: RepoIndex,
    owner: ClassInfo | None,
    module: ModuleInfo,
    node: ast.expr,
    frame: dict[str, Any],
    binding: Binding,
) -> Evaluation:
    """The value of one expression of `module` (a test or an assignment of an
    inline rule), with `frame` for the names it binds locally."""
    interp = _Interpreter(index, binding)
    interp.where = module
    value: Any
    try:
        value = interp.expr(node, dict(frame), module, owner, 0)
    except _Raised as exc:
        value = exc.raises()
    except _Unsupported as exc:
        value = NotEvaluable(
            (exc.module or module).path,
            getattr(exc.node, "lineno", getattr(node, "lineno", 0)),
            exc.what,
            exc.needs_release,
        )
    except (RecursionError, MemoryError) as exc:
        value = NotEvaluable(
            module.path, getattr(node, "lineno", 0), f"evaluation too deep or too large ({type(exc).__name__})"
        )
    except _OpaqueUse as exc:
        value = NotEvaluable(module.path, getattr(node, "lineno", 0), str(exc))
    return Evaluation(
        value, None, interp.reads_flashinfer, tuple(interp.settings_read.items()), tuple(interp.platform_read.items())
    )


class _Interpreter:
    def __init__(self, index: RepoIndex, binding: Binding | None = None):
        self.index = index
        self.binding = binding or Binding()
        self.steps = 0
        self.where: ModuleInfo | None = None  # module of the code being interpreted
        self.returned_at: int | None = None
        self.reads_flashinfer = False
        self.settings_read: dict[str, Any] = {}
        self.platform_read: dict[str, bool] = {}
        self.calls: list[FunctionInfo] = []  # the functions being interpreted, innermost last
        # How many expressions have met a value hprobe cannot know: a `try`
        # whose body met one cannot say whether its handlers run (_try).
        self.unknowns = 0
        self.unknown_call: ast.Call | None = None  # the last call of what hprobe cannot know (_unknown_call)

    def _tick(self, node: ast.AST) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise _Unsupported(node, f"more than {MAX_STEPS} steps")

    # -- calls -------------------------------------------------------------------------

    def _refuse_rebound(self, target: _Callable) -> None:
        """A function whose definition is not what runs (decorated, bound again,
        its class changed after its definition) is not evaluable."""
        fn = target.function
        if target.owner is not None:
            why = self.index.taint(target.owner)
            if why is not None:
                raise _Unsupported(fn.node, why)
        holder, _, name = fn.qualname.rpartition(".")
        cls = fn.module.classes.get(holder) if holder else None
        why = cls.rebound.get(name) if cls is not None else fn.module.rebound.get(fn.qualname)
        if why is not None:
            raise _Unsupported(fn.node, f"{fn.qualname} is not what its definition says ({why})")

    def call(self, target: _Callable, args: list[Any], kwargs: dict[str, Any], depth: int) -> Any:
        fn = target.function
        if depth > MAX_DEPTH:
            raise _Unsupported(fn.node, f"calls nested deeper than {MAX_DEPTH}")
        self._refuse_rebound(target)
        node = fn.node
        for deco in node.decorator_list:
            name = _dotted(deco)
            if name not in TRANSPARENT_METHOD_DECORATORS:
                raise _Unsupported(deco, f"decorator @{name or ast.unparse(deco)}")
        a = node.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
            raise _Unsupported(node, "a signature with *args, **kwargs or keyword-only parameters")
        params = [p.arg for p in a.args]
        is_method = target.owner is not None and not any(_dotted(d) == "staticmethod" for d in node.decorator_list)
        if is_method:
            params = params[1:]  # cls / self
        defaults = a.defaults
        frame: dict[str, Any] = {}
        for i, name in enumerate(params):
            if i < len(args):
                frame[name] = args[i]
            elif name in kwargs:
                frame[name] = kwargs.pop(name)
            else:
                d = len(params) - len(defaults)
                if i >= d:
                    frame[name] = self.expr(defaults[i - d], {}, fn.module, target.owner, depth)
                else:
                    raise _Unsupported(node, f"{fn.qualname}() called without {name!r}")
        if kwargs:
            raise _Unsupported(node, f"{fn.qualname}() got unknown keyword {next(iter(kwargs))!r}")
        previous = self.where
        self.where = fn.module
        self.calls.append(fn)
        try:
            self.block(node.body, frame, fn.module, target.owner, depth)
        except _Return as ret:
            return ret.value
        except _Unsupported as exc:
            exc.module = exc.module or self.where
            raise
        finally:
            self.where = previous
            self.calls.pop()
        return None

    # -- statements --------------------------------------------------------------------

    def block(self, body: list[ast.stmt], frame: dict, module: ModuleInfo, owner: ClassInfo | None, depth: int) -> None:
        for stmt in body:
            try:
                self.stmt(stmt, frame, module, owner, depth)
            except _Raised as exc:
                if exc.foreign and exc.at is None:
                    exc.at = (module.path, stmt.lineno)  # the innermost statement that met the object
                raise

    def stmt(self, node: ast.stmt, frame: dict, module: ModuleInfo, owner: ClassInfo | None, depth: int) -> None:
        self._tick(node)
        ev = lambda e: self.expr(e, frame, module, owner, depth)  # noqa: E731
        if isinstance(node, (ast.Return, ast.If, ast.For, ast.Break, ast.Continue, ast.Raise, ast.Assert, ast.Try)):
            self._control(node, ev, frame, module, owner, depth)
            return
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and self._assign(
            node, ev, frame, module, owner
        ):
            return
        if isinstance(node, ast.ImportFrom):
            self._import_from(node, frame, module)
            return
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            return  # a docstring
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and self._logging(node.value, module):
            for arg in [*node.value.args, *(k.value for k in node.value.keywords)]:
                ev(arg)  # Python evaluates the arguments (and may raise there); the log line changes nothing
            return
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            ev(node.value)  # a call for its raise, e.g. cls._check(n)
            if self.unknown_call is node.value:
                raise _Unsupported(node, f"calls `{ast.unparse(node.value.func)[:40]}` for what it does, not known")
            return
        if isinstance(node, ast.Pass):
            return
        raise _Unsupported(node, f"statement `{_first_line(node)}`")

    def _logging(self, call: ast.Call, module: ModuleInfo) -> bool:
        """`logger.warning(...)` as a statement, where `logger` is a module-level
        logger (`init_logger(__name__)`, `logging.getLogger(...)`): it writes a
        line and returns nothing a rule reads."""
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr in _LOG_METHODS and isinstance(func.value, ast.Name)):
            return False
        bound = module.constants.get(func.value.id)
        return (
            isinstance(bound, ast.Call)
            and _dotted(bound.func).rsplit(".", 1)[-1] in _LOGGER_FACTORIES
            and func.value.id not in module.rebound
        )

    def _control(
        self,
        node: ast.stmt,
        ev: Callable[[ast.expr], Any],
        frame: dict,
        module: ModuleInfo,
        owner: ClassInfo | None,
        depth: int,
    ) -> None:
        """Statements that decide what runs next: return, if, for, break, continue, raise, assert, try."""
        if isinstance(node, ast.Return):
            value = ev(node.value) if node.value is not None else None
            if depth == 0:
                self.returned_at = node.lineno
            raise _Return(value)
        if isinstance(node, ast.If):
            self.block(node.body if ev(node.test) else node.orelse, frame, module, owner, depth)
        elif isinstance(node, ast.For):
            if not isinstance(node.target, ast.Name) or node.orelse:
                raise _Unsupported(node, "a for loop other than `for name in ...:`")
            for item in ev(node.iter):
                frame[node.target.id] = item
                try:
                    self.block(node.body, frame, module, owner, depth)
                except _Break:
                    break
                except _Continue:
                    continue
        elif isinstance(node, ast.Break):
            raise _Break()
        elif isinstance(node, ast.Continue):
            raise _Continue()
        elif isinstance(node, ast.Raise):
            self._raise(node, frame, module, owner, depth)
            raise _Unsupported(node, f"statement `{_first_line(node)}`")  # a raise that raised nothing
        elif isinstance(node, ast.Assert):
            if not ev(node.test):
                message = str(ev(node.msg)) if node.msg is not None else ast.unparse(node.test)
                raise _Raised("AssertionError", message)
        elif isinstance(node, ast.Try):
            self._try(node, frame, module, owner, depth)

    def _assign(
        self,
        node: ast.Assign | ast.AnnAssign | ast.AugAssign,
        ev: Callable[[ast.expr], Any],
        frame: dict,
        module: ModuleInfo,
        owner: ClassInfo | None,
    ) -> bool:
        """An assignment to names (or one tuple of names); False for any other target."""
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple):
            self._unpack(node.targets[0], ev(node.value), frame, node)
            return True
        if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            value = ev(node.value)
            for t in node.targets:
                assert isinstance(t, ast.Name)
                frame[t.id] = value
            return True
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            frame[node.target.id] = ev(node.value)
            return True
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            if _BINOPS.get(type(node.op)) is None:
                raise _Unsupported(node, f"operator {type(node.op).__name__}")
            frame[node.target.id] = self._binop(
                node, node.op, self._name(node.target, frame, module, owner), ev(node.value)
            )
            return True
        return False

    def _try(self, node: ast.Try, frame: dict, module: ModuleInfo, owner: ClassInfo | None, depth: int) -> None:
        met = self.unknowns
        try:
            try:
                try:
                    self.block(node.body, frame, module, owner, depth)
                finally:
                    if node.handlers and self.unknowns != met:
                        # Anything done with a value not known may raise: whether a handler runs is not known.
                        raise _Unsupported(
                            node,
                            "a try whose body uses a value hprobe cannot know: whether its handlers run is not known",
                        )
            except _Raised as exc:
                for handler in node.handlers:
                    if self._catches(handler, exc.error_type):
                        if handler.name:
                            frame[handler.name] = _Caught(exc.error_type, exc.message)
                        self.block(handler.body, frame, module, owner, depth)
                        break
                else:
                    raise
            else:
                self.block(node.orelse, frame, module, owner, depth)
        finally:
            if node.finalbody:
                self.block(node.finalbody, frame, module, owner, depth)

    @staticmethod
    def _catches(handler: ast.ExceptHandler, error_type: str) -> bool:
        """Whether `except <handler>` catches `error_type`, by Python's own
        exception hierarchy (`except ArithmeticError` catches ZeroDivisionError).
        A handler naming anything but a builtin exception is not evaluable:
        what it catches is the consumer's class."""
        if handler.type is None:
            return True
        raised = getattr(builtins, error_type, None)
        for name_node in handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]:
            name = _dotted(name_node)
            caught = getattr(builtins, name, None) if name and "." not in name else None
            if not (isinstance(caught, type) and issubclass(caught, BaseException)):
                raise _Unsupported(name_node, f"except {ast.unparse(name_node)}: not a builtin exception")
            if isinstance(raised, type) and issubclass(raised, caught):
                return True
        return False

    def _unpack(self, target: ast.Tuple, value: Any, frame: dict, node: ast.AST) -> None:
        if not all(isinstance(t, ast.Name) for t in target.elts):
            raise _Unsupported(node, "unpacking into something other than names")
        try:
            items = list(value)
        except TypeError as exc:
            raise _Raised("TypeError", str(exc)) from None
        if len(items) != len(target.elts):
            raise _Raised("ValueError", f"expected {len(target.elts)} values to unpack, got {len(items)}")
        for t, item in zip(target.elts, items, strict=True):
            assert isinstance(t, ast.Name)
            frame[t.id] = item

    def _import_from(self, node: ast.ImportFrom, frame: dict, module: ModuleInfo) -> None:
        """`from X import a` inside a function: X of the repo binds its functions,
        classes and constants; X of flashinfer reads the judged release's tree."""
        if node.level == 0 and (node.module or "").split(".")[0] == "flashinfer":
            self._import_flashinfer(node, frame)
            return
        package = module.name if module.path.endswith("__init__.py") else module.name.rpartition(".")[0]
        source = resolve_relative(package, node.module, node.level)
        other = self.index.by_suffix(source)
        if other is None:
            raise _Unsupported(node, f"imports from {source or '.'}, which is not in the repo")
        for alias in node.names:
            found_name = self.index.lookup(other, alias.name)
            if found_name is None:
                raise _Unsupported(node, f"{alias.name} is not a constant, function or class of {source}")
            if found_name[0] == "module":
                raise _Unsupported(node, f"imports the module {alias.name}")
            frame[alias.asname or alias.name] = self._value_of(found_name)

    def _import_flashinfer(self, node: ast.ImportFrom, frame: dict) -> None:
        """Names from the release judged: a literal its source spells out is read
        with ast; anything else is imported in a worker on the SM judged."""
        self.reads_flashinfer = True
        source, dotted = self.binding.flashinfer, node.module or ""
        if source is None:
            raise _Unsupported(
                node,
                f"reads flashinfer ({dotted}): evaluated per release, with --flashinfer or the repo's pin",
                needs_release=True,
            )
        values = _literals(source.index, dotted, [a.name for a in node.names]) if source.index is not None else {}
        rest = [a.name for a in node.names if a.name not in values]
        if rest:
            doc = source.import_names(dotted, rest, self.binding.sm)
            if "error" in doc:
                raise _Unsupported(
                    node, f"flashinfer {source.version}: {dotted} could not be read here: {doc['error']}"
                )
            if "import_error" in doc:
                missing = doc.get("missing") or ""
                if not (missing and (dotted == missing or dotted.startswith(missing + "."))):
                    # Another module failed to import: this environment, not the release.
                    raise _Unsupported(
                        node,
                        f"flashinfer {source.version}: importing {dotted} failed here ({doc['import_error']}), for a "
                        "reason of this environment",
                    )
                raise _Raised("ImportError", doc["import_error"])
            for name in rest:
                item = doc["values"][name]
                if item.get("missing"):
                    raise _Raised(
                        "ImportError", f"cannot import name {name!r} from {dotted!r} (flashinfer {source.version})"
                    )
                values[name] = _from_data(item, node)
        for alias in node.names:
            frame[alias.asname or alias.name] = values[alias.name]

    def _raise(self, node: ast.Raise, frame: dict, module: ModuleInfo, owner: ClassInfo | None, depth: int) -> None:
        exc = node.exc
        if isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name) and exc.func.id in _EXCEPTIONS:
            message = " ".join(str(self.expr(a, frame, module, owner, depth)) for a in exc.args)
            raise _Raised(exc.func.id, message)
        if isinstance(exc, ast.Name) and exc.id in _EXCEPTIONS:
            raise _Raised(exc.id, "")
        raise _Unsupported(node, f"raise of `{ast.unparse(exc) if exc else 're-raise'}`")

    # -- expressions -------------------------------------------------------------------

    def expr(self, node: ast.expr, frame: dict, module: ModuleInfo, owner: ClassInfo | None, depth: int) -> Any:
        value = self._expr(node, frame, module, owner, depth)
        if isinstance(value, Opaque):
            self.unknowns += 1
            if not isinstance(node, (ast.BoolOp, ast.IfExp, ast.Name)):
                # An operand's truth or choices are not those of what is computed from it.
                value = value.plain
        return value

    def _expr(self, node: ast.expr, frame: dict, module: ModuleInfo, owner: ClassInfo | None, depth: int) -> Any:
        self._tick(node)
        ev = lambda e: self.expr(e, frame, module, owner, depth)  # noqa: E731
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self._name(node, frame, module, owner)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            shown = _display(node, ev)
            self._check_size(node, shown)  # `t = (t, t)` in a loop doubles what any later walk would walk
            return shown
        if isinstance(node, ast.BinOp):
            left, right = ev(node.left), ev(node.right)
            return _opaque_of(left, right) or self._binop(node, node.op, left, right)
        if isinstance(node, ast.UnaryOp):
            operand = ev(node.operand)
            if isinstance(operand, Opaque) and operand.truth is not None and isinstance(node.op, ast.Not):
                return not operand.truth
            return _opaque_of(operand) or self._unary(node, operand)
        if isinstance(node, ast.BoolOp):
            return _bool_op(node, ev)
        if isinstance(node, ast.Compare):
            return self._compare(node, ev)
        if isinstance(node, ast.IfExp):
            return _if_expression(node, ev)
        if isinstance(node, ast.JoinedStr):
            return _f_string(node, ev)
        if isinstance(node, ast.Subscript):
            return _subscript(node, ev)
        if isinstance(node, (ast.Call, ast.Attribute)):
            return self._reference(node, frame, module, owner, depth)
        if isinstance(node, (ast.GeneratorExp, ast.ListComp, ast.SetComp)):
            return self._comprehension(node, frame, module, owner, depth)
        raise _Unsupported(node, f"expression `{ast.unparse(node)[:60]}`")

    # -- expressions, one idea each ------------------------------------------------------

    def _unary(self, node: ast.UnaryOp, value: Any) -> Any:
        if isinstance(node.op, ast.Not):
            return not value
        unaries: dict[type, Callable[[Any], Any]] = {
            ast.USub: operator.neg,
            ast.UAdd: operator.pos,
            ast.Invert: operator.invert,
        }
        unary = unaries.get(type(node.op))
        if unary is None or isinstance(value, (_Callable, ClassInfo)):
            raise _Unsupported(node, f"operator {type(node.op).__name__}")
        try:
            return unary(value)
        except TypeError as exc:
            raise _Raised("TypeError", str(exc)) from None

    def _reference(
        self, node: ast.Call | ast.Attribute, frame: dict, module: ModuleInfo, owner: ClassInfo | None, depth: int
    ) -> Any:
        """A call or an attribute: a platform predicate the binding decides, a
        setting, or the consumer's own code followed."""
        if self.binding.platform:
            text = ast.unparse(node)
            if text in self.binding.platform:
                self.platform_read[text] = self.binding.platform[text]
                return self.binding.platform[text]
        if isinstance(node, ast.Call):
            setting = self._setting(node)
            if setting is not None:
                return setting[1]
            return self._call_expr(node, frame, module, owner, depth)
        return self._attribute(node, frame, module, owner)

    def _compare(self, node: ast.Compare, ev: Callable[[ast.expr], Any]) -> Any:
        left = ev(node.left)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = ev(right_node)
            holds = self._holds(node, op, left, right)
            if isinstance(holds, Opaque):
                return holds
            if not holds:
                return False
            left = right
        return True

    def _holds(self, node: ast.Compare, op: ast.cmpop, left: Any, right: Any) -> Any:
        """One comparison; where one side is one of known choices, the answer
        every choice gives, if they agree."""
        opaque = _opaque_of(left, right)
        if opaque is not None:
            if opaque.choices is None or _opaque_of(*(v for v in (left, right) if v is not opaque)) is not None:
                return opaque.plain
            answers: set[bool] = set()
            raised: list[_Raised] = []
            for choice in opaque.choices:
                sides = (choice, right) if opaque is left else (left, choice)
                try:
                    answers.add(bool(self._holds(node, op, *sides)))
                except _Raised as exc:
                    raised.append(exc)  # `n < ""` raises for this choice, not for the others
            if raised and not answers and len({exc.error_type for exc in raised}) == 1:
                raise raised[0]  # every choice raises the same: so does the comparison
            return answers.pop() if len(answers) == 1 and not raised else opaque.plain
        self._work(node, left, right)
        try:
            return COMPARISONS[type(op)](left, right)
        except (TypeError, ValueError) as exc:
            raise _Raised(type(exc).__name__, str(exc)) from None  # `n < "64"` raises in Python too

    # -- work and size bounds ------------------------------------------------------------

    def _binop(self, node: ast.AST, op_node: ast.operator, left: Any, right: Any) -> Any:
        op = _BINOPS.get(type(op_node))
        if op is None:
            raise _Unsupported(node, f"operator {type(op_node).__name__}")
        ints = isinstance(left, int) and isinstance(right, int)
        if (
            ints
            and isinstance(op_node, ast.Pow)
            and right > 0
            and abs(left) > 1
            and right * left.bit_length() > MAX_INT_BITS
        ):
            raise _Unsupported(node, f"a power of about {right * left.bit_length()} bits")
        if ints and isinstance(op_node, ast.LShift) and right > 0 and left and left.bit_length() + right > MAX_INT_BITS:
            raise _Unsupported(node, f"a shift to about {left.bit_length() + right} bits")
        if isinstance(op_node, ast.Mult):
            for seq, times in ((left, right), (right, left)):
                if (
                    isinstance(seq, _SIZED)
                    and isinstance(times, int)
                    and not isinstance(times, bool)
                    and deep_size(seq) * max(times, 0) > MAX_ITEMS
                ):
                    raise _Unsupported(node, f"a repetition to more than {MAX_ITEMS} items")
        if isinstance(op_node, ast.Add) and isinstance(left, _SIZED) and isinstance(right, _SIZED):
            if deep_size(left) + deep_size(right) > MAX_ITEMS:
                raise _Unsupported(node, f"a concatenation to more than {MAX_ITEMS} items")
        if isinstance(op_node, ast.Mod) and isinstance(left, (str, bytes)):
            # `"%0200000000d" % n` builds its width before anything could measure it.
            text = left.decode("latin-1") if isinstance(left, bytes) else left
            widths = [int(w) for w in re.findall(r"\d+", text)]
            if widths and max(widths) > MAX_FORMAT_WIDTH:
                raise _Unsupported(node, f"a %-format width or precision of {max(widths)}")
        self._work(node, left, right)
        try:
            result = op(left, right)
        except (TypeError, ZeroDivisionError, ValueError, OverflowError) as exc:
            raise _Raised(type(exc).__name__, str(exc)) from None  # what Python would raise for the consumer
        self._check_size(node, result)
        return result

    def _check_range(self, node: ast.AST, args: list[Any]) -> None:
        if all(isinstance(a, int) and not isinstance(a, bool) for a in args) and 1 <= len(args) <= 3:
            try:
                length = len(range(*args))
            except (ValueError, OverflowError):
                return  # range() itself raises: reported as the consumer's error
            if length > MAX_ITEMS:
                raise _Unsupported(node, f"a range of {length} items")

    def _check_size(self, node: ast.AST, value: Any) -> None:
        """Refuse a value larger than the bounds: an integer's bits, and every
        item of a container counted through its nesting (`((0,)*12000,)*12000`
        is 144 million items behind a length of 12,000; shared references count
        each time, as str() or == would walk them)."""
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
            raise _Unsupported(node, f"an integer of {value.bit_length()} bits")
        size = deep_size(value)
        if size > MAX_ITEMS:
            raise _Unsupported(node, f"a value of more than {MAX_ITEMS} items")

    def _work(self, node: ast.AST, *values: Any) -> None:
        """Count the items an operation walks (`in`, `all`, `sorted`, `==`),
        through nested containers, as steps: checked before it walks them."""
        for value in values:
            self.steps += deep_size(value, MAX_STEPS - self.steps + 1)
            if self.steps > MAX_STEPS:
                raise _Unsupported(node, f"more than {MAX_STEPS} steps")

    def _comprehension(self, node: Any, frame: dict, module: ModuleInfo, owner: ClassInfo | None, depth: int) -> Any:
        target = node.generators[0].target if len(node.generators) == 1 else None
        if not isinstance(target, (ast.Name, ast.Tuple)):
            raise _Unsupported(node, "a comprehension with several `for` clauses")
        gen = node.generators[0]
        items = []
        size = 0
        for item in self.expr(gen.iter, frame, module, owner, depth):
            inner = dict(frame)
            if isinstance(target, ast.Tuple):
                self._unpack(target, item, inner, node)
            else:
                inner[target.id] = item
            if all(self.expr(cond, inner, module, owner, depth) for cond in gen.ifs):
                items.append(self.expr(node.elt, inner, module, owner, depth))
                size += 1 + deep_size(items[-1])
                if size > MAX_ITEMS:
                    raise _Unsupported(node, f"a comprehension of more than {MAX_ITEMS} items")
        return set(items) if isinstance(node, ast.SetComp) else items

    def _name(self, node: ast.Name, frame: dict, module: ModuleInfo, owner: ClassInfo | None) -> Any:
        if node.id in frame:
            return frame[node.id]
        if node.id in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.id]
        found = self.index.lookup(module, node.id)
        if found is not None and found[0] != "module":
            return self._value_of(found)
        if node.id in _BUILTINS:
            patched = self.index.patched_builtins()
            where = patched.get(node.id) or patched.get("*")
            if where is not None:
                raise _Unsupported(
                    node, f"the builtin {node.id} is replaced at {where}: what the rule calls is not Python's"
                )
            return _BUILTINS[node.id]
        raise _Unsupported(node, f"name {node.id!r} is not a constant or function of the repo")

    def _value_of(self, found: tuple[str, Any, ModuleInfo]) -> Any:
        """What a name the index found stands for: a constant evaluated where it
        is defined, a function to call, or a class."""
        kind, value, where = found
        if kind == "rebound":
            if not self.binding.unknown_rebound:
                raise _Unsupported(where.tree, str(value))
            # What it is at run time is not its definition: a value not known,
            # which decides nothing (a platform object the engine binds late).
            return Opaque(str(value))
        if kind == "constant":
            previous = self.where
            self.where = where
            try:
                return self.expr(value, {}, where, None, 0)
            finally:
                self.where = previous
        if kind == "function":
            return _Callable(value)
        return value

    def _setting(self, node: ast.Call) -> tuple[str, Any] | None:
        """`envs.NAME.get()`: (NAME, its value), or None when `node` is not a read of the registry."""
        settings = self.binding.settings
        func = node.func
        if (
            settings is None
            or node.args
            or node.keywords
            or not isinstance(func, ast.Attribute)
            or func.attr != settings.accessor
        ):
            return None
        holder = func.value
        if not (
            isinstance(holder, ast.Attribute)
            and isinstance(holder.value, ast.Name)
            and holder.value.id == settings.object_name
        ):
            return None
        name = holder.attr
        if name not in settings.values:
            why = settings.problems.get(name, "not declared in the settings registry")
            raise _Unsupported(node, f"setting {name}: {why}")
        self.settings_read[name] = settings.values[name]
        return name, settings.values[name]

    def _attribute(self, node: ast.Attribute, frame: dict, module: ModuleInfo, owner: ClassInfo | None) -> Any:
        base = node.value
        if (
            isinstance(base, ast.Call)
            and _dotted(base.func) == "super"
            and not base.args
            and owner is not None
            and self.calls
        ):
            return self._super_member(owner, node.attr, node)
        if (
            isinstance(base, ast.Name)
            and base.id == "self"
            and node.attr in self.binding.instance
            and "self" not in frame
        ):
            return self.binding.instance[node.attr]
        if isinstance(base, ast.Name) and base.id in ("cls", "self") and owner is not None and base.id not in frame:
            return self._member(owner, node.attr, node)
        if isinstance(base, ast.Name) and base.id == "math" and node.attr in _MATH:
            return _MATH[node.attr]
        value = self.expr(base, frame, module, owner, 0)
        if isinstance(value, Opaque):
            return value
        if isinstance(value, ClassInfo):
            return self._member(value, node.attr, node)
        raise _Unsupported(node, f"attribute `{ast.unparse(node)}`")

    def _super_member(self, owner: ClassInfo, name: str, node: ast.AST) -> Any:
        """`super().name` inside a method: the next definition after the class
        that holds the method being interpreted, in the instance's MRO."""
        current = self.calls[-1]
        order = self.index.mro(owner)
        holder = current.qualname.rpartition(".")[0]
        at = next((i for i, k in enumerate(order) if k.name == holder and k.module is current.module), None)
        if at is None:
            raise _Unsupported(node, f"super() outside a method of {owner.name}'s hierarchy")
        for klass in order[at + 1 :]:
            if name in klass.methods:
                return _Callable(klass.methods[name], owner)
        raise _Unsupported(node, f"super().{name} is not defined in the repo")

    def _member(self, cls: ClassInfo, name: str, node: ast.AST) -> Any:
        why = self.index.taint(cls)
        if why is not None:
            raise _Unsupported(node, why)
        for klass in self.index.mro(cls):
            if name in klass.rebound:
                raise _Unsupported(node, f"{klass.name}.{name} is not what its definition says ({klass.rebound[name]})")
            if name in klass.methods:
                return _Callable(klass.methods[name], cls)
            if name in klass.attributes:
                previous = self.where
                self.where = klass.module
                try:
                    return self.expr(klass.attributes[name], {}, klass.module, klass, 0)
                finally:
                    self.where = previous
        raise _Unsupported(node, f"{cls.name}.{name} is not defined in the repo")

    def _call_expr(self, node: ast.Call, frame: dict, module: ModuleInfo, owner: ClassInfo | None, depth: int) -> Any:
        func = self.expr(node.func, frame, module, owner, depth)
        if isinstance(func, Opaque):
            return self._unknown_call(node, func, frame, module, owner, depth)
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise _Unsupported(node, "a call with *args or **kwargs")
        args = [self.expr(a, frame, module, owner, depth) for a in node.args]
        kwargs = {str(k.arg): self.expr(k.value, frame, module, owner, depth) for k in node.keywords}
        if isinstance(func, _Callable):
            return self.call(func, args, kwargs, depth + 1)
        if func in _BUILTINS.values() or func in _MATH.values():
            values = [*args, *kwargs.values()]
            if any(isinstance(v, (_Callable, ClassInfo)) for v in values):
                raise _Unsupported(node, f"{ast.unparse(node.func)}() given a function or class")
            unknown = _opaque_in(values)
            if unknown is not None:
                # `max(x, n)` compares with what it cannot know: Python's answer
                # (or its TypeError) is not this Opaque's, so nothing is computed.
                return Opaque(unknown.why)
            if func is range:
                self._check_range(node, args)
            self._work(node, *values)
            try:
                result = func(*args, **kwargs)
            except (TypeError, ValueError, ZeroDivisionError, OverflowError) as exc:
                raise _Raised(type(exc).__name__, str(exc)) from None  # what Python would raise for the consumer
            self._check_size(node, result)
            return result
        raise _Unsupported(node, f"call of `{ast.unparse(node.func)}`")

    def _unknown_call(
        self, node: ast.Call, func: Opaque, frame: dict, module: ModuleInfo, owner: ClassInfo | None, depth: int
    ) -> Opaque:
        """A call of what hprobe cannot know: its arguments are evaluated as
        Python does, and its result is not known. Handed a container or a
        function, it may change what the rest reads: not evaluable. Called
        for what it does (a statement: stmt reads `unknown_call`), what it does
        or raises is the answer's and not known."""
        handed = [*(a.value if isinstance(a, ast.Starred) else a for a in node.args), *(k.value for k in node.keywords)]
        for arg in handed:
            value = self.expr(arg, frame, module, owner, depth)
            if _shares_state(value):
                raise _Unsupported(
                    node,
                    f"hands `{ast.unparse(arg)[:40]}` to `{ast.unparse(node.func)[:40]}`, which hprobe cannot know "
                    f"({func.why}) and which may change it or call it",
                )
        self.unknown_call = node  # last: the call is the statement's own only if nothing ran after it
        return Opaque(func.why)


def _opaque_in(values: list[Any], limit: int = 1000) -> Opaque | None:
    """The first value hprobe cannot know in `values` or the containers they hold."""
    stack = list(values)
    while stack and limit > 0:
        limit -= 1
        item = stack.pop()
        if isinstance(item, Opaque):
            return item
        if isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend([*item.keys(), *item.values()])
    return Opaque("a container too large to search for values hprobe cannot know") if stack else None


def _shares_state(value: Any, limit: int = 1000) -> bool:
    """Whether a value is (or holds) something a callee could change or call."""
    if isinstance(value, (list, dict, set, bytearray, _Callable, ClassInfo)):
        return True
    if isinstance(value, (tuple, frozenset)) and limit > 0:
        return any(_shares_state(v, limit - 1) for v in value)
    return False


def _literals(index: RepoIndex, dotted: str, names: list[str]) -> dict[str, Any]:
    """The names of module `dotted` that its source spells out as constants the
    subset evaluates; the others are left to the worker."""
    module = index.by_suffix(dotted)
    if module is None:
        return {}
    reader = _Interpreter(index)
    out: dict[str, Any] = {}
    for name in names:
        hit = index.lookup(module, name)
        if hit is not None and hit[0] == "constant":
            try:
                out[name] = reader.expr(hit[1], {}, hit[2], None, 0)
            except (_Unsupported, _Raised):
                pass  # not a literal: the worker imports it
    return out


def _from_data(item: dict, node: ast.AST) -> Any:
    """A worker's tagged value back to Python (see worker._data)."""
    if "value" in item:
        return item["value"]
    for kind, build in (("tuple", tuple), ("list", list), ("frozenset", frozenset)):
        if kind in item:
            return build(_from_data(x, node) for x in item[kind])
    if "dict" in item:
        return {_from_data(k, node): _from_data(v, node) for k, v in item["dict"]}
    if "iterable" in item:
        return Iterated([_from_data(x, node) for x in item["iterable"]], item.get("type", "object"))
    if "not_iterable" in item:
        return NotIterable(str(item.get("opaque", "object")), str(item["not_iterable"]))
    raise _Unsupported(node, f"reads a flashinfer {item.get('opaque', 'object')}, which is not data")


_SIZED = (str, bytes, bytearray, list, tuple, set, frozenset, dict, range)
_NESTED = (list, tuple, set, frozenset, dict)


def deep_size(value: Any, limit: int = MAX_ITEMS + 1) -> int:
    """Items in `value` counted through nested containers (a string's or
    bytes' characters, a range's length), stopping once past `limit`: the cost
    of finding the size is bounded by the size allowed."""
    if not isinstance(value, _SIZED):
        return 0
    total = 0
    stack = [value]
    while stack and total <= limit:
        item = stack.pop()
        if isinstance(item, _NESTED):
            total += len(item)
            if total <= limit:
                stack.extend(item.items() if isinstance(item, dict) else item)
        elif isinstance(item, tuple):
            stack.extend(item)
        elif isinstance(item, _SIZED):
            total += len(item)
    return total


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    return ""


def _first_line(node: ast.AST) -> str:
    text = ast.unparse(node).splitlines()[0]
    return text if len(text) <= 60 else text[:57] + "..."


def _bool_op(node: ast.BoolOp, ev: Callable[[ast.expr], Any]) -> Any:
    """`and` / `or` as Python evaluates them: the first deciding operand, unevaluated rest."""
    stop_when = not isinstance(node.op, ast.And)  # `and` stops at a false operand, `or` at a true one
    result: Any = not stop_when
    for i, v in enumerate(node.values):
        result = ev(v)
        if isinstance(result, Opaque) and result.truth is None:
            return _decided_after(result, node.values[i + 1 :], stop_when, ev)
        if bool(result) is stop_when:
            return result
    return result


# What an operand may do that Python would not do where an earlier operand
# decides first: only operands without any of these are looked at past one
# hprobe cannot know.
_EFFECTS = (ast.Call, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Lambda)


def _decided_after(unknown: Opaque, rest: list[ast.expr], stop_when: bool, ev: Callable[[ast.expr], Any]) -> Opaque:
    """`x and y` with `x` not known: false wherever `y` is (an `or`: true
    wherever `y` is), whichever of them Python returns; its value stays unknown.
    Only operands with no call in them are read: Python may never evaluate
    them, so what they raise or do here is not the consumer's."""
    for operand in rest:
        if any(isinstance(part, _EFFECTS) for part in ast.walk(operand)):
            continue
        try:
            value = ev(operand)
        except (_Raised, _Unsupported, _OpaqueUse):
            continue
        if isinstance(value, Opaque) and value.truth is None:
            continue
        if bool(value) is stop_when:
            return Opaque(unknown.why, truth=stop_when)
    return Opaque(unknown.why)


def _opaque_of(*values: Any) -> Opaque | None:
    return next((v for v in values if isinstance(v, Opaque)), None)


def _if_expression(node: ast.IfExp, ev: Callable[[ast.expr], Any]) -> Any:
    """`a if test else b`; with an Opaque test, the value both sides agree on,
    else one of the two where both are plain values, else Opaque."""
    test = ev(node.test)
    if not isinstance(test, Opaque) or test.truth is not None:
        return ev(node.body) if test else ev(node.orelse)
    try:
        # Python evaluates one side only: what the other raises is not the consumer's.
        body, orelse = ev(node.body), ev(node.orelse)
    except (_Raised, _Unsupported, _OpaqueUse):
        return test.plain
    return one_of(test.why, body, orelse)


def one_of(why: str, *values: Any) -> Any:
    """A value that is one of `values`, which is not known (for `why`): the
    value where they agree, one of them (an Opaque with choices) where each
    is a plain value or has choices, else a plain Opaque."""
    first = values[0]
    if not isinstance(first, Opaque) and all(
        not isinstance(v, Opaque) and type(v) is type(first) and v == first for v in values[1:]
    ):
        return first
    choices: list[Any] = []
    for value in values:
        if isinstance(value, Opaque):
            if value.choices is None:
                return Opaque(why)
            found = value.choices
        elif isinstance(value, _CHOICE):
            found = (value,)
        else:
            return Opaque(why)
        choices.extend(c for c in found if not any(type(c) is type(k) and c == k for k in choices))
    if len(choices) == 1:
        return choices[0]
    return Opaque(why, choices=tuple(choices))


def _f_string(node: ast.JoinedStr, ev: Callable[[ast.expr], Any]) -> str:
    parts = []
    for value in node.values:
        if isinstance(value, ast.FormattedValue):
            spec = ev(value.format_spec) if value.format_spec is not None else ""
            widths = [int(w) for w in re.findall(r"\d+", str(spec))]
            if widths and max(widths) > MAX_FORMAT_WIDTH:
                raise _Unsupported(value, f"a format width or precision of {max(widths)}")
            item = ev(value.value)
            # `!r`, `!s`, `!a` convert before the spec applies, as Python does.
            conversions: dict[int, Callable[[Any], str]] = {114: repr, 115: str, 97: ascii}
            converted = conversions.get(value.conversion)
            if deep_size(item) > MAX_ITEMS:
                raise _Unsupported(value, f"formats a value of more than {MAX_ITEMS} items")
            try:
                parts.append(format(converted(item) if converted else item, spec))
            except (TypeError, ValueError) as exc:
                raise _Raised(type(exc).__name__, str(exc)) from None
        else:
            parts.append(str(ev(value)))
        if sum(map(len, parts)) > MAX_ITEMS:
            raise _Unsupported(value, f"an f-string of more than {MAX_ITEMS} characters")
    return "".join(parts)


def _subscript(node: ast.Subscript, ev: Callable[[ast.expr], Any]) -> Any:
    base = ev(node.value)
    if isinstance(base, Opaque):
        return base
    if isinstance(base, (_Callable, ClassInfo)):
        raise _Unsupported(node, f"subscript of `{ast.unparse(node.value)}`")
    try:
        if isinstance(node.slice, ast.Slice):
            s = node.slice
            return base[slice(*(ev(x) if x is not None else None for x in (s.lower, s.upper, s.step)))]
        return base[ev(node.slice)]
    except (IndexError, KeyError, TypeError, ValueError) as exc:
        raise _Raised(type(exc).__name__, str(exc)) from None  # `PADS[n]` out of range raises in Python too


def _display(node: ast.Tuple | ast.List | ast.Set, ev: Callable[[ast.expr], Any]) -> Any:
    if any(isinstance(e, ast.Starred) for e in node.elts):
        raise _Unsupported(node, "a starred element")
    items = [ev(e) for e in node.elts]
    return {ast.Tuple: tuple, ast.List: list, ast.Set: set}[type(node)](items)
