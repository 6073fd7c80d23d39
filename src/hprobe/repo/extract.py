"""A padding table read from a consumer's source tree: padding classes found with
`ast`, their rule evaluated statically per head count, mapped to kernel probes
by a mapping file. Nothing in the tree is imported or executed."""

from __future__ import annotations

import ast
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
from .bound import BoundRule, SettingsSpec, evaluate_entries, load_settings, shown_path
from .evaluate import FlashinferSource, NotEvaluable, Raises, evaluate
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
    phase: str | None = None  # "decode" / "prefill": one class judged once per phase
    args: tuple[tuple[str, str | int], ...] = ()  # values of the rule's extra parameters

    @property
    def label(self) -> str:
        return f" [{self.phase}]" if self.phase else ""


@dataclass
class Mapping:
    path: str
    method: str
    models: list[Model]
    classes: dict[str, list[ClassMapping]]  # class name -> its entries (one per kernel, SMs and phase)
    package: str | None = None  # the engine package the mapping reads ("vllm", "sglang")
    # A rule whose head count is an instance attribute, not an argument:
    instance: dict[str, str] = field(default_factory=dict)  # self.<attr> -> "n", "total" or "tp"
    parameters: dict[str, str] = field(default_factory=dict)  # extra parameter -> the axis giving its value
    platform: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)  # predicate source -> SMs where true
    settings: SettingsSpec | None = None

    @property
    def bound(self) -> bool:
        return bool(self.instance)


@dataclass
class PaddingClass:
    """One class whose padding method the tree defines or inherits."""

    cls: ClassInfo
    function: FunctionInfo  # where the rule is written (maybe in a base class)
    path: str  # the function's file as shown to the user
    rule: PaddingRule | None = None
    outputs: dict[int, int | Raises] = field(default_factory=dict)
    problem: NotEvaluable | None = None
    entries: list[ClassMapping] = field(default_factory=list)
    bound: list[BoundRule] = field(default_factory=list)  # rules evaluated per entry, SM and model
    reads_flashinfer: bool = False  # the rule reads the judged release's own tables

    @property
    def mapping(self) -> ClassMapping | None:
        return self.entries[0] if self.entries else None

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
    mapping: Mapping | None = None  # what was read with, to read again per release
    excludes: tuple[str, ...] = ()
    overrides: dict[str, str] = field(default_factory=dict)
    flashinfer_version: str | None = None  # the release the rules were evaluated against

    @property
    def per_release(self) -> bool:
        """Some rule reads flashinfer's own tables: its padding depends on the release."""
        return any(c.reads_flashinfer for c in self.classes)

    def against(self, release: FlashinferSource, label: str) -> RepoTables:
        """The same tree read again with its rules evaluated against `release`,
        as a table judged on that release only."""
        assert self.mapping is not None
        again = extract(Path(self.root), self.mapping, self.excludes, release, self.overrides)
        again.table.name = f"{self.table.name} on flashinfer {release.version}"
        again.table.releases = (label,)
        again.flashinfer_version = release.version
        return again

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
                    "bound": [b.to_dict() for b in c.bound],
                    "reads_flashinfer": c.reads_flashinfer,
                    "not_evaluable": str(c.problem) if c.problem else None,
                    "kernel": c.mapping.kernel if c.mapping else None,
                    "unprobed": c.mapping.unprobed if c.mapping else None,
                }
                for c in self.classes
            ],
            "notes": self.notes,
        }


MAPPING_KEYS = ("class", "instance", "mapping", "model", "parameters", "platform", "settings")


