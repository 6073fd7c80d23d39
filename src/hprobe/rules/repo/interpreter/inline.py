"""A padding written inline in a method, not as a padding method of its own
(SGLang 0.5.18/0.5.19's `MQALayer.forward`: `padded_num_heads = 64 if
self.n_local_heads <= 64 else self.n_heads`; DSpark's `q_padded =
x.new_empty(T, _PAD_NUM_HEADS, D)` under an `elif`): the count an engine hands
FlashInfer is the value of one variable where the method assigns it, and the
engine's own count where no assignment runs.

Only the statements that decide that variable are read: the assignments of
it, and the `if` tests on the way to each. That is sound only while nothing
else in the method changes what those tests and values read, so a method is
refused (not evaluable, with its line) when

- an assignment of the variable sits under anything but `if` (a loop, `try`,
  `with`, a nested function), or the variable is bound any other way;
- a name those statements read is bound anywhere in the method, or an
  attribute of `self` they read is assigned there (a condition the mapping
  gives by its source text, `pool.uniform_fp8`, is read from the mapping)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from hprobe.rules.repo.interpreter.evaluate import Binding, NotEvaluable, Raises, evaluate_expression
from hprobe.rules.repo.tree.mapping import InlineRule
from hprobe.rules.repo.tree.scan import ClassInfo, FunctionInfo, ModuleInfo, RepoIndex

Path_ = tuple[tuple[ast.If, bool], ...]  # the `if` tests on the way to a statement, and the branch taken


@dataclass(frozen=True)
class InlineSite:
    """The method an inline rule lives in, found in the tree."""

    cls: ClassInfo
    function: FunctionInfo


def find_inline(index: RepoIndex, rule: InlineRule) -> InlineSite | str:
    """The class and method `rule.function` (Class.method) names, or why not."""
    cls_name, _, method = rule.function.rpartition(".")
    for module in index.modules_mentioning({cls_name}):
        cls = module.classes.get(cls_name)
        if cls is None:
            continue
        for klass in index.mro(cls):
            if method in klass.methods:
                return InlineSite(cls, klass.methods[method])
        return f"{module.path}: class {cls_name} has no method {method}"
    return f"no class {cls_name} in the tree"


def evaluate_inline(
    index: RepoIndex, site: InlineSite, rule: InlineRule, n: int, binding: Binding
) -> tuple[int | Raises | NotEvaluable, int | None]:
    """The count the method hands on for per-rank count `n`: (count, the line
    of the assignment that gave it, or None where none ran and `n` stands)."""
    function = site.function
    path = function.module.path
    assignments = _assignments(function.node, rule.variable)
    if isinstance(assignments, NotEvaluable):
        return NotEvaluable(path, assignments.line, assignments.what), None
    if not assignments:
        return NotEvaluable(path, function.line, f"{function.qualname} never assigns {rule.variable}"), None
    problem = _reads_are_stable(function.node, assignments, rule, binding)
    if problem is not None:
        return NotEvaluable(path, problem[0], problem[1]), None
    count: int | Raises | NotEvaluable = n
    line: int | None = None
    tests: dict[int, Any] = {}  # id(If) -> the test's truth, evaluated once
    for stmt, way in assignments:
        taken = True
        for branch, body in way:
            if id(branch) not in tests:
                value = _value(index, site, branch.test, binding)
                if isinstance(value, (Raises, NotEvaluable)):
                    return value, None
                tests[id(branch)] = bool(value)
            if tests[id(branch)] != body:
                taken = False
                break
        if not taken:
            continue
        value = _assigned(index, site, stmt, rule, binding)
        if isinstance(value, (Raises, NotEvaluable)):
            return value, stmt.lineno
        if value is None:
            count, line = n, None  # `variable = None`: no padding on this way
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            return NotEvaluable(
                path, stmt.lineno, f"{rule.variable} is {type(value).__name__}, not a head count"
            ), stmt.lineno
        count, line = value, stmt.lineno
    return count, line


def _value(index: RepoIndex, site: InlineSite, node: ast.expr, binding: Binding) -> Any:
    return evaluate_expression(index, site.cls, site.function.module, node, {}, binding).value


def _assigned(
    index: RepoIndex, site: InlineSite, stmt: ast.Assign | ast.AnnAssign, rule: InlineRule, binding: Binding
) -> Any:
    value = stmt.value
    assert value is not None  # _assignments keeps assignments with a value
    if isinstance(value, ast.Constant) and value.value is None:
        return None
    if rule.size_arg is None:
        return _value(index, site, value, binding)
    if (
        not isinstance(value, ast.Call)
        or rule.size_arg >= len(value.args)
        or any(isinstance(a, ast.Starred) for a in value.args)
    ):
        return NotEvaluable(
            site.function.module.path,
            stmt.lineno,
            f"{rule.variable} is not an allocation with a positional argument {rule.size_arg}",
        )
    return _value(index, site, value.args[rule.size_arg], binding)


def _assignments(
    function: ast.FunctionDef | ast.AsyncFunctionDef, variable: str
) -> list[tuple[ast.Assign | ast.AnnAssign, Path_]] | NotEvaluable:
    """Every assignment of `variable` with the `if` tests on its way, in source
    order; NotEvaluable when it is bound in any way this module does not model."""
    found: list[tuple[ast.Assign | ast.AnnAssign, Path_]] = []
    stack: list[tuple[list[ast.stmt], Path_]] = [(function.body, ())]
    blocks: list[tuple[list[ast.stmt], Path_]] = []
    while stack:
        body, way = stack.pop()
        blocks.append((body, way))
        for stmt in body:
            if isinstance(stmt, ast.If):
                stack.append((stmt.body, (*way, (stmt, True))))
                stack.append((stmt.orelse, (*way, (stmt, False))))
    for body, way in blocks:
        for stmt in body:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and stmt.targets[0].id == variable
            ):
                found.append((stmt, way))
            elif (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and stmt.target.id == variable
                and stmt.value is not None
            ):
                found.append((stmt, way))
    modelled = {id(stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target) for stmt, _ in found}
    for node in ast.walk(function):
        if id(node) in modelled:
            continue
        if isinstance(node, ast.Name) and node.id == variable and isinstance(node.ctx, (ast.Store, ast.Del)):
            return NotEvaluable(
                "",
                node.lineno,
                f"{variable} is bound here in a way an inline rule does not model (a loop, try, with, unpacking or "
                "nested function)",
            )
    found.sort(key=lambda item: (item[0].lineno, item[0].col_offset))
    return found


def _reads_are_stable(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    assignments: list[tuple[ast.Assign | ast.AnnAssign, Path_]],
    rule: InlineRule,
    binding: Binding,
) -> tuple[int, str] | None:
    """(line, why) when something the deciding statements read is changed in
    the method (so its value there is not what the binding says), else None."""
    read: list[ast.expr] = []
    for stmt, way in assignments:
        assert stmt.value is not None
        value = stmt.value
        if rule.size_arg is not None and isinstance(value, ast.Call) and rule.size_arg < len(value.args):
            value = value.args[rule.size_arg]
        read.append(value)
        read.extend(branch.test for branch, _ in way)
    given = set(binding.platform)  # expressions the mapping decides by their text
    names: set[str] = set()
    attributes: set[str] = set()
    for expr in read:
        stack: list[ast.AST] = [expr]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.expr) and ast.unparse(node) in given:
                continue
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                attributes.add(node.attr)
                continue
            if isinstance(node, ast.Name):
                names.add(node.id)
            stack.extend(ast.iter_child_nodes(node))
    names.discard(rule.variable)
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, (ast.Store, ast.Del)):
            return node.lineno, f"{node.id}, which the inline rule reads, is bound in {function.name}()"
        if isinstance(node, ast.arg) and node.arg in names:
            return node.lineno, f"{node.arg}, which the inline rule reads, is a parameter of {function.name}()"
        if (
            isinstance(node, ast.Attribute)
            and node.attr in attributes
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and isinstance(node.ctx, (ast.Store, ast.Del))
        ):
            return node.lineno, f"self.{node.attr}, which the inline rule reads, is assigned in {function.name}()"
        if isinstance(node, (ast.Global, ast.Nonlocal)) and names & set(node.names):
            return (
                node.lineno,
                f"{sorted(names & set(node.names))[0]} is declared {type(node).__name__.lower()} in {function.name}()",
            )
    return None


@dataclass(frozen=True)
class FloorConstant:
    """The module constant an inline padding pads up to, where it is that
    constant alone (DSpark's `_PAD_NUM_HEADS = 64`): one edit of its literal
    changes the padding and nothing else."""

    name: str
    module: ModuleInfo
    literal: ast.Constant  # the int the constant is bound to


def floor_constant(index: RepoIndex, site: InlineSite, rule: InlineRule) -> FloorConstant | str:
    """The one module-level int constant the count an inline padding assigns
    is (`x.new_empty(T, _PAD, D)` at its size argument), where nothing else in
    the tree reads that constant; or why the padding is not that constant.
    Whether a new value pads as wanted is for the caller to read again."""
    function = site.function
    assignments = _assignments(function.node, rule.variable)
    if isinstance(assignments, NotEvaluable) or not assignments:
        return f"{function.qualname} does not assign {rule.variable} in a way hprobe reads"
    constants: dict[str, tuple[ModuleInfo, ast.Constant]] = {}
    for stmt, _ in assignments:
        value = stmt.value
        if rule.size_arg is not None and isinstance(value, ast.Call) and rule.size_arg < len(value.args):
            value = value.args[rule.size_arg]
        if value is None or (isinstance(value, ast.Constant) and value.value is None):
            continue  # `q_padded = None`: no padding on this way
        if not isinstance(value, ast.Name):
            return f"{function.qualname} pads to {ast.unparse(value)[:40]}, not to a constant"
        hit = index.lookup(function.module, value.id)
        bound = hit[1] if hit is not None and hit[0] == "constant" else None
        if not (isinstance(bound, ast.Constant) and isinstance(bound.value, int) and not isinstance(bound.value, bool)):
            return f"{value.id} is not a module constant bound to an int"
        assert hit is not None
        constants[value.id] = (hit[2], bound)
    if len(constants) != 1:
        return f"{function.qualname} pads to {len(constants)} constants, not one"
    ((name, (module, literal)),) = constants.items()
    if module.path != function.module.path:
        return f"{name} is defined in {module.path}, not beside {function.qualname}"
    # Read anywhere else (another method, another module), a new value would change code no one judged.
    inside = range(function.node.lineno, (function.node.end_lineno or function.node.lineno) + 1)
    outside = [
        node.lineno
        for node in ast.walk(module.tree)
        if isinstance(node, ast.Name)
        and node.id == name
        and isinstance(node.ctx, ast.Load)
        and node.lineno not in inside
    ]
    elsewhere = [m.path for m in index.modules_mentioning({name}) if m.path != module.path]
    if outside or elsewhere:
        where = f"{module.path}:{outside[0]}" if outside else elsewhere[0]
        return f"{name} ({module.path}:{literal.lineno}) is read elsewhere too ({where})"
    return FloorConstant(name, module, literal)
