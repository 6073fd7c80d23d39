"""Call paths: every call of a probed FlashInfer entry in an engine's tree
(calls.py finds them all), each judged or listed.

The mapping's [[call]] entries say, per call site, what decides the head
count it hands FlashInfer and which kernel variant that count reaches:

- unpadded: the engine's per-rank count (heads // tp), as it is;
- rule: a padding class's method (`padded_by`), judged by that class's own
  [[class]] entries; the path is listed as judged through it;
- inline: a padding written in a method (`inline`, `variable`), evaluated
  here per count (inline.py);

and whether the backend is picked by count (`backend_by`, a function of the
engine evaluated per count: vLLM's `_select_mla_decode_backend`). A call the
mapping does not describe, or describes as `unresolved`, is listed with its
file:line and why: nothing an engine hands FlashInfer is dropped. What the
mapping says is checked against the call itself where the call says it (the
entry called, a literal `backend=`, whether `sparse_mla_top_k` is passed)."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Any, assert_never

from hprobe.kernels import get_probe, probes_called_as, probes_not_read
from hprobe.model.assumption import Assumption
from hprobe.model.call import CallForm
from hprobe.model.errors import InputError
from hprobe.model.padding import Backend, CallPathRecord, Model, PadMap, Reach, Where
from hprobe.model.sm import sm_names
from hprobe.rules.repo.interpreter.evaluate import (
    Binding,
    FlashinferSource,
    NotEvaluable,
    Raises,
    Settings,
    evaluate_call,
)
from hprobe.rules.repo.tracing.calls import CallSite, find_calls
from hprobe.rules.repo.tree.mapping import HEADS_INLINE, HEADS_RULE, HEADS_UNPADDED, CallMapping, Mapping
from hprobe.rules.repo.tree.registry import Served
from hprobe.rules.repo.tree.scan import RepoIndex

if TYPE_CHECKING:
    from hprobe.rules.repo.interpreter.inline import InlineSite
    from hprobe.rules.repo.tracing.heads import HeadTrail, TreeCalls
    from hprobe.rules.repo.tracing.keywords import KeywordReading
    from hprobe.rules.repo.tracing.traced import Answers

# The tracing, keyword and inline machinery is imported where a reading is
# made: a warm run reads a reading back from the cache (support/readings.py),
# and these modules' classes are none of what it holds.


class PathStatus(str, Enum):
    """Where a call path stands."""

    JUDGED = "judged"  # its count is judged here, as a backend of the table
    BY_RULE = "by-rule"  # its count is a padding class's rule, judged with that class
    NOT_EVALUABLE = "not-evaluable"  # its count is decided by code hprobe cannot evaluate: inconclusive
    # its count was not followed: shown under the stated assumption (the
    # model's heads // tp, unpadded), undecided for the gate
    ASSUMED = "assumed"
    UNRESOLVED = "unresolved"  # hprobe cannot say what it hands FlashInfer: listed with why

    @property
    def judged(self) -> bool:
        match self:
            case PathStatus.JUDGED | PathStatus.BY_RULE:
                return True
            case PathStatus.NOT_EVALUABLE | PathStatus.ASSUMED | PathStatus.UNRESOLVED:
                return False
            case _:
                assert_never(self)


@dataclass
class CallPath:
    """One call site with what decides its count (one per [[call]] entry that
    describes it, or one unresolved when none does)."""

    site: CallSite
    shown: str  # the site's file:line as the user named the tree
    status: PathStatus
    detail: str  # how its count is decided, or why it is not judged
    kernel: str | None = None
    backends: tuple[str, ...] = ()  # the table's backends that judge it
    phase: str | None = None
    reach: Reach | None = None
    entry: CallMapping | None = field(default=None, repr=False, compare=False)  # the [[call]] entry that describes it

    def record(self) -> CallPathRecord:
        return CallPathRecord(
            self.shown,
            self.site.function,
            self.site.entry,
            self.status.value,
            self.detail,
            self.kernel,
            self.phase,
            self.backends,
            self.sms,
        )

    @property
    def sms(self) -> tuple[int, ...]:
        """The SMs an unresolved path runs on, where its [[call]] entry says (() = any)."""
        return self.entry.sms if self.entry is not None and self.status is PathStatus.UNRESOLVED else ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "site": self.shown,
            "function": self.site.function,
            "calls": self.site.entry,
            "status": self.status.value,
            "detail": self.detail,
            "kernel": self.kernel,
            "phase": self.phase,
            "backends": list(self.backends),
            "sms": list(self.sms),
            "reach": self.reach.to_dict() if self.reach else None,
        }


@dataclass
class PathProblem:
    """A judged path whose count could not be evaluated: inconclusive where it runs."""

    backend: str
    kernel: str
    sms: tuple[int, ...]
    models: tuple[str, ...]
    problem: NotEvaluable


@dataclass
class PathReading:
    """Every call path of a tree, the backends that judge them, and the
    problems that make some inconclusive."""

    paths: list[CallPath] = field(default_factory=list)
    backends: list[Backend] = field(default_factory=list)
    problems: list[PathProblem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    cited: set[tuple[str, int]] = field(default_factory=set)  # (tree-relative file, line) each judged count rests on
    # (padding class, kernel) -> the calls whose counts that class's rule gives,
    # each with the SMs its mapping entry places it on: the class's backend is
    # bound against each release's signature through them
    rule_calls: dict[tuple[str, str], list[tuple[tuple[int, ...], CallForm]]] = field(default_factory=dict)

    def calls_through(self, cls: str, kernel: str, sms: tuple[int, ...]) -> tuple[CallForm, ...]:
        """The calls class `cls`'s rule feeds `kernel` through on any of `sms`."""
        return tuple(dict.fromkeys(form for on, form in self.rule_calls.get((cls, kernel), []) if set(on) & set(sms)))


