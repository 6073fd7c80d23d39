"""An engine's call of a FlashInfer entry as the engine writes it, and whether
a release's own signature of that entry takes it.

A probe calls an entry with the inputs a count needs; the engine's call also
passes keywords of its own (a backend, a flag that its indices are storage
offsets, an output scale). Where the release's signature has no parameter for
one of them (and no `**kwargs`), Python refuses the call before any check of
flashinfer's runs, at every count: a `TypeError` the probe never meets. This
module says so, from two facts read elsewhere: the call's form (read from the
engine's source, rules/repo/tracing) and the entry's signature (read from the
loaded release by the probe, probe/run.py)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any

from hprobe.model.outcome import Cause, HeadResult, KernelSMResult, Outcome


@dataclass(frozen=True)
class CallForm:
    """How one call in the engine hands its arguments over."""

    entry: str  # the FlashInfer name the engine calls
    where: str  # the call's file:line, as the user named the tree
    positional: int  # positional arguments passed (those before any `*args`)
    keywords: tuple[str, ...]  # keyword names passed whenever the call runs
    # keyword names passed only on some runs (under a test hprobe does not
    # decide), each with where and why, in words
    conditional: tuple[tuple[str, str], ...] = ()
    # why the call's arguments cannot all be told (a `*args` or a `**dict`
    # hprobe cannot read); None: every argument is known
    unknown: str | None = None
    # (keyword, file:line) where each keyword is written, where that is not
    # the call's own line (a keyword on a line of its own, a `**dict`'s key)
    places: tuple[tuple[str, str], ...] = ()
    literals: tuple[tuple[str, str | int], ...] = ()  # keywords spelled with a literal string or integer

    def passes(self, keyword: str) -> str | int | bool | None:
        """What the call passes for `keyword`: its literal, True for a value
        that is not one, False for nothing, None where that cannot be told."""
        literal = dict(self.literals).get(keyword)
        if literal is not None:
            return literal
        if keyword in self.keywords or any(k == keyword for k, _ in self.conditional):
            return True
        return None if self.unknown is not None else False

    def place(self, keyword: str) -> str:
        """Where the engine writes `keyword` (the call's place where not known)."""
        return dict(self.places).get(keyword, self.where)

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "where": self.where,
            "positional": self.positional,
            "keywords": list(self.keywords),
            "conditional": [{"keyword": k, "why": why} for k, why in self.conditional],
            "unknown": self.unknown,
            "places": dict(self.places),
        }


class ParameterKind(str, Enum):
    """inspect.Parameter's kinds, by the names inspect gives them."""

    POSITIONAL_ONLY = "POSITIONAL_ONLY"
    POSITIONAL_OR_KEYWORD = "POSITIONAL_OR_KEYWORD"
    VAR_POSITIONAL = "VAR_POSITIONAL"
    KEYWORD_ONLY = "KEYWORD_ONLY"
    VAR_KEYWORD = "VAR_KEYWORD"


@dataclass(frozen=True)
class Parameter:
    name: str
    kind: ParameterKind
    required: bool  # no default