def load_mapping(path: Path | None = None) -> Mapping:
    if path is None:
        path = shipped_data(*DEFAULT_MAPPING)
    text = read_text(path, "mapping file")
    data = parse_toml(text, path)
    unknown = sorted(set(data) - set(MAPPING_KEYS))
    if unknown:
        raise InputError(f"{path}: unknown top-level key {unknown[0]!r} (known: {', '.join(MAPPING_KEYS)})")
    # Models are written as in a padding table; its parser checks them.
    raw_models = data.get("model", [])
    raw_models = [raw_models] if isinstance(raw_models, dict) else raw_models
    if not isinstance(raw_models, list):
        raise InputError(f"{path}: [[model]] must be a list of tables")
    parser = _Parser(str(path), text)
    models = [parser.model(raw, i) for i, raw in enumerate(raw_models)]
    header = data.get("mapping", {})
    if not isinstance(header, dict) or set(header) - {"method", "package"}:
        raise InputError(f"{path}: [mapping] takes `method` (the padding method's name) and `package` (the engine's package)")
    method = header.get("method", "get_padded_num_q_heads")
    if not isinstance(method, str) or not method.isidentifier():
        raise InputError(f"{path}: [mapping] method must be a Python method name")
    package = header.get("package")
    if package is not None and (not isinstance(package, str) or not package.isidentifier()):
        raise InputError(f"{path}: [mapping] package must be a Python package name")
    instance = _string_table(data, "instance", path, allowed=BINDABLE)
    parameters = _string_table(data, "parameters", path)
    platform = _platforms(data.get("platform", []), path, text)
    settings = _settings_spec(data.get("settings"), path)
    classes: dict[str, list[ClassMapping]] = {}
    raw_classes = data.get("class", [])
    if not isinstance(raw_classes, list):
        raise InputError(f"{path}: [[class]] must be a list of tables")
    for i, raw in enumerate(raw_classes):
        where = Where(str(path), _line_of(text, "[[class]]", i))
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise InputError(f"{where}: [[class]] needs a name")
        classes.setdefault(raw["name"], []).append(_class_entry(raw, where, set(parameters)))
    return Mapping(str(path), method, models, classes, package, instance, parameters, platform, settings)


BINDABLE = ("n", "total", "tp")  # what an instance attribute can be bound to


def _string_table(data: dict, key: str, path: Path, allowed: tuple[str, ...] | None = None) -> dict[str, str]:
    raw = data.get(key, {})
    if not isinstance(raw, dict) or not all(isinstance(k, str) and k.isidentifier() and isinstance(v, str) for k, v in raw.items()):
        raise InputError(f"{path}: [{key}] maps names to strings")
    for name, value in raw.items():
        if allowed is not None and value not in allowed:
            raise InputError(f"{path}: [{key}] {name} = {value!r}: expected one of {', '.join(allowed)}")
    return dict(raw)


def _platforms(raw: object, path: Path, text: str) -> list[tuple[str, tuple[int, ...]]]:
    if not isinstance(raw, list):
        raise InputError(f"{path}: [[platform]] must be a list of tables")
    out = []
    for i, item in enumerate(raw):
        where = Where(str(path), _line_of(text, "[[platform]]", i))
        if not isinstance(item, dict) or set(item) != {"expr", "sm"} or not isinstance(item["expr"], str) or not isinstance(item["sm"], list):
            raise InputError(f"{where}: [[platform]] takes expr (the predicate as the source writes it) and sm (where it is true)")
        try:
            expr = ast.unparse(ast.parse(item["expr"], mode="eval").body)  # normalised as the evaluator sees it
            sms = tuple(parse_sm(str(x)).number for x in item["sm"])
        except SyntaxError:
            raise InputError(f"{where}: [[platform]] expr {item['expr']!r} is not a Python expression") from None
        except InputError as exc:
            raise InputError(f"{where}: [[platform]] {exc.message}") from None
        out.append((expr, sms))
    return out


def _settings_spec(raw: object, path: Path) -> SettingsSpec | None:
    if raw is None:
        return None
    keys = {"module", "object", "accessor"}
    if not isinstance(raw, dict) or set(raw) != keys or not all(isinstance(v, str) and v for v in raw.values()):
        raise InputError(f"{path}: [settings] takes module (the registry's module), object (its instance, e.g. envs) and accessor (e.g. get)")
    return SettingsSpec(raw["module"], raw["object"], raw["accessor"])