@dataclass(frozen=True)
class PathContext:
    """What a path's count is evaluated with, besides the path itself."""

    index: RepoIndex
    mapping: Mapping
    models: list[Model]
    rule_classes: dict[str, str]  # padding class qualname -> where its rule is defined
    settings: Settings | None
    flashinfer: FlashinferSource | None
    reaches: dict[str, Reach]
    shown: Callable[[str], str]  # a tree-relative path as the user named the tree
    served: Served | None = None  # the tree's model registry: which code serves which architectures


def read_paths(context: PathContext) -> PathReading:
    """Every call of a probed entry in the tree, judged or listed."""
    from hprobe.rules.repo.tracing.heads import TreeCalls

    reading = PathReading()
    called_as = probes_called_as()
    not_read = probes_not_read()
    # One search finds both: the calls judged here and those of entries whose engine calls are not read yet.
    found = find_calls(context.index, frozenset(called_as) | frozenset(not_read))
    sites = [site for site in found if site.entry not in not_read]
    calls = TreeCalls(context.index)  # what one trail reads of the tree, the next reuses
    entries: dict[int, tuple[CallMapping, list[CallSite]]] = {}
    reading.notes.extend(_unprobed(context, frozenset(called_as)))
    reading.notes.extend(_calls_not_read(context, [site for site in found if site.entry in not_read], not_read))
    escapes = [site for site in sites if site.escape is not None]
    sites = [site for site in sites if site.escape is None]
    for site in escapes:
        path, backends = _escaped(context, site, called_as)
        reading.paths.append(path)
        reading.backends.extend(backends)
    forms = {site: _call_form(context, site) for site in sites}
    for site in sites:
        shown = f"{context.shown(site.path)}:{site.line}"
        described = _for_models(
            context, [m for m in context.mapping.calls if m.matches(site.module, site.function, site.entry)]
        )
        if not described:
            path, backends = _unmapped(context, site, shown, called_as[site.entry], reading.cited, calls)
            reading.paths.append(path)
            reading.backends.extend(replace(b, calls=(forms[site],)) for b in backends)
            continue
        for m in described:
            path = _describe(context, site, shown, m)
            path.entry = m
            reading.paths.append(path)
            if path.status is PathStatus.JUDGED:
                entries.setdefault(id(m), (m, []))[1].append(site)
            elif path.status is PathStatus.BY_RULE and m.padded_by is not None and m.kernel is not None:
                reading.rule_calls.setdefault((m.padded_by, m.kernel), []).append((m.sms, forms[site]))
    for m, judged_sites in entries.values():
        backends, problems = _backends(context, m, judged_sites, reading.cited)
        judged_forms = tuple(dict.fromkeys(forms[s] for s in judged_sites))
        backends = [
            replace(
                b,
                calls=judged_forms,
                options=options_from_calls(b.kernel, b.options, judged_forms, m.backend_by is not None),
            )
            for b in backends
        ]
        reading.backends.extend(backends)
        reading.problems.extend(problems)
        judged_by = tuple(b.name for b in backends) + tuple(p.backend for p in problems)
        for path in reading.paths:
            if path.entry is m and path.status is PathStatus.JUDGED:
                path.backends = judged_by
                if problems:
                    path.status = PathStatus.NOT_EVALUABLE
                    path.detail = f"{path.detail}; not evaluable: {problems[0].problem}"
    # The call's own tests, before those of the callers its trail crossed.
    reading.backends = [
        replace(b, guard=" and ".join(x for x in (g, b.guard) if x)) if (g := _guard(context, b, sites)) else b
        for b in reading.backends
    ]
    # An entry whose module is in the tree but whose call is not: the call
    # moved, or the mapping is for another release of that file.
    reading.notes.extend(
        f"the mapping's call at {m.site} ({m.entry}, {m.where}) is not in this tree's {context.shown(module.path)}"
        for m in context.mapping.calls
        if not any(m.matches(s.module, s.function, s.entry) for s in sites)
        and (module := context.index.by_suffix(m.module)) is not None
    )
    return reading


def _for_models(context: PathContext, described: list[CallMapping]) -> list[CallMapping]:
    """The [[call]] entries of one site that speak for a model judged here:
    where several describe the site per model family (DSA and NoPE DSA), one
    whose family no model here takes says nothing of this tree. Where none
    does, the site is still listed as ever (never dropped), but not as a call
    one family's entry says is not judged for that family alone."""
    kept = [m for m in described if m.model_family is None or any(mo.takes(m.model_family) for mo in context.models)]
    return kept or [m for m in described if m.unresolved is None or m.model_family is None] or described


def _guard(context: PathContext, backend: Backend, sites: list[CallSite]) -> str:
    """Where, inside the function holding its call, `backend`'s call runs
    (tracing/guards.py), in words: "cp_world > 1 (file.py:304)"; "" where no
    test guards it or its call is not one of `sites`."""
    from hprobe.rules.repo.tracing.guards import guards

    site = next(
        (s for s in sites if s.line == backend.where.line and context.shown(s.path) == backend.where.path), None
    )
    module = context.index.by_suffix(site.module) if site is not None else None
    if site is None or module is None:
        return ""
    found = guards(module.tree, site.line)
    if not found:
        return ""
    lines = ", ".join(str(line) for line, _ in found)
    return f"{' and '.join(test for _, test in found)} ({backend.where.path.rpartition('/')[2]}:{lines})"


# The top-k an assumed sparse call is shown with when its own is not a literal:
# DeepSeek V3.2's index_topk, which the DSA models of the models table share.
ASSUMED_TOPK = 2048


def _call_form(context: PathContext, site: CallSite) -> CallForm:
    """What the call at `site` passes, as written (keywords.call_form)."""
    from hprobe.rules.repo.tracing.keywords import call_form

    module = context.index.by_suffix(site.module)
    where = f"{context.shown(site.path)}:{site.line}"
    if module is None:
        return CallForm(site.entry, where, 0, site.keywords, unknown="its module could not be read again")
    return replace(call_form(context.index, module, site.line, site.entry, where), literals=site.constants)


