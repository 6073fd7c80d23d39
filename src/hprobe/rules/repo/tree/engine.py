"""Which engine setting routes a rule's count to FlashInfer, read from the
engine's own source with `ast` (never imported).

A mapping's `[[engine_setting]]` names the option (SGLang's `dsv4_attn_backend`,
`--dsv4-attn-backend`), the value under which FlashInfer runs (`trtllm`), the
module that declares the option with its default, and the function that
resolves an `auto` default (`_default_dsv4_attention_backend`). What that
function can return is read from its `return` statements: the default is one
of them, whichever the machine picks at run time. Where the engine sets the
option itself when none is given (`assigned_in`, `key`, `given`: SGLang's
overrides), every value it sets is read with the tests on its way, and those
its own code decides on the paths' SMs are decided (`_chosen`)."""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hprobe.model.padding import Reach
from hprobe.model.sm import sm_names
from hprobe.rules.repo.tree.mapping import EngineSetting
from hprobe.rules.repo.tree.operators import COMPARISONS
from hprobe.rules.repo.tree.scan import ModuleInfo, RepoIndex
from hprobe.system.parsing import parse_expression

# The mapping's platform predicates: (source text as ast.unparse writes it, the SMs where it is true).
Platform = Sequence[tuple[str, tuple[int, ...]]]


def read_reach(index: RepoIndex, setting: EngineSetting, platform: Platform = (), sms: tuple[int, ...] = ()) -> Reach:
    """The setting's default, as this tree's source gives it, on the SMs
    (`sms`) of the paths it gates; `platform` is the mapping's predicates
    (source text -> the SMs where each is true)."""
    if setting.priority_in is not None:
        return _priority(index, setting)
    if setting.assigned_in is not None:
        return _assigned(index, setting, platform, sms)
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


def _assigned(index: RepoIndex, setting: EngineSetting, platform: Platform, sms: tuple[int, ...]) -> Reach:
    """`overrides["key"] = "value"` in `assigned_in`: what the engine sets
    when the user sets nothing (one assignment, or the values it may set)."""
    assert setting.assigned_in is not None and setting.key is not None
    module = index.by_suffix(setting.assigned_in)
    if module is None:
        return Reach(
            setting.flag, setting.value, f"not found in the tree ({setting.assigned_in})", None, setting.otherwise, ""
        )
    if setting.given is not None:
        return _chosen(module, setting, platform, sms)
    wanted = ast.unparse(parse_expression(setting.branch).body) if setting.branch else None
    # The string values set for the key, under `branch` where the mapping names one.
    found = [
        (set_.value.value, set_.line)
        for set_ in _settings_of(module, setting.key)
        if isinstance(set_.value, ast.Constant)
        and isinstance(set_.value.value, str)
        and (wanted is None or any(t.holds and ast.unparse(t.node) == wanted for t in set_.tests))
    ]
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


# -- a key the engine sets under tests of its own: which value on which SM ------------------------


class _Unknown:
    """A value the reading cannot tell (a setting, a model's config, a call)."""


UNKNOWN = _Unknown()
# Names a local may be followed through before the reading gives up: a
# function's locals chain a few deep (`is_glm_sm12_fp8` reads `major`).
_MAX_FOLLOWED = 32


@dataclass(frozen=True)
class _Capability:
    """`major, minor = torch.cuda.get_device_capability()`: a part of the SM."""

    part: int  # 0: major, 1: minor


@dataclass(frozen=True)
class _Local:
    """A local bound to an expression, with the locals it read then (a name
    rebound later does not change what it was)."""

    expr: ast.expr
    locals: Mapping[str, _Held]


_Held = _Local | _Capability


@dataclass(frozen=True)
class _Test:
    node: ast.expr
    holds: bool  # False: the path takes its `else`
    locals: Mapping[str, _Held]  # what the function had bound where the test is read

    def said(self) -> _Said:
        return (ast.unparse(self.node), self.holds)


# A test as the reading says it: (its source as ast.unparse writes it, whether
# it holds on the way): a test and its negation are the same text.
_Said = tuple[str, bool]
_INVERSE: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
}


def _words(said: _Said) -> str:
    """A test in words, to be joined by `and`: a negation said as Python
    would write it (`not x`, `a in b` for `not (a not in b)`), an `or` in
    parentheses."""
    text, holds = said
    node = parse_expression(text).body
    if not holds:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            node = node.operand
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _INVERSE:
            node = ast.Compare(node.left, [_INVERSE[type(node.ops[0])]()], node.comparators)
        else:
            node = ast.UnaryOp(ast.Not(), node)
    words = ast.unparse(node)
    loose = isinstance(node, ast.BoolOp | ast.IfExp | ast.Lambda | ast.NamedExpr)
    return f"({words})" if loose else words


