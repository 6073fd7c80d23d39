"""Padding tables written as TOML files (the schema is in README.md)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from hprobe.model.errors import InputError
from hprobe.model.padding import (
    MAX_HEADS,
    AttentionLayer,
    Backend,
    Model,
    NoPadding,
    PaddingRule,
    PaddingTable,
    PadMap,
    PadMultiple,
    PadTile,
    PadTo,
    Provenance,
    Reach,
    Where,
)
from hprobe.model.sm import parse_sm
from hprobe.rules.interface import RuleInputs, RuleSource, SourceKind
from hprobe.system.fileio import read_text

_TOML_LINE = re.compile(r"\(at line (\d+), column \d+\)")


class TomlTableSource(RuleSource):
    """Reads one TOML padding table. Nothing in the file is executed."""

    def __init__(self, path: Path):
        self.path = path

    def collect(self) -> PaddingTable:
        text = read_text(self.path, "table file")
        return _Parser(str(self.path), text).table(parse_toml(text, self.path))


class TomlSourceKind(SourceKind):
    """--table FILE (repeatable), or every shipped table when none is named: always given."""

    name = "tables"

    def given(self, inputs: RuleInputs) -> bool:
        return True

    def make(self, inputs: RuleInputs) -> list[RuleSource]:
        return list(table_sources(list(inputs.tables)))


def shipped_data(*parts: str) -> Path:
    """A file or folder of the shipped data (package `hprobe.matrices`, the
    top-level matrices/ of the source tree), in a checkout, an editable install
    or an installed wheel alike."""
    from importlib.resources import files

    return Path(str(files("hprobe.matrices").joinpath(*parts)))


def table_sources(paths: list[Path] | None) -> list[TomlTableSource]:
    """The given table files, or every shipped table when none is given."""
    if not paths:
        directory = shipped_data()
        paths = sorted(directory.glob("*.toml"))
        if not paths:
            raise InputError(f"no padding tables found in {directory}; pass --table FILE")
    return [TomlTableSource(Path(p)) for p in paths]


def parse_toml(text: str, path: Path) -> dict[str, Any]:
    """TOML the user wrote, or one InputError naming the file and line."""
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise InputError(f"{path}: malformed TOML: nested too deeply") from None
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        line = _TOML_LINE.search(message)
        message = _TOML_LINE.sub("", message).strip()
        where = f"{path}:{line.group(1)}" if line else str(path)
        raise InputError(f"{where}: malformed TOML: {message}") from None


class _Parser:
    def __init__(self, path: str, text: str):
        self.path = path
        self.lines = text.splitlines()

    # -- locating keys, so errors can name a line ---------------------------------

    def locate(self, header: str, index: int = 0, key: str | None = None) -> Where:
        """Line of `key` inside the index-th `[header]`/`[[header]]` block."""
        seen = -1
        start = None
        for number, raw in enumerate(self.lines, 1):
            line = raw.strip()
            if line in (f"[{header}]", f"[[{header}]]"):
                seen += 1
                if seen == index:
                    start = number
                    if key is None:
                        return Where(self.path, number)
                    continue
            if start is not None:
                if line.startswith("["):
                    break
                if key is not None and re.match(rf"^{re.escape(key)}\s*=", line):
                    return Where(self.path, number)
        return Where(self.path, start)

    def _fail(self, where: Where, message: str) -> InputError:
        return InputError(f"{where}: {message}")

    def _no_unknown(self, raw: Any, known: frozenset[str], where: Where, block: str) -> None:
        """A misspelt key (`nmae`, `tpp`) is an error, never a silent default."""
        if isinstance(raw, dict):
            unknown = sorted(set(raw) - known)
            if unknown:
                raise self._fail(where, f"{block}: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")

    # -- schema -------------------------------------------------------------------

    def table(self, data: dict[str, Any]) -> PaddingTable:
        meta = data.get("table", {})
        if not isinstance(meta, dict):
            raise self._fail(Where(self.path), "[table] must be a table")
        self._no_unknown(meta, _TABLE_KEYS, self.locate("table"), "[table]")
        name = meta.get("name", Path(self.path).stem)
        source = meta.get("source", "")
        if not isinstance(name, str) or not isinstance(source, str):
            raise self._fail(self.locate("table"), "[table] name and source must be strings")
        pin = meta.get("requires_flashinfer")
        if pin is not None:
            if not isinstance(pin, str):
                raise self._fail(self.locate("table", 0, "requires_flashinfer"), "requires_flashinfer must be a string")
            try:
                SpecifierSet(pin)
            except InvalidSpecifier:
                raise self._fail(
                    self.locate("table", 0, "requires_flashinfer"),
                    f"requires_flashinfer {pin!r} is not a PEP 440 version specifier (e.g. '>=0.6.14')",
                ) from None
        provenance = self._provenance(meta.get("provenance", []))
        unknown = set(data) - {"table", "model", "backend"}
        if unknown:
            raise self._fail(Where(self.path), f"unknown top-level key(s): {', '.join(sorted(unknown))}")

        raw_models = data.get("model")
        if isinstance(raw_models, dict):
            raw_models = [raw_models]
        if not raw_models or not isinstance(raw_models, list):
            raise self._fail(Where(self.path), "a table needs a [model] (or [[model]] entries)")
        models = [self.model(raw, i) for i, raw in enumerate(raw_models)]

        raw_backends = data.get("backend")
        if not raw_backends or not isinstance(raw_backends, list):
            raise self._fail(Where(self.path), "a table needs at least one [[backend]]")
        backends = [self.backend(raw, i) for i, raw in enumerate(raw_backends)]
        table = PaddingTable(name, source, self.path, pin, models, backends)
        table.provenance = provenance
        return table

    def _provenance(self, raw: Any) -> tuple[Provenance, ...]:
        """`provenance = [{ engine, release, file, line, says }]`: where in a
        released engine each fact of the table is written."""
        keys = {"engine", "release", "file", "line", "says"}
        if not isinstance(raw, list) or not all(isinstance(item, dict) and set(item) == keys for item in raw):
            raise self._fail(
                self.locate("table", 0, "provenance"), "provenance is a list of { engine, release, file, line, says }"
            )
        out = []
        for item in raw:
            if not all(
                isinstance(item[k], str) and item[k] for k in ("engine", "release", "file", "says")
            ) or not _positive_int(item["line"]):
                raise self._fail(
                    self.locate("table", 0, "provenance"),
                    "provenance: engine, release, file and says are strings, line a positive integer",
                )
            out.append(Provenance(item["engine"], item["release"], item["file"], item["line"], item["says"]))
        return tuple(out)

    def model(self, raw: Any, index: int) -> Model:
        where = self.locate("model", index)
        if not isinstance(raw, dict):
            raise self._fail(where, "[model] must be a table")
        self._no_unknown(raw, _MODEL_KEYS, where, "[model]")
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise self._fail(where, "model needs a name")
        heads = raw.get("num_q_heads")
        if not isinstance(heads, int) or not _positive_int(heads):
            raise self._fail(
                self.locate("model", index, "num_q_heads"), f"model {name}: num_q_heads must be a positive integer"
            )
        if heads > MAX_HEADS:
            raise self._fail(
                self.locate("model", index, "num_q_heads"),
                f"model {name}: num_q_heads {heads} is above {MAX_HEADS}, more than any model has",
            )
        tp = raw.get("tp", [1])
        tp = [tp] if isinstance(tp, int) and not isinstance(tp, bool) else tp
        if not isinstance(tp, list) or not tp or not all(_positive_int(t) and t <= MAX_HEADS for t in tp):
            raise self._fail(
                self.locate("model", index, "tp"),
                f"model {name}: tp must be a list of positive integers up to {MAX_HEADS}",
            )
        for t in tp:
            if heads % t:
                raise self._fail(
                    self.locate("model", index, "tp"),
                    f"model {name}: {heads} query heads do not divide evenly over tp={t}",
                )
        families = raw.get("families", [])
        if not isinstance(families, list) or not all(isinstance(f, str) and f for f in families):
            raise self._fail(
                self.locate("model", index, "families"),
                f'model {name}: families must be a list of names such as ["dense-mla"]',
            )
        attributes = raw.get("attributes", {})
        if not isinstance(attributes, dict) or not all(
            isinstance(k, str) and k.isidentifier() and isinstance(v, (bool, int, str)) for k, v in attributes.items()
        ):
            raise self._fail(
                self.locate("model", index, "attributes"),
                f"model {name}: attributes maps config names to true/false, integers or strings",
            )
        kv = raw.get("num_kv_heads", 1)
        if not _positive_int(kv) or heads % kv:
            raise self._fail(
                self.locate("model", index, "num_kv_heads"),
                f"model {name}: num_kv_heads must be a positive integer that divides num_q_heads",
            )
        architectures = raw.get("architectures", [])
        if (
            not isinstance(architectures, list)
            or not all(isinstance(a, str) and a.isidentifier() for a in architectures)
            or not isinstance(raw.get("architectures_cited", ""), str)
        ):
            raise self._fail(
                self.locate("model", index, "architectures"),
                f'model {name}: architectures is a list of class names such as ["DeepseekV3ForCausalLM"]',
            )
        layers = self._layers(raw, index, name, heads, tp)
        citation = raw.get("config", "")
        if (
            not isinstance(citation, str)
            or not isinstance(raw.get("field", ""), str)
            or not isinstance(raw.get("corroborated", ""), str)
        ):
            raise self._fail(where, f"model {name}: config, field and corroborated are strings")
        if citation and raw.get("field"):
            citation = f"{citation} ({raw['field']})"
        return Model(
            name,
            heads,
            tuple(tp),
            where,
            tuple(families),
            tuple(sorted(attributes.items())),
            citation,
            tuple(architectures),
            layers=layers,
        )

    def _layers(
        self, raw: dict[str, Any], index: int, name: str, heads: int, tp: list[int]
    ) -> tuple[AttentionLayer, ...]:
        """A GQA/MHA model's kinds of attention layer: `layers = [{name, num_kv_heads,
        head_dim, sinks}, ...]`, or one kind from the model's own `num_kv_heads`,
        `head_dim` and `sinks`; none (MLA) without a head dim."""
        if "layers" in raw and "head_dim" in raw:
            raise self._fail(self.locate("model", index, "layers"), f"model {name}: give layers or head_dim, not both")
        if "layers" in raw:
            items = raw["layers"]
            if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items):
                raise self._fail(
                    self.locate("model", index, "layers"),
                    f"model {name}: layers is a list of tables such as "
                    '{name = "global", num_kv_heads = 4, head_dim = 512}',
                )
        elif "head_dim" in raw:
            items = [{"name": "attention", **{k: raw[k] for k in ("num_kv_heads", "head_dim", "sinks") if k in raw}}]
        else:
            if "sinks" in raw:
                raise self._fail(self.locate("model", index, "sinks"), f"model {name}: sinks needs a head_dim")
            return ()
        where = self.locate("model", index, "layers" if "layers" in raw else "head_dim")
        layers = []
        for item in items:
            if set(item) - {"name", "num_kv_heads", "head_dim", "sinks"}:
                raise self._fail(where, f"model {name}: a layer holds name, num_kv_heads, head_dim and sinks only")
            layer_name, kv, dim, sinks = (
                item.get("name", "attention"),
                item.get("num_kv_heads", 1),
                item.get("head_dim"),
                item.get("sinks", False),
            )
            if (
                not isinstance(layer_name, str)
                or not layer_name
                or not _positive_int(kv)
                or not _positive_int(dim)
                or dim > MAX_HEAD_DIM
                or not isinstance(sinks, bool)
            ):
                raise self._fail(
                    where,
                    f"model {name}: a layer's num_kv_heads is a positive integer, "
                    f"its head_dim one up to {MAX_HEAD_DIM}, its sinks true or false",
                )
            if heads % kv:
                raise self._fail(where, f"model {name}: {kv} KV heads do not divide {heads} query heads")
            for t in tp:
                # What the engines assert before they shard: split evenly, or replicated evenly.
                if kv % t and t % kv:
                    raise self._fail(
                        self.locate("model", index, "tp"),
                        f"model {name}: {kv} KV heads neither split over nor replicate evenly at tp={t}",
                    )
            layers.append(AttentionLayer(layer_name, kv, dim, sinks))
        if len({layer.name for layer in layers}) != len(layers):
            raise self._fail(where, f"model {name}: a layer is named twice")
        return tuple(layers)

    def backend(self, raw: Any, index: int) -> Backend:
        where = self.locate("backend", index)
        if not isinstance(raw, dict):
            raise self._fail(where, "[[backend]] must be a table")
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise self._fail(where, "backend needs a name")
        kernel = raw.get("kernel")
        if not isinstance(kernel, str) or not kernel:
            raise self._fail(where, f"backend {name}: needs a kernel id (see `hprobe kernels`)")
        sms = raw.get("sm")
        sms = [sms] if isinstance(sms, (int, str)) and not isinstance(sms, bool) else sms
        if not isinstance(sms, list) or not sms:
            raise self._fail(
                self.locate("backend", index, "sm"), f"backend {name}: sm must be a list such as [100, 103]"
            )
        try:
            parsed = tuple(dict.fromkeys(parse_sm(str(s)).number for s in sms))
        except InputError as exc:
            raise self._fail(
                self.locate("backend", index, "sm"), f"backend {name}: {exc.message.removeprefix('--sm ')}"
            ) from None
        rule = self.rule(raw, index, name)
        options = []
        for key, value in raw.items():
            if key in _BACKEND_KEYS:
                continue
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise self._fail(
                    self.locate("backend", index, key), f"backend {name}: {key} must be a string or an integer"
                )
            options.append((key, value))
        models = raw.get("models", [])
        if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
            raise self._fail(
                self.locate("backend", index, "models"), f"backend {name}: models must be a list of model names"
            )
        counts = raw.get("counts", [])
        if not isinstance(counts, list) or not all(_positive_int(c) and c <= MAX_HEADS for c in counts):
            raise self._fail(
                self.locate("backend", index, "counts"),
                f"backend {name}: counts must be a list of per-rank head counts up to {MAX_HEADS}",
            )
        tps = raw.get("tps", [])
        if not isinstance(tps, list) or not all(_positive_int(t) and t <= MAX_HEADS for t in tps):
            raise self._fail(self.locate("backend", index, "tps"), f"backend {name}: tps must be a list of TP degrees")
        return Backend(
            name,
            kernel,
            parsed,
            rule,
            where,
            tuple(options),
            models=tuple(models),
            reach=self.reach(raw, index, name),
            counts=tuple(sorted(set(counts))),
            tps=tuple(sorted(set(tps))),
        )

    def reach(self, raw: dict[str, Any], index: int, name: str) -> Reach | None:
        """`reach = { flag, value, default, default_reaches, otherwise, source,
        default_when }`: the engine setting under which this rule reaches
        FlashInfer."""
        value = raw.get("reach")
        if value is None:
            return None
        texts = ("flag", "value", "default", "otherwise")
        if (
            not isinstance(value, dict)
            or not set(texts) <= set(value) <= {*texts, "default_reaches", "source", "default_when"}
            or not all(isinstance(value[k], str) for k in texts)
            or not isinstance(value.get("source", ""), str)
            or not isinstance(value.get("default_when", ""), str)
            or not isinstance(value.get("default_reaches", False), bool)
        ):
            raise self._fail(
                self.locate("backend", index, "reach"),
                f"backend {name}: reach takes flag, value, default, otherwise (strings), default_reaches (true/false), "
                "source and default_when",
            )
        return Reach(
            value["flag"],
            value["value"],
            value["default"],
            value.get("default_reaches"),
            value["otherwise"],
            value.get("source", ""),
            value.get("default_when", ""),
        )

    def rule(self, raw: dict[str, Any], index: int, name: str) -> PaddingRule:
        keys = [k for k in _RULE_KEYS if k in raw]
        if len(keys) != 1:
            raise self._fail(
                self.locate("backend", index), f"backend {name}: give exactly one of {', '.join(_RULE_KEYS)}"
            )
        key = keys[0]
        where = self.locate("backend", index, key)
        value = raw[key]
        if "max_heads" in raw and key != "pad_multiple":
            raise self._fail(
                self.locate("backend", index, "max_heads"),
                f"backend {name}: max_heads goes with pad_multiple only, not {key}",
            )
        if _largest_int(value) > MAX_HEADS or _largest_int(raw.get("max_heads")) > MAX_HEADS:
            raise self._fail(where, f"backend {name}: {key} names a count above {MAX_HEADS}, more than any model has")
        if key == "no_padding":
            if value is not True:
                raise self._fail(where, f"backend {name}: no_padding takes true")
            return NoPadding()
        if key == "pad_multiple":
            limit = raw.get("max_heads")
            if not _positive_int(value) or (limit is not None and not _positive_int(limit)):
                raise self._fail(where, f"backend {name}: pad_multiple (and max_heads) must be positive integers")
            return PadMultiple(value, limit)
        if key == "pad_tile":
            return self._pad_tile(where, name, value)
        if key == "pad_to":
            if not isinstance(value, list) or not value or not all(_positive_int(v) for v in value):
                raise self._fail(where, f"backend {name}: pad_to must be a non-empty list of positive integers")
            if sorted(set(value)) != value:
                raise self._fail(where, f"backend {name}: pad_to must be strictly increasing, got {value}")
            return PadTo(tuple(value))
        return self._pad_map(where, name, value)

    def _pad_tile(self, where: Where, name: str, value: Any) -> PadTile:
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(p, list) and len(p) == 2 and all(_positive_int(x) for x in p) for p in value)
        ):
            raise self._fail(
                where,
                f"backend {name}: pad_tile must be a list of [largest n, tile] pairs such as [[8, 8], [32, 16], [128, "
                "64]]",
            )
        uptos = [p[0] for p in value]
        if sorted(set(uptos)) != uptos:
            raise self._fail(where, f"backend {name}: pad_tile's largest-n values must be strictly increasing")
        return PadTile(tuple((p[0], p[1]) for p in value))

    def _pad_map(self, where: Where, name: str, value: Any) -> PadMap:
        if not isinstance(value, dict) or not value:
            raise self._fail(where, f'backend {name}: pad_map must be a table such as {{ "8" = 64 }}')
        pairs = []
        for k, v in value.items():
            # A count as people write one: ASCII digits, no sign, no space, no
            # leading zero (int() would also read "016", " 16" and "١٦").
            if not (isinstance(k, str) and k.isascii() and k.isdigit() and not k.startswith("0")):
                raise self._fail(
                    where, f'backend {name}: pad_map key {k!r} is not a head count (write it as digits, such as "16")'
                )
            # Length first: int() refuses strings past Python's digit limit (4,300), and no count is that long.
            if len(k) > len(str(MAX_HEADS)) or int(k) > MAX_HEADS:
                shown = k if len(k) <= 12 else f"{k[:6]}…({len(k):,} digits)"
                raise self._fail(
                    where, f"backend {name}: pad_map key {shown} is above {MAX_HEADS}, more than any model has"
                )
            n = int(k)
            if n <= 0 or not _positive_int(v):
                raise self._fail(where, f"backend {name}: pad_map entries must be positive integers, got {k} = {v!r}")
            if v < n:
                raise self._fail(where, f"backend {name}: pad_map pads {n} down to {v}")
            pairs.append((n, v))
        return PadMap(tuple(sorted(pairs)))


_RULE_KEYS = ("pad_to", "pad_map", "pad_multiple", "pad_tile", "no_padding")
# Keys of a [[backend]] that are not probe axes.
_BACKEND_KEYS = frozenset({"name", "kernel", "sm", "max_heads", "models", "counts", "tps", "reach", *_RULE_KEYS})


_TABLE_KEYS = frozenset({"name", "source", "requires_flashinfer", "provenance"})
_MODEL_KEYS = frozenset(
    {
        "name",
        "num_q_heads",
        "tp",
        "num_kv_heads",
        "families",
        "attributes",
        "config",
        "field",
        "corroborated",
        "architectures",
        "architectures_cited",
        "head_dim",
        "sinks",
        "layers",
    }
)
# Above any head dim a model has (Gemma 4's global layers: 512; MLA's 576 is not a GQA head dim).
MAX_HEAD_DIM = 1024


def _largest_int(value: Any) -> int:
    """The largest integer anywhere in a TOML value (0 for none)."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, list):
        return max((_largest_int(v) for v in value), default=0)
    if isinstance(value, dict):
        return max((_largest_int(v) for v in value.values()), default=0)
    return 0


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