def options_from_calls(
    kernel: str, options: tuple[tuple[str, str | int], ...], forms: tuple[CallForm, ...], picked: bool = False
) -> tuple[tuple[str, str | int], ...]:
    """A backend's probe options as its calls write them: the `backend` every
    call passes as one literal, or none where no call passes one (a mapping's
    `backend` the calls do not pass is the mapping's, not the engine's); the
    mapping's where the calls cannot tell or disagree, or where `kernel`'s
    probe has no backend axis. `picked`: the backend is picked per count by
    the engine's selector (the mapping says which)."""
    if not forms or picked or get_probe(kernel).axis("backend") is None:
        return options
    said = {form.passes("backend") for form in forms}
    if len(said) != 1:
        return options
    (passed,) = said
    kept = tuple((k, v) for k, v in options if k != "backend")
    if passed is False:
        return kept
    if isinstance(passed, str):
        return (*kept, ("backend", passed))
    return options


def _unmapped(
    context: PathContext, site: CallSite, shown: str, kernel: str, cited: set[tuple[str, int]], calls: TreeCalls
) -> tuple[CallPath, list[Backend]]:
    """A call no mapping entry describes: its head count followed through the
    engine's code from the layer's query (heads.py) and judged; where the trail
    ends, shown on the stated assumption with the file:line where it ended."""
    from hprobe.rules.repo.tracing.heads import HeadTrail
    from hprobe.rules.repo.tracing.traced import Answers, evaluate_trail

    probe = get_probe(kernel)
    axes = _call_axes(context, site, probe)
    unmapped = (
        f"{site.function or 'module level'} calls {site.entry}; the mapping does not say what decides its head count"
    )
    # Dispatch keywords hprobe cannot read leave the variant unknown: the call is
    # still shown, on the entry's defaults, and that is said (never dropped).
    options, said = axes if not isinstance(axes, str) else ({}, [f"{axes}: shown with {probe.id}'s defaults"])
    models, serves = _site_models(context, site)
    if not models:
        return CallPath(
            site,
            shown,
            PathStatus.JUDGED,
            f"{site.function or 'module level'} calls {site.entry}; {serves}, none of the models judged",
            kernel,
        ), []
    restrict = tuple(model.name for model in models) if len(models) < len(context.models) else ()
    end = _followed(context, site, probe, calls)
    counts = sorted({n for model in models for _, n in model.per_rank()})
    name = f"{site.module}.{site.function or '<module>'}:{site.line}"
    if isinstance(end, HeadTrail):
        found = evaluate_trail(end, counts, context.shown)
        if isinstance(found, Answers):
            return _traced(context, site, shown, kernel, end, found, said, options, models, serves, cited)
        # The count is the engine's expression, but it depends on what the
        # engine fills at run time: say both, with where evaluation stopped.
        unmapped = (
            f"{site.function or 'module level'} calls {site.entry} with {end.said} heads, followed from the layer's "
            f"query ({context.shown(end.root)})"
        )
        end = NotEvaluable(found.path, found.line, f"{end.said} depends on {found.what}")
    ended = _ended_at(context, end, shown)
    assumption = (
        f"assumed: the model's heads // tp, unpadded ({unmapped}; the trail ended at {ended}: "
        f"{end.what}{'; ' + '; '.join(said) if said else ''})"
    )
    backend = Backend(
        name + " [assumed]",
        kernel,
        probe.default_sms,
        PadMap(tuple((n, n) for n in counts)),
        Where(context.shown(site.path), site.line),
        tuple(options.items()),
        models=restrict,
        assumed=assumption,
        assumption=Assumption.HEADS,
    )
    detail = f"{unmapped}; the trail ended at {ended}: {end.what}: shown assuming the model's heads // tp, unpadded" + (
        f"; {serves}" if serves else ""
    )
    return CallPath(site, shown, PathStatus.ASSUMED, detail, kernel, backends=(backend.name,)), [backend]


