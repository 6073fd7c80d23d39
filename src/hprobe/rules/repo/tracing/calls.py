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

Mentioning an entry without calling it (`inspect.signature(X)`, `callable(X)`,
an annotation) is not a call."""

from __future__ import annotations

import ast
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

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def keyword(self, name: str) -> str | int | None:
        return dict(self.constants).get(name)


def find_calls(index: RepoIndex, entries: frozenset[str]) -> list[CallSite]:
    """Every call of an entry in `entries` (FlashInfer names: functions and
    wrapper classes) in the tree, in file and line order."""
    aliases = _engine_aliases(index, entries)
    words = set(entries) | {alias for _, alias in aliases}
    found: list[CallSite] = []
    for module in index.modules_mentioning(words):
        found.extend(_calls_in(module, entries, aliases, index))
    return sorted(found, key=lambda c: (c.path, c.line))


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
    module: ModuleInfo, entries: frozenset[str], aliases: set[tuple[str, str]], index: RepoIndex
) -> list[CallSite]:
    package = module.name if module.path.endswith("__init__.py") else module.name.rpartition(".")[0]
    out: list[CallSite] = []
    # (node, qualname, class, imports in scope); iterative, so no file's depth can exhaust the stack.
    # Module-level imports include those under `if`/`try` (`try: from flashinfer import X`).
    top = {**module.imports, **_local_imports(module.tree, package)}
    top_aliases = _local_aliases(module.tree, top, entries, aliases, index, {})
    stack: list[tuple[ast.AST, str, str | None, dict[str, tuple[str, str | None]], dict[str, str]]] = [
        (module.tree, "", None, top, top_aliases)
    ]
    while stack:
        node, qualname, cls, imports, bound = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner = dict(imports)
            inner.update(_local_imports(node, package))
            inner_bound = _local_aliases(node, inner, entries, aliases, index, bound)
            name = f"{qualname}.{node.name}" if qualname else node.name
            for child in ast.iter_child_nodes(node):
                stack.append((child, name, cls, inner, inner_bound))
            continue
        if isinstance(node, ast.ClassDef):
            name = f"{qualname}.{node.name}" if qualname else node.name
            for child in ast.iter_child_nodes(node):
                stack.append((child, name, node.name, imports, bound))
            continue
        if isinstance(node, ast.Call):
            entry = _callee_entry(node.func, imports, entries, aliases, index) or _bound_entry(node.func, bound)
            if entry is None and isinstance(node.func, (ast.Attribute, ast.Call)):
                # importlib.import_module("flashinfer.decode").X(...),
                # getattr(flashinfer.decode, "X")(...), partial(X)(...)
                entry = _referenced_entry(node.func, imports, entries, aliases, index, bound)
            if entry is not None:
                out.append(_site(module, node, qualname, cls, entry))
        for child in ast.iter_child_nodes(node):
            stack.append((child, qualname, cls, imports, bound))
    return out


def _local_aliases(
    scope: ast.AST,
    imports: dict[str, tuple[str, str | None]],
    entries: frozenset[str],
    aliases: set[tuple[str, str]],
    index: RepoIndex,
    outer: dict[str, str],
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
            entry = _referenced_entry(node.value, imports, entries, aliases, index, bound)
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
) -> str | None:
    """The entry an expression refers to without calling it, or None."""
    if isinstance(value, (ast.Name, ast.Attribute)):
        return (
            _callee_entry(value, imports, entries, aliases, index)
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
            module = _flashinfer_module(value.args[0], imports)
            return (
                str(value.args[1].value) if module or (isinstance(root, ast.Name) and root.id == "flashinfer") else None
            )
        if name == "partial" and value.args:
            return _referenced_entry(value.args[0], imports, entries, aliases, index, bound)
    if isinstance(value, ast.Dict):
        found = {
            e
            for v in value.values
            if v is not None and (e := _referenced_entry(v, imports, entries, aliases, index, bound)) is not None
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
) -> str | None:
    if isinstance(func, ast.Name):
        target = imports.get(func.id)
        if target is None:
            return None
        source, attr = target
        if attr is None:
            return None
        if source.split(".")[0] == "flashinfer":
            return attr if attr in entries else None
        if any(
            name == attr and (module == source or module.endswith("." + source) or source.endswith("." + module))
            for module, name in aliases
        ):
            return _alias_entry(index, source, attr, entries)
        return None
    if isinstance(func, ast.Attribute) and func.attr in entries:
        root = func.value
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name):
            target = imports.get(root.id)
            if target is not None and target[0].split(".")[0] == "flashinfer":
                return func.attr
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
