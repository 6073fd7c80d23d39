"""A padding table read from a consumer's source tree: padding classes found with
`ast`, their rule evaluated statically per head count, mapped to kernel probes
by a mapping file. Nothing in the tree is imported or executed."""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, assert_never

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from hprobe.model.errors import InputError, NothingToCheck
from hprobe.model.padding import (
    Backend,
    Model,
    NoPadding,
    PaddingRule,
    PaddingTable,
    PadMap,
    PadTo,
    Provenance,
    Reach,
    Where,
)
from hprobe.model.sm import sm_names
from hprobe.rules import shipped_data
from hprobe.rules.interface import RuleSource
from hprobe.rules.repo.interpreter.evaluate import FlashinferSource, NotEvaluable, Raises, evaluate
from hprobe.rules.repo.pin import RepoPin, find_pin, project_folders
from hprobe.rules.repo.tracing.paths import PathContext, PathReading, options_from_calls, read_paths
from hprobe.rules.repo.tree.engine import read_reach
from hprobe.rules.repo.tree.mapping import ClassMapping, Mapping, shipped_mappings
from hprobe.rules.repo.tree.registry import Served, served_architectures
from hprobe.rules.repo.tree.scan import DEFAULT_EXCLUDES, ClassInfo, FunctionInfo, RepoIndex
from hprobe.rules.repo.tree.status import ClassStatus
from hprobe.rules.toml_writer import table_toml as write_table_toml
from hprobe.system.fileio import regular_file
from hprobe.system.parsing import parse_module

if TYPE_CHECKING:
    from hprobe.rules.repo.interpreter.bound import BoundRule, RuleSite

# The bound-rule interpreter is imported where rules are evaluated: a warm run
# reads a reading back from the cache (support/readings.py) without it.

PROBE_RANGE = range(1, 257)  # counts a rule is evaluated over to recover its shape

# extract()'s signature: how a tree is read (directly, or through a cache).
Extractor = Callable[..., "RepoTables"]


@dataclass
class PaddingClass:
    """One class whose padding method the tree defines or inherits."""

    cls: ClassInfo
    function: FunctionInfo  # where the rule is written (maybe in a base class)
    path: str  # the function's file as shown to the user
    rule: PaddingRule | None = None
    outputs: dict[int, int | Raises] = field(default_factory=dict)
    problem: NotEvaluable | None = None
    entries: list[ClassMapping] = field(default_factory=list)
    bound: list[BoundRule] = field(default_factory=list)  # rules evaluated per entry, SM and model
    reads_flashinfer: bool = False  # the rule reads the judged release's own tables

    @property
    def mapping(self) -> ClassMapping | None:
        return self.entries[0] if self.entries else None

    @property
    def site(self) -> RuleSite:
        from hprobe.rules.repo.interpreter.bound import RuleSite

        return RuleSite(self.cls, self.function, self.path)

    @property
    def where(self) -> Where:
        return Where(self.path, self.function.line)

    @property
    def status(self) -> ClassStatus:
        if self.problem is not None:
            return ClassStatus.NOT_EVALUABLE
        if self.mapping is None:
            return ClassStatus.UNMAPPED
        return ClassStatus.UNPROBED if self.mapping.kernel is None else ClassStatus.MAPPED

    def not_probed_because(self) -> str | None:
        """Why this class's rule is not judged against a kernel; None when it is."""
        match self.status:
            case ClassStatus.MAPPED:
                return None
            case ClassStatus.UNPROBED:
                return f"not probed: {self.mapping.unprobed if self.mapping else ''}"
            case ClassStatus.UNMAPPED:
                return "not in the mapping file, so no kernel to judge it against"
            case ClassStatus.NOT_EVALUABLE:
                return f"not evaluable: {self.problem}"
            case _:
                assert_never(self.status)


