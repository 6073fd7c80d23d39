"""The job behind `hprobe matrix` (and the matrices of `diff` and `report`):
pick the variants and SMs, probe the releases."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hprobe.kernels import PROBES, get_probe, get_variant, named_axes
from hprobe.kernels.base import Value, Variant
from hprobe.model.errors import InputError
from hprobe.model.padding import Model
from hprobe.model.release import INSTALLED, ProbedRelease, Progress, quiet
from hprobe.model.targets import resolve_targets
from hprobe.report.model import MatrixReport, ModelShape, ShapeAnswer
from hprobe.support.gather import gather

# The axes a GQA/MHA model's shape sets (`matrix --model`): given with it, they would contradict it.
SHAPE_AXES = ("kv_heads", "head_dim", "sinks")


def variant_keys(kernel_ids: list[str], axes: dict[str, list[Value]] | None = None) -> list[str]:
    """Every variant of the named kernels: their sweeps, with `axes` overriding.
    An axis no named kernel has is an input error, not silently ignored."""
    axes = {k: v for k, v in (axes or {}).items() if v}
    pinned = {k: get_variant(k) for k in kernel_ids if "[" in k}  # `trtllm-mla[backend=xqa]`
    probes = [pinned[k].probe if k in pinned else get_probe(k) for k in kernel_ids]
    for name in axes:
        if not any(p.axis(name) for p in probes):
            owners = sorted(p.id for p in _all_probes() if p.axis(name))
            hint = f" (kernels with it: {', '.join(owners)})" if owners else ""
            raise InputError(f"--{name.replace('_', '-')}: none of the kernels probed has this axis{hint}")
    keys: list[str] = []
    for item, probe in zip(kernel_ids, probes, strict=True):
        mine = {k: v for k, v in axes.items() if probe.axis(k)}
        if item in pinned:
            # What the brackets name is fixed; the other axes sweep or follow options.
            named = named_axes(item)
            mine.update({k: [v] for k, v in pinned[item].values.items() if k in named})
        keys.extend(v.key for v in probe.variants(mine))
    return list(dict.fromkeys(keys))


def _all_probes():
    return PROBES.values()


def run_matrix(
    kernel_ids: list[str],
    sm_option: str | None,
    heads: list[int],
    releases: list[str] | None = None,
    use_cache: bool = True,
    progress: Progress = quiet,
    axes: dict[str, list[Value]] | None = None,
    pivot: tuple[str, str] | None = None,
    models: list[Model] | None = None,
) -> MatrixReport:
    """`releases`: labels (versions, wheels, directories); None: the installed
    one. `pivot`: checked against what is about to be probed, before probing.
    `models`: probe each one's shapes per rank instead of `heads`."""
    plans: list[_ShapePlan] = []
    if models:
        plans = _plan_shapes(kernel_ids, models, axes or {})
        heads = sorted({p.shape.heads for p in plans})
        keys = list(dict.fromkeys(p.key for p in plans if p.key))
    else:
        keys = variant_keys(kernel_ids, axes)
    fallback = sorted({sm for k in [*keys, *(p.kernel for p in plans)] for sm in get_variant(k).probe.default_sms})
    targets = resolve_targets(sm_option, fallback, "the kernels are built for")
    labels = releases or [INSTALLED]
    if pivot is not None:
        from hprobe.report.pivot import check_planned

        check_planned(*pivot, labels, keys, [sm.number for sm in targets.sms])
    sms = [sm.number for sm in targets.sms]
    if not models:
        probed = gather(labels, {key: sms for key in keys}, heads, use_cache, progress)
        return MatrixReport([probed[label] for label in labels], targets, heads, keys)
    # Each model's variants at the counts that model's own shapes hand them, so
    # that a row's answer (refused by name, or by configuration, is decided over
    # the counts a variant was asked) never rests on another model asked beside
    # it; and no count of another model's (4 query heads beside 8 KV heads, no
    # rank's shape) comes back inconclusive and keeps the variant from the cache.
    asked: dict[tuple[str, str], set[int]] = {}
    for plan in plans:
        if plan.key:
            asked.setdefault((plan.shape.model, plan.key), set()).add(plan.shape.heads)
    groups: dict[tuple[int, ...], list[str]] = {}
    for (_, key), counted in asked.items():
        group = groups.setdefault(tuple(sorted(counted)), [])
        if key not in group:
            group.append(key)
    by_counts = {
        counted: gather(labels, {key: sms for key in group}, list(counted), use_cache, progress)
        for counted, group in (groups or {(): []}).items()
    }
    versions = [next(iter(by_counts.values()))[label].info.version for label in labels]
    shapes = [
        _answer(
            plan,
            by_counts[tuple(sorted(asked[(plan.shape.model, plan.key)]))][label] if plan.key else None,
            sm,
            version,
        )
        for label, version in zip(labels, versions, strict=True)
        for sm in sms
        for plan in plans
    ]
    answered = [_merged([by_label[label] for by_label in by_counts.values()]) for label in labels]
    return MatrixReport(answered, targets, heads, keys, shapes)