@dataclass(frozen=True)
class _Setting:
    """`target[key] = value` as the engine writes it, with the tests on its way."""

    value: ast.expr
    tests: tuple[_Test, ...]
    locals: Mapping[str, _Held]
    line: int


def _settings_of(module: ModuleInfo, key: str) -> list[_Setting]:
    """Every `X[key] = value` of the module, each with the tests of the `if`s
    around it and of the earlier `if`s on its way that leave the function
    (`if sinks: declared[key] = ...; return declared`, `if not dsa: return {}`):
    past such an `if`, its test is false."""
    found: list[_Setting] = []

    def walk(block: Sequence[ast.stmt], tests: tuple[_Test, ...], bound: dict[str, _Held]) -> None:
        bound = dict(bound)
        for stmt in block:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                walk(stmt.body, (), {})
                bound.pop(stmt.name, None)
            elif isinstance(stmt, ast.Assign):
                _forget(stmt, bound)  # a := inside the value
                _bind(stmt, bound)
                for target in stmt.targets:
                    if isinstance(target, ast.Subscript) and _key_of(target) == key:
                        found.append(_Setting(stmt.value, tests, dict(bound), stmt.lineno))
            elif isinstance(stmt, ast.Return | ast.Expr) and stmt.value is not None:
                # `return {key: value, ...}`, `overrides.update(key=value)`: a
                # value set as it is handed back or merged in.
                for value in _handed(stmt.value, key):
                    found.append(_Setting(value, tests, dict(bound), stmt.lineno))
                _forget(stmt, bound)
            elif isinstance(stmt, ast.If):
                test = _Test(stmt.test, True, dict(bound))
                # `if A and B:` holds where each holds: said and decided one by one.
                conjuncts = (
                    stmt.test.values
                    if isinstance(stmt.test, ast.BoolOp) and isinstance(stmt.test.op, ast.And)
                    else [stmt.test]
                )
                walk(stmt.body, (*tests, *(_Test(c, True, test.locals) for c in conjuncts)), bound)
                walk(stmt.orelse, (*tests, _Test(stmt.test, False, dict(bound))), bound)
                if _leaves(stmt.body):
                    tests = (*tests, _Test(stmt.test, False, dict(bound)))
                elif stmt.orelse and _leaves(stmt.orelse):
                    tests = (*tests, test)
                _forget(stmt, bound)
            else:
                # A loop, a with, a try, a match: what they set is set under
                # the tests around them; a local they may rebind is unknown after.
                for part in (getattr(stmt, "body", []), getattr(stmt, "orelse", []), getattr(stmt, "finalbody", [])):
                    if part and isinstance(part[0], ast.stmt):
                        walk(part, tests, bound)
                for case in [*getattr(stmt, "handlers", []), *getattr(stmt, "cases", [])]:
                    walk(case.body, tests, bound)
                _forget(stmt, bound)

    walk(module.tree.body, (), {})
    return found


def _handed(node: ast.expr, key: str) -> list[ast.expr]:
    """The values `node` hands back for `key`: a dict literal's, or an
    `update(...)` call's (keywords, or a dict literal passed)."""
    if isinstance(node, ast.Dict):
        pairs = zip(node.keys, node.values, strict=True)
        return [v for k, v in pairs if isinstance(k, ast.Constant) and k.value == key]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update":
        return [kw.value for kw in node.keywords if kw.arg == key] + [
            v for arg in node.args if isinstance(arg, ast.Dict) for v in _handed(arg, key)
        ]
    return []


def _key_of(target: ast.Subscript) -> object:
    return target.slice.value if isinstance(target.slice, ast.Constant) else None


def _forget(stmt: ast.stmt, bound: dict[str, _Held]) -> None:
    """Locals a statement may rebind (in a branch, a loop, a `:=`) are no
    longer known after it."""
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.pop(node.id, None)


def _leaves(block: Sequence[ast.stmt]) -> bool:
    return bool(block) and isinstance(block[-1], ast.Return | ast.Raise)