def _unprobed(context: PathContext, probed: frozenset[str]) -> list[str]:
    """The names the tree imports from FlashInfer's MLA code (a module or a
    name that says `mla`) and calls that no probe answers for: those calls
    are not judged, and the report says so rather than leave them
    unmentioned. (Calls of a module's attribute, `mla.f(...)`, are not
    looked for here.)"""
    found: dict[str, list[str]] = {}
    # Only modules whose text can hold such an import are parsed: "flashinfer"
    # alone is in hundreds of a large tree's modules (comments, settings).
    for module in context.index.each_module_whose_text(_imports_mla):
        nodes = list(ast.walk(module.tree))
        # Only what the module calls: a constant it imports (a dispatch table
        # it reads) hands FlashInfer nothing.
        called = {n.func.id for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        for node in nodes:
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
                continue
            source = node.module
            if source.split(".")[0] != "flashinfer":
                continue
            for alias in node.names:
                mla = "mla" in source or "mla" in alias.name.lower()
                if alias.name in probed or (alias.asname or alias.name) not in called or not mla:
                    continue
                place = f"{context.shown(module.path).rpartition('/')[2]}:{node.lineno}"
                found.setdefault(f"{source}.{alias.name}", []).append(place)
    if not found:
        return []
    listed = "; ".join(
        f"{name} ({', '.join(places[:3])}{', …' if len(places) > 3 else ''})" for name, places in sorted(found.items())
    )
    return [
        f"not probed: {len(found)} name(s) this tree imports from FlashInfer's MLA code and calls, which no probe "
        f"answers for (what those calls hand FlashInfer is not judged): {listed}"
    ]


def _calls_not_read(context: PathContext, sites: list[CallSite], probes: dict[str, str]) -> list[str]:
    """The tree's calls of entries hprobe probes but whose engine calls it does not
    read yet (GQA/MHA): said with their places, so that a report that judges none
    of them says so; they take no part in the gate."""
    if not sites:
        return []
    by_entry: dict[str, list[str]] = {}
    for site in sites:
        by_entry.setdefault(site.entry, []).append(f"{context.shown(site.path).rpartition('/')[2]}:{site.line}")
    listed = "; ".join(
        f"{entry} ({', '.join(places[:3])}{', …' if len(places) > 3 else ''}; `hprobe matrix -k {probes[entry]}`)"
        for entry, places in sorted(by_entry.items())
    )
    served = _gqa_models_served(context.index)
    shapes = (
        f"; the GQA/MHA models of hprobe's table this tree registers: {', '.join(served)} (`hprobe matrix -k "
        "KERNEL --model NAME` answers one at its shapes per rank)"
        if served
        else ""
    )
    return [
        f"not judged: {len(sites)} call(s) of FlashInfer's GQA/MHA entries, whose kernels hprobe probes but whose "
        f"calls in engine code it does not read yet (not part of the gate): {listed}{shapes}"
    ]


def _gqa_models_served(index: RepoIndex) -> list[str]:
    """The GQA/MHA models of hprobe's table whose architecture the tree's
    registry names (none where it has no registry hprobe reads, or the model
    names no architecture to look up)."""
    from hprobe.rules.models import shipped_gqa_models
    from hprobe.rules.repo.tree.registry import served_architectures

    models = shipped_gqa_models()
    served = served_architectures(index, {a for m in models for a in m.architectures})
    if served is None:
        return []
    return [m.name for m in models if set(m.architectures) & served.architectures]


def _imports_mla(text: str) -> bool:
    return "from flashinfer" in text and _MLA.search(text) is not None


_MLA = re.compile("mla", re.IGNORECASE)


def _escaped(context: PathContext, site: CallSite, called_as: dict[str, str]) -> tuple[CallPath, list[Backend]]:
    """A place the tree hands an entry on in a form not followed (calls.py's
    escapes): the call it leads to is not read, so neither is its count nor
    what it passes. With the entry known, shown as heads // tp, unpadded, on
    the kernel's defaults (undecided); with the entry's name computed,
    listed as not judged."""
    shown = f"{context.shown(site.path)}:{site.line}" if site.line else context.shown(site.path)
    where = site.function or "module level"
    if not site.entry:  # a computed attribute, a file not read: which entry is unknown
        return CallPath(site, shown, PathStatus.UNRESOLVED, f"{where}: {site.escape}", None), []
    kernel = called_as[site.entry]
    probe = get_probe(kernel)
    models, serves = _site_models(context, site)
    detail = (
        f"{where}: {site.entry} is {site.escape}; the call it leads to is not followed, so neither its head count "
        "nor what it passes is read"
    )
    if not models:
        return CallPath(site, shown, PathStatus.JUDGED, f"{detail}; {serves}, none of the models judged", kernel), []
    counts = sorted({n for model in models for _, n in model.per_rank()})
    backend = Backend(
        f"{site.module}.{site.function or '<module>'}:{site.line} [assumed]",
        kernel,
        probe.default_sms,
        PadMap(tuple((n, n) for n in counts)),
        Where(context.shown(site.path), site.line),
        (),
        models=tuple(model.name for model in models) if len(models) < len(context.models) else (),
        assumed=f"assumed: the model's heads // tp, unpadded, on {probe.id}'s defaults ({detail})",
        assumption=Assumption.ESCAPED,
    )
    shown_detail = f"{detail}: shown assuming the model's heads // tp, unpadded" + (f"; {serves}" if serves else "")
    return CallPath(site, shown, PathStatus.ASSUMED, shown_detail, kernel, backends=(backend.name,)), [backend]


def _ended_at(context: PathContext, end: NotEvaluable, shown: str) -> str:
    """Where a trail ended, as the user named the tree (the call's own place
    when the end has none)."""
    return f"{context.shown(end.path)}:{end.line}" if end.path else shown


def _traced(
    context: PathContext,
    site: CallSite,
    shown: str,
    kernel: str,
    trail: HeadTrail,
    found: Answers,
    said: list[str],
    options: dict[str, str | int],
    models: list[Model],
    serves: str,
    cited: set[tuple[str, int]],
) -> tuple[CallPath, list[Backend]]:
    """A call judged on the counts its trail gives: a backend per answer, named
    by the run-time values it takes, and one per place the trail ended for
    some of them, shown on the stated assumption."""
    from hprobe.rules.repo.tracing.traced import innermost_why, values_text

    probe = get_probe(kernel)
    name = f"{site.module}.{site.function or '<module>'}:{site.line}"
    restrict = tuple(model.name for model in models) if len(models) < len(context.models) else ()
    where = Where(context.shown(site.path), site.line)
    cited.update(trail.cited)
    cited.add((site.path, site.line))
    followed = f"followed from the layer's query ({context.shown(trail.root)}): {trail.said}"
    # The query's dtype is the engine's (its KV cache dtype, a quantized query):
    # not read here, so the call is probed at each, and concluded where they agree.
    dtype = probe.axis("dtype")
    unread = (("dtype", dtype.choices),) if dtype is not None and dtype.choices and "dtype" not in options else ()
    backends: list[Backend] = []
    for answer in found.answers:
        how = f"{followed} ({answer.words})" if answer.words else followed
        branches = tuple(((model.name, n), f"{shown} [{how}]") for model in models for _, n in model.per_rank())
        # A top-k the call does not spell is the one assumption left: the
        # count is the engine's own, the variant is not.
        taken = f"assumed: {'; '.join(said)} (the head count is the engine's own: {how})" if said else None
        backends.append(
            Backend(
                name + (f" [traced, {answer.words}]" if answer.words else " [traced]"),
                kernel,
                probe.default_sms,
                PadMap(tuple((n, v) for n, v in answer.counts if isinstance(v, int))),
                where,
                tuple(options.items()),
                models=restrict,
                branches=branches,
                assumed=taken,
                assumption=Assumption.CALL if taken else None,
                regrouped=trail.regrouped,
                guard=" and ".join(
                    [
                        *(f"{test} ({context.shown(where).rpartition('/')[2]})" for where, test in answer.where),
                        *(
                            f"{u.said} ({context.shown(u.where).rpartition('/')[2]})"
                            for u in answer.unsure
                            if not u.own
                        ),
                    ]
                ),
                unsure_reach="; ".join(
                    f"it runs only where `{u.said}` holds ({context.shown(u.where)}), which hprobe cannot decide: "
                    f"{innermost_why(u.why)}"
                    for u in answer.unsure
                ),
                unread=unread,
                sms_read=False,
                answer_of=name,
            )
        )
    counts = sorted({n for model in models for _, n in model.per_rank()})
    for ended in found.ended:
        at = _ended_at(context, ended.end, shown)
        backends.append(
            Backend(
                name + f" [assumed, {ended.words}]",
                kernel,
                probe.default_sms,
                PadMap(tuple((n, n) for n in counts)),
                where,
                tuple(options.items()),
                models=restrict,
                assumed=(
                    f"assumed: the model's heads // tp, unpadded ({site.function or 'module level'} calls "
                    f"{site.entry} with {trail.said} heads ({ended.words}); the trail ended at {at}: {ended.end.what}"
                    f"{'; ' + '; '.join(said) if said else ''})"
                ),
                assumption=Assumption.HEADS,
                answer_of=name,
            )
        )
    depends = "".join(
        f"; {run.shown} is filled at run time ({run.means}, {context.shown(at)}): evaluated at each of "
        f"{values_text(run.values)}"
        for run, at in trail.runs
    )
    callers = "".join(
        f"; its callers hand the query in differently: {', '.join(axis.names)}, each judged on its own"
        for axis in found.axes
        if axis.caller
    )
    ends = "".join(
        f"; {ended.words}: the trail ended at "
        f"{_ended_at(context, ended.end, shown)}: "
        f"{ended.end.what}: shown assuming the model's heads // tp, unpadded"
        for ended in found.ended
    )
    # Combinations a test on the way rules out give no row: said, with the test.
    unreached = "".join(
        f"; {missed.words}: not reached (`{missed.test.said}` does not hold, {context.shown(missed.test.where)})"
        for missed in found.unreached
    )
    # Combinations under a test hprobe cannot decide: judged where the kernel accepts the count.
    unsure = "".join(
        f"; {answer.words or 'every value'}: runs only where `{u.said}` holds ({context.shown(u.where)}), which "
        "hprobe cannot decide: an accepted count is ok, any other undecided"
        for answer in found.answers
        for u in answer.unsure
    )
    detail = (
        f"{site.function or 'module level'} calls {site.entry}; its head count "
        f"{followed}{depends}{callers}{ends}{unreached}{unsure}" + "".join(f"; {x}" for x in [serves, *said] if x)
    )
    status = PathStatus.ASSUMED if said or found.ended else PathStatus.JUDGED
    return CallPath(site, shown, status, detail, kernel, backends=tuple(b.name for b in backends)), backends


def _site_models(context: PathContext, site: CallSite) -> tuple[list[Model], str]:
    """The models a call can run for: where the tree's registry puts the call's
    module inside one model's implementation, only the models of those
    architectures; else every model. With that, in words ("" for every model)."""
    owners = context.served.only_for(site.module) if context.served is not None else None
    if owners is None:
        return list(context.models), ""
    assert context.served is not None
    said = f"it runs only for {', '.join(sorted(owners))} ({context.served.where})"
    return [model for model in context.models if set(model.architectures) & owners or not model.architectures], said


def _followed(context: PathContext, site: CallSite, probe: Any, calls: TreeCalls) -> HeadTrail | NotEvaluable:
    """The trail of the call's query back to the layer's, or where it ended."""
    from hprobe.rules.repo.tracing.heads import trace_heads

    module = context.index.by_suffix(site.module)
    if probe.query_argument is None or module is None:
        return NotEvaluable("", 0, f"hprobe does not follow the head count of {probe.id}'s calls")
    if not context.mapping.layer_query:
        return NotEvaluable("", 0, "the mapping names no layer query (`layer_query`) to follow the count back to")
    return trace_heads(
        context.index,
        module,
        site.line,
        probe.query_argument,
        context.mapping.layer_query,
        calls,
        context.mapping.run_values,
    )


def _call_axes(context: PathContext, site: CallSite, probe: Any) -> tuple[dict[str, str | int], list[str]] | str:
    """The axis values an unmapped call passes itself (what it says it passes
    for the probe's dispatch keywords), with what was taken on assumption; or
    why hprobe cannot read them."""
    reading = _dispatch(context, site, probe)
    options: dict[str, str | int] = {}
    said: list[str] = []
    for keyword, axis_name in probe.dispatch_keywords.items():
        axis = probe.axis(axis_name)
        if axis is None:
            continue
        if keyword in reading.unknown:
            return f"cannot tell whether the call passes {keyword}: {reading.unknown[keyword]}"
        node = reading.passed.get(keyword)
        if not _passes(node):
            continue
        assert node is not None
        literal = node.value if isinstance(node, ast.Constant) else None
        if axis.choices == (0, 1):
            options[axis_name] = 1
        elif isinstance(axis.default, int):
            options[axis_name] = (
                literal if isinstance(literal, int) and not isinstance(literal, bool) and literal > 0 else ASSUMED_TOPK
            )
            if literal is None:
                said.append(f"{keyword}={ast.unparse(node)[:40]} taken as {ASSUMED_TOPK}")
        elif isinstance(literal, str) and literal in axis.choices:
            options[axis_name] = literal
        elif isinstance(literal, str):
            return (
                f"it passes {keyword}={literal!r}, a value {probe.id} is not probed with "
                f"({', '.join(map(str, axis.choices))})"
            )
        else:
            return f"it passes {keyword}={ast.unparse(node)[:40]}, which hprobe cannot read"
    return options, said


def _how(m: CallMapping) -> str:
    """How a [[call]] entry decides the count, in words (the start of a judged path's detail)."""
    if m.heads == HEADS_INLINE and m.inline is not None:
        how = f"padded inline in {m.inline.function} ({m.inline.variable})"
    elif m.heads == HEADS_RULE:
        how = f"padded by {m.padded_by}'s rule"
    else:
        how = "unpadded (heads // tp)"
    if m.backend_by:
        how += f"; backend picked per count by {m.backend_by}()"
    return how


def _describe(context: PathContext, site: CallSite, shown: str, m: CallMapping) -> CallPath:
    """A site as one [[call]] entry describes it, checked against the call itself."""
    if m.unresolved is not None:
        return CallPath(site, shown, PathStatus.UNRESOLVED, m.unresolved, m.kernel)
    assert m.kernel is not None
    reach = context.reaches.get(m.reaches_when) if m.reaches_when else None
    mismatch = _mismatch(context, site, m)
    if mismatch is not None:
        return CallPath(
            site,
            shown,
            PathStatus.UNRESOLVED,
            f"the mapping ({m.where}) no longer fits this call: {mismatch}",
            m.kernel,
            phase=m.phase,
            reach=reach,
        )
    if m.heads == HEADS_RULE:
        assert m.padded_by is not None
        where = _rule_class(context, site, m.padded_by)
        if where is None:
            return CallPath(
                site,
                shown,
                PathStatus.UNRESOLVED,
                f"padded by {m.padded_by}'s rule, which this tree does not define (or whose rule is not evaluable)",
                m.kernel,
                phase=m.phase,
                reach=reach,
            )
        return CallPath(
            site,
            shown,
            PathStatus.BY_RULE,
            f"padded by {m.padded_by}'s rule ({where}), judged with it",
            m.kernel,
            phase=m.phase,
            reach=reach,
        )
    return CallPath(site, shown, PathStatus.JUDGED, _how(m), m.kernel, phase=m.phase, reach=reach)


def _rule_class(context: PathContext, site: CallSite, name: str) -> str | None:
    """Where the padding rule of class `name` is, as the calling module sees
    the name (its own class, or one it imports); else the one padding class of
    that name in the tree; None when there is none, or several."""
    module = context.index.by_suffix(site.module)
    cls = context.index.resolve_class(module, name) if module is not None else None
    if cls is not None and cls.qualname in context.rule_classes:
        return context.rule_classes[cls.qualname]
    named = [where for qualname, where in context.rule_classes.items() if qualname.rpartition(".")[2] == name]
    return named[0] if len(named) == 1 else None


def _mismatch(context: PathContext, site: CallSite, m: CallMapping) -> str | None:
    """Where the call itself contradicts its [[call]] entry, in words."""
    assert m.kernel is not None
    try:
        probe = get_probe(m.kernel)
    except InputError as exc:
        return exc.message
    if site.entry not in probe.called_as:
        return f"it calls {site.entry}, which {m.kernel} does not probe"
    options = dict(m.options)
    literal = _backend_passed(context, site, probe)
    if literal is not None and m.backend_by is not None:
        return f"it passes backend={literal!r}, not one picked by {m.backend_by}()"
    if literal is not None and "backend" in options and options["backend"] != literal:
        return f"it passes backend={literal!r}, the mapping says {options['backend']!r}"
    if probe.axis("topk") is not None:
        reading = _dispatch(context, site, probe)
        sparse = "sparse_mla_top_k" in site.keywords or "sparse_mla_top_k" in reading.passed
        topk = int(options.get("topk", 0))
        if sparse and not topk:
            return "it passes sparse_mla_top_k, the mapping gives no topk"
        if topk and not sparse and "sparse_mla_top_k" not in reading.unknown:
            return f"the mapping gives topk={topk}, the call passes no sparse_mla_top_k"
    return None


def _dispatch(
    context: PathContext, site: CallSite, probe: Any, m: CallMapping | None = None, picked: str | None = None
) -> KeywordReading:
    """What the call passes for the probe's dispatch keywords, read from the
    tree; on a path whose backend a selector picks per count, as the call runs
    where the selector returned `picked`."""
    from hprobe.rules.repo.tracing.keywords import KeywordReading, read_keywords

    names = frozenset(probe.dispatch_keywords)
    module = context.index.by_suffix(site.module)
    if not names or module is None:
        return KeywordReading()
    conditions = dict(m.conditions) if m is not None else {}
    results: dict[str, Any] = {}
    if m is not None and m.backend_by is not None:
        results[m.backend_by] = None if picked == m.backend_none else picked
    return read_keywords(context.index, module, site.line, names, conditions, results)[0]


def _backend_passed(context: PathContext, site: CallSite, probe: Any) -> str | int | None:
    """The backend the call passes as a literal, spelled at the call or
    carried by a dict it spreads; None when it passes none or a value not
    literal (a selector's result: the mapping's `backend_by` says)."""
    literal = site.keyword("backend")
    if literal is not None or "backend" not in probe.dispatch_keywords:
        return literal
    node = _dispatch(context, site, probe).passed.get("backend")
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _passes(node: ast.expr | None) -> bool:
    """A keyword the call passes with a value (the literal None passes nothing,
    as flashinfer's `is not None` reads it)."""
    return node is not None and not (isinstance(node, ast.Constant) and node.value is None)


def _call_options(
    context: PathContext, m: CallMapping, sites: list[CallSite], picked: str | None = None
) -> dict[str, Any] | NotEvaluable:
    """Axis values the calls themselves set beyond the mapping's (a KV counter
    buffer passed), the same for every site of the entry; NotEvaluable naming
    the keyword where hprobe cannot tell what a call passes."""
    assert m.kernel is not None
    probe = get_probe(m.kernel)
    found: dict[str, Any] | None = None
    for site in sites:
        reading = _dispatch(context, site, probe, m, picked)
        options: dict[str, Any] = {}
        for keyword, axis_name in probe.dispatch_keywords.items():
            axis = probe.axis(axis_name)
            if axis is None or axis.choices != (0, 1):
                continue  # backend and top-k are the mapping's, checked against the call in _mismatch
            if keyword in reading.unknown:
                why = reading.unknown[keyword]
                return NotEvaluable(
                    context.shown(site.path), site.line, f"cannot tell whether the call passes {keyword}: {why}"
                )
            options[axis_name] = int(_passes(reading.passed.get(keyword)))
        if found is not None and found != options:
            return NotEvaluable(
                context.shown(site.path), site.line, f"its calls pass {', '.join(probe.dispatch_keywords)} differently"
            )
        found = options
    return found or {}


def _backends(
    context: PathContext, m: CallMapping, sites: list[CallSite], cited: set[tuple[str, int]]
) -> tuple[list[Backend], list[PathProblem]]:
    """The backends that judge one judged [[call]] entry: per group of models
    whose own attributes set the same probe axes, per group of SMs that answer
    alike, per backend its count picks."""
    assert m.kernel is not None
    models = [mo for mo in context.models if mo.takes(m.model_family)]
    if not models:
        return [], []  # no model judged here takes this path (--model of another family)
    # Per the probe axes the models' attributes set, and per the setting under
    # which each reaches FlashInfer here (a family the engine defaults apart).
    groups: dict[tuple[tuple[tuple[str, Any], ...], str | None], list[Model]] = {}
    for axes, members in _by_model_axes(get_probe(m.kernel), models).items():
        for model in members:
            groups.setdefault((axes, m.reach_setting(model.families)), []).append(model)
    out: list[Backend] = []
    for (axes, setting), members in groups.items():
        reached = m if setting == m.reaches_when else replace(m, reaches_when=setting)
        backends, problems = _model_group_backends(context, reached, sites, cited, members, dict(axes), len(groups) > 1)
        if problems:
            return [], problems
        out.extend(backends)
    return out, []


def _by_model_axes(probe: Any, models: list[Model]) -> dict[tuple[tuple[str, Any], ...], list[Model]]:
    """Models grouped by the probe axes their own attributes set: a NoPE
    model (`qk_rope_head_dim = 0`) hands the same call a query without a rope
    part, and is probed so."""
    groups: dict[tuple[tuple[str, Any], ...], list[Model]] = {}
    for model in models:
        key = tuple((name, value) for name, value in model.attributes if probe.axis(name) is not None)
        groups.setdefault(key, []).append(model)
    return groups


def _model_group_backends(
    context: PathContext,
    m: CallMapping,
    sites: list[CallSite],
    cited: set[tuple[str, int]],
    models: list[Model],
    model_axes: dict[str, Any],
    split: bool,
) -> tuple[list[Backend], list[PathProblem]]:
    assert m.kernel is not None
    site = sites[0]
    restrict = tuple(mo.name for mo in models) if len(models) < len(context.models) else ()
    base = _base_name(m, site)
    prepared = _prepared(context, m, sites)
    if isinstance(prepared, NotEvaluable):
        return [], [PathProblem(base, m.kernel, m.sms, restrict, prepared)]
    inline = prepared
    per_sm: dict[int, tuple[dict[tuple[str, int], int | Raises], dict[tuple[str, int], str]]] = {}
    for sm in m.sms:
        outputs: dict[tuple[str, int], int | Raises] = {}
        branches: dict[tuple[str, int], str] = {}
        for model in models:
            for tp, n in model.per_rank():
                if m.tps and tp not in m.tps:
                    continue  # the engine takes another path at this TP degree
                value, branch = _count(context, m, inline, site, sm, model, tp, n)
                if isinstance(value, NotEvaluable):
                    return [], [PathProblem(base, m.kernel, m.sms, restrict, value)]
                cited.update((s.path, s.line) for s in sites)
                if inline is not None and isinstance(value, int) and value != n:
                    cited.add((inline.function.module.path, int(branch.partition("\t")[0].rpartition(":")[2])))
                outputs[model.name, n] = value
                branches[model.name, n] = branch
        per_sm[sm] = (outputs, branches)
    groups: dict[str, list[int]] = {}
    for sm, (outputs, branches) in per_sm.items():
        groups.setdefault(repr((sorted(outputs.items(), key=str), sorted(branches.items()))), []).append(sm)
    out: list[Backend] = []
    for sms in groups.values():
        outputs, branches = per_sm[sms[0]]
        for names, part in _per_model(outputs, models, restrict):
            picked = _picked_backends(context, m, site, part)
            if isinstance(picked, NotEvaluable):
                return [], [PathProblem(base, m.kernel, m.sms, restrict, picked)]
            label = base + (f" ({'/'.join(names)})" if names != restrict or split else "")
            for backend_value, counts in picked.items():
                call_options = _call_options(context, m, sites, backend_value)
                if isinstance(call_options, NotEvaluable):
                    return [], [PathProblem(base, m.kernel, m.sms, restrict, call_options)]
                out.append(
                    _backend(
                        context,
                        m,
                        site,
                        label,
                        tuple(sms),
                        names,
                        part,
                        branches,
                        backend_value,
                        counts,
                        len(groups) > 1,
                        {**call_options, **model_axes},
                    )
                )
    return out, []


def _prepared(context: PathContext, m: CallMapping, sites: list[CallSite]) -> InlineSite | None | NotEvaluable:
    """The inline padding a path evaluates (None: none), or why it cannot be had."""
    from hprobe.rules.repo.interpreter.inline import find_inline

    site = sites[0]
    if m.heads != HEADS_INLINE:
        return None
    assert m.inline is not None
    found = find_inline(context.index, m.inline)
    if isinstance(found, str):
        return NotEvaluable(context.shown(site.path), site.line, f"inline rule {m.inline.function}: {found}")
    return found


def _per_model(
    outputs: dict[tuple[str, int], int | Raises], models: list[Model], restrict: tuple[str, ...]
) -> list[tuple[tuple[str, ...], dict[tuple[str, int], int | Raises]]]:
    """One map for every model when they agree on each count; else one per
    model (a rule that reads a model's own attributes may pad the same count
    differently for two models)."""
    merged: dict[int, int | Raises] = {}
    for (_, n), value in outputs.items():
        if merged.setdefault(n, value) != value:
            return [((mo.name,), {k: v for k, v in outputs.items() if k[0] == mo.name}) for mo in models]
    return [(restrict, outputs)]


def _base_name(m: CallMapping, site: CallSite) -> str:
    if m.heads == HEADS_INLINE and m.inline is not None:
        name = f"{m.inline.function} (inline) -> {site.function}"
    elif "." not in m.function and site.function.startswith(m.function + "."):
        # The mapping names the class: the method that holds the call, whatever the release calls it.
        name = f"{site.module}.{'.'.join(site.function.split('.')[:2])}"
    else:
        name = f"{site.module}.{m.function}"
    return name + (f" [{m.phase}]" if m.phase else "")


def _count(
    context: PathContext,
    m: CallMapping,
    inline: InlineSite | None,
    site: CallSite,
    sm: int,
    model: Model,
    tp: int,
    n: int,
) -> tuple[int | Raises | NotEvaluable, str]:
    """The count this path hands FlashInfer for one model x TP on one SM, and
    the branch that decided it, in words."""
    from hprobe.rules.repo.interpreter.inline import evaluate_inline

    where = f"{context.shown(site.path)}:{site.line}"
    if m.heads == HEADS_UNPADDED or inline is None:
        return n, f"{where}\tunpadded"
    values = {"n": n, "total": model.num_q_heads, "tp": tp}
    instance: dict[str, Any] = {attr: values[kind] for attr, kind in context.mapping.instance.items()}
    instance.update(model.attributes)
    platform: dict[str, Any] = {expr: sm in sms for expr, sms in context.mapping.platform}
    platform.update(dict(m.conditions))
    binding = Binding(
        head_arg=False,
        instance=instance,
        platform=platform,
        settings=context.settings,
        flashinfer=context.flashinfer,
        sm=sm,
    )
    assert m.inline is not None
    value, line = evaluate_inline(context.index, inline, m.inline, n, binding)
    path = context.shown(inline.function.module.path)
    if line is None:
        return (
            value,
            f"{path}:{inline.function.line}\t{m.inline.variable} not assigned in {inline.function.qualname}: unpadded",
        )
    return value, f"{path}:{line}\t"


def _picked_backends(
    context: PathContext, m: CallMapping, site: CallSite, outputs: dict[tuple[str, int], int | Raises]
) -> dict[str | None, tuple[int, ...]] | NotEvaluable:
    """backend value -> the counts that take it ({None: ()} when the backend is
    not picked by count: every count, the variant's own backend)."""
    if m.backend_by is None:
        return {None: ()}
    if "backend" not in site.keywords and not site.spreads:
        # This release's call names no backend (vLLM before the selector): the
        # entry point's default serves every count.
        return {None: ()}
    module = context.index.by_suffix(site.module)
    function = module.functions.get(m.backend_by) if module is not None else None
    if module is None or function is None:
        return NotEvaluable(context.shown(site.path), site.line, f"{m.backend_by}() is not a function of {site.module}")
    picked: dict[str | None, list[int]] = {}
    for n in sorted({v for v in outputs.values() if isinstance(v, int)}):
        value = evaluate_call(context.index, None, function, [n], Binding()).value
        if isinstance(value, (NotEvaluable, Raises)):
            return (
                value
                if isinstance(value, NotEvaluable)
                else NotEvaluable(
                    context.shown(function.module.path),
                    function.line,
                    f"{m.backend_by}({n}) raises {value.error_type}: {value.message}",
                )
            )
        if value is not None and not isinstance(value, str):
            return NotEvaluable(
                context.shown(function.module.path),
                function.line,
                f"{m.backend_by}({n}) returned {type(value).__name__}, not a backend name",
            )
        picked.setdefault(value if value is not None else m.backend_none, []).append(n)
    return {k: tuple(v) for k, v in picked.items()}


def _backend(
    context: PathContext,
    m: CallMapping,
    site: CallSite,
    base: str,
    sms: tuple[int, ...],
    restrict: tuple[str, ...],
    outputs: dict[tuple[str, int], int | Raises],
    branches: dict[tuple[str, int], str],
    backend_value: str | None,
    counts: tuple[int, ...],
    split_by_sm: bool,
    call_options: dict[str, Any],
) -> Backend:
    assert m.kernel is not None
    probe = get_probe(m.kernel)
    options = dict(m.options)
    options.update({k: v for k, v in call_options.items() if v != getattr(probe.axis(k), "default", None)})
    literal = _backend_passed(context, site, probe)
    if backend_value is not None:
        options["backend"] = backend_value
    elif literal is not None and probe.axis("backend") is not None:
        options["backend"] = literal
    name = (
        base
        + (f" -> backend={backend_value}" if m.backend_by and backend_value is not None else "")
        + (f" ({sm_names(sms)})" if split_by_sm else "")
    )
    chosen = set(counts)
    # The counts this backend takes (all of the path's, unless its backend is picked per count).
    rule = PadMap(
        tuple(
            sorted(
                {n: v for (_, n), v in outputs.items() if isinstance(v, int) and (not chosen or n in chosen)}.items()
            )
        )
    )
    conditions = [f"{k}={v}" for k, v in m.conditions]
    picks = [f"{m.backend_by}() picks {backend_value}"] if m.backend_by and backend_value is not None else []

    def said_for(branch: str) -> str:
        # "file:line [SMs, phase, conditions, how]": a file:line first, as every rule's branch reads.
        where, _, how = branch.partition("\t")
        words = [sm_names(sms), *([m.phase] if m.phase else []), *conditions, *([how] if how else []), *picks]
        return f"{where} [{', '.join(words)}]"

    said = tuple(
        (key, said_for(branch))
        for key, branch in branches.items()
        if key in outputs and (not chosen or key[1] in chosen)
    )
    reach = context.reaches.get(m.reaches_when) if m.reaches_when else None
    return Backend(
        name,
        m.kernel,
        sms,
        rule,
        Where(context.shown(site.path), site.line),
        tuple(options.items()),
        models=restrict,
        branches=said,
        reach=reach,
        counts=counts,
        tps=m.tps,
        crashes=tuple(
            (key, crash)
            for key, value in outputs.items()
            if isinstance(value, Raises)
            and (not chosen or key[1] in chosen)
            and (crash := value.crash(context.shown)) is not None
        ),
    )
