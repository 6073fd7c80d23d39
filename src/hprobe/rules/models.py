"""The MLA models the engines serve (matrices/models/mla.toml): each one's total
query heads, cited to its published config, and the model families whose call
paths it takes. `--model NAME` picks from them; `--heads N` stands in for one."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path

from hprobe.model.errors import InputError
from hprobe.model.padding import Model
from hprobe.rules import shipped_data
from hprobe.rules.toml_source import _Parser, parse_toml
from hprobe.system.fileio import read_text

MODELS_FILE = ("models", "mla.toml")  # a subfolder: matrices/*.toml are padding tables


@cache
def shipped_models() -> tuple[Model, ...]:
    return tuple(load_models(shipped_data(*MODELS_FILE)))


def load_models(path: Path) -> list[Model]:
    text = read_text(path, "models file")
    data = parse_toml(text, path)
    if set(data) - {"model"}:
        raise InputError(f"{path}: a models file holds [[model]] entries only")
    raw = data.get("model", [])
    if not isinstance(raw, list):
        raise InputError(f"{path}: [[model]] must be a list of tables")
    parser = _Parser(str(path), text)
    models = [parser.model(item, i) for i, item in enumerate(raw)]
    names = [m.name for m in models]
    if len(set(names)) != len(names):
        raise InputError(f"{path}: a model is named twice")
    return models


def pick_models(models: list[Model], names: list[str]) -> list[Model]:
    """The models named (`--model A,B`), in that order; an unknown name is one
    line naming those known. Matched without regard to case."""
    by_name = {m.name.lower(): m for m in models}
    out = []
    for name in names:
        found = by_name.get(name.strip().lower())
        if found is None:
            known = ", ".join(m.name for m in models)
            raise InputError(
                f"--model {name!r}: not a model hprobe knows (known: {known}); give --heads N for another count"
            )
        out.append(replace(found, asked=True))
    return out