@dataclass(frozen=True)
class Signature:
    """An entry's parameters as the loaded release defines them, and where."""

    parameters: tuple[Parameter, ...]
    where: str  # flashinfer/…/file.py:line of its definition, or "" where not known

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Signature:
        return cls(
            tuple(Parameter(str(p[0]), ParameterKind(p[1]), bool(p[2])) for p in data["parameters"]),
            str(data.get("where", "")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"parameters": [[p.name, p.kind.value, p.required] for p in self.parameters], "where": self.where}


def signature_of(fn: object) -> Signature | None:
    """`fn`'s parameters as Python binds a call to them (a class: its
    constructor's; a decorated function: the function it wraps, as
    `inspect.signature` follows `__wrapped__`), and where it is defined."""
    try:
        parameters = inspect.signature(fn).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    code = getattr(inspect.unwrap(getattr(fn, "__init__", fn) if inspect.isclass(fn) else fn), "__code__", None)  # type: ignore[arg-type]
    where = ""
    if code is not None:
        file = code.co_filename.replace("\\", "/")
        marker = file.rfind("/flashinfer/")
        where = f"{file[marker + 1 :] if marker >= 0 else Path(file).name}:{code.co_firstlineno}"
    return Signature(
        tuple(Parameter(p.name, ParameterKind(p.kind.name), p.default is inspect.Parameter.empty) for p in parameters),
        where,
    )


class Binds(Enum):
    """What binding a call's form to a signature concludes."""

    YES = "yes"
    NO = "no"  # Python refuses the call at every count (TypeError)
    UNDECIDED = "undecided"  # it depends on what hprobe could not read of the call


def bind(form: CallForm, signature: Signature, release: str) -> tuple[Binds, str]:
    """Whether `signature` takes the call `form` describes, and why not, in
    words that name the keyword and both places: Python's own binding rules
    (too many positional arguments, an unknown keyword without `**kwargs`, a
    value given twice, a required parameter not given)."""
    params = signature.parameters
    named = f"flashinfer {release}'s {form.entry}" + (f" ({signature.where})" if signature.where else "")
    var_keyword = any(p.kind is ParameterKind.VAR_KEYWORD for p in params)
    var_positional = any(p.kind is ParameterKind.VAR_POSITIONAL for p in params)
    positional = [p for p in params if p.kind in (ParameterKind.POSITIONAL_ONLY, ParameterKind.POSITIONAL_OR_KEYWORD)]
    by_keyword = {p.name for p in params if p.kind in (ParameterKind.POSITIONAL_OR_KEYWORD, ParameterKind.KEYWORD_ONLY)}
    if form.positional > len(positional) and not var_positional:
        return Binds.NO, (
            f"{named} takes {len(positional)} positional argument{'s' * (len(positional) != 1)}; the engine passes "
            f"{form.positional} at {form.where}"
        )
    filled = {p.name for p in positional[: form.positional]}
    for keyword in form.keywords:
        if keyword in filled:
            return Binds.NO, f"{named} is given '{keyword}' twice (by position and by keyword) at {form.place(keyword)}"
        if keyword not in by_keyword and not var_keyword:
            return Binds.NO, f"{named} has no parameter '{keyword}'; the engine passes it at {form.place(keyword)}"
    given = filled | set(form.keywords) | {k for k, _ in form.conditional}
    missing = [
        p.name
        for p in params
        if p.required
        and p.name not in given
        and p.kind not in (ParameterKind.VAR_POSITIONAL, ParameterKind.VAR_KEYWORD)
    ]
    if missing and form.unknown is None:
        return Binds.NO, f"{named} requires '{missing[0]}', which the engine's call at {form.where} does not pass"
    for keyword, why in form.conditional:
        if keyword not in by_keyword and not var_keyword:
            return Binds.UNDECIDED, (
                f"the engine's call at {form.where} passes '{keyword}' ({form.place(keyword)}) {why}; {named} has "
                "no such parameter"
            )
    if form.unknown is not None and not var_keyword:
        return Binds.UNDECIDED, (
            f"whether {named} takes every argument of the engine's call is not known: {form.unknown}"
        )
    return Binds.YES, ""


def bound_to(forms: tuple[CallForm, ...], result: KernelSMResult) -> KernelSMResult:
    """`result` as the engine's calls meet it: itself where every call binds to
    the release's signature (or no signature was recorded: nothing to bind
    against, as for an entry the release lacks), else a result in which every
    count is refused with the binding's words (a call Python refuses), or
    inconclusive where binding depends on what hprobe could not read."""
    for form in forms:
        recorded = result.signatures.get(form.entry)
        if recorded is None:
            continue
        binds, why = bind(form, Signature.from_dict(recorded), result.flashinfer_version)
        if binds is Binds.YES:
            continue
        call = Cause.CALL.value
        heads = {
            h: (
                HeadResult(
                    h,
                    Outcome.REJECTED,
                    error_type="TypeError",
                    message=why,
                    location=form.where,
                    cause=Cause.CALL.value,
                )
                if binds is Binds.NO
                else HeadResult(h, Outcome.INCONCLUSIVE, reason=why, cause=call)
            )
            for h in result.heads
        }
        return replace(result, heads=heads, notes=[*result.notes, why])
    return result
