"""The jobs behind `hprobe check` and `hprobe matrix`: choose targets, probe, compare."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import __version__
from .core import Finding, check_table, exit_code
from .errors import InputError
from .kernels import get_probe
from .matrix import probe_kernel
from .outcome import KernelSMResult
from .shim import FlashinferSession
from .sm import SM, detect_gpus, parse_sm_list
from .tables import PaddingTable

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
    """`1-256`, `8,16,24`, `1-8,16`: positive head counts."""
    values: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                lo_text, hi_text = part.split("-", 1)
                lo, hi = int(lo_text), int(hi_text)
                if lo > hi:
                    raise InputError(f"--heads {text!r}: range {part} runs backwards")
                values.update(range(lo, hi + 1))
            else:
                values.add(int(part))
        except ValueError:
            raise InputError(f"--heads {text!r}: expected counts like 1-256 or 8,16,24") from None
    if not values:
        raise InputError(f"--heads {text!r}: no head counts given")
    if min(values) <= 0:
        raise InputError(f"--heads {text!r}: head counts must be positive")
    if max(values) > 4096:
        raise InputError(f"--heads {text!r}: head counts above 4096 are not probed")
    return sorted(values)


@dataclass
class FlashinferInfo:
    version: str
    location: str
    import_seconds: float | None


@dataclass
class MatrixReport:
    flashinfer: FlashinferInfo
    targets: Targets
    heads: list[int]
    results: list[KernelSMResult]

    def to_dict(self) -> dict:
        return {
            "schema": "hprobe.matrix/1",
            "hprobe_version": __version__,
            "flashinfer": {"version": self.flashinfer.version, "location": self.flashinfer.location},
            "sm_source": self.targets.source,
            "sms": [sm.number for sm in self.targets.sms],
            "heads": {"min": min(self.heads), "max": max(self.heads), "count": len(self.heads)},
            "results": [r.to_dict() for r in self.results],
        }


@dataclass
class CheckReport:
    flashinfer: FlashinferInfo
    targets: Targets
    tables: list[PaddingTable]
    findings: list[Finding]
    strict: bool
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return exit_code(self.findings, self.strict)

    def to_dict(self) -> dict:
        counts: dict[str, int] = {}
        for f in self.findings:
            counts[f.verdict.value] = counts.get(f.verdict.value, 0) + 1
        return {
            "schema": "hprobe.check/1",
            "hprobe_version": __version__,
            "flashinfer": {"version": self.flashinfer.version, "location": self.flashinfer.location},
            "sm_source": self.targets.source,
            "sms": [sm.number for sm in self.targets.sms],
            "strict": self.strict,
            "exit_code": self.exit_code,
            "summary": counts,
            "tables": [{"name": t.name, "path": t.path, "source": t.source, "requires_flashinfer": t.requires_flashinfer} for t in self.tables],
            "findings": [f.to_dict() for f in self.findings],
            "notes": self.notes,
        }


def _open_session(targets: Targets) -> FlashinferSession:
    session = FlashinferSession(targets.sms[0])
    session.open()
    return session


def run_matrix(kernel_ids: list[str], sm_option: str | None, heads: list[int]) -> MatrixReport:
    probes = [get_probe(k) for k in kernel_ids]
    fallback = sorted({sm for p in probes for sm in p.default_sms})
    targets = resolve_targets(sm_option, fallback, "the kernels are built for")
    session = _open_session(targets)
    try:
        results: list[KernelSMResult] = []
        for probe in probes:
            results.extend(probe_kernel(session, probe, targets.sms, heads))
        info = FlashinferInfo(session.version, session.location, session.import_seconds)
    finally:
        session.close()
    return MatrixReport(info, targets, heads, results)


def run_check(tables: list[PaddingTable], sm_option: str | None, strict: bool) -> CheckReport:
    for table in tables:
        for backend in table.backends:
            try:
                get_probe(backend.kernel)
            except InputError as exc:
                raise InputError(f"{backend.where}: backend {backend.name}: {exc.message}") from None
    fallback = sorted({sm for t in tables for b in t.backends for sm in b.sms})
    targets = resolve_targets(sm_option, fallback, "the tables name")
    numbers = [sm.number for sm in targets.sms]
    # Probe each kernel once per SM over 1..max(256, largest padded count).
    needed: dict[str, set[int]] = {}
    ceiling = DEFAULT_MAX_HEADS
    for table in tables:
        for backend in table.backends:
            needed.setdefault(backend.kernel, set()).update(sm for sm in backend.sms if sm in numbers)
            ceiling = max(ceiling, backend.rule.largest(), *(m.num_q_heads for m in table.models))
    heads = list(range(1, ceiling + 1))
    support: dict[tuple[str, int], KernelSMResult] = {}
    findings: list[Finding] = []
    notes: list[str] = [targets.note] if targets.note else []
    if any(needed.values()):
        session = _open_session(targets)
        try:
            for kernel_id, sms in needed.items():
                if not sms:
                    continue
                probe = get_probe(kernel_id)
                for result in probe_kernel(session, probe, [SM.from_number(s) for s in sorted(sms)], heads):
                    support[(kernel_id, result.sm)] = result
            info = FlashinferInfo(session.version, session.location, session.import_seconds)
        finally:
            session.close()
    else:
        info = _installed_flashinfer_info()
    for table in tables:
        table_findings, table_notes = check_table(table, support, numbers)
        findings.extend(table_findings)
        notes.extend(table_notes)
        if table.requires_flashinfer:
            notes.extend(_pin_note(table, info.version))
    if not findings:
        notes.append("nothing was checked: no backend of the tables runs on the SMs selected")
    return CheckReport(info, targets, tables, findings, strict, notes)


def _pin_note(table: PaddingTable, version: str) -> list[str]:
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        admitted = Version(version) in SpecifierSet(table.requires_flashinfer or "", prereleases=True)
    except InvalidVersion:
        return []
    if admitted:
        return []
    return [
        f"{table.name}: the table pins flashinfer {table.requires_flashinfer}, but {version} is installed: "
        "these verdicts describe the installed release, not the pinned one"
    ]


def _installed_flashinfer_info() -> FlashinferInfo:
    from .envinfo import distribution_version, flashinfer_origin

    return FlashinferInfo(distribution_version("flashinfer-python") or "not installed", flashinfer_origin() or "", None)
