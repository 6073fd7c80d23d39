"""`--pad-fn`: call the consumer's own padding function. An explicit opt-in to
importing and running their code, unlike `--repo`, which only reads it."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any, Callable

from ..errors import InputError
from ..tables.model import Backend, Model, PaddingTable, PadMap, Where


def load_pad_fn(spec: str) -> tuple[Callable[[int], Any], Where]:
    """`pkg.module:Class.method` or `path/to/file.py:function` -> the callable."""
    target, sep, qualname = spec.rpartition(":")
    if not sep or not target or not qualname:
        raise InputError(f"--pad-fn {spec!r}: expected MODULE:QUALNAME or FILE.py:QUALNAME")
    try:
        if target.endswith(".py"):
            path = Path(target)
            if not path.is_file():
                raise InputError(f"--pad-fn {spec!r}: no such file {target}")
            module_spec = importlib.util.spec_from_file_location(f"hprobe_pad_fn_{path.stem}", path)
            assert module_spec is not None and module_spec.loader is not None
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[module_spec.name] = module
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except InputError:
        raise
    except BaseException as exc:  # noqa: BLE001 - their import failing is their error, in one line
        raise InputError(f"--pad-fn {spec!r}: importing {target} failed: {type(exc).__name__}: {exc}") from None
    obj: Any = module
    for part in qualname.split("."):
        if not hasattr(obj, part):
            raise InputError(f"--pad-fn {spec!r}: {target} has no {qualname}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise InputError(f"--pad-fn {spec!r}: {qualname} is not callable")
    try:
        where = Where(inspect.getsourcefile(obj) or target, inspect.getsourcelines(obj)[1])
    except (OSError, TypeError):
        where = Where(target)
    return obj, where


def pad_fn_table(spec: str, kernel: str, sms: tuple[int, ...], models: list[Model], options: tuple = ()) -> tuple[PaddingTable, list[str]]:
    """A table whose rule is what the function returns for each per-rank count;
    a count it raises for is one the consumer refuses."""
    fn, where = load_pad_fn(spec)
    pairs: list[tuple[int, int]] = []
    notes: list[str] = []
    for n in sorted({n for m in models for _, n in m.per_rank()}):
        try:
            value = fn(n)
        except Exception as exc:  # noqa: BLE001 - the consumer raises for n
            notes.append(f"{spec} raises for {n}: {type(exc).__name__}: {exc}")
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < n:
            raise InputError(f"--pad-fn {spec!r}: returned {value!r} for {n}, not a count >= {n}")
        pairs.append((n, value))
    backend = Backend(spec, kernel, sms, PadMap(tuple(pairs)), where, options)
    return PaddingTable(f"--pad-fn {spec}", f"called {spec}", str(where.path), None, models, [backend]), notes
