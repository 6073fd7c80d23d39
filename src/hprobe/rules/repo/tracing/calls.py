"""Every place an engine's source calls a FlashInfer entry point hprobe probes,
found with `ast` (never imported): the call, the function and class around
it, and the keywords it passes. What decides the head count such a call hands
FlashInfer is the mapping's to say (paths.py); this module only finds calls,
and finds all of them, so none can go unjudged without being listed.

A call is recognised by what its callee resolves to, through the imports of
the module and of the function around it:

- `flashinfer.mla.X(...)`, `flashinfer.decode.X(...)`: X is an entry name;
- `X(...)` where X was imported from a `flashinfer` module (at module level
  or inside the function);
- `alias(...)` where `alias` is a name the engine defines as a wrapper of an
  entry name (vLLM's `flashinfer_trtllm_batch_decode_sparse_mla_dsv4 =
  _lazy_import_wrapper("flashinfer.mla", "trtllm_batch_decode_sparse_mla_dsv4")`),
  imported from the engine's own module.

- a name the module or function binds to one of the above (`g =
  flashinfer.decode.X`, `getattr(flashinfer.decode, "X")`,
  `importlib.import_module("flashinfer.decode").X`, `functools.partial(X, ...)`,
  a dispatch table `{"k": X}` called as `T[k](...)`), called through it.

- a name an engine module re-exports (`from engine.fi import X`, `fi.X(...)`,
  `from engine.fi import *`, through any number of engine modules and
  renames), and a bare `X(...)` under `from flashinfer... import *`.

Mentioning an entry without calling it (`inspect.signature(X)`, `callable(X)`,
an annotation, `X is None`) is not a call. Any other place the entry is handed
on — stored on an object, passed to a helper, put in a list, returned,
subclassed, bound by `:=` — and any attribute of a flashinfer module by a
computed name (`getattr(flashinfer.mla, name)`, `vars(...)`) is an *escape*:
the call it leads to is not followed, so the place is listed (as a site whose
`escape` says how), never dropped."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from hprobe.rules.repo.tree.scan import ModuleInfo, RepoIndex, resolve_relative


@dataclass(frozen=True)
class CallSite:
    """One call of a FlashInfer entry point in the engine's source."""

    module: str  # dotted module name, from the tree root
    path: str  # the file, as the tree shows it
    line: int
    function: str  # the qualname of the function around it ("" at module level)
    cls: str | None  # the class whose method holds it, if any
    entry: str  # the entry's name as FlashInfer spells it
    keywords: tuple[str, ...]  # keyword arguments passed (their names)
    constants: tuple[tuple[str, str | int], ...]  # keywords passed as literal strings or integers
    spreads: bool = False  # it also passes **kwargs: other keywords may be passed that the call does not spell
    # Not a call: where the entry is handed on in a form not followed, in words
    # ("passed to run(...)"). `entry` is "" where the attribute's name is computed.
    escape: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def keyword(self, name: str) -> str | int | None:
        return dict(self.constants).get(name)


def find_calls(index: RepoIndex, entries: frozenset[str]) -> list[CallSite]:
    """Every call of an entry in `entries` (FlashInfer names: functions and
    wrapper classes) in the tree, in file and line order."""
    aliases = _engine_aliases(index, entries)
    exports = _Exports.of(index, entries, aliases)
    words = set(entries) | {alias for _, alias in aliases} | exports.names
    found: list[CallSite] = []
    seen: set[str] = set()
    for module in index.modules_mentioning(words):
        seen.add(module.name)
        found.extend(_calls_in(module, entries, aliases, index, exports))
    # A module naming no entry can still reach one by a computed name: only
    # that is looked for there (a full walk of each costs a cold run seconds).
    for module in index.each_module_whose_text(_may_compute_an_attribute):
        if module.name not in seen:
            found.extend(_computed_attributes(module))
    for module, line, name in exports.beyond:
        how = f"imports {name}, a FlashInfer entry re-exported through more than {MAX_REEXPORT_HOPS} modules"
        found.append(_escape_at(module, line, how))
    # A file not read or not parsed may hold a call: listed, never passed over.
    for name, unread in sorted(index.unread.items()):
        if index.may_mention(name, words | {"flashinfer"}):
            why = f"{unread.why}; it names FlashInfer, so a call in it would go unjudged"
            found.append(CallSite(name, unread.shown, unread.line, "", None, "", (), (), escape=why))
    return sorted(found, key=lambda c: (c.path, c.line))