@dataclass
class RepoTables:
    root: str
    table: PaddingTable
    classes: list[PaddingClass]
    pin: RepoPin | None
    notes: list[str]
    index: RepoIndex | None = None  # the parsed tree, for `suggest --diff`
    mapping: Mapping | None = None  # what was read with, to read again per release
    excludes: tuple[str, ...] = ()
    overrides: dict[str, str] = field(default_factory=dict)
    flashinfer_version: str | None = None  # the release the rules were evaluated against
    paths: PathReading = field(default_factory=PathReading)  # every call of a probed FlashInfer entry
    reader: Extractor | None = None  # how it was read (through the cache or not), to read again per release
    # flashinfer requirements present but unreadable (each said as where and
    # why): with no pin read, which release the tree installs is unknown
    pin_unread: tuple[str, ...] = ()

    @property
    def per_release(self) -> bool:
        """Some rule or call path reads flashinfer's own tables (or objects):
        its padding depends on the release."""
        return any(c.reads_flashinfer for c in self.classes) or any(
            p.problem.needs_release for p in self.paths.problems
        )

    def against(self, release: FlashinferSource, label: str) -> RepoTables:
        """The same tree read again with its rules evaluated against `release`,
        as a table judged on that release only."""
        assert self.mapping is not None
        # The tree as this reading parsed it, where it holds it: what a module
        # says does not depend on the release its rules are evaluated against.
        # Not where a file could not be read or parsed: the notes of that
        # would then depend on what the first reading happened to open.
        index = self.index if self.index is not None and not self.index.problems and not self.index.unread else None
        again = (self.reader or extract)(
            Path(self.root), self.mapping, self.excludes, release, self.overrides, index=index
        )
        table = replace(again.table, name=f"{self.table.name} on flashinfer {release.version}", releases=(label,))
        return replace(again, table=table, flashinfer_version=release.version)

    def indexed(self) -> RepoTables:
        """This reading with its parsed tree, which one kept in the cache does
        not hold (a patch edits the nodes it read): the tree read again."""
        if self.index is not None:
            return self
        assert self.mapping is not None and self.flashinfer_version is None, "a tree read per release is not patched"
        again = extract(Path(self.root), self.mapping, self.excludes, None, self.overrides)
        return replace(again, table=self.table)  # the table as overridden and judged

    def to_dict(self) -> dict:
        return {
            "root": self.root,
            "pin": {"spec": self.pin.spec, "source": self.pin.source} if self.pin else None,
            "classes": [
                {
                    "class": c.cls.name,
                    "module": c.cls.module.name,
                    "defined_at": str(c.where),
                    "status": c.status.value,
                    "rule": c.rule.describe() if c.rule else None,
                    "bound": [b.to_dict() for b in c.bound],
                    "reads_flashinfer": c.reads_flashinfer,
                    "not_evaluable": str(c.problem) if c.problem else None,
                    "kernel": c.mapping.kernel if c.mapping else None,
                    "unprobed": c.mapping.unprobed if c.mapping else None,
                }
                for c in self.classes
            ],
            "call_paths": [p.to_dict() for p in self.paths.paths],
            "notes": self.notes,
        }


