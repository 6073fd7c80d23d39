"""What `self.<name>` holds when a method reads it: the one value its class
stores there, in `__init__` (`self.heads = heads`, or one element of
`self.impl, self.heads = impl, heads`), or what a `@property` of that name
returns. From there the head-count trail (heads.py) follows the value back
to each construction of the class.

Only where that is all that can set it: the instances of the class are
confined (instances.py: no instance handed where hprobe does not follow it),
no method of the class's family stores the name again, deletes it or writes
through `setattr`, `vars` or `__dict__`, no other receiver anywhere in the
tree stores an attribute of that name, and no method builds an instance
through `cls(...)`, `type(self)(...)` or `self.__class__(...)` (a
construction no search by the class's name finds). Anything else is said,
with the place, and the trail ends there."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from hprobe.rules.repo.tracing.instances import Confined, NotConfined, class_named, family
from hprobe.rules.repo.tree.scan import ClassInfo, RepoIndex

# Beyond these many modules naming the attribute, the search for other stores
# is not made: the value is taken as not known (said).
MAX_MODULES = 64

Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Stored:
    """`self.<name>` is `value`, stored in `function` (a method of `cls`): an
    `__init__`, or a property whose one `return` gives it."""

    cls: ClassInfo
    function: Function
    value: ast.expr
    where: str  # file:line of the store (or the return)


@dataclass(frozen=True)
class NotStored:
    where: str  # file:line
    why: str


def stored(
    index: RepoIndex, owner: ClassInfo, confined: Confined | NotConfined | None, name: str
) -> Stored | NotStored | None:
    """What `self.<name>` holds in a method of `owner`'s instances; None where
    no method stores it (a class attribute, read as such by the evaluator).
    `confined` None: the instance is one construction of `owner` itself that
    hprobe read (`box = Box(...)`; `box.q`), so where instances are kept does
    not matter, and only `owner`'s own methods run on it."""
    here = f"{owner.module.path}:{owner.node.lineno}"
    if confined is None:
        classes = index.mro(owner)
    else:
        members = confined.family if isinstance(confined, Confined) else family(index, owner)
        if isinstance(members, NotConfined):
            return NotStored(members.where or here, f"`self.{name}`: {members.why}")
        qualnames = members if isinstance(members, frozenset) else frozenset(c.qualname for c in members)
        classes = _classes(index, owner, qualnames)
    # A property is code: what it returns holds wherever the instances are kept.
    prop = _property(classes, name)
    if prop is not None:
        return prop
    if isinstance(confined, NotConfined):
        if not any(_stores(info.node, name) for cls in classes for info in cls.methods.values()):
            return None
        return NotStored(confined.where or here, f"`self.{name}`: {confined.why}")
    stores: list[tuple[ClassInfo, Function, ast.expr | None, int]] = []
    for cls in classes:
        for info in cls.methods.values():
            function = info.node
            problem = _unread_write(function, name)
            if problem is not None:
                return NotStored(f"{cls.module.path}:{problem[0]}", problem[1])
            stores.extend((cls, function, value, line) for value, line in _stores(function, name))
    outside = _stored_elsewhere(index, name)
    if outside is not None:
        return outside
    if not stores:
        return None
    if len(stores) != 1:
        said = ", ".join(f"{cls.module.path}:{line}" for cls, _, _, line in stores[:4])
        return NotStored(here, f"`self.{name}` is stored at {len(stores)} places" + (f" ({said})" if said else ""))
    cls, method, value, line = stores[0]
    where = f"{cls.module.path}:{line}"
    if method.name != "__init__":
        return NotStored(where, f"`self.{name}` is stored in {method.name}, not in __init__")
    if value is None:
        return NotStored(where, f"`self.{name}` is unpacked from what hprobe does not split")
    if any(name in c.attributes for c in classes) and not _unconditional(method, line):
        return NotStored(where, f"`self.{name}` is stored under a test, over a class attribute of that name")
    return Stored(cls, method, value, where)


@dataclass(frozen=True)
class Field:
    """A field of a dataclass or named tuple: what a construction hands it
    (by keyword, or at `position`), else `default`."""

    position: int | None  # None: keyword-only
    default: ast.expr | None
    where: str


