"""Mapping files: which padding class of a consumer's tree feeds which kernel
probe on which SMs, and what its rule reads besides n (instance attributes,
extra arguments, platform predicates, a settings registry)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from hprobe.model.errors import InputError
from hprobe.model.padding import Model, Where
from hprobe.model.sm import parse_sm
from hprobe.rules import shipped_data
from hprobe.rules.toml_source import _Parser, parse_toml
from hprobe.system.fileio import read_text
from hprobe.system.parsing import parse_expression

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
    """An engine option under which a path reaches FlashInfer, and where its
    default is read: a field's declaration (`declared_in`, with `resolved_by`
    resolving an `auto`), the first entry of a priority list a function
    returns under a branch (`priority_in`, `branch`: vLLM's attention backend
    priorities), or an assignment of a key (`assigned_in`, `key`: SGLang's
    model overrides). `default` words it where no reader fits, with `source`."""

    name: str  # the option's field name in the engine (dsv4_attn_backend)
    flag: str  # as users pass it (--dsv4-attn-backend)
    value: str  # under which the count reaches FlashInfer (trtllm)
    declared_in: str | None  # dotted module declaring the field and its default
    otherwise: str  # what the rule serves under any other value
    resolved_by: str | None = None  # dotted function resolving the default (auto)
    priority_in: str | None = None  # dotted function returning a priority list
    branch: str | None = None  # the `if` test (as written) under which that list is returned
    # The list variable whose first entry is the default under that branch,
    # where the engine binds it in `if`s of its own (vLLM's sparse_backends).
    priority_list: str | None = None
    assigned_in: str | None = None  # dotted module assigning `overrides[key] = value`
    key: str | None = None
    default: str | None = None  # the default in words, where no reader fits
    default_reaches: bool | None = None  # with `default`: whether FlashInfer runs by default
    source: str | None = None  # with `default`: where the engine says so
    # With `assigned_in`: the local that is true where the user gave the
    # setting (SGLang's `user_set_decode`); its tests are the user's choice,
    # every other test on the way is read, and decided on the paths' SMs
    # where the engine's code decides it.
    given: str | None = None


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
    model_family: str | None = None  # serves the models of this family only (models.toml)

    @property
    def label(self) -> str:
        return f" [{self.phase}]" if self.phase else ""


# How a call path's head count is decided (a [[call]] entry's `heads`).
HEADS_UNPADDED = "unpadded"  # the engine's per-rank count, heads // tp, as it is
HEADS_RULE = "rule"  # a padding class's rule (`padded_by`), judged by that class's [[class]] entries
HEADS_INLINE = "inline"  # a padding written inline in a method (`inline`, `variable`)
HEADS_KINDS = (HEADS_UNPADDED, HEADS_RULE, HEADS_INLINE)


@dataclass(frozen=True)
class InlineRule:
    """A padding written inline: the statements of `function` (Class.method)
    that assign `variable`, evaluated per count; `size_arg`: the variable is an
    allocation whose positional argument of that index is the count; where no
    assignment runs, the count is unpadded."""

    function: str
    variable: str
    size_arg: int | None = None


@dataclass(frozen=True)
class CallMapping:
    """What decides a call path's head count, which kernel variant it reaches
    on which SMs, and under which engine setting: one [[call]] entry."""

    module: str  # dotted suffix of the calling module
    function: str  # qualname of the calling function; nested functions match too
    entry: str  # the FlashInfer name called
    where: Where
    kernel: str | None = None  # None: unresolved (`unresolved` says why)
    sms: tuple[int, ...] = ()
    options: tuple[tuple[str, str | int], ...] = ()
    unresolved: str | None = None
    heads: str = HEADS_UNPADDED
    padded_by: str | None = None  # HEADS_RULE: the class whose padding method gives the count
    inline: InlineRule | None = None  # HEADS_INLINE
    backend_by: str | None = None  # a function of the calling module that picks `backend` from the count
    backend_none: str = "auto"  # what the engine passes when that function returns None
    conditions: tuple[tuple[str, bool | int | str], ...] = ()  # expression text -> its value on this path
    model_family: str | None = None
    phase: str | None = None
    reaches_when: str | None = None
    note: str | None = None
    tps: tuple[int, ...] = ()  # the engine takes this path at these TP degrees only; () = any
    # (model family, engine setting): the models of that family reach
    # FlashInfer on this path under that setting instead (an engine's
    # per-model defaults: SGLang's Kimi K3 overrides its own backends).
    reaches_for: tuple[tuple[str, str], ...] = ()

    def reach_setting(self, families: tuple[str, ...]) -> str | None:
        """The setting under which a model of `families` reaches FlashInfer here."""
        return next((setting for family, setting in self.reaches_for if family in families), self.reaches_when)

    @property
    def site(self) -> str:
        return f"{self.module}:{self.function}"

    def matches(self, module: str, function: str, entry: str) -> bool:
        same_module = module == self.module or module.endswith("." + self.module) or self.module.endswith("." + module)
        return (
            same_module
            and entry == self.entry
            and (function == self.function or function.startswith(self.function + "."))
        )


@dataclass(frozen=True)
class RunValue:
    """A value the engine fills at run time from its settings, which no static
    reading ties to them (the drafter's tokens per request, from its draft
    length): a head-count trail that reaches `name` in `function` of `module`
    is evaluated at each of `values`, and each answer names the value it took."""

    module: str  # dotted suffix of the module
    function: str  # qualname of the function that binds or takes `name`
    name: str  # the parameter or local the engine fills
    shown: str  # how answers name it ("k")
    values: tuple[bool | int | str, ...]
    means: str  # what it is, and where the engine bounds it, in words

    def at(self, module: str, function: str) -> bool:
        same = module == self.module or module.endswith("." + self.module)
        return same and function == self.function


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
    calls: list[CallMapping] = field(default_factory=list)  # call paths that hand FlashInfer a head count
    models_shipped: bool = False  # the models are hprobe's table (models/mla.toml), not the mapping's own
    versions: str | None = None  # the engine releases it describes (a specifier), None: any
    # Where the engine hands its attention the layer's query, which carries the
    # model's per-rank count: function name -> parameter ("forward_mqa(q)").
    # The engine calls these through its layer objects, which no static reading
    # ties to a call; a head-count trail (heads.py) starts there.
    layer_query: dict[str, str] = field(default_factory=dict)
    run_values: tuple[RunValue, ...] = ()

    @property
    def bound(self) -> bool:
        return bool(self.instance)


MAPPING_KEYS = (
    "call",
    "class",
    "engine_setting",
    "instance",
    "mapping",
    "model",
    "parameters",
    "platform",
    "run_value",
    "settings",
)


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
    shipped = not models
    if shipped:
        # No [[model]] of its own: the models hprobe knows, each path judged
        # for the models of its family.
        from hprobe.rules.models import shipped_models

        models = list(shipped_models())
    method, package, versions, layer_query = _header(data.get("mapping", {}), path)
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
            raise InputError(
                f"{where}: class {entry.name}: reaches_flashinfer_when = {entry.reaches_when!r} names no "
                "[[engine_setting]]"
            )
        classes.setdefault(raw["name"], []).append(entry)
    calls = _calls(data.get("call", []), path, parser, engine_settings)
    return Mapping(
        str(path),
        method,
        models,
        classes,
        package,
        instance,
        parameters,
        platform,
        settings,
        engine_settings,
        calls,
        shipped,
        versions,
        layer_query,
        _run_values(data.get("run_value", []), path, parser),
    )


def _run_values(raw: object, path: Path, parser: _Parser) -> tuple[RunValue, ...]:
    if not isinstance(raw, list):
        raise InputError(f"{path}: [[run_value]] must be a list of tables")
    out = []
    for i, entry in enumerate(raw):
        where = parser.locate("run_value", i)
        usage = (
            f'{where}: [[run_value]] takes at ("module:function"), name, shown, means (strings) and values '
            "(a non-empty list of booleans, integers or strings)"
        )
        if not isinstance(entry, dict) or set(entry) != {"at", "name", "shown", "values", "means"}:
            raise InputError(usage)
        texts = [entry[k] for k in ("at", "name", "shown", "means")]
        values = entry["values"]
        if (
            not all(isinstance(t, str) and t for t in texts)
            or not isinstance(values, list)
            or not values
            or not all(isinstance(v, (bool, int, str)) for v in values)
        ):
            raise InputError(usage)
        module, colon, function = entry["at"].partition(":")
        if not colon or not all(p.isidentifier() for p in (*module.split("."), *function.split("."), entry["name"])):
            raise InputError(usage)
        out.append(RunValue(module, function, entry["name"], entry["shown"], tuple(values), entry["means"]))
    return tuple(out)


_READERS = (("declared_in",), ("priority_in", "branch"), ("assigned_in", "key"), ("default", "source"))


_LAYER_QUERY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _header(header: object, path: Path) -> tuple[str, str | None, str | None, dict[str, str]]:
    """[mapping]: (method, package, versions, layer_query)."""
    if not isinstance(header, dict) or set(header) - {"method", "package", "versions", "layer_query"}:
        raise InputError(
            f"{path}: [mapping] takes `method` (the padding method's name), `package` (the engine's package), "
            "`versions` (the engine releases it describes)"
            ' and `layer_query` (where the layer\'s query enters: ["forward_mqa(q)"])'
        )
    raw_roots = header.get("layer_query", [])
    if not isinstance(raw_roots, list) or not all(isinstance(r, str) and _LAYER_QUERY.fullmatch(r) for r in raw_roots):
        raise InputError(f'{path}: [mapping] layer_query must be a list of "function(parameter)" strings')
    layer_query = {m.group(1): m.group(2) for r in raw_roots if (m := _LAYER_QUERY.fullmatch(r))}
    versions = header.get("versions")
    if versions is not None:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            SpecifierSet(str(versions))
        except InvalidSpecifier:
            raise InputError(
                f'{path}: [mapping] versions {versions!r} is not a version specifier such as ">=0.5.20"'
            ) from None
    method = header.get("method", "get_padded_num_q_heads")
    if not isinstance(method, str) or not method.isidentifier():
        raise InputError(f"{path}: [mapping] method must be a Python method name")
    package = header.get("package")
    if package is not None and (not isinstance(package, str) or not package.isidentifier()):
        raise InputError(f"{path}: [mapping] package must be a Python package name")
    return method, package, str(versions) if versions is not None else None, layer_query


def _calls(
    raw_calls: object, path: Path, parser: _Parser, engine_settings: dict[str, EngineSetting]
) -> list[CallMapping]:
    if not isinstance(raw_calls, list):
        raise InputError(f"{path}: [[call]] must be a list of tables")
    calls = []
    for i, raw in enumerate(raw_calls):
        call = _call_entry(raw, parser.locate("call", i))
        for named in (call.reaches_when, *(setting for _, setting in call.reaches_for)):
            if named is not None and named not in engine_settings:
                raise InputError(
                    f"{call.where}: call {call.site}: reaches_flashinfer_when names no [[engine_setting]] {named!r}"
                )
        calls.append(call)
    return calls


def _engine_settings(raw: object, path: Path, parser: _Parser) -> dict[str, EngineSetting]:
    if not isinstance(raw, list):
        raise InputError(f"{path}: [[engine_setting]] must be a list of tables")
    out = {}
    required = {"name", "flag", "value", "otherwise"}
    optional = {
        "declared_in",
        "resolved_by",
        "priority_in",
        "branch",
        "priority_list",
        "assigned_in",
        "key",
        "default",
        "default_reaches",
        "source",
        "given",
    }
    usage = (
        f"{path}: [[engine_setting]] takes name, flag, value, otherwise (strings) and where its default is read: "
        "declared_in (and resolved_by), priority_in and branch (and priority_list), assigned_in and key (and given), "
        "or default and source (with default_reaches)"
    )
    for i, item in enumerate(raw):
        where = parser.locate("engine_setting", i)
        if not isinstance(item, dict) or not required <= set(item) or set(item) - required - optional:
            raise InputError(f"{where}: {usage.removeprefix(f'{path}: ')}")
        if not all(isinstance(v, str) and v for k, v in item.items() if k != "default_reaches") or not isinstance(
            item.get("default_reaches", False), bool
        ):
            raise InputError(f"{where}: {usage.removeprefix(f'{path}: ')}")
        readers = [keys for keys in _READERS if keys[0] in item]
        if (
            len(readers) != 1
            or not all(k in item for k in readers[0])
            or ("branch" in item and not {"priority_in", "assigned_in"} & set(item))
            or ("priority_list" in item and "priority_in" not in item)
            or ("given" in item and "assigned_in" not in item)
        ):
            raise InputError(f"{where}: {usage.removeprefix(f'{path}: ')}")
        for expression in ("given", "branch"):
            if expression in item:
                try:
                    normalised_expression(item[expression])
                except SyntaxError as exc:
                    raise InputError(f"{where}: {expression} {item[expression][:60]!r}: {exc.msg}") from None
        out[item["name"]] = EngineSetting(
            item["name"],
            item["flag"],
            item["value"],
            item.get("declared_in"),
            item["otherwise"],
            item.get("resolved_by"),
            item.get("priority_in"),
            item.get("branch"),
            item.get("priority_list"),
            item.get("assigned_in"),
            item.get("key"),
            item.get("default"),
            item.get("default_reaches"),
            item.get("source"),
            item.get("given"),
        )
    return out


BINDABLE = ("n", "total", "tp")  # what an instance attribute can be bound to


def _string_table(data: dict, key: str, path: Path, allowed: tuple[str, ...] | None = None) -> dict[str, str]:
    raw = data.get(key, {})
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and k.isidentifier() and isinstance(v, str) for k, v in raw.items()
    ):
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
        if (
            not isinstance(item, dict)
            or set(item) != {"expr", "sm"}
            or not isinstance(item["expr"], str)
            or not isinstance(item["sm"], list)
        ):
            raise InputError(
                f"{where}: [[platform]] takes expr (the predicate as the source writes it) and sm (where it is true)"
            )
        try:
            expr = normalised_expression(item["expr"])  # as the evaluator sees it
            sms = tuple(parse_sm(str(x)).number for x in item["sm"])
        except SyntaxError as exc:
            raise InputError(f"{where}: [[platform]] expr {item['expr'][:60]!r}: {exc.msg}") from None
        except InputError as exc:
            raise InputError(f"{where}: [[platform]] {exc.message}") from None
        out.append((expr, sms))
    return out


def _settings_spec(raw: object, path: Path) -> SettingsSpec | None:
    if raw is None:
        return None
    keys = {"module", "object", "accessor"}
    if not isinstance(raw, dict) or set(raw) != keys or not all(isinstance(v, str) and v for v in raw.values()):
        raise InputError(
            f"{path}: [settings] takes module (the registry's module), object (its instance, e.g. envs) and accessor "
            "(e.g. get)"
        )
    return SettingsSpec(raw["module"], raw["object"], raw["accessor"])


def _kernel_and_sms(raw: dict, what: str, instead: str) -> tuple[str, tuple[int, ...]]:
    """An entry's kernel and SMs, or one input error naming the entry (`what`)."""
    kernel, sms = raw.get("kernel"), raw.get("sm")
    if not isinstance(kernel, str) or not isinstance(sms, list) or not sms:
        raise InputError(f"{what}: needs kernel and sm (or {instead})")
    return kernel, _sms(sms, what)


