"""Where the instances of a class of the engine's tree can be: the places its
constructions are kept (`self.fi = FlashInferCore(...)`, `core =
FlashInferCore(...)`), when every use of the class and of those places is
one hprobe reads (a method called on it, an attribute read, a test, a copy
into a local that is itself read so). Then a call `obj.decode(...)` whose
`obj` is none of those places is no call of that class's `decode`, whatever
the method is named (a tokenizer's `decode` is not an attention core's);
and one whose `obj` is such a place calls the method its class resolves.

Where a use is not read so (an instance passed to a function, returned,
stored in a container, the class handed on as a value), the class is not
confined, with the place and why: the caller search then keeps to the names
it has (heads.py), never concluding from a confinement it could not show."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from hprobe.rules.repo.tracing.calls import call_name, handed_on
from hprobe.rules.repo.tracing.keywords import class_at, enclosing_functions, innermost_function
from hprobe.rules.repo.tree.scan import ClassInfo, ModuleInfo, RepoIndex, resolve_relative

# Beyond these the class is taken as not confined (said), so that one common
# name cannot make the search parse a large part of the tree.
MAX_FAMILY = 32
MAX_MODULES = 64

Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Place:
    """Where constructions of the class are kept: `self.<name>` in the
    methods of `holder` (and of the classes related to it), or the local
    `name` of the function at `function` (its module's path and `def` line)."""

    name: str
    classes: frozenset[str]  # qualnames of the classes constructed into it
    holder: str | None = None  # qualname of the class whose methods assign self.<name>
    function: tuple[str, int] | None = None


@dataclass(frozen=True)
class Confined:
    """Every instance of the family of `owner` lives in `places`."""

    owner: str  # qualname
    places: tuple[Place, ...]
    family: frozenset[str] = frozenset()  # qualnames: the owner and the tree's classes derived from it
    # A module that spells none of these holds no call of the owner's methods:
    # the places' names, and the names of the family's classes and of the
    # owner's bases (whose module defines or imports them by name).
    words: frozenset[str] = frozenset()


@dataclass(frozen=True)
class NotConfined:
    where: str  # file:line
    why: str

    def __str__(self) -> str:
        return f"{self.where}: {self.why}"


def confine(index: RepoIndex, owner: ClassInfo) -> Confined | NotConfined:
    """Where every instance of `owner` and of the tree's subclasses of it is kept."""
    members = family(index, owner)
    if isinstance(members, NotConfined):
        return members
    reader = _Reader(index, {cls.qualname: cls for cls in members})
    for cls in members:
        found = reader.constructions(cls) or _self_handed_on(index, cls)
        if isinstance(found, NotConfined):
            return found
    checked = reader.check_places()
    if checked is not None:
        return checked
    places = tuple(reader.places.values())
    words = (
        {place.name for place in places}
        | {cls.name for cls in members}
        | {cls.name for cls in index.mro(owner)}
        | {place.holder.rpartition(".")[2] for place in places if place.holder is not None}
    )
    return Confined(owner.qualname, places, frozenset(c.qualname for c in members), frozenset(words))


def holds(
    index: RepoIndex,
    confined: Confined,
    receiver: ast.expr,
    module: ModuleInfo,
    function: Function | None,
    owner: ClassInfo | None,
) -> frozenset[str]:
    """The classes (qualnames) of the family an instance at `receiver` can be,
    in `function` of `module` (a method of `owner`); empty where it holds none."""
    if isinstance(receiver, ast.Attribute) and _is_self(receiver.value) and owner is not None:
        bases = {c.qualname for c in index.mro(owner)}
        return frozenset(
            qualname
            for place in confined.places
            if place.holder is not None
            and place.name == receiver.attr
            and (place.holder in bases or owner.qualname in _lineage(index, place.holder))
            for qualname in place.classes
        )
    if isinstance(receiver, ast.Name) and function is not None:
        # The local of this function or of one around it (a closure reads it).
        around = {(module.path, f.lineno) for f in enclosing_functions(module.tree, receiver.lineno)}
        return frozenset(
            qualname
            for place in confined.places
            if place.function in around and place.name == receiver.id
            for qualname in place.classes
        )
    return frozenset()


def may_be_family(index: RepoIndex, confined: Confined, cls: ClassInfo | None) -> bool:
    """Whether `self` in a method of `cls` (and so `super()` there) may be an
    instance of the family: `cls` is one of it, or a base of one of it."""
    if cls is None:
        return True
    if cls.qualname in confined.family or confined.family & {c.qualname for c in index.mro(cls)}:
        return True
    return any(cls.qualname in _lineage(index, member) for member in confined.family)


def _lineage(index: RepoIndex, qualname: str) -> set[str]:
    """The qualnames of a class's own hierarchy (a base's method may run on its instance)."""
    cls = class_named(index, qualname)
    return {c.qualname for c in index.mro(cls)} if cls is not None else set()


def class_named(index: RepoIndex, qualname: str) -> ClassInfo | None:
    """The tree's class of that qualname, or None."""
    module_name, _, name = qualname.rpartition(".")
    module = index.by_suffix(module_name)
    return module.classes.get(name) if module is not None else None


def dispatches_to(index: RepoIndex, classes: frozenset[str], method: str, function: ast.AST) -> bool:
    """Whether `method` called on an instance of any of `classes` runs `function`."""
    for qualname in classes:
        cls = class_named(index, qualname)
        if cls is None:
            return True  # not read again: it may
        defining = next((c for c in index.mro(cls) if method in c.methods), None)
        if defining is None or defining.methods[method].node is function:
            return True  # defined outside the tree (it may be the same) or this very one
    return False


def family(index: RepoIndex, owner: ClassInfo) -> list[ClassInfo] | NotConfined:
    """`owner` and the classes of the tree that derive from it."""
    found = {owner.qualname: owner}
    names = {owner.name}
    while names:
        fresh: set[str] = set()
        for module in index.modules_mentioning(names):
            for cls in module.classes.values():
                if cls.qualname not in found and any(k.qualname in found for k in index.mro(cls)[1:]):
                    found[cls.qualname] = cls
                    fresh.add(cls.name)
        if len(found) > MAX_FAMILY:
            return NotConfined(
                f"{owner.module.path}:{owner.node.lineno}", f"more than {MAX_FAMILY} classes derive from {owner.name}"
            )
        names = fresh
    return list(found.values())


class _Reader:
    def __init__(self, index: RepoIndex, family: dict[str, ClassInfo]) -> None:
        self.index = index
        self.family = family
        self.places: dict[tuple[str | None, tuple[str, int] | None, str], Place] = {}

    # -- where the family's classes are named --------------------------------------------------

    def constructions(self, cls: ClassInfo) -> NotConfined | None:
        modules = self.index.count_naming(cls.name)
        if modules > MAX_MODULES:
            return NotConfined(f"{cls.module.path}:{cls.node.lineno}", f"{cls.name} is named in {modules} modules")
        for module in self.index.each_module_naming(cls.name):
            parents = _parents(module.tree)
            annotations = _annotation_nodes(module.tree)
            aliases = _aliases_of(module, cls.name)
            exported = _exported_names(module.tree)
            for node in ast.walk(module.tree):
                if isinstance(node, ast.Constant) and node.value in aliases and id(node) not in exported:
                    # `getattr(module, "Name")`, a registry entry: made by name, anywhere.
                    return NotConfined(f"{module.path}:{node.lineno}", f"{cls.name} is named in a string")
                if not isinstance(node, (ast.Name, ast.Attribute)) or not isinstance(node.ctx, ast.Load):
                    continue
                spelt = node.id if isinstance(node, ast.Name) else node.attr
                if spelt not in aliases or id(node) in annotations:
                    continue
                qualname = self._class_of(module, node)
                if qualname is None:
                    if self._another_thing(module, node):
                        continue  # a name the module binds to something else
                    return NotConfined(
                        f"{module.path}:{node.lineno}", f"`{ast.unparse(node)[:60]}` may be {cls.name}, not resolved"
                    )
                problem = self._construction(module, node, parents, qualname)
                if problem is not None:
                    return problem
        return None

    def _class_of(self, module: ModuleInfo, node: ast.Name | ast.Attribute) -> str | None:
        """The family class `node` names, or None for a name that is another thing."""
        if isinstance(node, ast.Name):
            found = self.index.lookup(module, node.id)
            if found is None:
                local = _local_import(module, node)
                other = self.index.by_suffix(local[0]) if local is not None else None
                found = self.index.lookup(other, local[1]) if other is not None and local is not None else None
            if found is not None and found[0] == "class" and found[1].qualname in self.family:
                return str(found[1].qualname)
            # The module's own class of that name (lookup reads module-level names).
            own = module.classes.get(node.id)
            return own.qualname if own is not None and own.qualname in self.family else None
        cls = self.index.resolve_class(module, ast.unparse(node))  # `module.Name`: a chain of names
        return cls.qualname if cls is not None and cls.qualname in self.family else None

    def _another_thing(self, module: ModuleInfo, node: ast.Name | ast.Attribute) -> bool:
        """Whether `node` resolves, in the tree, to something other than a class
        of the family (another class or function of that name, a local of a
        function): a name that resolves to nothing may be the class."""
        if isinstance(node, ast.Attribute):
            return False
        found = self.index.lookup(module, node.id)
        if found is not None:
            # Rebound after its definition, it may still be the class.
            return found[0] != "rebound" and not (found[0] == "class" and found[1].qualname in self.family)
        function = innermost_function(module.tree, node.lineno)
        return (
            function is not None
            and any(
                isinstance(n, ast.Name) and n.id == node.id and isinstance(n.ctx, ast.Store) for n in ast.walk(function)
            )
            or (function is not None and node.id in {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)})
        )

    def _construction(
        self, module: ModuleInfo, node: ast.expr, parents: dict[int, ast.AST], qualname: str
    ) -> NotConfined | None:
        """One place a family class is named: as a base, in a type check, or constructed."""
        parent = parents.get(id(node))
        where = f"{module.path}:{getattr(node, 'lineno', 0)}"
        match parent:
            case ast.ClassDef(bases=bases) if any(b is node for b in bases):
                return None  # a subclass: of the family already
            case ast.Call(func=func, args=[_, second, *_]) if second is node and call_name(func) in (
                "isinstance",
                "issubclass",
            ):
                return None
            case ast.Compare():
                return None
            case ast.Call(func=func) if func is node:
                return self._kept(module, parent, parents, qualname, where)
            case ast.Attribute(value=value) if value is node and self._static_call(parent, parents, qualname):
                return None  # `C.check(...)` of a static method: no instance is made or handed on
        return _escape(where, node, handed_on(parent))

    def _static_call(self, attribute: ast.Attribute, parents: dict[int, ast.AST], qualname: str) -> bool:
        """Whether `attribute` (`C.name`) is called at once and names a
        `@staticmethod` of C or of a class C inherits it from. A class method
        may build an instance (`cls(...)`) and is not taken."""
        call = parents.get(id(attribute))
        if not (isinstance(call, ast.Call) and call.func is attribute):
            return False
        for cls in self.index.mro(self.family[qualname]):
            method = cls.methods.get(attribute.attr)
            if method is not None:
                decorators = method.node.decorator_list
                return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in decorators)
        return False

    def _kept(
        self, module: ModuleInfo, call: ast.Call, parents: dict[int, ast.AST], qualname: str, where: str
    ) -> NotConfined | None:
        """A construction: kept in `self.<attr>` or a local, or called at once."""
        parent = parents.get(id(call))
        if isinstance(parent, ast.Attribute) and isinstance(parents.get(id(parent)), ast.Call):
            return None  # `C(...).m(...)`: the instance is gone after the call
        target: ast.expr | None = None
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and parent.value is call:
            target = parent.targets[0]
        elif isinstance(parent, ast.AnnAssign) and parent.value is call:
            target = parent.target
        if target is None:
            return NotConfined(where, f"{ast.unparse(call.func)}(...) is {handed_on(parent)}, not kept in a name")
        function, cls = _around(module, call.lineno)
        if isinstance(target, ast.Attribute) and _is_self(target.value) and cls is not None:
            self._add(Place(target.attr, frozenset({qualname}), holder=cls.qualname))
            return None
        if isinstance(target, ast.Name) and function is not None:
            self._add(Place(target.id, frozenset({qualname}), function=(module.path, function.lineno)))
            return None
        return NotConfined(where, f"{ast.unparse(call.func)}(...) is kept in `{ast.unparse(target)}`")

    def _add(self, place: Place) -> None:
        key = (place.holder, place.function, place.name)
        known = self.places.get(key)
        self.places[key] = (
            place if known is None else Place(place.name, known.classes | place.classes, place.holder, place.function)
        )

    # -- every use of the places ---------------------------------------------------------------

    def check_places(self) -> NotConfined | None:
        checked: set[tuple[str | None, tuple[str, int] | None, str]] = set()
        while len(checked) < len(self.places):
            for key, place in list(self.places.items()):
                if key in checked:
                    continue
                checked.add(key)
                problem = self._attribute_uses(place) if place.holder is not None else self._local_uses(place)
                if problem is not None:
                    return problem
        return None

    def _attribute_uses(self, place: Place) -> NotConfined | None:
        """Every `.<name>` in the tree: `self.<name>` in the holder's hierarchy,
        used as `_used` allows; any other receiver of that attribute may be
        the holder's instance, which hprobe does not follow."""
        holder = self._holder(place)
        if holder is None:
            return NotConfined("", f"the class keeping `{place.name}` could not be read again")
        related = {c.qualname for c in self.index.mro(holder)}
        if self.index.count_naming(place.name) > MAX_MODULES:
            return NotConfined(
                f"{holder.module.path}:{holder.node.lineno}", f"`.{place.name}` is named in too many modules to read"
            )
        for module in self.index.each_module_naming(place.name):
            parents = _parents(module.tree)
            for node in ast.walk(module.tree):
                if not (isinstance(node, ast.Attribute) and node.attr == place.name):
                    continue
                where = f"{module.path}:{node.lineno}"
                function, cls = _around(module, node.lineno)
                if not _is_self(node.value) or cls is None:
                    return NotConfined(where, f"`{ast.unparse(node)}` may be {holder.name}'s `{place.name}`")
                mine = {c.qualname for c in self.index.mro(cls)}
                if holder.qualname not in mine and cls.qualname not in related:
                    continue  # another class's attribute of that name
                if not isinstance(node.ctx, ast.Load):
                    continue  # what is stored there: a construction is read as one, anything else is no instance
                problem = self._used(module, node, parents, function, where)
                if problem is not None:
                    return problem
        return None

    def _local_uses(self, place: Place) -> NotConfined | None:
        assert place.function is not None
        path, line = place.function
        module = next((m for m in self.index.modules.values() if m.path == path), None)
        function = _function_at(module.tree, line) if module is not None else None
        if module is None or function is None:
            return NotConfined(f"{path}:{line}", f"the function keeping `{place.name}` could not be read again")
        parents = _parents(function)
        for node in ast.walk(function):
            if isinstance(node, ast.Name) and node.id == place.name and isinstance(node.ctx, ast.Load):
                problem = self._used(module, node, parents, function, f"{path}:{node.lineno}")
                if problem is not None:
                    return problem
            if isinstance(node, (ast.Global, ast.Nonlocal)) and place.name in node.names:
                return NotConfined(f"{path}:{node.lineno}", f"`{place.name}` is shared with another scope")
        return None

    def _used(
        self,
        module: ModuleInfo,
        node: ast.expr,
        parents: dict[int, ast.AST],
        function: Function | None,
        where: str,
    ) -> NotConfined | None:
        """A use of a place that keeps the instance where it is: a method or
        attribute of it, a test of it, or a copy into a local (a place too)."""
        parent = parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return None
        if isinstance(parent, ast.Compare) or (isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not)):
            return None
        if isinstance(parent, (ast.If, ast.While, ast.Assert, ast.IfExp)) and parent.test is node:
            return None
        if isinstance(parent, ast.BoolOp) and _in_a_test(parent, parents):
            return None
        copied = _copied_to(node, parent, parents)
        if copied is not None and function is not None:
            classes = frozenset(
                c for place in self.places.values() for c in place.classes
            )  # a copy may hold any of the family's constructions kept here
            self._add(Place(copied, classes, function=(module.path, function.lineno)))
            return None
        return _escape(where, node, handed_on(parent))

    def _holder(self, place: Place) -> ClassInfo | None:
        return class_named(self.index, place.holder or "")