def field_of(index: RepoIndex, cls: ClassInfo, name: str) -> Field | NotStored | None:
    """`name` as a field of `cls` (a `@dataclass` or a `NamedTuple`) that
    nothing changes after construction; None where `cls` is neither."""
    here = f"{cls.module.path}:{cls.node.lineno}"
    named_tuple = any(base.rpartition(".")[2] == "NamedTuple" for base in cls.bases)
    decorator = next((d for d in cls.node.decorator_list if _last_name(d) == "dataclass"), None)
    if not named_tuple and decorator is None:
        return None
    if len(index.mro(cls)) > 1 or (not named_tuple and len(cls.bases) > 0):
        return NotStored(here, f"{cls.name} inherits fields hprobe does not read")
    options = decorator.keywords if isinstance(decorator, ast.Call) else []
    keyword_only = any(k.arg == "kw_only" for k in options)
    fields: list[ast.AnnAssign] = []
    for stmt in cls.node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if "ClassVar" in ast.unparse(stmt.annotation):
                continue
            if stmt.target.id == "_" and "KW_ONLY" in ast.unparse(stmt.annotation):
                keyword_only = True
                continue
            fields.append(stmt)
    at = next((i for i, f in enumerate(fields) if isinstance(f.target, ast.Name) and f.target.id == name), None)
    if at is None:
        return NotStored(here, f"`{name}` is no field of {cls.name}")
    declared = fields[at]
    default = declared.value
    if isinstance(default, ast.Call) and _last_name(default) == "field":
        plain = [k for k in default.keywords if k.arg == "default"]
        if len(plain) != 1 or len(default.keywords) != 1:
            return NotStored(
                f"{cls.module.path}:{declared.lineno}", f"`{name}` is set by `{ast.unparse(default)[:60]}`"
            )
        default = plain[0].value
    changed = None if named_tuple else _changed_after(index, cls, name)  # a named tuple's fields are read-only
    if changed is not None:
        return changed
    # A field before it that `__init__` does not take (`field(init=False)`, or
    # any `field(...)` hprobe does not read) moves the positions: not told.
    if any(_configured(f.value) for f in fields[:at]):
        return NotStored(f"{cls.module.path}:{declared.lineno}", f"the fields before `{name}` are configured")
    return Field(None if keyword_only else at, default, f"{cls.module.path}:{declared.lineno}")


def _changed_after(index: RepoIndex, cls: ClassInfo, name: str) -> NotStored | None:
    """A way a field may change after construction: a method of the class, or a store anywhere."""
    for info in cls.methods.values():
        problem = _unread_write(info.node, name)
        if problem is not None:
            return NotStored(f"{cls.module.path}:{problem[0]}", problem[1])
        if _stores(info.node, name):
            return NotStored(f"{cls.module.path}:{info.node.lineno}", f"{info.node.name} stores `self.{name}`")
    return _stored_elsewhere(index, name)


def _configured(value: ast.expr | None) -> bool:
    """A field declared by `field(...)` with more than a plain default."""
    return (
        isinstance(value, ast.Call) and _last_name(value) == "field" and any(k.arg != "default" for k in value.keywords)
    )


def _last_name(node: ast.AST) -> str:
    """The name a decorator or call ends in: `dataclass` of `@dataclasses.dataclass(frozen=True)`."""
    if isinstance(node, ast.Call):
        return _last_name(node.func)
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _classes(index: RepoIndex, owner: ClassInfo, members: frozenset[str]) -> list[ClassInfo]:
    """The classes whose methods run on the instances: the family and every base of it in the tree."""
    seen: dict[str, ClassInfo] = {}
    for qualname in sorted(members | {owner.qualname}):
        cls = class_named(index, qualname)
        for member in index.mro(cls) if cls is not None else []:
            seen.setdefault(member.qualname, member)
    return list(seen.values())


def _property(classes: list[ClassInfo], name: str) -> Stored | NotStored | None:
    """`name` as a method of the classes: a `@property` with one `return`, or why not."""
    for cls in classes:
        info = cls.methods.get(name)
        if info is None:
            continue
        function = info.node
        where = f"{cls.module.path}:{function.lineno}"
        if not any(isinstance(d, ast.Name) and d.id == "property" for d in function.decorator_list):
            return NotStored(where, f"`self.{name}` is a method, not a value")
        returns = [
            node
            for node in ast.walk(function)
            if isinstance(node, ast.Return) and node.value is not None and _own(function, node)
        ]
        if len(returns) != 1 or sum(1 for c in classes if name in c.methods) != 1:
            return NotStored(where, f"the property `{name}` gives its value at {len(returns)} places")
        value = returns[0].value
        assert value is not None
        return Stored(cls, function, value, f"{cls.module.path}:{returns[0].lineno}")
    return None


