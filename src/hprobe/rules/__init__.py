"""Where padding rules come from. Each source turns something the user owns into
`PaddingTable`s without modifying it: TOML tables (here and `toml_source`), a
`--pad-fn` function and a consumer's tree (`repo/`).

Lowest first (a part imports only the parts above it in this list): this
module, `interface`, the TOML reader and writer, `models` and `waivers`;
`repo/`; `sources`, the registry of the kinds of source (tests/test_layers.py
holds the order)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from hprobe.model.errors import InputError

if TYPE_CHECKING:
    from hprobe.kernels.base import Value
from hprobe.model.padding import Model, PaddingTable, PadMap, Where
from hprobe.rules.toml_source import TomlTableSource, shipped_data, table_sources

__all__ = ["TomlTableSource", "load_tables", "overridden_models", "override_models", "shipped_data", "table_sources"]


def load_tables(paths: list[Path] | None) -> list[PaddingTable]:
    return [source.collect() for source in table_sources(paths)]


def override_models(
    table: PaddingTable,
    heads: int | None,
    tp: list[int] | None,
    maps_cover_every_count: bool = False,
    picked: list[Model] | None = None,
) -> PaddingTable:
    """Apply --heads/--tp to every model of a table. --heads replaces the models
    with one named by its count (a model's name must not outlive its head
    count). A pad_map written for the table's own models says nothing about a
    per-rank count none of them produces: such a count is an input error, never
    read as the table refusing it (`maps_cover_every_count`: the maps were
    evaluated over every count, as a repo's are, so a missing count does raise)."""
    if heads is None and tp is None and picked is None:
        return table
    models = overridden_models(table.models, heads, tp, picked)
    counts = sorted({n for m in models for _, n in m.per_rank()})
    own = {n for m in table.models for _, n in m.per_rank()}
    backends = []
    for backend in table.backends:
        if isinstance(backend.rule, PadMap) and not maps_cover_every_count:
            missing = [n for n in counts if n not in dict(backend.rule.mapping) and n not in own]
            if missing:
                raise InputError(
                    f"--heads/--tp: backend {backend.name}'s pad_map ({backend.where}) does not say what "
                    f"n={', '.join(map(str, missing))} pads to; "
                    "re-extract it for these heads (`hprobe table extract --repo PATH`) or check the repo itself "
                    "(--repo)"
                )
        backends.append(replace(backend, models=()) if heads is not None else backend)
    return replace(table, models=models, backends=backends)


def overridden_models(
    models: list[Model], heads: int | None, tp: list[int] | None, picked: list[Model] | None = None
) -> list[Model]:
    """The models judged: one of `heads` (--heads), those `picked` (--model),
    or the given ones; with `tp`, at those TP degrees."""
    if picked is not None:
        models = [replace(m, tp=tuple(tp)) if tp is not None else m for m in picked]
        tp = None
    if heads is not None:
        tps = tuple(tp) if tp is not None else tuple(t for t in (1, 2, 4, 8, 16) if heads % t == 0)
        models = _at_heads(models, heads, tps)
    elif tp is not None:
        models = [replace(m, tp=tuple(tp)) for m in models]
    for model in models:
        for t in model.tp:
            if model.num_q_heads % t:
                raise InputError(
                    f"model {model.name}: {model.num_q_heads} query heads do not divide evenly over tp={t}"
                )
            for layer in model.layers:
                if layer.num_kv_heads % t and t % layer.num_kv_heads:
                    raise InputError(
                        f"model {model.name}: {layer.num_kv_heads} KV heads neither split over nor replicate "
                        f"evenly at tp={t}"
                    )
    return list(models)


def _at_heads(models: list[Model], heads: int, tps: tuple[int, ...]) -> list[Model]:
    """--heads N: the models' every attribute but the head count. The config
    attributes they bring (`q_head_norm`, which a rule may read) are kept on
    one model, "N heads", on every path; only models that give one attribute
    different values make one model each, on their own families' paths, named
    by those values."""
    values: dict[str, set[bool | int | str]] = {}
    for model in models:
        for name, value in model.attributes:
            values.setdefault(name, set()).add(value)
    differ = sorted(name for name, seen in values.items() if len(seen) > 1)
    groups: dict[tuple[tuple[str, bool | int | str | None], ...], list[Model]] = {}
    for model in models:
        own = dict(model.attributes)
        groups.setdefault(tuple((name, own.get(name)) for name in differ), []).append(model)
    shared = {name: next(iter(seen)) for name, seen in values.items() if name not in differ}
    out = []
    for split, group in groups.items() or {(): []}.items():
        kept = {**shared, **{name: value for name, value in split if value is not None}}
        said = ", ".join(f"{n}={str(v).lower() if isinstance(v, bool) else v}" for n, v in split if v is not None)
        families = (
            ()
            if not split or any(not m.families for m in group)
            else tuple(dict.fromkeys(f for m in group for f in m.families))
        )
        out.append(
            Model(
                f"{heads} heads ({said})" if said else f"{heads} heads",
                heads,
                tps,
                Where("--heads"),
                families=families,
                attributes=tuple(sorted(kept.items())),
            )
        )
    return out


def override_options(table: PaddingTable, axes: dict[str, list[Value]]) -> PaddingTable:
    """Apply axis options (`--topk 256`) to every backend whose kernel has that axis."""
    if not axes:
        return table
    from hprobe.kernels import get_probe

    for name, values in axes.items():
        if len(values) != 1:
            raise InputError(
                f"--{name.replace('_', '-')}: check takes one value per axis, got {', '.join(map(str, values))}"
            )
    backends = []
    for backend in table.backends:
        try:
            probe = get_probe(backend.kernel)
        except InputError as exc:
            raise InputError(f"{backend.where}: backend {backend.name}: {exc.message}") from None
        options = dict(backend.options)
        options.update({k: v[0] for k, v in axes.items() if probe.axis(k)})
        backends.append(replace(backend, options=tuple(options.items())))
    return replace(table, backends=backends)