def _bind(stmt: ast.Assign, bound: dict[str, _Held]) -> None:
    """A local's value as the function binds it; the SM's parts where it reads
    the device capability."""
    capability = isinstance(stmt.value, ast.Call) and ast.unparse(stmt.value.func).endswith("get_device_capability")
    for target in stmt.targets:
        if isinstance(target, ast.Name):
            if capability:
                bound.pop(target.id, None)  # the pair itself: not a number
            else:
                bound[target.id] = _Local(stmt.value, dict(bound))
        elif isinstance(target, ast.Tuple) and capability:
            for part, element in enumerate(target.elts[:2]):
                if isinstance(element, ast.Name):
                    bound[element.id] = _Capability(part)
        else:
            for node in ast.walk(target):
                if isinstance(node, ast.Name):
                    bound.pop(node.id, None)


def _evaluated(
    node: ast.expr,
    bound: Mapping[str, _Held],
    sm: int | None,
    platform: Mapping[str, tuple[int, ...]],
    depth: int = 0,
) -> object:
    """The value of `node` on `sm` where the function's own code decides it
    (constants, the device capability, the mapping's platform predicates, and
    locals bound to those), else UNKNOWN. `sm` None: the SM is not known."""
    if depth > _MAX_FOLLOWED:
        return UNKNOWN
    text = ast.unparse(node)
    if text in platform:
        return UNKNOWN if sm is None else sm in platform[text]
    again = lambda inner: _evaluated(inner, bound, sm, platform, depth + 1)  # noqa: E731
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        held = bound.get(node.id)
        if isinstance(held, _Capability):
            return UNKNOWN if sm is None else divmod(sm, 10)[held.part]
        return UNKNOWN if held is None else _evaluated(held.expr, held.locals, sm, platform, depth + 1)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        value = again(node.operand)
        return value if value is UNKNOWN else not value
    if isinstance(node, ast.BoolOp):
        return _either(node, [again(v) for v in node.values])
    if isinstance(node, ast.IfExp):
        test = again(node.test)
        return UNKNOWN if test is UNKNOWN else again(node.body if test else node.orelse)
    if isinstance(node, ast.Compare):
        return _compared(node, [again(node.left), *(again(c) for c in node.comparators)])
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        elements = [again(e) for e in node.elts]
        return UNKNOWN if any(e is UNKNOWN for e in elements) else tuple(elements)
    return UNKNOWN


def _either(node: ast.BoolOp, values: list[object]) -> object:
    """`and`/`or` over values some of which are unknown: one that decides it
    (a false one for `and`, a true one for `or`) does, whatever the rest are."""
    for value in values:
        if value is not UNKNOWN and (not value if isinstance(node.op, ast.And) else value):
            return value
    return UNKNOWN if any(v is UNKNOWN for v in values) else values[-1]


def _compared(node: ast.Compare, operands: list[object]) -> object:
    """A chain of comparisons, each pair compared as Python would; UNKNOWN
    where an operand is, or Python refuses the comparison."""
    for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
        if left is UNKNOWN or right is UNKNOWN or type(op) not in COMPARISONS:
            return UNKNOWN
        try:
            if not COMPARISONS[type(op)](left, right):
                return False
        except TypeError:
            return UNKNOWN
    return True


def _chosen(module: ModuleInfo, setting: EngineSetting, platform: Platform, sms: tuple[int, ...]) -> Reach:
    """What the engine sets `key` to when the user gives none (the tests
    that read `given` are the user's choice), on `sms`: the tests its own code
    decides there (the device capability, the platform) are decided, and the
    rest (a KV cache dtype, a model's config, another setting) are said as
    written. FlashInfer is the default where its value is set."""
    assert setting.key is not None and setting.given is not None
    predicates = dict(platform)
    settings = _settings_of(module, setting.key)
    readings = [_alternatives(found, setting.given, sm, predicates) for found in settings for sm in sms or (None,)]
    per_setting = len(sms) or 1
    chosen: list[tuple[str | None, tuple[_Said, ...], int]] = []
    for i, found in enumerate(settings):
        on_each = readings[i * per_setting : (i + 1) * per_setting]
        if any(r != on_each[0] for r in on_each):  # the SMs disagree: say it for no SM in particular
            on_each = [_alternatives(found, setting.given, None, predicates)]
        chosen.extend((value, tests, found.line) for value, tests in on_each[0])
    where_sms = f" on {sm_names(sms)}" if sms else ""
    if not chosen:
        return Reach(
            setting.flag,
            setting.value,
            f"not set in {module.path}{where_sms} when none is given",
            None,
            setting.otherwise,
            module.path,
        )
    values = list(dict.fromkeys(value or "a value hprobe does not read" for value, _, _ in chosen))
    reaching = _merged([tests for value, tests, _ in chosen if value == setting.value])
    first = min(line for value, _, line in chosen if value == setting.value) if reaching else chosen[0][2]
    where = f"{module.path}:{first}"
    unread = "a value hprobe does not read"
    each = [f"{value} where {_said(_merged([t for v, t, _ in chosen if (v or unread) == value]))}" for value in values]
    default = f"{'; '.join(each)} (set by {module.path}{where_sms} when none is given)"
    if not reaching:
        return Reach(setting.flag, setting.value, default, False, setting.otherwise, where)
    if any(not tests for tests in reaching) and values == [setting.value]:
        return Reach(setting.flag, setting.value, default, True, setting.otherwise, where)
    return Reach(setting.flag, setting.value, default, None, setting.otherwise, where, _said(reaching))