_LOOKED_UP = re.compile(r"\b(?:getattr|vars)\s*\(\s*(\w+)")


def _may_compute_an_attribute(text: str) -> bool:
    """Whether a module may take an attribute of a flashinfer module by a
    computed name: a `getattr(`/`vars(` whose first argument starts with a name
    some import binds from flashinfer (or `flashinfer`, `importlib`,
    `import_module`). Only a filter before the parse, which decides; it lets
    through more than the parse finds, never less."""
    if "flashinfer" not in text:
        return False
    roots = set(_LOOKED_UP.findall(text))
    if not roots:
        return False
    if roots & {"flashinfer", "importlib", "import_module"}:
        return True
    joined = text.replace("\\\n", " ")
    return any(
        re.search(
            rf"import\s+flashinfer[\w.]*\s+as\s+{root}\b"
            rf"|from\s+flashinfer[\w.]*\s+import\s+(?:\([^)]*?\b{root}\b|[^\n(]*?\b{root}\b)",
            joined,
        )
        for root in roots
    )


def _computed_attributes(module: ModuleInfo) -> list[CallSite]:
    """`getattr(flashinfer.mla, name)` and `vars(flashinfer.mla)` anywhere in a
    module, each an escape. Every import of the module counts in every scope:
    a name bound to a flashinfer module anywhere is taken as one everywhere,
    so a computed attribute is never missed (at worst a place is listed that
    hands nothing on)."""
    package = _package(module)
    imports = {**module.imports, **_local_imports(module.tree, package)}
    for node in ast.walk(module.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            imports.update(_local_imports(node, package))
    out: list[CallSite] = []
    # (node, qualname, class): iterative, as every walk of a file is.
    stack: list[tuple[ast.AST, str, str | None]] = [(module.tree, "", None)]
    while stack:
        node, qualname, cls = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{qualname}.{node.name}" if qualname else node.name
            inner_cls = node.name if isinstance(node, ast.ClassDef) else cls
            stack.extend((child, name, inner_cls) for child in ast.iter_child_nodes(node))
            continue
        if isinstance(node, ast.Call) and (how := _computed_attribute(node, imports)) is not None:
            out.append(_escape(module, node, qualname, cls, "", how))
        stack.extend((child, qualname, cls) for child in ast.iter_child_nodes(node))
    return out


# `import *`, spaces or a continuation line between (no `\b` before it: the
# literal first keeps the search over a whole tree fast; a longer word
# ending in "import" only reads one module more).
_STAR_IMPORT = re.compile(r"import(?:[ \t]|\\\n)+\*")

# How many rounds of re-exports (one engine module importing an entry from
# another) are followed; an import one round further is listed as an escape
# at its line, never dropped.
MAX_REEXPORT_HOPS = 8


class _Exports:
    """The names engine modules bind to an entry, so that a call through any of
    them is the entry's: `from flashinfer.mla import X as Y` in `engine.fi`
    makes (engine.fi, Y) the entry X; `from engine.fi import Y as Z` in
    `engine.attn` then makes (engine.attn, Z) X too; a star import carries
    every such name of the module it names (`from flashinfer.mla import *`
    every entry name). Worked out to a fixed point over the modules naming
    any of the names so far."""

    def __init__(self, index: RepoIndex, entries: frozenset[str]) -> None:
        self.index = index
        self.entries = entries
        self.bound: dict[tuple[str, str], str] = {}  # (module, local name) -> entry
        self.star_flashinfer: set[str] = set()  # modules with `from flashinfer... import *`
        self.stars: dict[str, set[str]] = {}  # module -> engine modules it star-imports
        self._names: dict[str, str | None] = {}
        # Imports of a re-exported name found after the last round: (module, line, name).
        self.beyond: list[tuple[ModuleInfo, int, str]] = []

    @property
    def names(self) -> set[str]:
        return {name for _, name in self.bound}

    @classmethod
    def of(cls, index: RepoIndex, entries: frozenset[str], aliases: set[tuple[str, str]]) -> _Exports:
        exports = cls(index, entries)
        for holder, name in aliases:
            entry = _alias_entry(index, holder, name, entries)
            if entry is not None:
                exports.bound[(holder, name)] = entry
        # Each round reads again the modules read so far (parsed already) and
        # searches the tree only for the names the last round added.
        # Star imports carry names their text never spells: every module with
        # one is read from the start (a handful in an engine tree).
        read: dict[str, ModuleInfo] = {}
        words = set(entries) | exports.names
        stars = list(index.each_module_whose_text(lambda text: _STAR_IMPORT.search(text) is not None))
        for _ in range(MAX_REEXPORT_HOPS):
            fresh = [m for m in [*stars, *index.modules_mentioning(words)] if m.name not in read]
            stars = []
            before = exports.names
            grew = False
            for module in [*read.values(), *fresh]:
                grew |= exports._read(module, entries, first=module.name not in read)
            read.update((m.name, m) for m in fresh)
            if not grew:
                break
            words = exports.names - before
        else:
            exports.beyond = exports._imports_beyond(index.modules_mentioning(words))
        return exports

    def _imports_beyond(self, modules: list[ModuleInfo]) -> list[tuple[ModuleInfo, int, str]]:
        """Imports of a re-exported name that the rounds did not take in."""
        out: list[tuple[ModuleInfo, int, str]] = []
        for module in modules:
            package = _package(module)
            for node in _top_statements(module.tree):
                if isinstance(node, ast.ImportFrom):
                    source = self.module_name(resolve_relative(package, node.module, node.level))
                    for alias in node.names:
                        if (
                            source is not None
                            and (source, alias.name) in self.bound
                            and (module.name, alias.asname or alias.name) not in self.bound
                        ):
                            out.append((module, node.lineno, alias.name))
        return out

    def _read(self, module: ModuleInfo, entries: frozenset[str], first: bool) -> bool:
        before = len(self.bound)
        package = _package(module)
        imports: dict[str, tuple[str, str | None]] | None = None
        for node in _top_statements(module.tree):
            if isinstance(node, ast.ImportFrom):
                self._import(module.name, resolve_relative(package, node.module, node.level), node.names)
            elif (
                first
                and isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                # `DECODE = flashinfer.mla.X` at module level, imported elsewhere.
                imports = imports if imports is not None else {**module.imports, **_local_imports(module.tree, package)}
                entry = _referenced_entry(node.value, imports, entries, set(), self.index, {}, None, module.name)
                if entry is not None:
                    self.bound[(module.name, node.targets[0].id)] = entry
        for importer, sources in self.stars.items():
            for source in sources:
                if source in self.star_flashinfer and importer not in self.star_flashinfer:
                    self.star_flashinfer.add(importer)
                for (holder, name), entry in list(self.bound.items()):
                    if holder == source:
                        self.bound.setdefault((importer, name), entry)
        return len(self.bound) > before or (module.name in self.star_flashinfer and first)

    def _import(self, module: str, source: str, names: list[ast.alias]) -> None:
        """What `from source import names` in `module` binds to entries."""
        for alias in names:
            local = alias.asname or alias.name
            if source.split(".")[0] == "flashinfer":
                if alias.name == "*":
                    self.star_flashinfer.add(module)
                elif alias.name in self.entries:
                    self.bound[(module, local)] = alias.name
            elif alias.name == "*":
                other = self.module_name(source)
                if other is not None:
                    self.stars.setdefault(module, set()).add(other)
            elif (entry := self.entry_of(source, alias.name)) is not None:
                self.bound[(module, local)] = entry

    def module_name(self, dotted: str) -> str | None:
        """The tree's module `dotted` names, or None (looked up once per name)."""
        if dotted not in self._names:
            found = self.index.by_suffix(dotted) if dotted.split(".")[0] != "flashinfer" else None
            self._names[dotted] = found.name if found is not None else None
        return self._names[dotted]

    def entry_of(self, source: str, name: str) -> str | None:
        """The entry `name` is in the engine module `source`, or None."""
        if name not in self.names and name not in self.entries:
            return None  # the common case, answered without looking the module up
        module = self.module_name(source)
        return self.star_entry(module, name) if module is not None else None

    def star_entry(self, module: str, name: str) -> str | None:
        """The entry `name` is in `module` (bound there, or brought in by a star import), or None."""
        if module in self.star_flashinfer and name in self.entries:
            return name
        return self.bound.get((module, name))


def _package(module: ModuleInfo) -> str:
    return module.name if module.path.endswith("__init__.py") else module.name.rpartition(".")[0]


def _top_statements(tree: ast.Module) -> list[ast.stmt]:
    """A module's statements outside functions and classes (under `if`/`try`/`with` too)."""
    out: list[ast.stmt] = []
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.stmt):
            out.append(node)
        if isinstance(node, (ast.If, ast.Try, ast.With, ast.AsyncWith, ast.For, ast.While)) or (
            hasattr(ast, "TryStar") and isinstance(node, ast.TryStar)
        ):
            stack.extend(
                child for child in ast.iter_child_nodes(node) if isinstance(child, (ast.stmt, ast.excepthandler))
            )
        elif isinstance(node, ast.ExceptHandler):
            stack.extend(node.body)
    return out


def _engine_aliases(index: RepoIndex, entries: frozenset[str]) -> set[tuple[str, str]]:
    """(module, name) of module-level names the engine binds to a wrapper of an
    entry: an assignment whose value is a call naming the entry as a string."""
    out: set[tuple[str, str]] = set()
    for module in index.modules_mentioning(set(entries)):
        for name, value in module.constants.items():
            if isinstance(value, ast.Call) and any(
                isinstance(a, ast.Constant) and a.value in entries
                for a in (*value.args, *(k.value for k in value.keywords))
            ):
                out.add((module.name, name))
    return out


def _alias_entry(index: RepoIndex, module: str, name: str, entries: frozenset[str]) -> str | None:
    other = index.by_suffix(module)
    if other is None:
        return None
    value = other.constants.get(name)
    if not isinstance(value, ast.Call):
        return None
    for arg in (*value.args, *(k.value for k in value.keywords)):
        if isinstance(arg, ast.Constant) and arg.value in entries:
            return str(arg.value)
    return None


def _calls_in(
    module: ModuleInfo, entries: frozenset[str], aliases: set[tuple[str, str]], index: RepoIndex, exports: _Exports
) -> list[CallSite]:
    return _Walk(module, entries, aliases, index, exports).sites()


# What the walk knows at a node: the node, its parent, the qualname and class
# around it, the imports and aliases in scope, and whether the statement is
# directly in a class body.
_Frame = tuple[ast.AST, ast.AST | None, str, str | None, dict[str, tuple[str, str | None]], dict[str, str], bool]


class _Walk:
    """One module's calls of entries, and the places it hands an entry on."""

    def __init__(
        self,
        module: ModuleInfo,
        entries: frozenset[str],
        aliases: set[tuple[str, str]],
        index: RepoIndex,
        exports: _Exports,
    ) -> None:
        self.module, self.entries, self.aliases, self.index, self.exports = module, entries, aliases, index, exports
        self.package = _package(module)
        self.out: list[CallSite] = []
        # Nodes whose mention of an entry is accounted for (a call's callee, an
        # alias the trail follows, a harmless look at it): any other mention escapes.
        self.consumed: set[int] = set()

    def referenced(
        self, node: ast.expr, imports: dict[str, tuple[str, str | None]], bound: dict[str, str]
    ) -> str | None:
        return _referenced_entry(
            node, imports, self.entries, self.aliases, self.index, bound, self.exports, self.module.name
        )

    def sites(self) -> list[CallSite]:
        # Iterative, so no file's depth can exhaust the stack. Module-level
        # imports include those under `if`/`try` (`try: from flashinfer import X`).
        top = {**self.module.imports, **_local_imports(self.module.tree, self.package)}
        top_aliases = self._aliases(self.module.tree, top, {})
        stack: list[_Frame] = [(self.module.tree, None, "", None, top, top_aliases, False)]
        while stack:
            frame = stack.pop()
            node, _, qualname, cls, imports, bound, class_body = frame
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                stack.extend(self._function(node, frame))
            elif isinstance(node, ast.ClassDef):
                name = f"{qualname}.{node.name}" if qualname else node.name
                for child in ast.iter_child_nodes(node):
                    inside = child in node.body
                    stack.append(
                        (
                            child,
                            node,
                            name if inside else qualname,
                            node.name if inside else cls,
                            imports,
                            bound,
                            inside,
                        )
                    )
            elif self._visit(frame):
                stack.extend(
                    (child, node, qualname, cls, imports, bound, class_body and isinstance(node, ast.stmt))
                    for child in ast.iter_child_nodes(node)
                )
        return self.out

    def _aliases(
        self, scope: ast.AST, imports: dict[str, tuple[str, str | None]], outer: dict[str, str]
    ) -> dict[str, str]:
        return _local_aliases(
            scope, imports, self.entries, self.aliases, self.index, outer, self.exports, self.module.name
        )

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, frame: _Frame) -> list[_Frame]:
        _, _, qualname, cls, imports, bound, class_body = frame
        inner = {**imports, **_local_imports(node, self.package)}
        inner_bound = self._aliases(node, inner, bound)
        name = f"{qualname}.{node.name}" if qualname else node.name
        self.consumed.update(_annotation_nodes(node))
        out: list[_Frame] = []
        for child in ast.iter_child_nodes(node):
            # Decorators and defaults are evaluated in the enclosing scope.
            if child in node.decorator_list or child is node.args:
                out.append((child, node, qualname, cls, imports, bound, class_body))
            else:
                out.append((child, node, name, cls, inner, inner_bound, False))
        return out

    def _visit(self, frame: _Frame) -> bool:
        """Record what `node` is (a call of an entry, an escape); whether its children are to be walked."""
        node, parent, qualname, cls, imports, bound, class_body = frame
        if isinstance(node, ast.AnnAssign):
            self.consumed.update(id(n) for n in ast.walk(node.annotation))
        elif isinstance(node, ast.Assign) and not class_body and len(node.targets) == 1:
            target = node.targets[0]
            # An alias the calls through it are found by (_local_aliases).
            if isinstance(target, ast.Name) and bound.get(target.id) and self.referenced(node.value, imports, bound):
                self.consumed.update(id(n) for n in ast.walk(node.value))
        elif isinstance(node, ast.Call):
            self._call(node, qualname, cls, imports, bound)
        elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
            if id(node) in self.consumed:
                return True
            entry = self.referenced(node, imports, bound)
            if entry is None:
                return True
            self.consumed.update(id(n) for n in ast.walk(node))
            how = _escape_form(node, parent, class_body)
            if how is not None:
                self.out.append(_escape(self.module, node, qualname, cls, entry, how))
            return False
        return True

    def _call(
        self,
        node: ast.Call,
        qualname: str,
        cls: str | None,
        imports: dict[str, tuple[str, str | None]],
        bound: dict[str, str],
    ) -> None:
        entry = _callee_entry(
            node.func, imports, self.entries, self.aliases, self.index, self.exports, self.module.name
        ) or _bound_entry(node.func, bound)
        if entry is None and isinstance(node.func, (ast.Attribute, ast.Call)):
            # importlib.import_module("flashinfer.decode").X(...),
            # getattr(flashinfer.decode, "X")(...), partial(X)(...)
            entry = self.referenced(node.func, imports, bound)
        if entry is not None:
            self.out.append(_site(self.module, node, qualname, cls, entry))
            self.consumed.update(id(n) for n in ast.walk(node.func))
            return
        self.consumed.update(_harmless_arguments(node))
        computed = _computed_attribute(node, imports)
        if computed is not None:
            self.out.append(_escape(self.module, node, qualname, cls, "", computed))