def extract(
    root: Path,
    mapping: Mapping,
    excludes: tuple[str, ...] = (),
    flashinfer: FlashinferSource | None = None,
    overrides: dict[str, str] | None = None,
    index: RepoIndex | None = None,
) -> RepoTables:
    """Find the padding classes under `root`, evaluate their rules, build a table.
    `flashinfer`: the release judged, for rules that read its tables;
    `overrides`: --set values for the consumer's settings; `index`: the tree
    as already read (a patch checked before it is written), else read here."""
    if not root.exists():
        raise InputError(f"--repo {root}: no such file or directory")
    if not root.is_dir() and not (regular_file(root) and root.suffix == ".py"):
        raise InputError(f"--repo {root}: neither a directory nor a .py file")
    from hprobe.rules.repo.interpreter.bound import evaluate_entries, load_settings, shown_path

    if index is None:
        index = RepoIndex.build(root, DEFAULT_EXCLUDES + tuple(excludes))
    notes: list[str] = []
    found: list[PaddingClass] = []
    settings = load_settings(index, mapping.settings, overrides or {}) if mapping.bound else None
    if overrides and not mapping.bound:
        raise InputError(f"--set {next(iter(overrides))}: the mapping's rules read no settings")
    for cls in index.classes_with(mapping.method):
        function = _resolve_method(index, cls, mapping.method)
        if function is None:
            continue
        path = os.path.normpath(str(root / function.module.path)) if root.is_dir() else str(root)
        entries = mapping.classes.get(cls.qualname) or mapping.classes.get(cls.name) or []
        item = PaddingClass(cls, function, path, entries=list(entries))
        if mapping.bound:
            result = evaluate_entries(index, item.site, item.entries, mapping, settings, flashinfer)
            item.bound, item.reads_flashinfer = result.rules, result.reads_flashinfer
            if result.problem is not None:
                item.problem = NotEvaluable(
                    shown_path(item.site, result.problem.path), result.problem.line, result.problem.what
                )
        else:
            _evaluate_rule(index, item)
        fewer = [(n, v) for n, v in item.outputs.items() if isinstance(v, int) and v < n]
        if fewer:
            n, v = fewer[0]
            notes.append(f"{cls.qualname} ({item.where}) returns {v} for {n} heads: fewer than it has")
        found.append(item)
    found.sort(key=lambda c: (c.cls.module.name, c.cls.name))
    served_models, served = _served(index, mapping.models, notes)
    # Kept for a reading again (per release, or to patch): it asks the registry
    # again, and says again which models this tree does not serve.
    given = mapping
    mapping = replace(mapping, models=served_models)
    reaches = {
        name: read_reach(index, setting, mapping.platform, _gated_sms(mapping, name))
        for name, setting in mapping.engine_settings.items()
    }
    shown = (lambda rel: os.path.normpath(str(root / rel))) if root.is_dir() else (lambda rel: str(root))
    # Judged through their own entries (inconclusive there where not evaluable).
    rule_classes = {c.cls.qualname: str(c.where) for c in found if c.status is not ClassStatus.UNMAPPED}
    paths = read_paths(
        PathContext(index, mapping, list(mapping.models), rule_classes, settings, flashinfer, reaches, shown, served)
    )
    if not found and not paths.paths:
        raise _NoRule(root, mapping, _read_summary(index))
    notes[:0] = index.problems  # files are parsed on demand: known only now
    for name in mapping.classes:
        if not any(name in (c.cls.name, c.cls.qualname) for c in found):
            unparsed = f" ({len(index.problems)} file(s) could not be parsed; see above)" if index.problems else ""
            notes.append(f"the mapping names {name}, which this tree does not define{unparsed}")
    notes.extend(paths.notes)
    pin_unread: list[str] = []
    pin = find_pin(root, notes, pin_unread)
    backends = [b for item in found for b in _fed_backends(item, reaches, mapping.models, paths)]
    backends.extend(paths.backends)
    table = PaddingTable(
        name=f"{root.name or root} ({mapping.method if found else 'call paths'})",
        source=f"{root} read with ast; mapping {_mapping_label(mapping)}",
        path=str(root),
        requires_flashinfer=pin.spec if pin else None,
        models=list(mapping.models),
        backends=backends,
    )
    table.provenance = _provenance(root, index, mapping, found, paths)
    if any(c.reads_flashinfer for c in found) and flashinfer is None:
        notes.append("some rules read flashinfer's own tables: they are evaluated against each release judged")
    return RepoTables(
        str(root),
        table,
        found,
        pin,
        notes,
        index,
        given,
        tuple(excludes),
        dict(overrides or {}),
        flashinfer.version if flashinfer else None,
        paths,
        pin_unread=tuple(pin_unread),
    )


def _gated_sms(mapping: Mapping, setting: str) -> tuple[int, ...]:
    """The SMs of the paths a setting gates: its default is read on them."""
    classes = [e for entries in mapping.classes.values() for e in entries if e.reaches_when == setting]
    calls = [c for c in mapping.calls if setting in (c.reaches_when, *(s for _, s in c.reaches_for))]
    return tuple(sorted({sm for e in classes for sm in e.sms} | {sm for c in calls for sm in c.sms}))


def _served(index: RepoIndex, models: list[Model], notes: list[str]) -> tuple[list[Model], Served | None]:
    """The models this tree can load (its registry names one of their
    architectures), each other said once; models named with --model, and
    those of a table or --heads (no architectures), are judged whatever.
    With them, what the registry says (None: no registry read)."""
    wanted = {a for m in models for a in m.architectures}
    served = served_architectures(index, wanted) if wanted else None
    if served is None:
        if wanted:
            notes.append(
                "this tree has no model registry hprobe reads (vLLM's model_executor/models/registry.py, SGLang's "
                "EntryClass declarations): every model is judged"
            )
        return models, None
    kept = []
    for model in models:
        if not model.architectures or set(model.architectures) & served.architectures:
            kept.append(model)
        elif model.asked:
            kept.append(model)
            notes.append(
                f"{model.name}: judged as asked (--model), though this tree serves no "
                f"{' or '.join(model.architectures)} ({served.where})"
            )
        else:
            notes.append(
                f"{model.name}: not served by this tree (no {' or '.join(model.architectures)} in {served.where}): not "
                "judged"
            )
    return kept, served