def _stores(function: Function, name: str) -> list[tuple[ast.expr | None, int]]:
    """Each store to `self.<name>` in `function`: the value stored (None where
    unpacked from something hprobe does not split) and its line."""
    found: list[tuple[ast.expr | None, int]] = []
    for node in ast.walk(function):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                found.extend(_matched(target, node.value, name, node.lineno, augmented=isinstance(node, ast.AugAssign)))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.comprehension, ast.NamedExpr)):
            bound = (
                [node.target]
                if not isinstance(node, (ast.With, ast.AsyncWith))
                else [item.optional_vars for item in node.items if item.optional_vars is not None]
            )
            for target in bound:
                if any(_is_self_attr(t, name) for t in ast.walk(target)):
                    found.append((None, getattr(node, "lineno", function.lineno)))
    return found


def _matched(
    target: ast.expr, value: ast.expr | None, name: str, line: int, augmented: bool
) -> list[tuple[ast.expr | None, int]]:
    if _is_self_attr(target, name):
        return [(None if augmented or value is None else value, line)]
    if isinstance(target, (ast.Tuple, ast.List)):
        elements = value.elts if isinstance(value, (ast.Tuple, ast.List)) else None
        if elements is not None and (
            len(elements) != len(target.elts) or any(isinstance(e, ast.Starred) for e in (*elements, *target.elts))
        ):
            elements = None
        out: list[tuple[ast.expr | None, int]] = []
        for at, element in enumerate(target.elts):
            if elements is None:
                if any(_is_self_attr(t, name) for t in ast.walk(element)):
                    out.append((None, line))
            else:
                out.extend(_matched(element, elements[at], name, line, augmented))
        return out
    return []


def _unread_write(function: Function, name: str) -> tuple[int, str] | None:
    """A way the method may set or drop `self.<name>` that is no plain store, or build an instance unseen."""
    for node in ast.walk(function):
        if isinstance(node, ast.Delete) and any(_is_self_attr(t, name) for t in node.targets):
            return node.lineno, f"`self.{name}` is deleted"
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in ("setattr", "vars", "delattr"):
                return node.lineno, f"`{func.id}(...)` may set `self.{name}`"
            if (
                isinstance(func, ast.Name)
                and func.id == "cls"
                or isinstance(func, ast.Call)
                and isinstance(func.func, ast.Name)
                and func.func.id == "type"
                or isinstance(func, ast.Attribute)
                and func.attr == "__class__"
            ):
                return node.lineno, f"`{ast.unparse(func)}(...)` builds an instance no search by the class's name finds"
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            return node.lineno, f"`{ast.unparse(node)}` may set `self.{name}`"
    return None


def _stored_elsewhere(index: RepoIndex, name: str) -> NotStored | None:
    """A store of `.<name>` on a receiver other than `self` (an instance's
    place, another object that may be one): hprobe does not tell them apart.
    `self.<name>` stored in another class's methods is that class's own."""
    if index.count_naming(name) > MAX_MODULES:
        return NotStored("", f"`.{name}` is named in too many modules to read its stores")
    for module in index.each_module_naming(name):
        for node in ast.walk(module.tree):
            for target in _store_targets(node):
                for part in ast.walk(target):
                    if isinstance(part, ast.Attribute) and part.attr == name and not is_self(part.value):
                        return NotStored(
                            f"{module.path}:{part.lineno}", f"`{ast.unparse(part)}` is stored, on what may be one"
                        )
            if (
                isinstance(node, ast.Call)
                and _sets_by_name(node.func)
                and len(node.args) >= 2
                and not (isinstance(node.args[1], ast.Constant) and node.args[1].value != name)
            ):
                return NotStored(f"{module.path}:{node.lineno}", f"`{ast.unparse(node)[:60]}` may set `.{name}`")
    return None


def _sets_by_name(func: ast.expr) -> bool:
    """`setattr(obj, name, v)`, `delattr(...)`, or `object.__setattr__(obj, name, v)` (a frozen dataclass's way)."""
    if isinstance(func, ast.Name):
        return func.id in ("setattr", "delattr")
    return isinstance(func, ast.Attribute) and func.attr in ("__setattr__", "__delattr__")


def _store_targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.NamedExpr)):
        return [node.target]
    if isinstance(node, ast.Delete):
        return list(node.targets)
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [item.optional_vars for item in node.items if item.optional_vars is not None]
    return []


def _unconditional(function: Function, line: int) -> bool:
    """Whether the statement at `line` is one of `function`'s own top statements."""
    return any(stmt.lineno == line for stmt in function.body)


def _own(function: Function, node: ast.AST) -> bool:
    """Whether `node` is `function`'s own, not a nested function's."""
    for inner in ast.walk(function):
        if inner is not function and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if any(n is node for n in ast.walk(inner)):
                return False
    return True


def is_self(node: ast.AST) -> bool:
    """`self` (not `cls`: a class's own attribute is no instance's store)."""
    return isinstance(node, ast.Name) and node.id == "self"


def _is_self_attr(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == name and is_self(node.value)
