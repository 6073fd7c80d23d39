"""A padding table read from a consumer's source tree: padding classes found with
`ast`, their rule evaluated statically per head count, mapped to kernel probes
by a mapping file. Nothing in the tree is imported or executed."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError, NothingToCheck
from ..fileio import read_text, regular_file
from ..sm import parse_sm
from ..tables import shipped_data
from ..tables.interface import RuleSource
from ..tables.model import Backend, Model, NoPadding, PaddingRule, PaddingTable, PadMap, PadTo, Where
from ..tables.toml_source import _Parser, parse_toml
from ..tables.toml_writer import table_toml as write_table_toml
from .evaluate import NotEvaluable, Raises, evaluate
from .pin import RepoPin, find_pin
from .scan import DEFAULT_EXCLUDES, ClassInfo, FunctionInfo, RepoIndex

# In a subfolder of the shipped data: `matrices/*.toml` are padding tables, this is not one.
DEFAULT_MAPPING = ("mappings", "vllm.toml")
PROBE_RANGE = range(1, 257)  # counts a rule is evaluated over to recover its shape


@dataclass
class ClassMapping:
    name: str
    kernel: str | None  # None: hprobe cannot probe the kernel behind it
    sms: tuple[int, ...] = ()
    options: tuple[tuple[str, str | int], ...] = ()
    unprobed: str | None = None  # why not (FlashMLA, AITER, vLLM's own CUTLASS op)
    models: tuple[str, ...] = ()  # restrict to these models; () = every model
    where: Where | None = None


@dataclass
class Mapping:
    path: str
    method: str
    models: list[Model]
    classes: dict[str, ClassMapping]


@dataclass
class PaddingClass:
    """One class whose padding method the tree defines or inherits."""

    cls: ClassInfo
    function: FunctionInfo  # where the rule is written (maybe in a base class)
    path: str  # the function's file as shown to the user
    rule: PaddingRule | None = None
    outputs: dict[int, int | Raises] = field(default_factory=dict)
    problem: NotEvaluable | None = None
    mapping: ClassMapping | None = None

    @property
    def where(self) -> Where:
        return Where(self.path, self.function.line)

    @property
    def status(self) -> str:
        if self.problem is not None:
            return "not-evaluable"
        if self.mapping is None:
            return "unmapped"
        return "unprobed" if self.mapping.kernel is None else "mapped"


@dataclass
class RepoTables:
    root: str
    table: PaddingTable
    classes: list[PaddingClass]
    pin: RepoPin | None
    notes: list[str]
    index: RepoIndex | None = None  # the parsed tree, for `suggest --diff`

    def to_dict(self) -> dict:
        return {
            "root": self.root,
            "pin": {"spec": self.pin.spec, "source": self.pin.source} if self.pin else None,
            "classes": [
                {
                    "class": c.cls.name,
                    "module": c.cls.module.name,
                    "defined_at": str(c.where),
                    "status": c.status,
                    "rule": c.rule.describe() if c.rule else None,
                    "not_evaluable": str(c.problem) if c.problem else None,
                    "kernel": c.mapping.kernel if c.mapping else None,
                    "unprobed": c.mapping.unprobed if c.mapping else None,
                }
                for c in self.classes
            ],
            "notes": self.notes,
        }


def load_mapping(path: Path | None = None) -> Mapping:
    if path is None:
        path = shipped_data(*DEFAULT_MAPPING)
    text = read_text(path, "mapping file")
    data = parse_toml(text, path)
    unknown = sorted(set(data) - {"mapping", "model", "class"})
    if unknown:
        raise InputError(f"{path}: unknown top-level key {unknown[0]!r} (known: class, mapping, model)")
    # Models are written as in a padding table; its parser checks them.
    raw_models = data.get("model", [])
    raw_models = [raw_models] if isinstance(raw_models, dict) else raw_models
    if not isinstance(raw_models, list):
        raise InputError(f"{path}: [[model]] must be a list of tables")
    parser = _Parser(str(path), text)
    models = [parser.model(raw, i) for i, raw in enumerate(raw_models)]
    header = data.get("mapping", {})
    if not isinstance(header, dict) or set(header) - {"method"}:
        raise InputError(f"{path}: [mapping] takes only `method` (the padding method's name)")
    method = header.get("method", "get_padded_num_q_heads")
    if not isinstance(method, str) or not method.isidentifier():
        raise InputError(f"{path}: [mapping] method must be a Python method name")
    classes: dict[str, ClassMapping] = {}
    raw_classes = data.get("class", [])
    if not isinstance(raw_classes, list):
        raise InputError(f"{path}: [[class]] must be a list of tables")
    for i, raw in enumerate(raw_classes):
        where = Where(str(path), _line_of(text, "[[class]]", i))
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise InputError(f"{where}: [[class]] needs a name")
        name = raw["name"]
        if "unprobed" in raw:
            classes[name] = ClassMapping(name, None, unprobed=str(raw["unprobed"]), where=where)
            continue
        kernel, sms = raw.get("kernel"), raw.get("sm")
        if not isinstance(kernel, str) or not isinstance(sms, list) or not sms:
            raise InputError(f"{where}: class {name}: needs kernel and sm (or unprobed = \"why\")")
        try:
            parsed = tuple(parse_sm(str(s)).number for s in sms)
        except InputError as exc:
            raise InputError(f"{where}: class {name}: {exc.message}") from None
        options = []
        for key, value in raw.items():
            if key in ("name", "kernel", "sm", "models"):
                continue
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise InputError(f"{where}: class {name}: unknown key {key!r}, or an axis value that is not a string or integer")
            options.append((key, value))
        restrict = raw.get("models", [])
        if not isinstance(restrict, list) or not all(isinstance(m, str) for m in restrict):
            raise InputError(f"{where}: class {name}: models must be a list of model names")
        classes[name] = ClassMapping(name, kernel, parsed, tuple(options), None, tuple(restrict), where)
    return Mapping(str(path), method, models, classes)


def extract(root: Path, mapping: Mapping, excludes: tuple[str, ...] = ()) -> RepoTables:
    """Find the padding classes under `root`, evaluate their rules, build a table."""
    if not root.exists():
        raise InputError(f"--repo {root}: no such file or directory")
    if not root.is_dir() and not (regular_file(root) and root.suffix == ".py"):
        raise InputError(f"--repo {root}: neither a directory nor a .py file")
    index = RepoIndex.build(root, DEFAULT_EXCLUDES + tuple(excludes))
    notes: list[str] = []
    found: list[PaddingClass] = []
    for cls in index.classes_with(mapping.method):
        function = _resolve_method(index, cls, mapping.method)
        if function is None:
            continue
        path = os.path.normpath(str(root / function.module.path)) if root.is_dir() else str(root)
        item = PaddingClass(cls, function, path, mapping=mapping.classes.get(cls.qualname) or mapping.classes.get(cls.name))
        _evaluate_rule(index, item)
        fewer = [(n, v) for n, v in item.outputs.items() if isinstance(v, int) and v < n]
        if fewer:
            n, v = fewer[0]
            notes.append(f"{cls.qualname} ({item.where}) returns {v} for {n} heads: fewer than it has")
        found.append(item)
    if not found:
        unparsed = f"; {len(index.problems)} file(s) not parsed: {index.problems[0]}" if index.problems else ""
        raise NothingToCheck(f"--repo {root}: no class defines or inherits `{mapping.method}` ({len(index.files)} Python files read{unparsed})")
    found.sort(key=lambda c: (c.cls.module.name, c.cls.name))
    notes[:0] = index.problems  # files are parsed on demand: known only now
    for name in mapping.classes:
        if not any(name in (c.cls.name, c.cls.qualname) for c in found):
            unparsed = f" ({len(index.problems)} file(s) could not be parsed; see above)" if index.problems else ""
            notes.append(f"the mapping names {name}, which this tree does not define{unparsed}")
    pin = find_pin(root)
    backends: list[Backend] = []
    for item in found:
        m = item.mapping
        if m is None or m.kernel is None or item.rule is None:
            continue
        backends.append(Backend(item.cls.qualname, m.kernel, m.sms, item.rule, item.where, m.options))
    table = PaddingTable(
        name=f"{root.name or root} ({mapping.method})",
        source=f"{root} read with ast; mapping {mapping.path}",
        path=str(root),
        requires_flashinfer=pin.spec if pin else None,
        models=list(mapping.models),
        backends=backends,
    )
    return RepoTables(str(root), table, found, pin, notes, index)


def _resolve_method(index: RepoIndex, cls: ClassInfo, method: str) -> FunctionInfo | None:
    for klass in index.mro(cls):
        if method in klass.methods:
            fn = klass.methods[method]
            return None if fn.abstract else fn
    return None


def _evaluate_rule(index: RepoIndex, item: PaddingClass) -> None:
    for n in PROBE_RANGE:
        result = evaluate(index, item.cls, item.function, n)
        if isinstance(result, NotEvaluable):
            # Shown as the tree's path, like the rule's own location.
            item.problem = NotEvaluable(_shown(item, result.path), result.line, result.what)
            item.outputs.clear()
            return
        item.outputs[n] = result
    item.rule = _rule_of(item.outputs)


def _shown(item: PaddingClass, rel: str) -> str:
    """`rel` (relative to the tree root) as the user named the tree."""
    own = item.function.module.path
    root = item.path[: -len(own)] if item.path.endswith(own) else ""
    return os.path.normpath(root + rel) if root else rel


def _rule_of(outputs: dict[int, int | Raises]) -> PaddingRule:
    """The simplest rule that reproduces every evaluated output: pad_to when the
    function rounds up to a fixed set, else an explicit pad_map."""
    if all(v == n for n, v in outputs.items()):
        return NoPadding()
    values = sorted({v for v in outputs.values() if isinstance(v, int)})
    if values:
        candidate = PadTo(tuple(values))
        if all(candidate.pad(n) == (v if isinstance(v, int) else None) for n, v in outputs.items()):
            return candidate
    return PadMap(tuple((n, v) for n, v in sorted(outputs.items()) if isinstance(v, int)))


def _line_of(text: str, header: str, index: int) -> int | None:
    seen = -1
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip() == header:
            seen += 1
            if seen == index:
                return number
    return None


def table_toml(tables: RepoTables) -> str:
    """The extracted table as TOML that `hprobe check --table` reads back to the
    same table, with each backend's source line and the classes not probed as
    comments."""
    t = tables.table
    header = ["Extracted by `hprobe table extract`: padding rules read from source with ast.", f"Tree: {tables.root}"]
    if t.requires_flashinfer and tables.pin:
        header.append(f"requires_flashinfer read from {tables.pin.source}")
    footer = []
    others = [c for c in tables.classes if c.status != "mapped"]
    if others:
        footer.append("Not probed:")
        for c in others:
            detail = {
                "unprobed": f"{c.mapping.unprobed if c.mapping else ''}",
                "unmapped": "not in the mapping file",
                "not-evaluable": f"not evaluable: {c.problem}",
            }[c.status]
            rule = f"; {c.rule.describe()}" if c.rule else ""
            footer.append(f"  {c.cls.name} ({c.where}){rule}: {detail}")
    return write_table_toml(t, header, {b.name: str(b.where) for b in t.backends}, footer)


class RepoRuleSource(RuleSource):
    """The padding classes of a source tree, read with `ast` and mapped to kernels;
    `found` keeps the full record (classes, pin, what was not probed)."""

    def __init__(self, root: Path, mapping: Mapping, excludes: tuple[str, ...] = ()):
        self.root, self.mapping, self.excludes = root, mapping, excludes
        self.found: RepoTables | None = None

    def collect(self) -> PaddingTable:
        self.found = extract(self.root, self.mapping, self.excludes)
        return self.found.table