def _provenance(
    root: Path, index: RepoIndex, mapping: Mapping, found: list[PaddingClass], paths: PathReading
) -> tuple[Provenance, ...]:
    """Where each judged rule and call is, in the engine release the tree is
    (its wheel's own paths): an extracted table carries its own citations.
    Empty when the tree does not say which release it is."""
    package = mapping.package
    release = engine_version(root, package) if package else None
    if package is None or release is None or not root.is_dir():
        return ()
    prefix = f"{package}/" if root.name == package else ""
    cited: set[tuple[str, int]] = set()
    for item in found:
        if item.status is ClassStatus.MAPPED:
            cited.add((item.function.module.path, item.function.line))
    cited |= paths.cited
    out = []
    for rel, line in sorted(cited):
        text = index.source_line(rel, line)
        if text is not None:
            out.append(Provenance(package, str(release), prefix + rel, line, text))
    return tuple(out)


def _mapping_label(mapping: Mapping) -> str:
    """A shipped mapping by its name (the same on every machine), another by its path."""
    shipped = shipped_data("mappings")
    return f"hprobe's mappings/{Path(mapping.path).name}" if Path(mapping.path).parent == shipped else mapping.path


class _NoRule(NothingToCheck):
    """No class of the tree has the mapping's method; `read` says what was read."""

    def __init__(self, root: Path, mapping: Mapping, read: str):
        super().__init__(
            f"--repo {root}: no class defines or inherits `{mapping.method}` and nothing calls a FlashInfer entry "
            f"hprobe probes ({read})"
        )
        self.read = read


def _read_summary(index: RepoIndex) -> str:
    unparsed = f"; {len(index.problems)} file(s) not parsed: {index.problems[0]}" if index.problems else ""
    return f"{len(index.files)} Python files read{unparsed}"


def _fed_backends(
    item: PaddingClass, reaches: dict[str, Reach], models: list[Model], paths: PathReading
) -> list[Backend]:
    """A class's backends as the calls its rule feeds make them: bound against
    each release's signature, with the backend those calls pass."""
    out = []
    for b in _backends(item, reaches, models):
        fed = paths.calls_through(item.cls.name, b.kernel, b.sms) or paths.calls_through(
            item.cls.qualname, b.kernel, b.sms
        )
        out.append(replace(b, calls=fed, options=options_from_calls(b.kernel, b.options, fed)))
    return out


def _backends(item: PaddingClass, reaches: dict[str, Reach], models: list[Model]) -> list[Backend]:
    m = item.mapping
    if item.bound:
        names = [f"{item.cls.qualname}{b.entry.label}" for b in item.bound]
        out = []
        for name, b in zip(names, item.bound, strict=True):
            assert b.entry.kernel is not None  # bound rules exist for probed entries only
            if names.count(name) > 1:  # the entry split by SM or model: say which
                sms = sm_names(b.sms)
                name = f"{name} ({sms}{' ' + '/'.join(b.models) if b.models else ''})"
            reach = reaches.get(b.entry.reaches_when) if b.entry.reaches_when else None
            served = b.models or family_models(models, b.entry.model_family)
            if served is None:
                continue
            out.append(
                Backend(
                    name,
                    b.entry.kernel,
                    b.sms,
                    b.rule,
                    item.where,
                    b.entry.options,
                    models=served,
                    branches=b.branches,
                    reach=reach,
                    crashes=b.crashes,
                )
            )
        return out
    if m is None or m.kernel is None or item.rule is None:
        return []
    reach = reaches.get(m.reaches_when) if m.reaches_when else None
    served = family_models(models, m.model_family)
    if served is None:
        return []
    return [Backend(item.cls.qualname, m.kernel, m.sms, item.rule, item.where, m.options, models=served, reach=reach)]


def family_models(models: list[Model], family: str | None) -> tuple[str, ...] | None:
    """The names of the models a path of `family` serves; () when it serves
    them all, None when it serves none of them (no backend then)."""
    if family is None:
        return ()
    names = tuple(m.name for m in models if m.takes(family))
    if not names:
        return None
    return names if len(names) < len(models) else ()


