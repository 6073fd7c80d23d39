"""The model architectures an engine tree can load, read from its own model
registry with `ast` (never imported): a model is judged on a tree only where
the tree serves one of its architectures (models/mla.toml's
`architectures`), so a finding never rests on a model the engine cannot load.

- vLLM: the string keys of the module-level dicts of
  `model_executor/models/registry.py` (`"DeepseekV3ForCausalLM": ("deepseek_v2",
  "DeepseekV3ForCausalLM")`);
- SGLang: the classes a model module names as its `EntryClass` (`EntryClass =
  [DeepseekV3ForCausalLM]`), which SGLang's registry imports by that name.

A tree with neither (a fixture, a single package) says nothing: its models
are all judged, and a note says the registry was not found."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from hprobe.rules.repo.scan import ModuleInfo, RepoIndex

VLLM_REGISTRY = "model_executor.models.registry"


@dataclass(frozen=True)
class Served:
    """The architectures a tree registers, and where it registers them."""

    architectures: frozenset[str]
    where: str  # the registry file, or "EntryClass declarations under DIR"


def served_architectures(index: RepoIndex, wanted: set[str]) -> Served | None:
    """What the tree's registry names, or None when it has none hprobe reads.
    `wanted`: the architectures of the models judged (SGLang's declarations
    are read only in the files that mention one of them)."""
    registry = index.by_suffix(VLLM_REGISTRY)
    if registry is not None:
        return Served(frozenset(_registry_keys(registry)), registry.path)
    # Only the files that name a wanted architecture are parsed (SGLang has
    # hundreds of model files); the rest are searched as text.
    declaring = index.mentioning("EntryClass")
    if not declaring:
        return None
    found: set[str] = set()
    for module in index.modules_mentioning(wanted) if wanted else []:
        found |= _entry_classes(module)
    folders = sorted({path.rpartition("/")[0] or "." for path in declaring})
    where = f"the EntryClass declarations under {folders[0]}" + (f" and {len(folders) - 1} more folders" if len(folders) > 1 else "")
    return Served(frozenset(found), where)


def _registry_keys(module: ModuleInfo) -> set[str]:
    keys: set[str] = set()
    for node in module.tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.Dict):
            keys |= {k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return keys


def _entry_classes(module: ModuleInfo) -> set[str]:
    value = module.constants.get("EntryClass")
    if value is None:
        return set()
    items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
    return {item.id if isinstance(item, ast.Name) else item.attr for item in items if isinstance(item, (ast.Name, ast.Attribute))}
