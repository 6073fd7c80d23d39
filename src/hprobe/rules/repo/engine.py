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
from hprobe.rules.repo.mapping import EngineSetting
from hprobe.rules.repo.scan import RepoIndex


def read_reach(index: RepoIndex, setting: EngineSetting) -> Reach:
    """The setting's default, as this tree's source gives it."""
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
    module = index.by_suffix(setting.declared_in)
    if module is None:
        return None
    for node in ast.walk(module.tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == setting.name and node.value is not None:
            value = node.value.value if isinstance(node.value, ast.Constant) else ast.unparse(node.value)
            return value, f"{module.path}:{node.lineno}"
    return None


def _returned_strings(index: RepoIndex, dotted: str) -> tuple[list[str], str] | None:
    """The string constants a function returns, and where it is defined."""
    module_name, _, function = dotted.rpartition(".")
    module = index.by_suffix(module_name)
    if module is None or function not in module.functions:
        return None
    info = module.functions[function]
    values = [n.value.value for n in ast.walk(info.node) if isinstance(n, ast.Return) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)]
    return list(dict.fromkeys(values)), f"{module.path}:{info.node.lineno}"
