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
from dataclasses import dataclass, field

from hprobe.rules.repo.tree.scan import ModuleInfo, RepoIndex

VLLM_REGISTRY = "model_executor.models.registry"


@dataclass(frozen=True)
class Served:
    """The architectures a tree registers, and where it registers them."""

    architectures: frozenset[str]
    where: str  # the registry file, or "EntryClass declarations under DIR"
    # architecture -> the module (or package) that implements it, as the tree
    # names modules: code under it runs only for those architectures
    homes: dict[str, str] = field(default_factory=dict)

    def only_for(self, module: str) -> frozenset[str] | None:
        """The architectures whose implementation `module` is part of, or None
        when it belongs to no model's (shared code: every model's)."""
        owners = frozenset(
            arch for arch, home in self.homes.items() if home and module == home or module.startswith(home + ".")
        )
        return owners or None


def served_architectures(index: RepoIndex, wanted: set[str]) -> Served | None:
    """What the tree's registry names, or None when it has none hprobe reads.
    `wanted`: the architectures of the models judged (SGLang's declarations
    are read only in the files that mention one of them)."""
    registry = index.by_suffix(VLLM_REGISTRY)
    if registry is not None:
        registered = _registry_homes(registry)
        return Served(frozenset(registered), registry.path, registered)
    # Only the files that name a wanted architecture are parsed (SGLang has
    # hundreds of model files); the rest are searched as text.
    declaring = index.mentioning("EntryClass")
    if not declaring:
        return None
    homes: dict[str, str] = {}
    for module in index.modules_mentioning(wanted) if wanted else []:
        homes.update(dict.fromkeys(_entry_classes(module), module.name))
    folders = sorted({path.rpartition("/")[0] or "." for path in declaring})
    where = f"the EntryClass declarations under {folders[0]}" + (
        f" and {len(folders) - 1} more folders" if len(folders) > 1 else ""
    )
    return Served(frozenset(homes), where, homes)


def _registry_homes(module: ModuleInfo) -> dict[str, str]:
    """Each key of the registry's dicts with the module its value names:
    `("deepseek_v2", cls)` beside the registry, `("vllm.models.deepseek_v4",
    cls)` as written; a key whose value is not such a tuple has no home."""
    beside = module.name.rpartition(".")[0]
    # What the index puts before the package's own names: "vllm." (the tree
    # holds the package), "" (the tree is the package), "tree.vllm." (the
    # package one folder down). Absolute names are re-rooted onto it.
    above = module.name[: -len(VLLM_REGISTRY)]
    package = above.rstrip(".").rpartition(".")[2]
    homes: dict[str, str] = {}
    for node in module.tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if not isinstance(value, ast.Dict):
            continue
        for key, item in zip(value.keys, value.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue
            named = item.elts[0] if isinstance(item, ast.Tuple) and item.elts else None
            if isinstance(named, ast.Constant) and isinstance(named.value, str) and named.value:
                first, _, rest = named.value.partition(".")
                if not rest:
                    homes[key.value] = f"{beside}.{named.value}"
                elif first == package:
                    homes[key.value] = above[: -len(package) - 1] + named.value
                else:
                    homes[key.value] = rest  # the tree is the package: its names start below it
            else:
                homes.setdefault(key.value, "")
    return homes


def _entry_classes(module: ModuleInfo) -> set[str]:
    value = module.constants.get("EntryClass")
    if value is None:
        return set()
    items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
    return {
        item.id if isinstance(item, ast.Name) else item.attr
        for item in items
        if isinstance(item, (ast.Name, ast.Attribute))
    }