def _said(alternatives: list[tuple[_Said, ...]]) -> str:
    return " or ".join(" and ".join(map(_words, tests)) or "always" for tests in alternatives)


def _alternatives(
    found: _Setting, given: str, sm: int | None, platform: Mapping[str, tuple[int, ...]]
) -> tuple[tuple[str | None, tuple[_Said, ...]], ...]:
    """(value, the tests left undecided) of one setting on `sm`; none where a
    test is false there or the user gave the setting. A value the code
    chooses by a test (`"trtllm" if major >= 10 else "fa3"`) is one
    alternative per branch."""
    given_text, given_holds = _stripped(parse_expression(given).body, True)
    left: list[_Said] = []
    for test in found.tests:
        text, holds = _stripped(test.node, test.holds)
        if text == given_text:
            if holds == given_holds:
                return ()  # set only where the user gave it: not a default
            continue
        value = _evaluated(test.node, test.locals, sm, platform)
        if value is UNKNOWN:
            left.append(test.said())
        elif bool(value) != test.holds:
            return ()
    out: list[tuple[str | None, tuple[_Said, ...]]] = []
    stack: list[tuple[ast.expr, Mapping[str, _Held], tuple[_Said, ...], int]] = [
        (found.value, found.locals, tuple(left), 0)
    ]
    while stack:
        node, bound, tests, depth = stack.pop()
        held = bound.get(node.id) if isinstance(node, ast.Name) else None
        if isinstance(held, _Local) and depth < _MAX_FOLLOWED:
            stack.append((held.expr, held.locals, tests, depth + 1))
        elif isinstance(node, ast.IfExp) and depth < _MAX_FOLLOWED:
            decided = _evaluated(node.test, bound, sm, platform)
            said = ast.unparse(node.test)
            if decided is UNKNOWN or decided:
                stack.append((node.body, bound, tests if decided is not UNKNOWN else (*tests, (said, True)), depth + 1))
            if decided is UNKNOWN or not decided:
                stack.append(
                    (node.orelse, bound, tests if decided is not UNKNOWN else (*tests, (said, False)), depth + 1)
                )
        else:
            value = _evaluated(node, bound, sm, platform)
            out.append((value if isinstance(value, str) else None, tests))
    return tuple(sorted(out, key=lambda item: (item[0] or "", item[1])))  # one order on every SM


def _stripped(node: ast.expr, holds: bool) -> tuple[str, bool]:
    """A test without its `not`s: (what it tests, whether that holds)."""
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        node, holds = node.operand, not holds
    return ast.unparse(node), holds


def _merged(alternatives: list[tuple[_Said, ...]]) -> list[tuple[_Said, ...]]:
    """`A and T or A and not (T)` is `A`: two alternatives that differ by one
    test and its negation are one (a value set alike for either KV cache dtype)."""
    merged = list(dict.fromkeys(alternatives))
    changed = True
    while changed:
        changed = False
        for i, one in enumerate(merged):
            for j in range(i + 1, len(merged)):
                other = merged[j]
                if len(one) != len(other):
                    continue
                differing = [k for k, (a, b) in enumerate(zip(one, other, strict=True)) if a != b]
                if len(differing) != 1:
                    continue
                k = differing[0]
                if one[k][0] == other[k][0]:  # the same test, holding in one and not in the other
                    merged[i] = one[:k] + one[k + 1 :]
                    del merged[j]
                    changed = True
                    break
            if changed:
                break
    return list(dict.fromkeys(merged))
