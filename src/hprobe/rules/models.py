"""The models the engines serve, each count cited to its published config: MLA
(matrices/models/mla.toml: total query heads and the model families whose call
paths it takes; `check --model NAME` picks from them, `--heads N` stands in for
one) and GQA/MHA (matrices/models/gqa.toml: query heads and each kind of
attention layer's KV heads and head dim; `matrix --model NAME` probes them)."""

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
GQA_MODELS_FILE = ("models", "gqa.toml")


@cache
def shipped_models() -> tuple[Model, ...]:
    """The MLA models: those `check` judges engine paths for."""
    return tuple(load_models(shipped_data(*MODELS_FILE)))


@cache
def shipped_gqa_models() -> tuple[Model, ...]:
    """The GQA/MHA models; each has its kinds of attention layer."""
    models = tuple(load_models(shipped_data(*GQA_MODELS_FILE)))
    if not all(m.layers for m in models):
        raise InputError(f"{shipped_data(*GQA_MODELS_FILE)}: every GQA/MHA model needs a head_dim or layers")
    return models


def every_model() -> list[Model]:
    """MLA and GQA/MHA models together, as `models` and `matrix --model` know them."""
    every = [*shipped_models(), *shipped_gqa_models()]
    names = [m.name.lower() for m in every]
    if len(set(names)) != len(names):
        raise InputError("a model is named in both matrices/models/mla.toml and gqa.toml")
    return every


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
        if found is None and not any(m.layers for m in models):
            gqa = {m.name.lower(): m for m in shipped_gqa_models()}.get(name.strip().lower())
            if gqa is not None:
                raise InputError(
                    f"--model {name!r}: a GQA/MHA model, and check judges MLA call paths only; "
                    f"`hprobe matrix --model {gqa.name}` probes its shapes per rank"
                )
        if found is None:
            known = ", ".join(m.name for m in models)
            raise InputError(
                f"--model {name!r}: not a model hprobe knows (known: {known}); give --heads N for another count"
            )
        out.append(replace(found, asked=True))
    return out