def _sms(sms: object, what: str) -> tuple[int, ...]:
    """An entry's `sm` list, or one input error naming the entry (`what`)."""
    if not isinstance(sms, list) or not sms:
        raise InputError(f"{what}: sm must be a non-empty list of SMs")
    try:
        return tuple(parse_sm(str(s)).number for s in sms)
    except InputError as exc:
        raise InputError(f"{what}: {exc.message}") from None


def _class_entry(raw: dict, where: Where, parameters: set[str]) -> ClassMapping:
    name = raw["name"]
    if "unprobed" in raw:
        return ClassMapping(name, None, unprobed=str(raw["unprobed"]), where=where)
    kernel, parsed = _kernel_and_sms(raw, f"{where}: class {name}", 'unprobed = "why"')
    phase = raw.get("phase")
    if phase is not None and not isinstance(phase, str):
        raise InputError(f"{where}: class {name}: phase must be a string (decode, prefill)")
    args = raw.get("args", {})
    if not isinstance(args, dict) or not all(
        k in parameters and isinstance(v, (str, int)) and not isinstance(v, bool) for k, v in args.items()
    ):
        raise InputError(
            f"{where}: class {name}: args gives values to the parameters [parameters] declares, as strings or integers"
        )
    reaches_when = raw.get("reaches_flashinfer_when")
    if reaches_when is not None and not isinstance(reaches_when, str):
        raise InputError(f"{where}: class {name}: reaches_flashinfer_when names an [[engine_setting]]")
    family = raw.get("model_family")
    if family is not None and not isinstance(family, str):
        raise InputError(f"{where}: class {name}: model_family names a family of models (dense-mla, dsa, dsv4, ...)")
    options = []
    for key, value in raw.items():
        if key in ("name", "kernel", "sm", "models", "phase", "args", "reaches_flashinfer_when", "model_family"):
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise InputError(
                f"{where}: class {name}: unknown key {key!r}, or an axis value that is not a string or integer"
            )
        options.append((key, value))
    restrict = raw.get("models", [])
    if not isinstance(restrict, list) or not all(isinstance(m, str) for m in restrict):
        raise InputError(f"{where}: class {name}: models must be a list of model names")
    return ClassMapping(
        name,
        kernel,
        parsed,
        tuple(options),
        None,
        tuple(restrict),
        where,
        phase,
        tuple(args.items()),
        reaches_when,
        family,
    )


