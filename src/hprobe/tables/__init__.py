"""Padding-table sources. Each source turns something the user owns into
`PaddingTable`s without modifying it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError

if TYPE_CHECKING:
    from ..kernels.base import Value
from .model import Backend, Model, NoPadding, PaddingRule, PaddingTable, PadMap, PadMultiple, PadTile, PadTo, Where
from .toml_source import TomlTableSource

__all__ = [
    "Backend",
    "Model",
    "NoPadding",
    "PaddingRule",
    "PaddingTable",
    "PadMap",
    "PadMultiple",
    "PadTile",
    "PadTo",
    "Where",
    "TomlTableSource",
    "load_tables",
    "table_sources",
    "override_models",
]


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


def load_tables(paths: list[Path] | None) -> list[PaddingTable]:
    return [source.collect() for source in table_sources(paths)]


def override_models(table: PaddingTable, heads: int | None, tp: list[int] | None) -> PaddingTable:
    """Apply --heads/--tp to every model of a table."""
    if heads is None and tp is None:
        return table
    models = []
    for model in table.models:
        new_heads = heads if heads is not None else model.num_q_heads
        new_tp = tuple(tp) if tp is not None else model.tp
        for t in new_tp:
            if new_heads % t:
                raise InputError(f"model {model.name}: {new_heads} query heads do not divide evenly over tp={t}")
        models.append(replace(model, num_q_heads=new_heads, tp=new_tp))
    return replace(table, models=models)


def override_options(table: PaddingTable, axes: dict[str, list[Value]]) -> PaddingTable:
    """Apply axis options (`--topk 256`) to every backend whose kernel has that axis."""
    if not axes:
        return table
    from ..kernels import get_probe

    for name, values in axes.items():
        if len(values) != 1:
            raise InputError(f"--{name.replace('_', '-')}: check takes one value per axis, got {', '.join(map(str, values))}")
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