def _class_entry(raw: dict, where: Where, parameters: set[str]) -> ClassMapping:
    name = raw["name"]
    if "unprobed" in raw:
        return ClassMapping(name, None, unprobed=str(raw["unprobed"]), where=where)
    kernel, sms = raw.get("kernel"), raw.get("sm")
    if not isinstance(kernel, str) or not isinstance(sms, list) or not sms:
        raise InputError(f"{where}: class {name}: needs kernel and sm (or unprobed = \"why\")")
    try:
        parsed = tuple(parse_sm(str(s)).number for s in sms)
    except InputError as exc:
        raise InputError(f"{where}: class {name}: {exc.message}") from None
    phase = raw.get("phase")
    if phase is not None and not isinstance(phase, str):
        raise InputError(f"{where}: class {name}: phase must be a string (decode, prefill)")
    args = raw.get("args", {})
    if not isinstance(args, dict) or not all(k in parameters and isinstance(v, (str, int)) and not isinstance(v, bool) for k, v in args.items()):
        raise InputError(f"{where}: class {name}: args gives values to the parameters [parameters] declares, as strings or integers")
    options = []
    for key, value in raw.items():
        if key in ("name", "kernel", "sm", "models", "phase", "args"):
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise InputError(f"{where}: class {name}: unknown key {key!r}, or an axis value that is not a string or integer")
        options.append((key, value))
    restrict = raw.get("models", [])
    if not isinstance(restrict, list) or not all(isinstance(m, str) for m in restrict):
        raise InputError(f"{where}: class {name}: models must be a list of model names")
    return ClassMapping(name, kernel, parsed, tuple(options), None, tuple(restrict), where, phase, tuple(args.items()))


def extract(root: Path, mapping: Mapping, excludes: tuple[str, ...] = (), flashinfer: FlashinferSource | None = None, overrides: dict[str, str] | None = None) -> RepoTables:
    """Find the padding classes under `root`, evaluate their rules, build a table.
    `flashinfer`: the release judged, for rules that read its tables;
    `overrides`: --set values for the consumer's settings."""
    if not root.exists():
        raise InputError(f"--repo {root}: no such file or directory")
    if not root.is_dir() and not (regular_file(root) and root.suffix == ".py"):
        raise InputError(f"--repo {root}: neither a directory nor a .py file")
    index = RepoIndex.build(root, DEFAULT_EXCLUDES + tuple(excludes))
    notes: list[str] = []
    found: list[PaddingClass] = []
    settings = load_settings(index, mapping.settings, overrides or {}) if mapping.bound else None
    if overrides and not mapping.bound:
        raise InputError(f"--set {next(iter(overrides))}: the mapping's rules read no settings")
    for cls in index.classes_with(mapping.method):
        function = _resolve_method(index, cls, mapping.method)
        if function is None:
            continue
        path = os.path.normpath(str(root / function.module.path)) if root.is_dir() else str(root)
        entries = mapping.classes.get(cls.qualname) or mapping.classes.get(cls.name) or []
        item = PaddingClass(cls, function, path, entries=list(entries))
        if mapping.bound:
            evaluate_entries(index, item, mapping, settings, flashinfer)
            if item.problem is not None:
                item.problem = NotEvaluable(shown_path(item, item.problem.path), item.problem.line, item.problem.what)
        else:
            _evaluate_rule(index, item)
        fewer = [(n, v) for n, v in item.outputs.items() if isinstance(v, int) and v < n]
        if fewer:
            n, v = fewer[0]
            notes.append(f"{cls.qualname} ({item.where}) returns {v} for {n} heads: fewer than it has")
        found.append(item)
    if not found:
        raise NothingToCheck(f"--repo {root}: no class defines or inherits `{mapping.method}` ({_read_summary(index)})")
    found.sort(key=lambda c: (c.cls.module.name, c.cls.name))
    notes[:0] = index.problems  # files are parsed on demand: known only now
    for name in mapping.classes:
        if not any(name in (c.cls.name, c.cls.qualname) for c in found):
            unparsed = f" ({len(index.problems)} file(s) could not be parsed; see above)" if index.problems else ""
            notes.append(f"the mapping names {name}, which this tree does not define{unparsed}")
    pin = find_pin(root)
    backends: list[Backend] = []
    for item in found:
        backends.extend(_backends(item))
    table = PaddingTable(
        name=f"{root.name or root} ({mapping.method})",
        source=f"{root} read with ast; mapping {_mapping_label(mapping)}",
        path=str(root),
        requires_flashinfer=pin.spec if pin else None,
        models=list(mapping.models),
        backends=backends,
    )
    if any(c.reads_flashinfer for c in found) and flashinfer is None:
        notes.append("some rules read flashinfer's own tables: they are evaluated against each release judged")
    return RepoTables(str(root), table, found, pin, notes, index, mapping, tuple(excludes), dict(overrides or {}), flashinfer.version if flashinfer else None)


def _mapping_label(mapping: Mapping) -> str:
    """A shipped mapping by its name (the same on every machine), another by its path."""
    shipped = Path(str(shipped_data("mappings", "vllm.toml"))).parent
    return f"hprobe's mappings/{Path(mapping.path).name}" if Path(mapping.path).parent == shipped else mapping.path