def _self_handed_on(index: RepoIndex, cls: ClassInfo) -> NotConfined | None:
    """A method of the class that hands its own instance on (`helper(self)`,
    `return self`, `registry.append(self)`): then an instance lives where no
    construction put it. A method that returns `self` (a fluent
    `prepare(...)`) hands nothing on where every call of that name in the
    tree drops what it returns."""
    parents = _parents(cls.node)
    for node in ast.walk(cls.node):
        if not (isinstance(node, ast.Name) and node.id == "self" and isinstance(node.ctx, ast.Load)):
            continue
        parent = parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.value is node:
            continue  # self.x, self.m(...)
        if isinstance(parent, ast.Compare):
            continue
        if isinstance(parent, ast.Call) and call_name(parent.func) in ("isinstance", "type", "id", "super"):
            continue
        if isinstance(parent, ast.Return):
            method = parents.get(id(parent))
            while method is not None and not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                method = parents.get(id(method))
            if method is not None and parents.get(id(method)) is cls.node and _results_dropped(index, method.name):
                continue
        return _escape(f"{cls.module.path}:{node.lineno}", node, handed_on(parent))
    return None


def _results_dropped(index: RepoIndex, method: str) -> bool:
    """Whether every `.<method>` in the tree is called with what it returns
    dropped (a statement of its own), and nothing names it in a string (a
    `getattr` could fetch it): by name, whatever the receiver's class."""
    if index.count_naming(method) > MAX_MODULES:
        return False
    for module in index.each_module_naming(method):
        parents = _parents(module.tree)
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Constant) and node.value == method:
                return False
            if isinstance(node, ast.Attribute) and node.attr == method:
                call = parents.get(id(node))
                called = isinstance(call, ast.Call) and call.func is node
                if not (called and isinstance(parents.get(id(call)), ast.Expr)):
                    return False
    return True


