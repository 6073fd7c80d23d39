"""Mapping files: which padding class of a consumer's tree feeds which kernel
probe on which SMs, and what its rule reads besides n (instance attributes,
extra arguments, platform predicates, a settings registry)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from hprobe.model.errors import InputError
from hprobe.model.padding import Model, Where
from hprobe.model.sm import parse_sm
from hprobe.rules import shipped_data
from hprobe.rules.toml_source import _Parser, parse_toml
from hprobe.system.fileio import read_text

# In a subfolder of the shipped data: `matrices/*.toml` are padding tables, these are not.
DEFAULT_MAPPING = ("mappings", "vllm.toml")


@dataclass(frozen=True)
class SettingsSpec:
    """Where a consumer's settings registry lives, as its mapping declares it."""

    module: str  # dotted, e.g. sglang.srt.environ
    object: str  # the registry instance the code reads: envs
    accessor: str  # the method that returns a value: get


@dataclass(frozen=True)
class EngineSetting:
    name: str  # the option's field name in the engine (dsv4_attn_backend)
    flag: str  # as users pass it (--dsv4-attn-backend)
    value: str  # under which the count reaches FlashInfer (trtllm)
    declared_in: str  # dotted module declaring the field and its default
    otherwise: str  # what the rule serves under any other value
    resolved_by: str | None = None  # dotted function resolving the default (auto)


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
    reaches_when: str | None = None  # the [[engine_setting]] under which the count reaches FlashInfer

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
    engine_settings: dict[str, EngineSetting] = field(default_factory=dict)

    @property
    def bound(self) -> bool:
        return bool(self.instance)


MAPPING_KEYS = ("class", "engine_setting", "instance", "mapping", "model", "parameters", "platform", "settings")


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
    platform = _platforms(data.get("platform", []), path, parser)
    settings = _settings_spec(data.get("settings"), path)
    engine_settings = _engine_settings(data.get("engine_setting", []), path, parser)
    classes: dict[str, list[ClassMapping]] = {}
    raw_classes = data.get("class", [])
    if not isinstance(raw_classes, list):
        raise InputError(f"{path}: [[class]] must be a list of tables")
    for i, raw in enumerate(raw_classes):
        where = parser.locate("class", i)
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise InputError(f"{where}: [[class]] needs a name")
        entry = _class_entry(raw, where, set(parameters))
        if entry.reaches_when is not None and entry.reaches_when not in engine_settings:
            raise InputError(f"{where}: class {entry.name}: reaches_flashinfer_when = {entry.reaches_when!r} names no [[engine_setting]]")
        classes.setdefault(raw["name"], []).append(entry)
    return Mapping(str(path), method, models, classes, package, instance, parameters, platform, settings, engine_settings)


def _engine_settings(raw: object, path: Path, parser: _Parser) -> dict[str, EngineSetting]:
    if not isinstance(raw, list):
        raise InputError(f"{path}: [[engine_setting]] must be a list of tables")
    out = {}
    required, optional = {"name", "flag", "value", "declared_in", "otherwise"}, {"resolved_by"}
    for i, item in enumerate(raw):
        where = parser.locate("engine_setting", i)
        if not isinstance(item, dict) or not required <= set(item) or set(item) - required - optional or not all(isinstance(v, str) and v for v in item.values()):
            raise InputError(f"{where}: [[engine_setting]] takes name, flag, value, declared_in, otherwise (strings) and optionally resolved_by")
        out[item["name"]] = EngineSetting(item["name"], item["flag"], item["value"], item["declared_in"], item["otherwise"], item.get("resolved_by"))
    return out


BINDABLE = ("n", "total", "tp")  # what an instance attribute can be bound to


def _string_table(data: dict, key: str, path: Path, allowed: tuple[str, ...] | None = None) -> dict[str, str]:
    raw = data.get(key, {})
    if not isinstance(raw, dict) or not all(isinstance(k, str) and k.isidentifier() and isinstance(v, str) for k, v in raw.items()):
        raise InputError(f"{path}: [{key}] maps names to strings")
    for name, value in raw.items():
        if allowed is not None and value not in allowed:
            raise InputError(f"{path}: [{key}] {name} = {value!r}: expected one of {', '.join(allowed)}")
    return dict(raw)


def _platforms(raw: object, path: Path, parser: _Parser) -> list[tuple[str, tuple[int, ...]]]:
    if not isinstance(raw, list):
        raise InputError(f"{path}: [[platform]] must be a list of tables")
    out = []
    for i, item in enumerate(raw):
        where = parser.locate("platform", i)
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
    reaches_when = raw.get("reaches_flashinfer_when")
    if reaches_when is not None and not isinstance(reaches_when, str):
        raise InputError(f"{where}: class {name}: reaches_flashinfer_when names an [[engine_setting]]")
    options = []
    for key, value in raw.items():
        if key in ("name", "kernel", "sm", "models", "phase", "args", "reaches_flashinfer_when"):
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise InputError(f"{where}: class {name}: unknown key {key!r}, or an axis value that is not a string or integer")
        options.append((key, value))
    restrict = raw.get("models", [])
    if not isinstance(restrict, list) or not all(isinstance(m, str) for m in restrict):
        raise InputError(f"{where}: class {name}: models must be a list of model names")
    return ClassMapping(name, kernel, parsed, tuple(options), None, tuple(restrict), where, phase, tuple(args.items()), reaches_when)


SHIPPED_MAPPINGS = ("vllm.toml", "sglang.toml")


def shipped_mappings() -> list[Mapping]:
    return [load_mapping(shipped_data("mappings", name)) for name in SHIPPED_MAPPINGS]