def _merged(parts: list[ProbedRelease]) -> ProbedRelease:
    """One release's answers gathered in parts (each its own counts), as one:
    a variant asked in two parts (two models' counts) keeps the first's."""
    first = parts[0]
    return replace(
        first,
        results={k: r for part in reversed(parts) for k, r in part.results.items()},
        notes=list(dict.fromkeys(n for part in parts for n in part.notes)),
        unmet=list(dict.fromkeys(u for part in parts for u in part.unmet)),
    )


@dataclass(frozen=True)
class _ShapePlan:
    """One model shape against one kernel, before probing: the variant that
    answers for it, or why none can."""

    shape: ModelShape
    kernel: str  # the column it is shown in: the probe and its other axes
    key: str | None
    not_probed: str | None = None


def _plan_shapes(kernel_ids: list[str], models: list[Model], axes: dict[str, list[Value]]) -> list[_ShapePlan]:
    """Each model's shapes per rank against each kernel that serves its kind of
    attention: GQA/MHA models against the probes with a KV-heads axis, MLA
    models against the others. With no kernel named, every such probe."""
    given = [a for a in SHAPE_AXES if axes.get(a)]
    if given:
        raise InputError(
            f"--{given[0].replace('_', '-')}: --model sets it from each model's layers; give one or the other"
        )
    ids = kernel_ids or [p.id for p in _all_probes()]
    plans: list[_ShapePlan] = []
    for model in models:
        gqa = bool(model.layers)
        fitting = [k for k in ids if _takes_kv_heads(k) == gqa]
        if not fitting:
            kind, other = ("a GQA/MHA", "MLA") if gqa else ("an MLA", "GQA/MHA")
            raise InputError(
                f"--model {model.name}: {kind} model, and every kernel named is {other} "
                f"({', '.join(ids)}); `hprobe kernels` lists both kinds"
            )
        for kernel_id in fitting:
            plans.extend(_plan_model(kernel_id, model, axes))
    return plans


def _takes_kv_heads(kernel_id: str) -> bool:
    return get_variant(kernel_id).probe.axis("kv_heads") is not None


def _plan_model(kernel_id: str, model: Model, axes: dict[str, list[Value]]) -> list[_ShapePlan]:
    probe = get_variant(kernel_id).probe  # an id, or one with some axes fixed in brackets
    mine = {k: v for k, v in axes.items() if probe.axis(k)}
    if not model.layers:
        keys = variant_keys([kernel_id], mine)
        return [
            _ShapePlan(ModelShape(model.name, tp, n), _column(key), key) for tp, n in model.per_rank() for key in keys
        ]
    plans = []
    for tp, layer, q, kv in model.per_rank_layers():
        shape = ModelShape(model.name, tp, q, layer.name, kv, layer.head_dim, layer.sinks)
        values: dict[str, list[Value]] = {"kv_heads": [kv], "head_dim": [layer.head_dim]}
        if probe.axis("sinks"):
            values["sinks"] = [1 if layer.sinks else 0]
        elif layer.sinks:
            plans.append(
                _ShapePlan(shape, probe.id, None, f"{probe.id} has no sinks axis: a call with sinks is not probed")
            )
            continue
        try:
            keys = variant_keys([kernel_id], {**mine, **values})
        except InputError as exc:
            plans.append(_ShapePlan(shape, probe.id, None, f"{probe.id}: {exc.message}"))
            continue
        plans.extend(_ShapePlan(shape, _column(key), key) for key in keys)
    return plans


def _column(key: str) -> str:
    """A variant's key without the axes a model shape sets: the kernel as its column names it."""
    variant = get_variant(key)
    others = {k: v for k, v in variant.values.items() if k not in SHAPE_AXES}
    return Variant(variant.probe, tuple(others.items())).key


def _answer(plan: _ShapePlan, release: ProbedRelease | None, sm: int, version: str) -> ShapeAnswer:
    """A shape's answer from the release its variant was probed on (None: no variant could be)."""
    if plan.key is None or release is None:
        return _unprobed(plan, sm, version)
    result = release.results.get((plan.key, sm))
    cell = result.heads.get(plan.shape.heads) if result else None
    if result is None or cell is None:
        return _unprobed(plan, sm, version, "no answer came back for this cell")
    return ShapeAnswer(
        plan.shape, plan.kernel, sm, version, plan.key, cell, result.depth, unchecked=tuple(result.unchecked)
    )


def _unprobed(plan: _ShapePlan, sm: int, release: str, why: str | None = None) -> ShapeAnswer:
    return ShapeAnswer(plan.shape, plan.kernel, sm, release, plan.key, not_probed=why or plan.not_probed)