_CALL_KEYS = frozenset(
    {
        "site",
        "entry",
        "kernel",
        "sm",
        "unresolved",
        "heads",
        "padded_by",
        "inline",
        "variable",
        "size_arg",
        "backend_by",
        "backend_none",
        "conditions",
        "model_family",
        "phase",
        "reaches_flashinfer_when",
        "reaches_flashinfer_when_family",
        "note",
        "tp",
    }
)


def _call_entry(raw: object, where: Where) -> CallMapping:
    """One [[call]] entry: where (`site` = "module:Class.function", `entry`), and
    either `unresolved = "why"` or the kernel, SMs, axis values and what decides
    the count. Keys that are not the entry's own are probe axes."""
    if not isinstance(raw, dict) or not isinstance(raw.get("site"), str) or not isinstance(raw.get("entry"), str):
        raise InputError(
            f'{where}: [[call]] needs site ("module:Class.function") and entry (the FlashInfer name it calls)'
        )
    module, colon, function = raw["site"].partition(":")
    if (
        not colon
        or not module
        or not function
        or not all(part.isidentifier() for part in (*module.split("."), *function.split(".")))
    ):
        raise InputError(
            f"{where}: call site {raw['site']!r}: expected module:Class.function, such as "
            "vllm.v1.attention.backends.mla.flashinfer_mla:FlashInferMLAImpl.forward_mqa"
        )
    texts = {
        k: raw.get(k)
        for k in (
            "unresolved",
            "padded_by",
            "inline",
            "variable",
            "backend_by",
            "backend_none",
            "model_family",
            "phase",
            "reaches_flashinfer_when",
            "note",
        )
    }
    if not all(v is None or (isinstance(v, str) and v) for v in texts.values()):
        raise InputError(
            f"{where}: call {raw['site']}: "
            f"{', '.join(k for k, v in texts.items() if v is not None and not (isinstance(v, str) and v))} must be a "
            "non-empty string"
        )
    base = {"module": module, "function": function, "entry": raw["entry"], "where": where, "note": texts["note"]}
    if texts["unresolved"] is not None:
        extra = set(raw) - {"site", "entry", "unresolved", "note", "model_family", "sm", "kernel"}
        if extra:
            raise InputError(
                f"{where}: call {raw['site']}: an unresolved path takes only site, entry, unresolved, note, "
                f"model_family, sm and kernel, not {sorted(extra)[0]}"
            )
        # `sm`: the SMs on which the engine takes the path (not judged only there).
        sms = _sms(raw["sm"], f"{where}: call {raw['site']}") if "sm" in raw else ()
        return CallMapping(**base, unresolved=texts["unresolved"], model_family=texts["model_family"], sms=sms)
    kernel, parsed = _kernel_and_sms(raw, f"{where}: call {raw['site']}", 'unresolved = "why"')
    heads, inline = _call_heads(raw, where, texts)
    normalised = _call_conditions(raw, where)
    per_family = raw.get("reaches_flashinfer_when_family", {})
    if not isinstance(per_family, dict) or not all(
        isinstance(k, str) and k and isinstance(v, str) and v for k, v in per_family.items()
    ):
        raise InputError(
            f"{where}: call {raw['site']}: reaches_flashinfer_when_family maps a model family to an [[engine_setting]]"
        )
    tps = raw.get("tp", [])
    if not isinstance(tps, list) or not all(isinstance(t, int) and not isinstance(t, bool) and t > 0 for t in tps):
        raise InputError(
            f"{where}: call {raw['site']}: tp lists the TP degrees the engine takes this path at, e.g. [8, 16]"
        )
    options = []
    for key, value in raw.items():
        if key in _CALL_KEYS:
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise InputError(
                f"{where}: call {raw['site']}: unknown key {key!r}, or an axis value that is not a string or integer"
            )
        options.append((key, value))
    return CallMapping(
        **base,
        kernel=kernel,
        sms=parsed,
        options=tuple(options),
        heads=heads,
        padded_by=texts["padded_by"],
        inline=inline,
        backend_by=texts["backend_by"],
        backend_none=texts["backend_none"] or "auto",
        conditions=normalised,
        model_family=texts["model_family"],
        phase=texts["phase"],
        reaches_when=texts["reaches_flashinfer_when"],
        tps=tuple(tps),
        reaches_for=tuple(per_family.items()),
    )