def _copied_to(node: ast.expr, parent: ast.AST | None, parents: dict[int, ast.AST]) -> str | None:
    """`x = node` or `a, x = y, node`: the local the value is copied to, else None."""
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and parent.value is node:
        target = parent.targets[0]
        return target.id if isinstance(target, ast.Name) else None
    if isinstance(parent, ast.Tuple):
        assign = parents.get(id(parent))
        if isinstance(assign, ast.Assign) and len(assign.targets) == 1 and assign.value is parent:
            target = assign.targets[0]
            if isinstance(target, ast.Tuple) and len(target.elts) == len(parent.elts):
                at = next(i for i, e in enumerate(parent.elts) if e is node)
                copy = target.elts[at]
                return copy.id if isinstance(copy, ast.Name) else None
    return None


def _in_a_test(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """A boolean operation whose value only decides a test (`if a and b:`)."""
    while isinstance(node, (ast.BoolOp, ast.UnaryOp)):
        parent = parents.get(id(node))
        if isinstance(parent, (ast.If, ast.While, ast.Assert, ast.IfExp)) and parent.test is node:
            return True
        if parent is None:
            return False
        node = parent
    return False


def _escape(where: str, node: ast.expr, how: str) -> NotConfined:
    return NotConfined(where, f"`{ast.unparse(node)[:60]}` is {how}")


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _exported_names(tree: ast.Module) -> set[int]:
    """The strings of the module's own `__all__` (assigned or extended at its
    top level): an export list names the class for `import *`, which brings
    it in under that same name (found by the search), never builds one."""
    out: set[int] = set()
    for statement in tree.body:
        targets: list[ast.expr] = []
        if isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        elif isinstance(statement, (ast.AugAssign, ast.AnnAssign)) and statement.value is not None:
            targets, value = [statement.target], statement.value
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and isinstance(
            value, (ast.List, ast.Tuple)
        ):
            out.update(id(e) for e in value.elts if isinstance(e, ast.Constant))
    return out


def _annotation_nodes(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        annotations: list[ast.expr | None] = []
        if isinstance(node, ast.arg):
            annotations.append(node.annotation)
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            annotations.append(node.returns)
        out.update(id(n) for a in annotations if a is not None for n in ast.walk(a))
    return out


def _aliases_of(module: ModuleInfo, name: str) -> set[str]:
    """`name` and what a module imports it as (`from x import Name as Other`)."""
    out = {name}
    for node in ast.walk(module.tree):
        if isinstance(node, ast.ImportFrom):
            out.update(a.asname for a in node.names if a.name == name and a.asname)
    return out


def _local_import(module: ModuleInfo, node: ast.Name) -> tuple[str, str] | None:
    """`from X import name` in a function of `module` (the one a function-level use reads)."""
    package = module.name if module.path.endswith("__init__.py") else module.name.rpartition(".")[0]
    for found in ast.walk(module.tree):
        if isinstance(found, ast.ImportFrom):
            for alias in found.names:
                if (alias.asname or alias.name) == node.id:
                    return resolve_relative(package, found.module, found.level), alias.name
    return None


def _around(module: ModuleInfo, line: int) -> tuple[Function | None, ClassInfo | None]:
    """The innermost function around `line` and the top-level class around it."""
    return innermost_function(module.tree, line), class_at(module, line)


def _function_at(tree: ast.AST, line: int) -> Function | None:
    return next(
        (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.lineno == line),
        None,
    )


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")
