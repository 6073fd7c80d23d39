"""What a command is asked to do, parsed once from the command line's text: the
rule source, SMs, models, releases and axes. Every refusal here happens before
any probing, so a bad option costs nothing."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hprobe.model.errors import InputError
from hprobe.model.padding import MAX_HEADS, Model

if TYPE_CHECKING:
    from packaging.version import Version

    from hprobe.kernels.base import Value
    from hprobe.rules.interface import RuleInputs


@dataclass(frozen=True)
class RuleRequest:
    """Where `check` and `suggest` take their padding rules from (tables, a repo,
    a function), which models and SMs, and which releases."""

    tables: tuple[Path, ...] = ()
    repo: Path | None = None
    mapping: Path | None = None
    exclude: tuple[str, ...] = ()
    settings: tuple[tuple[str, str], ...] = ()  # --set NAME=VALUE, in order
    pad_fn: str | None = None
    kernel: str | None = None
    sm: str | None = None
    heads: int | None = None
    tp: tuple[int, ...] | None = None
    pin: str | None = None
    flashinfer: str | None = None
    axes: tuple[tuple[str, tuple[Value, ...]], ...] = ()
    models: tuple[str, ...] | None = None  # --model: names of hprobe's model table

    @classmethod
    def parse(
        cls,
        command: str,
        *,
        tables: list[Path] | None,
        repo: Path | None,
        mapping: Path | None,
        exclude: list[str] | None,
        settings: list[str] | None,
        pad_fn: str | None,
        kernel: str | None,
        sm: str | None,
        heads: int | None,
        tp: str | None,
        pin: str | None,
        flashinfer: str | None,
        extra_args: list[str],
        model: str | None = None,
    ) -> RuleRequest:
        if sum(x is not None and x != [] for x in (tables, repo, pad_fn)) > 1:
            raise InputError("--table, --repo and --pad-fn each choose the padding rules; give one")
        if heads is not None and heads <= 0:
            raise InputError(f"--heads {heads}: the number of query heads must be positive")
        if flashinfer is not None and pin is not None:
            raise InputError("--flashinfer and --pin both choose releases; give one")
        check_release_options(flashinfer, pin)
        if heads is not None and heads > MAX_HEADS:
            raise InputError(f"--heads {heads}: above {MAX_HEADS}, more query heads than any model has")
        if exclude and repo is None:
            raise InputError("--exclude goes with --repo")
        if settings and repo is None:
            raise InputError("--set goes with --repo")
        overrides = parse_settings(settings)
        models = tuple(name.strip() for name in model.split(",") if name.strip()) if model is not None else None
        if model is not None and not models:
            raise InputError("--model: name one or more models (`hprobe models` lists them)")
        if models is not None and heads is not None:
            raise InputError("--model and --heads both choose the models judged; give one")
        if models is not None and pad_fn is not None:
            raise InputError("--model goes with --table or --repo; --pad-fn takes --heads")
        if models is not None:
            from hprobe.rules.models import pick_models, shipped_models

            pick_models(list(shipped_models()), list(models))  # an unknown name: one line before any work
        if kernel and not pad_fn:
            raise InputError(f"--kernel on {command} goes with --pad-fn")
        return cls(
            tables=tuple(tables or ()),
            repo=repo,
            mapping=mapping,
            exclude=tuple(exclude or ()),
            settings=tuple(overrides.items()),
            pad_fn=pad_fn,
            kernel=kernel,
            sm=sm,
            heads=heads,
            tp=tuple(parse_int_list(tp, "--tp")) if tp is not None else None,
            pin=pin,
            flashinfer=flashinfer,
            axes=tuple((name, tuple(values)) for name, values in parse_axes(extra_args).items()),
            models=models,
        )

    @property
    def axis_values(self) -> dict[str, list[Value]]:
        return {name: list(values) for name, values in self.axes}

    @property
    def releases(self) -> list[str] | None:
        """The release labels --flashinfer names, or None (the pin's ends, else the installed one)."""
        from hprobe.support.trees import parse_spec

        return parse_spec(self.flashinfer) if self.flashinfer else None

    def rule_inputs(self, use_cache: bool) -> RuleInputs:
        """What the rules step reads: the sources named, the models picked, and
        with --repo the tree read through the cache (support/readings.py)
        unless `use_cache` is off."""
        from hprobe.rules.interface import RuleInputs

        picked = None
        if self.models is not None:
            from hprobe.rules.models import pick_models, shipped_models

            picked = tuple(pick_models(list(shipped_models()), list(self.models)))
        read_tree = None
        if self.repo is not None:
            from hprobe.support.readings import KeptReadings

            read_tree = KeptReadings(use_cache).extract
        return RuleInputs(
            tables=self.tables,
            repo=self.repo,
            mapping=self.mapping,
            exclude=self.exclude,
            settings=self.settings,
            pad_fn=self.pad_fn,
            kernel=self.kernel,
            sm=self.sm,
            heads=self.heads,
            tp=self.tp,
            picked=picked,
            read_tree=read_tree,
        )


def parse_settings(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip().isidentifier():
            raise InputError(f"--set {item!r}: expected NAME=VALUE")
        out[name.strip()] = value
    return out


def check_release_options(flashinfer: str | None, pin: str | None) -> None:
    """An empty or foreign --flashinfer / --pin is an input error before any work,
    never a silent fall back to the installed release."""
    from hprobe.support.trees import parse_spec

    if flashinfer is not None:
        parse_spec(flashinfer)
    if pin is not None:
        from hprobe.model.pins import parse_pin

        parse_pin(pin)


def single_release(spec: str | None) -> str:
    """The release a pin names when it names exactly one (`==0.7.2`), else the
    installed one."""
    from hprobe.model.pins import exact_release
    from hprobe.model.release import INSTALLED

    return exact_release(spec) or INSTALLED


def release_number(text: str, option: str) -> Version:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)
    except InvalidVersion:
        raise InputError(f"{option} {text!r}: not a release number") from None


def kernel_ids(options: list[str] | None) -> list[str]:
    """--kernel given repeatedly or as a comma list (commas inside [...] belong to a
    variant); every probe when absent."""
    from hprobe.kernels import PROBES

    items = [k.strip() for item in (options or []) for k in re.split(r",(?![^\[]*\])", item) if k.strip()]
    return items or sorted(PROBES)


def parse_axes(args: list[str]) -> dict[str, list[Value]]:
    """Axis options (`--topk 128,512`, `--page-size=64`) as lists of raw values,
    each parsed later by the probes that have the axis. Any axis a probe declares
    is an option, so adding a probe needs no change here."""
    from hprobe.kernels import PROBES

    known = {a.name for p in PROBES.values() for a in p.axes}
    axes: dict[str, list[Value]] = {}
    rest = list(args)
    while rest:
        token = rest.pop(0)
        if not token.startswith("--"):
            raise InputError(f"unexpected argument {token!r}")
        flag, eq, value = token.partition("=")
        name = flag[2:].replace("-", "_")
        if name not in known:
            raise InputError(
                f"no such option: {flag} (axis options: {', '.join('--' + n.replace('_', '-') for n in sorted(known))})"
            )
        if not eq:
            if not rest or rest[0].startswith("--"):
                raise InputError(f"{flag} needs a value")
            value = rest.pop(0)
        axes.setdefault(name, []).extend(v.strip() for v in value.split(",") if v.strip())
    return axes


def parse_pivot(text: str | None) -> tuple[str, str] | None:
    if text is None:
        return None
    parts = [p.strip().replace("-", "_") for p in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise InputError(f"--pivot {text!r}: expected ROWS,COLS such as heads,sm or topk,heads")
    return parts[0], parts[1]


def parse_int_list(text: str, option: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InputError(f"{option} {text!r}: expected a comma list of positive integers") from None
    if not values or min(values) <= 0 or max(values) > MAX_HEADS:
        raise InputError(f"{option} {text!r}: expected a comma list of positive integers up to {MAX_HEADS}")
    return values


def model_options(
    names: str, heads: str | None, grid: bool, pivot: tuple[str, str] | None, tp: str | None = None
) -> list[Model]:
    """`matrix --model A,B [--tp 1,2,4]`: the models named, MLA or GQA/MHA, at
    their TP degrees or those given. The model sets the head counts and the
    matrix's shape, so --heads, --grid and --pivot with it are one line each."""
    for given, option in ((heads is not None, "--heads"), (grid, "--grid"), (pivot is not None, "--pivot")):
        if given:
            raise InputError(f"{option}: --model sets the head counts and the rows; give one or the other")
    from hprobe.rules import overridden_models
    from hprobe.rules.models import every_model, pick_models

    picked = pick_models(every_model(), [n.strip() for n in names.split(",") if n.strip()])
    if not picked:
        raise InputError("--model: name at least one model (`hprobe models` lists them)")
    degrees = parse_int_list(tp, "--tp") if tp is not None else None
    return overridden_models(picked, None, degrees, picked)
