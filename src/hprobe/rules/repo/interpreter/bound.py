"""Rules that read more than their head-count argument (SGLang's
`_kernel_num_heads(self, num_tokens)`): evaluated once per mapping entry (kernel,
SMs, phase), SM and model x TP, with the instance attributes, extra arguments,
platform predicates and settings the mapping binds, and the flashinfer release
being judged. Each padded count keeps the branch that produced it."""

from __future__ import annotations

import ast
import math
import os
from dataclasses import dataclass, field
from typing import Any

from hprobe.model.errors import InputError
from hprobe.model.padding import Model, PadMap
from hprobe.model.sm import sm_names
from hprobe.rules.repo.interpreter.evaluate import (
    Binding,
    Evaluation,
    FlashinferSource,
    NotEvaluable,
    Raises,
    Settings,
    evaluate_bound,
)
from hprobe.rules.repo.tree.mapping import ClassMapping, Mapping, SettingsSpec
from hprobe.rules.repo.tree.scan import ClassInfo, FunctionInfo, RepoIndex


@dataclass(frozen=True)
class RuleSite:
    """A class's padding method as found in the tree, and how its file is shown."""

    cls: ClassInfo
    function: FunctionInfo  # where the rule is written (maybe in a base class)
    path: str  # the function's file as the user named the tree


@dataclass
class BoundResult:
    rules: list[BoundRule] = field(default_factory=list)
    problem: NotEvaluable | None = None  # the first evaluation outside the subset
    reads_flashinfer: bool = False  # the rule reads the judged release's own tables


@dataclass(frozen=True)
class BoundRule:
    """One entry's padding on a group of SMs that answer alike, for some models."""

    entry: ClassMapping
    sms: tuple[int, ...]
    models: tuple[str, ...]  # () = every model the entry covers
    rule: PadMap
    branches: tuple[tuple[tuple[str, int], str], ...]  # (model, n) -> branch in words
    conditions: str  # the SM, phase and settings it was evaluated under
    # (model, n) -> the engine's own code crashing on the way (Raises.crash)
    crashes: tuple[tuple[tuple[str, int], str], ...] = ()

    def describe(self) -> str:
        return f"{self.conditions}: {self.rule.describe()}"

    def to_dict(self) -> dict:
        return {
            "kernel": self.entry.kernel,
            "phase": self.entry.phase,
            "sms": list(self.sms),
            "models": list(self.models),
            "rule": self.rule.describe(),
            "conditions": self.conditions,
            "branches": [{"model": m, "n": n, "branch": b} for (m, n), b in self.branches],
        }


def load_settings(index: RepoIndex, spec: SettingsSpec | None, overrides: dict[str, str]) -> Settings | None:
    """The registry's declared defaults (`NAME = EnvStr("flashinfer")`), read with
    ast, then `--set NAME=VALUE` overrides parsed by the field's own type."""
    if spec is None:
        if overrides:
            raise InputError(f"--set {next(iter(overrides))}: the mapping declares no settings registry")
        return None
    module = index.by_suffix(spec.module)
    values: dict[str, Any] = {}
    problems: dict[str, str] = {}
    kinds: dict[str, str] = {}
    registry = module.constants.get(spec.object) if module else None
    cls = None
    if module is not None and isinstance(registry, ast.Call) and isinstance(registry.func, ast.Name):
        cls = module.classes.get(registry.func.id)
    for name, value in cls.attributes.items() if cls else []:
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
            continue
        kinds[name] = value.func.id
        default = value.args[0] if value.args else next((k.value for k in value.keywords if k.arg == "default"), None)
        if default is None:
            values[name] = None
            continue
        try:
            values[name] = ast.literal_eval(default)
        except ValueError:
            problems[name] = (
                f"its default is computed at run time ({ast.unparse(default)}); give it with --set {name}=VALUE"
            )
    for name, text in overrides.items():
        if name not in kinds:
            where = f"{spec.module}.{cls.name}" if cls else f"{spec.module} (not found in the tree)"
            raise InputError(f"--set {name}: not a setting of {where}")
        values[name] = _parse_setting(name, kinds[name], text)
        problems.pop(name, None)
    return Settings(spec.object, spec.accessor, values, problems)


MAX_SETTING_BITS = 4096  # as for every integer a rule computes (README, Bounds)


def _parse_setting(name: str, kind: str, text: str) -> Any:
    try:
        if "Bool" in kind:
            lowered = text.strip().lower()
            if lowered not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                raise ValueError(text)
            return lowered in ("1", "true", "yes", "on")
        if "Int" in kind:
            value = int(text)
            if value.bit_length() > MAX_SETTING_BITS:
                raise InputError(f"--set {name}: an integer of {value.bit_length()} bits, more than {MAX_SETTING_BITS}")
            return value
        if "Float" in kind:
            number = float(text)
            if not math.isfinite(number):
                raise ValueError(text)
            return number
    except ValueError:
        raise InputError(f"--set {name}={text}: not a value of its type ({kind})") from None
    return text


