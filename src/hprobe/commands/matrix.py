"""The job behind `hprobe matrix` (and the matrices of `diff` and `report`):
pick the variants and SMs, probe the releases."""

from __future__ import annotations

from hprobe.kernels import PROBES, get_probe, get_variant, named_axes
from hprobe.kernels.base import Value
from hprobe.model.errors import InputError
from hprobe.model.release import INSTALLED, Progress, quiet
from hprobe.model.targets import resolve_targets
from hprobe.report.model import MatrixReport
from hprobe.support.gather import gather


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
) -> MatrixReport:
    """`releases`: labels (versions, wheels, directories); None: the installed
    one. `pivot`: checked against what is about to be probed, before probing."""
    keys = variant_keys(kernel_ids, axes)
    fallback = sorted({sm for k in keys for sm in get_variant(k).probe.default_sms})
    targets = resolve_targets(sm_option, fallback, "the kernels are built for")
    labels = releases or [INSTALLED]
    if pivot is not None:
        from hprobe.report.pivot import check_planned

        check_planned(*pivot, labels, keys, [sm.number for sm in targets.sms])
    needed = {key: [sm.number for sm in targets.sms] for key in keys}
    probed = gather(labels, needed, heads, use_cache, progress)
    return MatrixReport([probed[label] for label in labels], targets, heads, keys)