SHIPPED_MAPPINGS = ("vllm.toml", "sglang.toml", "sglang-0.5.18.toml")


def shipped_mappings() -> list[Mapping]:
    return [load_mapping(shipped_data("mappings", name)) for name in SHIPPED_MAPPINGS]


def _call_heads(raw: dict, where: Where, texts: dict) -> tuple[str, InlineRule | None]:
    heads = raw.get("heads", HEADS_UNPADDED)
    if heads not in HEADS_KINDS:
        raise InputError(f"{where}: call {raw['site']}: heads = {heads!r}: expected one of {', '.join(HEADS_KINDS)}")
    if (heads == HEADS_RULE) != (texts["padded_by"] is not None):
        raise InputError(
            f'{where}: call {raw["site"]}: heads = "rule" goes with padded_by (the class whose padding method gives '
            "the count)"
        )
    if heads != HEADS_INLINE:
        if any(raw.get(k) is not None for k in ("inline", "variable", "size_arg")):
            raise InputError(f'{where}: call {raw["site"]}: inline, variable and size_arg go with heads = "inline"')
        return heads, None
    size_arg = raw.get("size_arg")
    if (
        texts["inline"] is None
        or texts["variable"] is None
        or (size_arg is not None and (not isinstance(size_arg, int) or isinstance(size_arg, bool) or size_arg < 0))
    ):
        raise InputError(
            f'{where}: call {raw["site"]}: heads = "inline" takes inline (Class.method), variable and optionally '
            "size_arg"
        )
    return heads, InlineRule(texts["inline"], texts["variable"], size_arg)