def _read_summary(index: RepoIndex) -> str:
    unparsed = f"; {len(index.problems)} file(s) not parsed: {index.problems[0]}" if index.problems else ""
    return f"{len(index.files)} Python files read{unparsed}"


def _backends(item: PaddingClass) -> list[Backend]:
    m = item.mapping
    if item.bound:
        names = [f"{item.cls.qualname}{b.entry.label}" for b in item.bound]
        out = []
        for name, b in zip(names, item.bound, strict=True):
            assert b.entry.kernel is not None  # bound rules exist for probed entries only
            if names.count(name) > 1:  # the entry split by SM or model: say which
                name = f"{name} ({b.conditions.split(',')[0]}{' ' + '/'.join(b.models) if b.models else ''})"
            options = tuple(kv for kv in b.entry.options)
            out.append(Backend(name, b.entry.kernel, b.sms, b.rule, item.where, options, models=b.models, branches=b.branches))
        return out
    if m is None or m.kernel is None or item.rule is None:
        return []
    return [Backend(item.cls.qualname, m.kernel, m.sms, item.rule, item.where, m.options)]


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
            item.problem = NotEvaluable(shown_path(item, result.path), result.line, result.what)
            item.outputs.clear()
            return
        item.outputs[n] = result
    item.rule = _rule_of(item.outputs)


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
    if tables.flashinfer_version:
        header.append(f"Rules evaluated against flashinfer {tables.flashinfer_version}: they read its own tables, so another release may pad differently")
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
    # A rule evaluated per binding names each branch it took; others, their line.
    comments = {b.name: "; ".join(dict.fromkeys(why for _, why in b.branches)) or str(b.where) for b in t.backends}
    return write_table_toml(t, header, comments, footer)


SHIPPED_MAPPINGS = ("vllm.toml", "sglang.toml")


def shipped_mappings() -> list[Mapping]:
    return [load_mapping(shipped_data("mappings", name)) for name in SHIPPED_MAPPINGS]


def _mentions_package(root: Path, package: str) -> bool:
    """The tree is that engine's package, holds it, or is an unpacked wheel of it."""
    base = root if root.is_dir() else root.parent
    return (
        base.name == package
        or (base / package).is_dir()
        or any(base.glob(f"{package}-*.dist-info"))
        or any(base.parent.glob(f"{package}-*.dist-info"))
    )


def extract_any(root: Path, mapping: Mapping | None, excludes: tuple[str, ...] = (), flashinfer: FlashinferSource | None = None, overrides: dict[str, str] | None = None) -> RepoTables:
    """`extract` with the mapping given, else the shipped mapping of the engine
    the tree is (vLLM or SGLang, by package name), else each shipped mapping in
    turn. Nothing found: one line naming the methods and mappings tried."""
    if mapping is not None:
        return extract(root, mapping, excludes, flashinfer, overrides)
    candidates = shipped_mappings()
    detected = [m for m in candidates if m.package and _mentions_package(root, m.package)]
    tried = detected if len(detected) == 1 else candidates
    last = ""
    for m in tried:
        try:
            found = extract(root, m, excludes, flashinfer, overrides if m.bound else None)
        except NothingToCheck as exc:
            # What was read (the same tree each time; files are parsed only when
            # they name the method, so keep the fullest account).
            last = max(last, exc.message.split("` (", 1)[-1].rstrip(")"), key=len)
            continue
        if overrides and not m.bound:
            raise InputError(f"--set {next(iter(overrides))}: the rules of this tree ({Path(m.path).name}) read no settings")
        return found
    methods = ", ".join(f"`{m.method}` ({Path(m.path).name})" for m in tried)
    raise NothingToCheck(f"--repo {root}: no class defines or inherits {methods} ({last}); give --mapping for another engine")


class RepoRuleSource(RuleSource):
    """The padding classes of a source tree, read with `ast` and mapped to kernels;
    `found` keeps the full record (classes, pin, what was not probed)."""

    def __init__(self, root: Path, mapping: Mapping | None, excludes: tuple[str, ...] = (), overrides: dict[str, str] | None = None):
        self.root, self.mapping, self.excludes, self.overrides = root, mapping, excludes, overrides or {}
        self.found: RepoTables | None = None

    def collect(self) -> PaddingTable:
        self.found = extract_any(self.root, self.mapping, self.excludes, None, self.overrides)
        return self.found.table