def _resolve_method(index: RepoIndex, cls: ClassInfo, method: str) -> FunctionInfo | None:
    for klass in index.mro(cls):
        if method in klass.methods:
            fn = klass.methods[method]
            return None if fn.abstract else fn
    return None


def _evaluate_rule(index: RepoIndex, item: PaddingClass) -> None:
    from hprobe.rules.repo.interpreter.bound import shown_path

    for n in PROBE_RANGE:
        result = evaluate(index, item.cls, item.function, n)
        if isinstance(result, NotEvaluable):
            # Shown as the tree's path, like the rule's own location.
            item.problem = NotEvaluable(shown_path(item.site, result.path), result.line, result.what)
            item.outputs.clear()
            return
        item.outputs[n] = result
    item.rule = _rule_of(item.outputs)


def evaluate_class(index: RepoIndex, item: PaddingClass, method: str) -> PaddingRule | NotEvaluable:
    """The rule of `item`'s class as `index` reads it now (a patched tree checked
    before the patch is written)."""
    cls = next((c for c in index.classes_with(method) if c.qualname == item.cls.qualname), None)
    function = _resolve_method(index, cls, method) if cls is not None else None
    if cls is None or function is None:
        return NotEvaluable(item.path, item.function.line, f"{item.cls.qualname} no longer defines {method}")
    fresh = PaddingClass(cls, function, item.path)
    _evaluate_rule(index, fresh)
    return fresh.problem or fresh.rule or NotEvaluable(item.path, function.line, "no rule")


def _rule_of(outputs: dict[int, int | Raises]) -> PaddingRule:
    """The simplest rule that reproduces every evaluated output: pad_to when the
    function rounds up to a fixed set, else an explicit pad_map."""
    if all(v == n for n, v in outputs.items()):
        return NoPadding()
    values = sorted({v for v in outputs.values() if isinstance(v, int)})
    if values:
        candidate = PadTo(tuple(values))
        if all(candidate.pad(n) == (v if isinstance(v, int) else None) for n, v in outputs.items()):
            return candidate
    return PadMap(tuple((n, v) for n, v in sorted(outputs.items()) if isinstance(v, int)))


def table_toml(tables: RepoTables) -> str:
    """The extracted table as TOML that `hprobe check --table` reads back to the
    same table, with each backend's source line and the classes not probed as
    comments."""
    t = tables.table
    header = ["Extracted by `hprobe table extract`: padding rules read from source with ast.", f"Tree: {tables.root}"]
    if tables.flashinfer_version:
        header.append(
            f"Rules evaluated against flashinfer {tables.flashinfer_version}: they read its own tables, so another "
            "release may pad differently"
        )
    if t.requires_flashinfer and tables.pin:
        header.append(f"requires_flashinfer read from {tables.pin.source}")
    footer = []
    others = [c for c in tables.classes if c.status is not ClassStatus.MAPPED]
    if others:
        footer.append("Not judged against a kernel:")
        for c in others:
            detail = c.not_probed_because()
            rule = f"; {c.rule.describe()}" if c.rule else ""
            footer.append(f"  {c.cls.name} ({c.where}){rule}: {detail}")
    # A rule evaluated per binding names each branch it took; others, their line.
    comments = {b.name: "; ".join(dict.fromkeys(why for _, why in b.branches)) or str(b.where) for b in t.backends}
    return write_table_toml(t, header, comments, footer)


def engine_version(root: Path, package: str) -> Version | None:
    """The engine release a tree is, from its wheel's or installation's
    `.dist-info` name, else its `_version.py`/`version.py` literal; None when
    the tree does not say."""
    base = root if root.is_dir() else root.parent
    if not (base.name == package or (base / package).is_dir()):
        base = next(iter(project_folders(base, package)), base)  # a repository with the package in python/
    prefix = package.replace("-", "_").lower() + "-"
    for folder in (base, base.parent):
        try:
            names = sorted(p.name for p in folder.iterdir() if p.name.lower().endswith(".dist-info"))
        except OSError:
            continue
        for name in names:
            if name.lower().startswith(prefix):
                try:
                    return Version(name[len(prefix) : -len(".dist-info")])
                except InvalidVersion:
                    continue
    package_dir = base if base.name == package else base / package
    for candidate in ("_version.py", "version.py"):
        path = package_dir / candidate
        if regular_file(path):
            try:
                tree = parse_module(path.read_text(errors="replace"))
            except (SyntaxError, ValueError, OSError):
                continue
            for node in tree.body:
                if (
                    isinstance(node, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id in ("__version__", "version") for t in node.targets)
                    and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)
                ):
                    try:
                        return Version(node.value.value)
                    except InvalidVersion:
                        break
    return None


