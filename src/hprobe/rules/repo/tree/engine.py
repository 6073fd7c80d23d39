"""Which engine setting routes a rule's count to FlashInfer, read from the
engine's own source with `ast` (never imported).

A mapping's `[[engine_setting]]` names the option (SGLang's `dsv4_attn_backend`,
`--dsv4-attn-backend`), the value under which FlashInfer runs (`trtllm`), the
module that declares the option with its default, and the function that
resolves an `auto` default (`_default_dsv4_attention_backend`). What that
function can return is read from its `return` statements: the default is one
of them, whichever the machine picks at run time."""

from __future__ import annotations

import ast

from hprobe.model.padding import Reach
from hprobe.rules.repo.tree.mapping import EngineSetting
from hprobe.rules.repo.tree.scan import RepoIndex
from hprobe.system.parsing import parse_expression


def read_reach(index: RepoIndex, setting: EngineSetting) -> Reach:
    """The setting's default, as this tree's source gives it."""
    if setting.priority_in is not None:
        return _priority(index, setting)
    if setting.assigned_in is not None:
        return _assigned(index, setting)
    if setting.default is not None:
        return Reach(
            setting.flag,
            setting.value,
            f"{setting.default} (as the mapping states it)",
            setting.default_reaches,
            setting.otherwise,
            setting.source or "",
        )
    declared = _declared_default(index, setting)
    resolved = _returned_strings(index, setting.resolved_by) if setting.resolved_by else None
    if resolved is not None and resolved[0]:
        values, where = resolved
        resolver = (setting.resolved_by or "").rsplit(".", 1)[-1]
        written = repr(declared[0]) if declared else "auto"
        default = f"{written}, which {resolver} resolves to {' or '.join(values)}"
        reaches = True if values == [setting.value] else (False if setting.value not in values else None)
        return Reach(setting.flag, setting.value, default, reaches, setting.otherwise, where)
    if declared is not None:
        value, where = declared
        return Reach(setting.flag, setting.value, repr(value), value == setting.value, setting.otherwise, where)
    return Reach(setting.flag, setting.value, "not found in the tree", None, setting.otherwise, "")


def _declared_default(index: RepoIndex, setting: EngineSetting) -> tuple[object, str] | None:
    """`name: T = default` (a dataclass-style field) anywhere in the module."""
    module = index.by_suffix(setting.declared_in) if setting.declared_in else None
    if module is None:
        return None
    for node in ast.walk(module.tree):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == setting.name
            and node.value is not None
        ):
            value = node.value.value if isinstance(node.value, ast.Constant) else ast.unparse(node.value)
            return value, f"{module.path}:{node.lineno}"
        # A settings registry's field: `NAME = EnvStr("flashinfer")` (SGLang's environ.py).
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == setting.name
            and isinstance(node.value, ast.Call)
            and node.value.args
            and isinstance(node.value.args[0], ast.Constant)
        ):
            return node.value.args[0].value, f"{module.path}:{node.lineno}"
    return None


def _returned_strings(index: RepoIndex, dotted: str) -> tuple[list[str], str] | None:
    """The string constants a function returns, and where it is defined."""
    module_name, _, function = dotted.rpartition(".")
    module = index.by_suffix(module_name)
    if module is None or function not in module.functions:
        return None
    info = module.functions[function]
    values = [
        n.value.value
        for n in ast.walk(info.node)
        if isinstance(n, ast.Return) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
    ]
    return list(dict.fromkeys(values)), f"{module.path}:{info.node.lineno}"


def _priority(index: RepoIndex, setting: EngineSetting) -> Reach:
    """The first entry of the list `priority_in` returns under the `if` whose
    test reads `branch`: the engine's default where it holds. The setting's
    value later in that list is a fallback, not the default."""
    assert setting.priority_in is not None and setting.branch is not None
    module_name, _, function = setting.priority_in.rpartition(".")
    module = index.by_suffix(module_name)
    info = module.functions.get(function) if module is not None else None
    if module is None or info is None:
        return Reach(
            setting.flag, setting.value, f"not found in the tree ({setting.priority_in})", None, setting.otherwise, ""
        )
    wanted = ast.unparse(parse_expression(setting.branch).body)
    for node in ast.walk(info.node):
        if isinstance(node, ast.If) and ast.unparse(node.test) == wanted and setting.priority_list:
            return _priority_list(setting, setting.priority_list, module.path, node)
        if isinstance(node, ast.If) and ast.unparse(node.test) == wanted:
            for inner in ast.walk(ast.Module(body=node.body, type_ignores=[])):
                if isinstance(inner, ast.Return) and isinstance(inner.value, ast.List) and inner.value.elts:
                    names = [ast.unparse(e).rsplit(".", 1)[-1] for e in inner.value.elts]
                    where = f"{module.path}:{inner.lineno}"
                    default = f"{names[0]} (first of the priority list where {wanted})"
                    reaches = names[0] == setting.value
                    if not reaches and setting.value in names:
                        default += (
                            f"; {setting.value} is tried only after {', '.join(names[: names.index(setting.value)])}"
                        )
                    return Reach(setting.flag, setting.value, default, reaches, setting.otherwise, where)
    return Reach(
        setting.flag,
        setting.value,
        f"no priority list under `{wanted}` in {setting.priority_in}",
        None,
        setting.otherwise,
        f"{module.path}:{info.node.lineno}",
    )