def _call_conditions(raw: dict, where: Where) -> tuple[tuple[str, bool | int | str], ...]:
    """`conditions = { "pool.uniform_fp8" = false }`: expression text (as
    `ast.unparse` writes it) -> its value on this path."""
    conditions = raw.get("conditions", {})
    if not isinstance(conditions, dict) or not all(isinstance(v, (bool, int, str)) for v in conditions.values()):
        raise InputError(
            f"{where}: call {raw['site']}: conditions maps expressions as the source writes them to their values"
        )
    try:
        return tuple((normalised_expression(k), v) for k, v in conditions.items())
    except SyntaxError as exc:
        raise InputError(f"{where}: call {raw['site']}: a condition: {exc.msg}") from None


def normalised_expression(text: str) -> str:
    """A Python expression as `ast.unparse` writes it (how the evaluator
    matches source text), refused as a SyntaxError when it is not one or nests
    deeper than a source file may (scan.MAX_NESTING): every walk of it is then
    bounded."""
    from hprobe.rules.repo.tree.scan import MAX_NESTING

    if len(text) > 10_000:
        raise SyntaxError("longer than 10,000 characters, not an expression a rule reads")
    try:
        tree = parse_expression(text)
    except (RecursionError, MemoryError, ValueError):
        raise SyntaxError("nested too deeply for Python's parser") from None
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            raise SyntaxError(f"nested deeper than {MAX_NESTING} levels")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return ast.unparse(tree.body)