# Calls that look at an entry without calling it or handing it on.
_LOOKS_AT = frozenset(
    {
        "callable",
        "hasattr",
        "isinstance",
        "issubclass",
        "id",
        "repr",
        "str",
        "print",
        "type",
        "bool",
        "signature",
        "getsource",
        "getsourcefile",
        "getfile",
        "getmodule",
        "getdoc",
        "iscoroutinefunction",
        "isclass",
        "isfunction",
    }
)
# Attributes that reach the entry's code: reading one hands the entry on.
_CALLABLE_ATTRIBUTES = frozenset({"__call__", "__wrapped__", "__func__", "__init__", "__new__"})


def call_name(func: ast.expr) -> str | None:
    """The name a call's callee ends in (`f` of `f(...)` and of `a.b.f(...)`), or None."""
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _harmless_arguments(node: ast.Call) -> set[int]:
    """The nodes of a call's arguments that only look at an entry:
    `callable(X)`, `inspect.signature(X)`, `getattr(X, "__name__")`."""
    name = call_name(node.func)
    looked: list[ast.expr] = []
    if name in _LOOKS_AT:
        looked = list(node.args)
    elif (
        name == "getattr"
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value not in _CALLABLE_ATTRIBUTES
    ):
        looked = [node.args[0]]
    return {id(n) for arg in looked if isinstance(arg, (ast.Name, ast.Attribute)) for n in ast.walk(arg)}