def _priority_list(setting: EngineSetting, name: str, path: str, branch: ast.If) -> Reach:
    """The default under `branch` where the engine picks its list by settings
    of its own (`sparse_backends = [...]` in `if`s on the KV cache dtype and
    the head count): the first entry of each list `name` is bound to, with the
    tests on the way to it. FlashInfer is the default where its entry is first."""
    firsts: list[tuple[list[str], str, int]] = []  # (tests on the way, first entry, line)
    stack: list[tuple[list[ast.stmt], list[str]]] = [(branch.body, [])]
    while stack:
        body, tests = stack.pop()
        for stmt in body:
            if isinstance(stmt, ast.If):
                test = ast.unparse(stmt.test)
                stack.append((stmt.body, [*tests, test]))
                stack.append((stmt.orelse, [*tests, f"not ({test})"]))
            elif (
                isinstance(stmt, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
                and isinstance(stmt.value, ast.List)
                and stmt.value.elts
            ):
                firsts.append((tests, ast.unparse(stmt.value.elts[0]).rsplit(".", 1)[-1], stmt.lineno))
    if not firsts:
        return Reach(
            setting.flag,
            setting.value,
            f"no list {name} under `{ast.unparse(branch.test)}`",
            None,
            setting.otherwise,
            f"{path}:{branch.lineno}",
        )
    firsts.sort(key=lambda item: item[2])
    where = f"{path}:{firsts[0][2]}"
    default = "; ".join(f"{first} where {' and '.join(tests) or 'always'}" for tests, first, _ in firsts)
    reaching = [tests for tests, first, _ in firsts if first == setting.value]
    if len(reaching) == len(firsts) or not reaching:
        return Reach(setting.flag, setting.value, default, bool(reaching), setting.otherwise, where)
    # `A or (not (A) and B)` is `A or B`: a test an earlier alternative already
    # covers is not said again in a later one's negation.
    said: list[list[str]] = []
    for tests in reaching:
        covered = {f"not ({' and '.join(earlier)})" for earlier in said if earlier}
        said.append([t for t in tests if t not in covered])
    when = " or ".join(" and ".join(tests) or "always" for tests in said)
    return Reach(setting.flag, setting.value, default, None, setting.otherwise, where, when)


def _assigned(index: RepoIndex, setting: EngineSetting) -> Reach:
    """`overrides["key"] = "value"` in `assigned_in`: what the engine sets
    when the user sets nothing (one assignment, or the values it may set)."""
    assert setting.assigned_in is not None and setting.key is not None
    module = index.by_suffix(setting.assigned_in)
    if module is None:
        return Reach(
            setting.flag, setting.value, f"not found in the tree ({setting.assigned_in})", None, setting.otherwise, ""
        )
    found: list[tuple[str, int]] = []
    wanted = ast.unparse(parse_expression(setting.branch).body) if setting.branch else None
    # (node, the tests of the `if`s it sits under), so `branch` can pick one assignment.
    stack: list[tuple[ast.AST, tuple[str, ...]]] = [(module.tree, ())]
    while stack:
        node, tests = stack.pop()
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            target = node.targets[0]
            if (
                isinstance(target, ast.Subscript)
                and isinstance(target.slice, ast.Constant)
                and target.slice.value == setting.key
            ):
                if wanted is None or wanted in tests:
                    found.append((node.value.value, node.lineno))
        inner = (*tests, ast.unparse(node.test)) if isinstance(node, ast.If) else tests
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))
    found.sort(key=lambda item: item[1])
    if not found:
        return Reach(setting.flag, setting.value, f"not set in {module.path}", None, setting.otherwise, module.path)
    values = list(dict.fromkeys(v for v, _ in found))
    where = f"{module.path}:{found[0][1]}"
    reaches = True if values == [setting.value] else (False if setting.value not in values else None)
    under = f" under `{wanted}`" if wanted else ""
    return Reach(
        setting.flag,
        setting.value,
        f"{' or '.join(values)}, set by {module.path}{under} when none is given",
        reaches,
        setting.otherwise,
        where,
    )