def _mentions_package(root: Path, package: str) -> bool:
    """The tree is that engine's package, holds it (itself, or in a project
    folder one level down, as SGLang's repository keeps it in python/), or is
    an unpacked wheel of it."""
    base = root if root.is_dir() else root.parent
    return (
        base.name == package
        or (base / package).is_dir()
        or any(base.glob(f"{package}-*.dist-info"))
        or any(base.parent.glob(f"{package}-*.dist-info"))
        or bool(project_folders(base, package))
    )


def extract_any(
    root: Path,
    mapping: Mapping | None,
    excludes: tuple[str, ...] = (),
    flashinfer: FlashinferSource | None = None,
    overrides: dict[str, str] | None = None,
    models: Callable[[list[Model]], list[Model]] | None = None,
    reader: Extractor | None = None,
) -> RepoTables:
    """`extract` with the mapping given, else the shipped mapping of the engine
    the tree is (vLLM or SGLang, by package name), else each shipped mapping in
    turn. Nothing found: one line naming the methods and mappings tried.
    `models`: --heads/--tp applied to the mapping's models before any rule is
    evaluated (a rule bound per model is evaluated for the counts asked about).
    `reader`: `extract` itself, or one through a cache (support/readings.py)."""
    read_tree = reader or extract
    if mapping is not None:
        return replace(
            read_tree(
                root,
                replace(mapping, models=models(mapping.models)) if models else mapping,
                excludes,
                flashinfer,
                overrides,
            ),
            reader=read_tree,
        )
    candidates = [replace(m, models=models(m.models)) if models else m for m in shipped_mappings()]
    detected = [m for m in candidates if m.package and _mentions_package(root, m.package)]
    # Several mappings of one engine (one per era of its source): the one whose
    # `versions` admit the tree's release, when the tree says which it is.
    release = engine_version(root, detected[0].package) if detected and detected[0].package else None
    fitting = [
        m
        for m in detected
        if release is not None
        and m.versions is not None
        and SpecifierSet(m.versions).contains(release, prereleases=True)
    ]
    detected = fitting or detected
    tried = detected if len(detected) == 1 else (detected or candidates)
    read = ""
    for m in tried:
        try:
            found = replace(read_tree(root, m, excludes, flashinfer, overrides if m.bound else None), reader=read_tree)
        except _NoRule as exc:
            # What was read (the same tree each time; files are parsed only when
            # they name the method, so keep the fullest account).
            read = max(read, exc.read, key=len)
            continue
        if overrides and not m.bound:
            raise InputError(
                f"--set {next(iter(overrides))}: the rules of this tree ({Path(m.path).name}) read no settings"
            )
        return found
    by_method: dict[str, list[str]] = {}
    for m in tried:
        by_method.setdefault(m.method, []).append(Path(m.path).name)
    methods = ", ".join(f"`{method}` ({', '.join(names)})" for method, names in by_method.items())
    raise NothingToCheck(
        f"--repo {root}: no class defines or inherits {methods} and nothing calls a FlashInfer entry hprobe probes "
        f"({read}); give --mapping for another engine"
    )


class RepoRuleSource(RuleSource):
    """The padding classes of a source tree, read with `ast` and mapped to
    kernels: `read` gives the full record (classes, call paths, pin, what was
    not probed), `collect` its table."""

    def __init__(
        self,
        root: Path,
        mapping: Mapping | None,
        excludes: tuple[str, ...] = (),
        overrides: dict[str, str] | None = None,
        models: Callable[[list[Model]], list[Model]] | None = None,
        read: Extractor | None = None,
    ):
        self.root, self.mapping, self.excludes, self.overrides = root, mapping, excludes, overrides or {}
        self.models, self.reader = models, read

    def read(self) -> RepoTables:
        return extract_any(self.root, self.mapping, self.excludes, None, self.overrides, self.models, self.reader)

    def collect(self) -> PaddingTable:
        return self.read().table