def _annotation_nodes(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[int]:
    """The nodes of a function's annotations: naming an entry there hands nothing on."""
    arguments = node.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
    annotations = [a.annotation for a in every if a is not None and a.annotation is not None]
    if node.returns is not None:
        annotations.append(node.returns)
    return {id(n) for annotation in annotations for n in ast.walk(annotation)}


def _escape_form(node: ast.expr, parent: ast.AST | None, class_body: bool) -> str | None:
    """How a mention of an entry that is not a call hands it on, in words; None
    where it only looks at it (`X is None`, `if X:`, `X.__name__`)."""
    match parent:
        case ast.Compare() | ast.UnaryOp(op=ast.Not()) | ast.Expr():
            return None  # a test of it, or a bare mention: nothing handed on
        case ast.If(test=test) | ast.While(test=test) | ast.IfExp(test=test) | ast.Assert(test=test) if test is node:
            return None
        case ast.Attribute(attr=attr) if attr not in _CALLABLE_ATTRIBUTES:
            return None
    stored = isinstance(parent, (ast.Assign, ast.AnnAssign, ast.AugAssign))
    return handed_on(parent) + (" in a class body" if stored and class_body else "")


def handed_on(parent: ast.AST | None) -> str:
    """The words for the expression or statement a value is handed on through
    (an entry here, an instance in instances.py)."""
    match parent:
        case ast.Assign(targets=targets):
            return f"stored as {', '.join(ast.unparse(t)[:60] for t in targets)}"
        case ast.AnnAssign(target=target) | ast.AugAssign(target=target):
            return f"stored as {ast.unparse(target)[:60]}"
        case ast.ClassDef(name=name):
            return f"subclassed by {name}"
        case ast.Call(func=func):
            return f"passed to {ast.unparse(func)[:60]}(...)"
        case ast.keyword(arg=None):
            return "passed in a ** mapping"
        case ast.keyword(arg=arg):
            return f"passed as {arg}=..."
        case ast.Return() | ast.Yield() | ast.YieldFrom():
            return "returned"
        case ast.NamedExpr(target=target):
            return f"bound by {ast.unparse(target)} :="
        case ast.List() | ast.Tuple() | ast.Set() | ast.Dict():
            return "put in a container"
        case ast.Lambda():
            return "returned by a lambda"
        case ast.arguments():
            return "a parameter's default"
        case ast.FunctionDef() | ast.AsyncFunctionDef():
            return "a decorator"
        case ast.Starred():
            return "passed with *"
        case ast.IfExp() | ast.BoolOp():
            return "chosen by a conditional expression"
    return f"used in an expression hprobe does not follow ({type(parent).__name__})"


def _computed_attribute(node: ast.Call, imports: dict[str, tuple[str, str | None]]) -> str | None:
    """`getattr(flashinfer.mla, name)` with a name not written, or
    `vars(flashinfer.mla)`: any entry may come out of it; in words, or None."""
    name = call_name(node.func)
    if not node.args or not _flashinfer_module(node.args[0], imports):
        return None
    shown = ast.unparse(node.args[0])[:60]
    unknown = "any FlashInfer entry may come out of it; which one, and what it is handed, is not read"
    if name == "getattr" and len(node.args) >= 2 and not isinstance(node.args[1], ast.Constant):
        return f"an attribute of {shown} by a computed name ({ast.unparse(node.args[1])[:40]}): {unknown}"
    if name == "vars":
        return f"the namespace of {shown} (vars): {unknown}"
    return None


def _escape_at(module: ModuleInfo, line: int, how: str) -> CallSite:
    return CallSite(module.name, module.path, line, "", None, "", (), (), escape=how)


def _escape(module: ModuleInfo, node: ast.expr, qualname: str, cls: str | None, entry: str, how: str) -> CallSite:
    return CallSite(module.name, module.path, node.lineno, qualname, cls, entry, (), (), escape=how)


def _local_aliases(
    scope: ast.AST,
    imports: dict[str, tuple[str, str | None]],
    entries: frozenset[str],
    aliases: set[tuple[str, str]],
    index: RepoIndex,
    outer: dict[str, str],
    exports: _Exports | None,
    module: str,
) -> dict[str, str]:
    """Names a function (or module) binds to an entry, so a call through them is
    a call of the entry: `g = flashinfer.decode.X`, `g = getattr(flashinfer.decode,
    "X")`, `g = functools.partial(X, ...)`, `g = importlib.import_module(
    "flashinfer.decode").X`, and dispatch tables `T = {"k": X, ...}` (called as
    `T[k](...)`, a table of one entry). Statements of nested functions and
    classes are theirs."""
    bound = dict(outer)
    body = list(ast.iter_child_nodes(scope))
    while body:
        node = body.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            entry = _referenced_entry(node.value, imports, entries, aliases, index, bound, exports, module)
            if entry is not None:
                bound[node.targets[0].id] = entry
        body.extend(ast.iter_child_nodes(node))
    return bound


def _referenced_entry(
    value: ast.expr,
    imports: dict[str, tuple[str, str | None]],
    entries: frozenset[str],
    aliases: set[tuple[str, str]],
    index: RepoIndex,
    bound: dict[str, str],
    exports: _Exports | None,
    module: str,
) -> str | None:
    """The entry an expression refers to without calling it, or None."""
    if isinstance(value, (ast.Name, ast.Attribute)):
        return (
            _callee_entry(value, imports, entries, aliases, index, exports, module)
            or _bound_entry(value, bound)
            or _imported_module_attr(value, entries)
        )
    if isinstance(value, ast.Call):
        func = value.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if (
            name == "getattr"
            and len(value.args) >= 2
            and isinstance(value.args[1], ast.Constant)
            and value.args[1].value in entries
        ):
            root = value.args[0]
            while isinstance(root, ast.Attribute):
                root = root.value
            of_flashinfer = _flashinfer_module(value.args[0], imports)
            return (
                str(value.args[1].value)
                if of_flashinfer or (isinstance(root, ast.Name) and root.id == "flashinfer")
                else None
            )
        if name == "partial" and value.args:
            return _referenced_entry(value.args[0], imports, entries, aliases, index, bound, exports, module)
    if isinstance(value, ast.Dict):
        found = {
            e
            for v in value.values
            if v is not None
            and (e := _referenced_entry(v, imports, entries, aliases, index, bound, exports, module)) is not None
        }
        return next(iter(found)) if len(found) == 1 else None
    return None


def _flashinfer_module(node: ast.expr, imports: dict[str, tuple[str, str | None]]) -> bool:
    """`flashinfer.decode` (an imported flashinfer module, or an attribute chain from one)."""
    root = node
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(root, ast.Name):
        target = imports.get(root.id)
        return target is not None and target[0].split(".")[0] == "flashinfer"
    return _import_module_call(root) is not None


def _import_module_call(node: ast.expr) -> str | None:
    """The module `importlib.import_module("flashinfer...")` names, or None."""
    if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
        if (
            name == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).split(".")[0] == "flashinfer"
        ):
            return str(node.args[0].value)
    return None