def evaluate_entries(
    index: RepoIndex,
    site: RuleSite,
    entries: list[ClassMapping],
    mapping: Mapping,
    settings: Settings | None,
    flashinfer: FlashinferSource | None,
) -> BoundResult:
    """Every entry x SM x model x TP of one class's rule."""
    result = BoundResult()
    for entry in entries:
        if entry.kernel is None:
            continue
        models = [
            m for m in mapping.models if (not entry.models or m.name in entry.models) and m.takes(entry.model_family)
        ]
        per_sm: dict[int, tuple[dict[tuple[str, int], int | Raises], dict[tuple[str, int], int | None], str]] = {}
        for sm in entry.sms:
            outputs: dict[tuple[str, int], int | Raises] = {}
            lines: dict[tuple[str, int], int | None] = {}
            read: dict[str, Any] = {}
            for model in models:
                for tp, n in model.per_rank():
                    ev = _evaluate(index, site, mapping, entry, sm, model, tp, n, settings, flashinfer)
                    result.reads_flashinfer |= ev.reads_flashinfer
                    if isinstance(ev.value, NotEvaluable):
                        return BoundResult([], ev.value, result.reads_flashinfer)
                    outputs[model.name, n] = ev.value
                    lines[model.name, n] = ev.returned_at
                    read.update(ev.settings_read)
            settings_text = ", ".join(f"{k}={v}" for k, v in sorted(read.items()))
            per_sm[sm] = (outputs, lines, settings_text)
        # SMs that answer alike (SM100 and SM103) are one rule.
        groups: dict[str, list[int]] = {}
        for sm, (outputs, lines, settings_text) in per_sm.items():
            groups.setdefault(
                repr((sorted(outputs.items(), key=str), sorted(lines.items()), settings_text)), []
            ).append(sm)
        for sms in groups.values():
            outputs, lines, settings_text = per_sm[sms[0]]
            result.rules.extend(_rules(site, entry, tuple(sms), models, outputs, lines, settings_text))
    return result


def _evaluate(
    index: RepoIndex,
    site: RuleSite,
    mapping: Mapping,
    entry: ClassMapping,
    sm: int,
    model: Model,
    tp: int,
    n: int,
    settings: Settings | None,
    flashinfer: FlashinferSource | None,
) -> Evaluation:
    values = {"n": n, "total": model.num_q_heads, "tp": tp}
    instance = {attr: values[kind] for attr, kind in mapping.instance.items()}
    args: dict[str, Any] = dict(entry.args)
    options = dict(entry.options)
    for param, axis in mapping.parameters.items():
        if param not in args and axis in options:
            args[param] = options[axis]
    platform = {expr: sm in sms for expr, sms in mapping.platform}
    binding = Binding(
        head_arg=False, instance=instance, args=args, platform=platform, settings=settings, flashinfer=flashinfer, sm=sm
    )
    return evaluate_bound(index, site.cls, site.function, n, binding)


def _rules(
    site: RuleSite,
    entry: ClassMapping,
    sms: tuple[int, ...],
    models: list[Model],
    outputs: dict[tuple[str, int], int | Raises],
    lines: dict[tuple[str, int], int | None],
    settings_text: str,
) -> list[BoundRule]:
    where = sm_names(sms)
    conditions = ", ".join(x for x in (where, entry.phase, settings_text) if x)
    path = site.function.module.path

    def branch(key: tuple[str, int]) -> str:
        line = lines.get(key)
        return f"{shown_path(site, path)}:{line} [{conditions}]" if line else f"{shown_path(site, path)} [{conditions}]"

    merged: dict[int, int] = {}
    consistent = True
    for (_, n), value in outputs.items():
        if isinstance(value, int):
            if merged.setdefault(n, value) != value:
                consistent = False
    # One map for every model when they agree on each n; else one per model.
    sets = (
        [((), outputs)]
        if consistent
        else [((m.name,), {k: v for k, v in outputs.items() if k[0] == m.name}) for m in models]
    )
    out = []
    for names, part in sets:
        mapping = tuple(sorted({n: v for (_, n), v in part.items() if isinstance(v, int)}.items()))
        branches = tuple((key, branch(key)) for key in part)
        crashes = tuple(
            (key, crash)
            for key, value in part.items()
            if isinstance(value, Raises) and (crash := value.crash(lambda rel: shown_path(site, rel))) is not None
        )
        out.append(BoundRule(entry, sms, names, PadMap(mapping), branches, conditions, crashes))
    return out


def shown_path(site: RuleSite, rel: str) -> str:
    """`rel` (relative to the tree root) as the user named the tree."""
    own = site.function.module.path
    root = site.path[: -len(own)] if site.path.endswith(own) else ""
    return os.path.normpath(root + rel) if root else rel
