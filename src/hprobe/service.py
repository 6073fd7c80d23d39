"""The jobs behind `hprobe check` and `hprobe matrix`: choose targets, probe, compare."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import __version__
from .core import Finding, check_table, exit_code
from .envinfo import distribution_version
from .errors import InputError
from .kernels import get_probe, get_variant, named_axes
from .kernels.base import Value
from .matrix import probe_kernel
from .outcome import KernelSMResult, Outcome
from .shim import FlashinferSession
from .sm import SM, detect_gpus, parse_sm_list
from .tables import PaddingTable
from .tables.model import MAX_HEADS

if TYPE_CHECKING:
    from .repo.extract import RepoTables

DEFAULT_MAX_HEADS = 256


@dataclass
class Targets:
    sms: list[SM]
    source: str  # "flag", "gpu" or "default"
    note: str | None = None


def resolve_targets(sm_option: str | None, fallback: list[int], what: str) -> Targets:
    """--sm wins; otherwise the visible GPUs; otherwise every SM `what` covers."""
    if sm_option is not None:
        return Targets(parse_sm_list(sm_option), "flag")
    gpus = detect_gpus()
    if gpus:
        sms = list(dict.fromkeys(g.sm for g in gpus))
        names = ", ".join(f"GPU {g.index} {g.name} ({g.sm})" for g in gpus)
        return Targets(sms, "gpu", f"probing the visible GPUs: {names}")
    sms = [SM.from_number(n) for n in sorted(set(fallback))]
    return Targets(
        sms,
        "default",
        f"no GPU visible and no --sm: probing every SM {what} ({', '.join(map(str, sms))})",
    )


def parse_heads(text: str) -> list[int]:
    """`1-256`, `8,16,24`, `1-8,16`: positive head counts up to MAX_HEADS. Bounds
    are checked before a range is expanded, so `1-10000000000` costs nothing."""
    values: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo_text, dash, hi_text = part.partition("-")
        try:
            lo = int(lo_text)
            hi = int(hi_text) if dash else lo
        except ValueError:
            raise InputError(f"--heads {text!r}: expected counts like 1-256 or 8,16,24") from None
        if lo <= 0:
            raise InputError(f"--heads {text!r}: head counts must be positive")
        if lo > hi:
            raise InputError(f"--heads {text!r}: range {part} runs backwards")
        if hi > MAX_HEADS:
            raise InputError(f"--heads {text!r}: head counts above {MAX_HEADS} are not probed")
        values.update(range(lo, hi + 1))
    if not values:
        raise InputError(f"--heads {text!r}: no head counts given")
    return sorted(values)


@dataclass
class FlashinferInfo:
    version: str
    location: str


@dataclass
class ProbedRelease:
    """One flashinfer (installed, or fetched) and what its validators answered."""

    label: str  # "installed" or what the user named
    info: FlashinferInfo
    results: dict[tuple[str, int], KernelSMResult]  # (variant key, SM) -> result
    notes: list[str] = field(default_factory=list)

    def describe(self) -> dict:
        return {"label": self.label, "version": self.info.version, "location": self.info.location, "notes": self.notes}


INSTALLED = "installed"
Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def _header(schema: str, flashinfer: FlashinferInfo, releases: list[ProbedRelease], targets: Targets) -> dict:
    """What every report document starts with: what it is, and what it rests on."""
    return {
        "schema": schema,
        "hprobe_version": __version__,
        "flashinfer": {"version": flashinfer.version, "location": flashinfer.location},
        "releases": [rel.describe() for rel in releases],
        "sm_source": targets.source,
        "sms": [sm.number for sm in targets.sms],
    }


@dataclass
class MatrixReport:
    releases: list[ProbedRelease]
    targets: Targets
    heads: list[int]
    keys: list[str] = field(default_factory=list)  # the variants, in the order asked

    @property
    def flashinfer(self) -> FlashinferInfo:
        return self.releases[0].info

    @property
    def results(self) -> list[KernelSMResult]:
        return [r for rel in self.releases for r in rel.results.values()]

    def to_dict(self) -> dict:
        return {
            **_header("hprobe.matrix/2", self.flashinfer, self.releases, self.targets),
            "heads": {"min": min(self.heads), "max": max(self.heads), "count": len(self.heads)},
            "results": [r.to_dict() for r in self.results],
        }


@dataclass
class CheckReport:
    releases: list[ProbedRelease]
    targets: Targets
    tables: list[PaddingTable]
    findings: list[Finding]
    strict: bool
    notes: list[str] = field(default_factory=list)
    drift: dict | None = None  # `--baseline`: hprobe.diff/1 against a recorded matrix

    @property
    def flashinfer(self) -> FlashinferInfo:
        return self.releases[0].info if self.releases else _installed_flashinfer_info()

    @property
    def exit_code(self) -> int:
        code = exit_code(self.findings, self.strict)
        if self.drift is not None and code != 1:
            drift_code = self.drift["exit_code"]
            if drift_code == 1 or (drift_code == 3 and code == 0):
                code = drift_code
        return code

    def to_dict(self) -> dict:
        counts: dict[str, int] = {}
        for f in self.findings:
            counts[f.verdict.value] = counts.get(f.verdict.value, 0) + 1
        return {
            **_header("hprobe.check/2", self.flashinfer, self.releases, self.targets),
            "strict": self.strict,
            "exit_code": self.exit_code,
            "summary": counts,
            "tables": [{"name": t.name, "path": t.path, "source": t.source, "requires_flashinfer": t.requires_flashinfer} for t in self.tables],
            "findings": [f.to_dict() for f in self.findings],
            "drift": self.drift,
            "notes": self.notes,
        }


def probe_installed(needed: dict[str, list[int]], heads: list[int], use_cache: bool = True) -> ProbedRelease:
    """Probe the flashinfer importable here, in this process; answers for an
    installed distribution pip can vouch for are cached like fetched ones, so
    a warm run (a pre-commit hook) imports neither flashinfer nor torch."""
    from .releases import cache_installed, cached_installed, installed_identity

    identity = installed_identity() if use_cache else None
    cached: dict[tuple[str, int], KernelSMResult] = {}
    missing = dict(needed)
    if identity is not None:
        for key, sms in needed.items():
            hit = cached_installed(identity, key, get_variant(key).probe.probe_version, sms, heads)
            if hit is not None:
                cached.update({(key, r.sm): r for r in hit})
                del missing[key]
    if not missing:
        info = _installed_flashinfer_info()
        return ProbedRelease(INSTALLED, info, {(key, sm): cached[(key, sm)] for key, sms in needed.items() for sm in sms})
    fresh = _probe_in_process(missing, heads)
    if identity is not None:
        for key, sms in missing.items():
            results = [fresh.results[(key, sm)] for sm in sms]
            # An inconclusive answer may be this run's accident: asked again next time.
            if not any(h.outcome is Outcome.INCONCLUSIVE for r in results for h in r.heads.values()):
                cache_installed(identity, key, get_variant(key).probe.probe_version, sms, heads, results)
    merged = {**cached, **fresh.results}
    return ProbedRelease(INSTALLED, fresh.info, {(key, sm): merged[(key, sm)] for key, sms in needed.items() for sm in sms})


def _probe_in_process(needed: dict[str, list[int]], heads: list[int]) -> ProbedRelease:
    first = min(sm for sms in needed.values() for sm in sms)
    session = FlashinferSession(SM.from_number(first))
    session.open()
    try:
        from .parallel import probe_split

        def job(keys: list[str]) -> list[KernelSMResult]:
            out: list[KernelSMResult] = []
            for key in keys:
                out.extend(probe_kernel(session, get_variant(key), [SM.from_number(s) for s in needed[key]], heads))
            return out

        probed = probe_split(list(needed), job)
        by_key = {(r.key, r.sm): r for r in probed}
        # The order asked for, whichever process probed what.
        results = {(key, sm): by_key[(key, sm)] for key, sms in needed.items() for sm in sms}
        info = FlashinferInfo(session.version, session.location)
    finally:
        session.close()
    return ProbedRelease(INSTALLED, info, results)


def probe_named(item: str, needed: dict[str, list[int]], heads: list[int], use_cache: bool, progress: Progress) -> ProbedRelease:
    """Probe a release that is not installed: fetched, cached and run in a subprocess."""
    from .releases import probe_release, resolve

    progress(f"fetching flashinfer {item}")
    release = resolve(item)
    progress(f"probing flashinfer {release.version}")
    sms = sorted({sm for sms in needed.values() for sm in sms})
    results: dict[tuple[str, int], KernelSMResult] = {}
    for result in probe_release(release, list(needed), sms, heads, use_cache=use_cache):
        if result.key in needed and result.sm in needed[result.key]:
            results[(result.key, result.sm)] = result
    notes = [f"flashinfer {release.version} requires {u}" for u in release.unmet]
    from . import cache

    cache_note = cache.note()
    if cache_note:
        notes.append(cache_note)
    return ProbedRelease(item, FlashinferInfo(release.version, str(release.tree)), results, notes)


def gather(labels: list[str], needed: dict[str, list[int]], heads: list[int], use_cache: bool, progress: Progress) -> dict[str, ProbedRelease]:
    out: dict[str, ProbedRelease] = {}
    for label in labels:
        if label in out:
            continue
        out[label] = probe_installed(needed, heads, use_cache) if label == INSTALLED else probe_named(label, needed, heads, use_cache, progress)
    return out


PIVOT_FIXED = ("heads", "sm", "release", "kernel")


def pivot_cells(report: MatrixReport, rows: str, cols: str) -> tuple[list, list, dict]:
    """Row values, column values and cells for `matrix --pivot ROWS,COLS`.

    A dimension is h_q (`heads`), `sm`, `release`, `kernel` (the variant) or an
    axis. With h_q a dimension a cell is one Outcome; otherwise it is the
    KernelSMResult whose accepted set the cell shows. Two results landing in one
    cell is an input error: the other dimensions must be narrowed first.
    """
    axes = {name for r in report.results for name in r.config}
    for dim in (rows, cols):
        if dim not in PIVOT_FIXED and dim not in axes:
            raise InputError(f"--pivot {rows},{cols}: {dim!r} is not heads, sm, release, kernel or an axis of the kernels probed ({', '.join(sorted(axes)) or 'none'})")
    if rows == cols:
        raise InputError(f"--pivot {rows},{cols}: pick two different dimensions")

    def value(dim: str, rel: ProbedRelease, r: KernelSMResult):
        return {"sm": f"SM{r.sm}", "release": rel.info.version, "kernel": r.key}.get(dim, r.config.get(dim, "-"))

    row_values: list = []
    col_values: list = []
    cells: dict = {}
    for rel in report.releases:
        for r in rel.results.values():
            for h in (r.heads if "heads" in (rows, cols) else [None]):
                rv = h if rows == "heads" else value(rows, rel, r)
                cv = h if cols == "heads" else value(cols, rel, r)
                cell = r.heads[h].outcome if h is not None else r
                if (rv, cv) in cells:
                    raise InputError(
                        f"--pivot {rows},{cols}: several results fall in one cell ({rv}, {cv}); "
                        "narrow the others with --kernel, --sm or an axis option"
                    )
                cells[(rv, cv)] = cell
                row_values.append(rv)
                col_values.append(cv)
    return list(dict.fromkeys(row_values)), list(dict.fromkeys(col_values)), cells


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
    from .kernels import PROBES

    return PROBES.values()


def run_matrix(
    kernel_ids: list[str],
    sm_option: str | None,
    heads: list[int],
    flashinfer_spec: str | None = None,
    use_cache: bool = True,
    progress: Progress = _quiet,
    axes: dict[str, list[Value]] | None = None,
) -> MatrixReport:
    from .releases import parse_spec

    keys = variant_keys(kernel_ids, axes)
    fallback = sorted({sm for k in keys for sm in get_variant(k).probe.default_sms})
    targets = resolve_targets(sm_option, fallback, "the kernels are built for")
    labels = parse_spec(flashinfer_spec) if flashinfer_spec else [INSTALLED]
    needed = {key: [sm.number for sm in targets.sms] for key in keys}
    probed = gather(labels, needed, heads, use_cache, progress)
    return MatrixReport([probed[label] for label in labels], targets, heads, keys)


def run_check(
    tables: list[PaddingTable],
    sm_option: str | None,
    strict: bool,
    flashinfer_spec: str | None = None,
    pin: str | None = None,
    use_cache: bool = True,
    progress: Progress = _quiet,
    fallback_sms: list[int] | None = None,
) -> CheckReport:
    from .releases import parse_spec

    tables = [_with_variant_keys(t) for t in tables]
    fallback = sorted({sm for t in tables for b in t.backends for sm in b.sms}) or list(fallback_sms or [])
    targets = resolve_targets(sm_option, fallback, "the tables name")
    numbers = [sm.number for sm in targets.sms]
    notes: list[str] = [targets.note] if targets.note else []
    # Which releases each table is judged on.
    plan: dict[str, list[str]] = {}
    for table in tables:
        if flashinfer_spec:
            plan[table.path] = parse_spec(flashinfer_spec)
        elif pin or table.requires_flashinfer:
            labels, pin_notes = pinned_releases(pin or table.requires_flashinfer or "", progress)
            plan[table.path] = labels
            notes.extend(f"{table.name}: {n}" for n in pin_notes)
        else:
            plan[table.path] = [INSTALLED]
    # Probe each kernel once per SM and release over 1..max(256, largest padded count).
    needed: dict[str, list[int]] = {}
    ceiling = DEFAULT_MAX_HEADS
    for table in tables:
        for backend in table.backends:
            sms = set(needed.get(backend.variant_key, [])) | {sm for sm in backend.sms if sm in numbers}
            needed[backend.variant_key] = sorted(sms)
            ceiling = max(ceiling, backend.rule.largest(), *(m.num_q_heads for m in table.models))
    needed = {k: v for k, v in needed.items() if v}
    heads = list(range(1, ceiling + 1))
    findings: list[Finding] = []
    probed: dict[str, ProbedRelease] = {}
    if needed:
        all_labels = list(dict.fromkeys(label for labels in plan.values() for label in labels))
        probed = gather(all_labels, needed, heads, use_cache, progress)
        for rel in probed.values():
            notes.extend(rel.notes)
    for table in tables:
        supports = [probed[label].results for label in plan[table.path]] if needed else []
        table_findings, table_notes = check_table(table, supports, numbers) if needed else ([], [])
        findings.extend(table_findings)
        notes.extend(table_notes)
    if not findings:
        notes.append("nothing was checked: no backend of the tables runs on the SMs selected")
    return CheckReport(list(probed.values()), targets, tables, findings, strict, notes)


def _with_variant_keys(table: PaddingTable) -> PaddingTable:
    """Resolve each backend's kernel and options to a probe variant, or say where
    the table names something unknown."""
    from dataclasses import replace

    backends = []
    for backend in table.backends:
        try:
            variant = get_variant(backend.kernel, dict(backend.options))
        except InputError as exc:
            raise InputError(f"{backend.where}: backend {backend.name}: {exc.message}") from None
        backends.append(replace(backend, key=variant.key))
    return replace(table, backends=backends)


def pinned_releases(spec: str, progress: Progress = _quiet) -> tuple[list[str], list[str]]:
    """The lowest and highest published releases a pin admits, plus the installed
    release if the pin admits it. Returns (labels, notes)."""
    from packaging.version import InvalidVersion, Version

    from .releases import published_versions
    from .repo.pin import parse_pin

    specifier = parse_pin(spec)
    progress("listing published flashinfer releases")
    admitted = [v for v in published_versions() if specifier.contains(v)]
    if not admitted:
        raise InputError(f"pin {spec!r}: no published flashinfer-python release satisfies it")
    labels = list(dict.fromkeys([str(admitted[0]), str(admitted[-1])]))
    if len(admitted) == 1:
        notes = [f"pin {spec} admits one release: {labels[0]}"]
    else:
        notes = [f"pin {spec} admits {len(admitted)} releases; probing the lowest and highest: {', '.join(labels)}"]
    installed = distribution_version("flashinfer-python")
    if installed:
        try:
            if specifier.contains(Version(installed), prereleases=True):
                # The installed release is probed here, in this process: when the
                # pin's ends include it, it is not fetched and probed a second time.
                labels = [label for label in labels if Version(label) != Version(installed)] + [INSTALLED]
            else:
                notes.append(f"the installed flashinfer {installed} does not satisfy the pin {spec}: this environment does not match the repo's pin")
        except InvalidVersion:
            pass
    return labels, notes


def _installed_flashinfer_info() -> FlashinferInfo:
    from .envinfo import flashinfer_origin

    return FlashinferInfo(distribution_version("flashinfer-python") or "not installed", flashinfer_origin() or "")


def run_repo_check(
    repo: RepoTables,
    sm_option: str | None,
    strict: bool,
    flashinfer_spec: str | None = None,
    pin: str | None = None,
    use_cache: bool = True,
    progress: Progress = _quiet,
) -> CheckReport:
    """`check --repo`: the table read from the consumer's source, judged like any
    table; classes whose rule could not be evaluated are inconclusive findings,
    and classes hprobe does not probe are listed with their padding."""
    from .core import Verdict

    mapped_sms = sorted({sm for c in repo.classes if c.mapping and c.mapping.kernel for sm in c.mapping.sms})
    report = run_check([repo.table], sm_option, strict, flashinfer_spec, pin, use_cache, progress, fallback_sms=mapped_sms)
    if repo.pin:
        report.notes.insert(0, f"flashinfer pin {repo.pin.spec} read from {repo.pin.source}")
    else:
        report.notes.insert(0, f"no flashinfer requirement found in {repo.root}'s metadata")
    report.notes.extend(repo.notes)
    numbers = [sm.number for sm in report.targets.sms]
    for item in repo.classes:
        rule = item.rule.describe() if item.rule else "rule not evaluable"
        if item.status == "unprobed":
            assert item.mapping is not None
            report.notes.append(f"{item.cls.qualname} ({item.where}): {rule}; not probed: {item.mapping.unprobed}")
        elif item.status == "unmapped":
            report.notes.append(f"{item.cls.qualname} ({item.where}): {rule}; not in the mapping file, so no kernel to judge it against")
        elif item.status == "not-evaluable":
            mapping, problem = item.mapping, item.problem
            assert problem is not None  # the branch is for not-evaluable rules
            if mapping is None or mapping.kernel is None:
                report.notes.append(f"{item.cls.qualname}: not evaluable: {problem}")
                continue
            for sm in [s for s in mapping.sms if s in numbers] or list(mapping.sms):
                for model in repo.table.models:
                    for tp, n in model.per_rank():
                        report.findings.append(
                            Finding(
                                table=repo.table.name,
                                table_path=repo.table.path,
                                model=model.name,
                                tp=tp,
                                n=n,
                                backend=item.cls.qualname,
                                kernel=mapping.kernel,
                                sm=sm,
                                flashinfer_version="-",
                                padded=None,
                                verdict=Verdict.INCONCLUSIVE,
                                notes=[f"not evaluable: {item.problem}"],
                                source=f"{problem.path}:{problem.line}",
                                rule_unknown=True,
                            )
                        )
    if report.findings:
        report.notes = [n for n in report.notes if not n.startswith("nothing was checked")]
    return report


@dataclass
class Baseline:
    """A recorded `hprobe matrix --json`, read and checked before any probing."""

    release: ProbedRelease
    needed: dict[str, list[int]]
    heads: list[int]


def load_baseline(path: str) -> Baseline:
    import json
    from pathlib import Path

    from .fileio import read_text

    try:
        doc = json.loads(read_text(Path(path), "baseline (a recorded `hprobe matrix --json`)"))
    except RecursionError:
        raise InputError(f"--baseline {path}: nested too deeply to be an hprobe matrix document") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"--baseline {path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict) or doc.get("schema") not in ("hprobe.matrix/1", "hprobe.matrix/2"):
        raise InputError(f"--baseline {path}: not an hprobe matrix document (record one with `hprobe matrix --json > FILE`)")
    try:
        recorded = [KernelSMResult.from_dict(r) for r in doc["results"]]
        first_version = doc["releases"][0]["version"] if doc.get("releases") else doc["flashinfer"]["version"]
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise InputError(f"--baseline {path}: malformed result ({type(exc).__name__}: {exc})") from None
    recorded = [r for r in recorded if r.flashinfer_version == first_version] or recorded
    if not recorded:
        raise InputError(f"--baseline {path}: records no results")
    needed: dict[str, list[int]] = {}
    heads: set[int] = set()
    for r in recorded:
        key = get_variant(r.key).key  # an unknown kernel is an input error here
        needed.setdefault(key, [])
        if r.sm not in needed[key]:
            needed[key].append(r.sm)
        heads.update(r.heads)
    if any(not isinstance(h, int) or not 0 < h <= MAX_HEADS for h in heads):
        raise InputError(f"--baseline {path}: records head counts outside 1..{MAX_HEADS}")
    parse_sm_list(",".join(str(sm) for sms in needed.values() for sm in sms))  # an impossible SM is an input error
    old = ProbedRelease(f"baseline {path}", FlashinferInfo(first_version, str(path)), {(get_variant(r.key).key, r.sm): r for r in recorded})
    return Baseline(old, needed, sorted(heads))


def baseline_drift(baseline: Baseline, flashinfer_spec: str | None, use_cache: bool, progress: Progress = _quiet) -> dict:
    """`check --baseline FILE`: probe the kernels, SMs and h_q a recorded
    `hprobe matrix --json` covers, and say what changed since."""
    from .drift import diff_reports

    label = flashinfer_spec or INSTALLED
    new = gather([label], baseline.needed, baseline.heads, use_cache, progress)[label]
    sms = sorted({sm for v in baseline.needed.values() for sm in v})
    report = MatrixReport([baseline.release, new], Targets([SM.from_number(s) for s in sms], "baseline"), baseline.heads)
    return diff_reports(report)