def _imported_module_attr(node: ast.expr, entries: frozenset[str]) -> str | None:
    """`importlib.import_module("flashinfer.decode").X` -> X."""
    if isinstance(node, ast.Attribute) and node.attr in entries and _import_module_call(node.value) is not None:
        return node.attr
    return None


def _bound_entry(func: ast.expr, bound: dict[str, str]) -> str | None:
    """A call through a name bound to an entry (`g(...)`), or through a
    dispatch table of one (`T[k](...)`)."""
    if isinstance(func, ast.Name):
        return bound.get(func.id)
    if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name):
        return bound.get(func.value.id)
    return None


def _local_imports(function: ast.AST, package: str) -> dict[str, tuple[str, str | None]]:
    """`from X import a as b` and `import X` statements inside a function or
    module, under any `if`/`try`/`with`, but not in nested functions or classes."""
    out: dict[str, tuple[str, str | None]] = {}
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.ImportFrom):
            source = resolve_relative(package, node.module, node.level)
            for alias in node.names:
                if alias.name != "*":
                    out[alias.asname or alias.name] = (source, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                out[local] = (alias.name if alias.asname else local, None)
        stack.extend(ast.iter_child_nodes(node))
    return out


def _callee_entry(
    func: ast.expr,
    imports: dict[str, tuple[str, str | None]],
    entries: frozenset[str],
    aliases: set[tuple[str, str]],
    index: RepoIndex,
    exports: _Exports | None = None,
    module: str = "",
) -> str | None:
    if isinstance(func, ast.Name):
        target = imports.get(func.id)
        if target is None:
            # `from flashinfer.mla import *` (or an engine module's star import of it).
            return exports.star_entry(module, func.id) if exports is not None else None
        source, attr = target
        if attr is None:
            return None
        if source.split(".")[0] == "flashinfer":
            return attr if attr in entries else None
        if any(
            name == attr and (other == source or other.endswith("." + source) or source.endswith("." + other))
            for other, name in aliases
        ):
            return _alias_entry(index, source, attr, entries)
        return exports.entry_of(source, attr) if exports is not None else None
    if isinstance(func, ast.Attribute):
        chain: list[str] = [func.attr]
        root = func.value
        while isinstance(root, ast.Attribute):
            chain.append(root.attr)
            root = root.value
        if not isinstance(root, ast.Name):
            return None
        target = imports.get(root.id)
        if target is None:
            return None
        if target[0].split(".")[0] == "flashinfer":
            return func.attr if func.attr in entries else None
        if exports is None or (func.attr not in exports.names and func.attr not in entries):
            return None
        # `fi.X(...)` / `engine.fi.X(...)`: X as the engine module the chain names re-exports it.
        source, attr = target
        dotted = ".".join([source if attr is None else f"{source}.{attr}", *reversed(chain[1:])])
        return exports.entry_of(dotted, func.attr)
    return None


def _site(module: ModuleInfo, node: ast.Call, qualname: str, cls: str | None, entry: str) -> CallSite:
    keywords = tuple(k.arg for k in node.keywords if k.arg is not None)
    constants = tuple(
        (k.arg, k.value.value)
        for k in node.keywords
        if k.arg is not None
        and isinstance(k.value, ast.Constant)
        and isinstance(k.value.value, (str, int))
        and not isinstance(k.value.value, bool)
    )
    spreads = any(k.arg is None for k in node.keywords)
    return CallSite(module.name, module.path, node.lineno, qualname, cls, entry, keywords, constants, spreads)
