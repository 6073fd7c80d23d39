"""What a probe found for one (kernel, SM, h_q), with the evidence behind it."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, assert_never

from hprobe.model.heads import compact_set


def without_count(message: str, heads: int) -> str:
    """A refusal's message with the h_q it names blanked out ("got 65" -> "got #"),
    so that one check's refusals of many h_q read as one."""
    if str(heads) not in message:
        return message  # most messages: a report page asks a million times
    return _standalone(heads).sub("#", message)


@functools.lru_cache(maxsize=4096)
def _standalone(number: int) -> re.Pattern[str]:
    """A number on its own: the 4 of "got 4" or "got 4.", but not of "DSv4",
    "64", "4.5" or a release's "0.6.4"."""
    return re.compile(rf"(?<![\w.]){number}(?!\w|\.\d)")


_COUNT = "{h}"  # stands for each h_q of a run in a run's templated fields


def _count_template(fields: dict[str, Any], heads: int) -> dict[str, Any]:
    """`fields` with the h_q they name as `{h}`, those fields listed in `count_in`."""
    out = dict(fields)
    counted = []
    for name, value in fields.items():
        if isinstance(value, str) and name != "outcome" and str(heads) in value and _COUNT not in value:
            templated = _standalone(heads).sub(_COUNT, value)
            if templated != value:
                out[name] = templated
                counted.append(name)
    if counted:
        out["count_in"] = counted
    return out


# The most head counts one result can hold (hprobe takes counts up to 4096):
# a recorded document claiming more is refused before it is expanded.
MAX_RESULT_HEADS = 4096


def _expand_runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for run in runs:
        lo, hi = int(run["from"]), int(run["to"])
        if not 0 < lo <= hi <= MAX_RESULT_HEADS or len(items) + hi - lo + 1 > MAX_RESULT_HEADS:
            raise ValueError(f"a run from {lo} to {hi}: more head counts than a result holds ({MAX_RESULT_HEADS})")
        counted = run.get("count_in", [])
        fields = {k: v for k, v in run.items() if k not in ("from", "to", "count_in")}
        for h in range(lo, hi + 1):
            items.append({**fields, **{k: fields[k].replace(_COUNT, str(h)) for k in counted}, "heads": h})
    return items


# Said of an SM outside a kernel's families that no Python check refused (probe/run.py);
# compiled depth takes it back where the runner's own architecture check answers.
OUTSIDE_FAMILIES_UNCHECKED = "this release has no Python check for it, so only the validators answered"


class Outcome(str, Enum):
    ACCEPTED = "accepted"  # reached the launch boundary: every Python validator accepted
    REJECTED = "rejected"  # a validator raised, while other h_q reached the boundary
    UNSUPPORTED_ARCH = "unsupported-arch"  # the kernel refuses this SM whatever h_q is
    # one check refuses every h_q on this SM, and it tests neither h_q nor the SM:
    # this configuration (dtype, q_len, an option) is refused whatever h_q is
    UNSUPPORTED_CONFIG = "unsupported-config"
    INCONCLUSIVE = "inconclusive"  # the probe cannot tell; never read as "unsupported"
    ABSENT = "absent"  # this flashinfer release has no such entry point

    @property
    def _traits(self) -> _OutcomeTraits:
        # An exhaustive match: a new member without its presentation fails mypy
        # here, not at run time in some format.
        match self:
            case Outcome.ACCEPTED:
                return _OutcomeTraits("✓", "green", "green", "#2e9d4f")
            case Outcome.REJECTED:
                # A cross, dimmed: most cells of a 1..256 grid, it reads as "no" without shouting.
                return _OutcomeTraits("✗", "dim", "cyan", "#d9d9d9")
            case Outcome.UNSUPPORTED_ARCH:
                return _OutcomeTraits("A", "red", "red", "#8c8c8c", "stripes")  # A: the architecture
            case Outcome.UNSUPPORTED_CONFIG:
                return _OutcomeTraits("C", "red", "red", "#b07aa1", "cross")  # C: the configuration
            case Outcome.INCONCLUSIVE:
                return _OutcomeTraits("?", "cyan", "cyan", "#f2b134", "dots")
            case Outcome.ABSENT:
                return _OutcomeTraits("–", "dim", "dim", "#ffffff")
            case _:
                assert_never(self)

    @property
    def mark(self) -> str:
        """One character every visual format shows for this outcome (besides any colour)."""
        return self._traits.mark

    @property
    def style(self) -> str:
        """The terminal style of a cell holding this outcome."""
        return self._traits.style

    @property
    def status_style(self) -> str:
        """The terminal style of an SM's one-word status with this outcome."""
        return self._traits.status_style

    @property
    def colour(self) -> str:
        """The page's fill for this outcome, always shown with its mark."""
        return self._traits.colour

    @property
    def texture(self) -> str | None:
        """The pattern the page lays over the colour, so that a shape too
        narrow for its mark (one h_q, 6 px) is told apart by more than shade;
        None where the colour alone tells it (green, light grey, white)."""
        return self._traits.texture

    @staticmethod
    def legend() -> str:
        """Every mark with its outcome, as the text formats print it."""
        return "  ".join(f"{o.mark} {o.value}" for o in Outcome)


@dataclass(frozen=True)
class _OutcomeTraits:
    """How an outcome shows: grid mark, text styles, page colour and texture."""

    mark: str
    style: str
    status_style: str
    colour: str
    texture: str | None = None  # "stripes", "cross" or "dots"


class Cause(str, Enum):
    """Why an inconclusive answer says nothing about heads, as a type rather
    than words: what a test may excuse (this machine) differs from what it
    must not (a probe whose inputs no longer fit a release)."""

    ENVIRONMENT = "environment"  # this machine: an import, a dependency's API, memory, a worker that could not run
    DEVICE = "device"  # a check on the tensors' device, which CPU tensors cannot pass
    PROBE = "probe"  # the probe's own inputs or stand-ins do not fit this release
    # compiled code decides by what the GPU answers at run time (an occupancy
    # query), at a shape where the kernel table alone does not settle it
    RUNTIME = "runtime"
    # the engine's call as written: refused by the release's signature (a
    # keyword it lacks), or binding depends on what hprobe could not read of
    # the call (model/call.py); the same at every count
    CALL = "call"


@dataclass
class HeadResult:
    """The answer for one h_q: its outcome, and the evidence it rests on."""

    heads: int
    outcome: Outcome
    entry: str | None = None  # compiled module.function reached, for accepted
    error_type: str | None = None
    message: str | None = None  # the validator's own message
    location: str | None = None  # where it was raised, inside flashinfer
    reason: str | None = None  # for inconclusive: why this says nothing about heads
    slow_path: str | None = None  # for accepted: why the kernel reached is off the fast path
    cause: str | None = None  # for inconclusive: a Cause value, when one is known; Cause.CALL for rejected too
    # for accepted at compiled depth: a kernel exists only at some batch sizes and
    # KV lengths; which, in words (a launch at the others is refused)
    shapes: str | None = None
    # for accepted: a compiled check that decides this count follows the
    # validators and was not evaluated here (trtllm-gen's selection without its
    # kernel table, say), and why. The count is accepted as far as the probe
    # saw; a verdict resting on it is undecided, never ok.
    pending: str | None = None
    # for accepted: what the call handed a compiled entry whose own checks are
    # read from the release's C++ (device/boundary.launch_shape), for those to judge
    launch: str | None = None

    @property
    def serves(self) -> bool:
        """Accepted, on the fast path, and (at compiled depth) with a kernel at
        every shape tried, every check that decides it evaluated: a count worth
        padding to."""
        return self.outcome is Outcome.ACCEPTED and not self.slow_path and not self.shapes and not self.pending

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HeadResult:
        # Positional, in field order: a warm check reads back thousands of these.
        outcome = data["outcome"]
        return cls(int(data["heads"]), _OUTCOMES.get(outcome) or Outcome(outcome), *map(data.get, _TEXT_FIELDS))

    def to_dict(self) -> dict[str, Any]:
        # Field by field, not dataclasses.asdict: a report page writes a million of these.
        data: dict[str, Any] = {"heads": self.heads, "outcome": self.outcome.value}
        for name in _TEXT_FIELDS:
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        return data


# HeadResult's fields after heads and outcome, in their order (from_dict passes them by position).
_TEXT_FIELDS = (
    "entry",
    "error_type",
    "message",
    "location",
    "reason",
    "slow_path",
    "cause",
    "shapes",
    "pending",
    "launch",
)
_OUTCOMES = {outcome.value: outcome for outcome in Outcome}


class Depth(str, Enum):
    """What an accepted answer rests on; see README "Depth"."""

    VALIDATORS = "validators"  # the Python checks before the first compiled call ran
    DISPATCH = "dispatch"  # ... and a dispatch table the release consults in Python too
    # stopped at a compiled policy query whose answer Python acts on before the
    # launch: the checks after it did not run
    PARTIAL = "partial"
    # a check on the tensors' device stopped some h_q; their calls were made
    # again with tensors that report a CUDA device (no values), and the checks
    # after it ran on those
    FAKED_DEVICE = "faked-device"
    # past the validators: the release's own kernel table and a port of its own
    # selection code said which kernel each accepted h_q launches (or that none does)
    COMPILED = "compiled"

    def qualifier(self, unchecked: bool) -> str:
        """What an accepted answer at this depth is said with ("" for none):
        `unchecked` when compiled code is known to check more than ran."""
        match self:
            case Depth.VALIDATORS:
                return "validators only" if unchecked else ""
            case Depth.DISPATCH:
                return "validators and dispatch"
            case Depth.PARTIAL:
                return "partial"
            case Depth.FAKED_DEVICE:
                return "validators, some past a device check on faked CUDA tensors"
            case Depth.COMPILED:
                return "compiled selection"
            case _:
                assert_never(self)


# How a result's note begins where a check past the validators was not evaluated.
NOT_DEEPENED = "compiled depth: not evaluated"


@dataclass
class KernelSMResult:
    """Every probed h_q of one kernel variant on one SM, for one flashinfer release."""

    kernel: str  # the probe id
    sm: int
    flashinfer_version: str
    depth: Depth = Depth.VALIDATORS
    heads: dict[int, HeadResult] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    config: dict[str, str | int] = field(default_factory=dict)  # the axis values probed
    key: str = ""  # the variant key, e.g. trtllm-mla[backend=xqa]; the id when all defaults
    # What compiled code is known to check beyond Python for the entries reached:
    # an accepted count may still be refused there (a CPU cannot see it).
    unchecked: list[str] = field(default_factory=list)
    metadata: dict[str, Any] | None = None  # the release's own capability claim (Metadata.to_dict)
    # The signature of each FlashInfer name the probe answers for
    # (KernelProbe.called_as), as the loaded release defines it
    # (model/call.Signature.to_dict): what an engine's call is bound against.
    signatures: dict[str, dict[str, Any]] = field(default_factory=dict)
    # No probe ran (a worker that could not start or answer): this machine's
    # failure, never cached and never part of the release's record.
    unanswered: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        self.key = self.key or self.kernel
        self.depth = Depth(self.depth)  # its value as well as the member: read back from JSON or a cache

    def not_deepened(self, why: str) -> None:
        """Say why the compiled depth was not evaluated for this result."""
        self.notes.append(f"{NOT_DEEPENED}: {why}")

    def why_not_deepened(self) -> str | None:
        """The first note that says why compiled depth was not evaluated, if any."""
        return next((n for n in self.notes if n.startswith(NOT_DEEPENED)), None)

    def outcome(self, heads: int) -> Outcome | None:
        result = self.heads.get(heads)
        return result.outcome if result else None

    def accepted(self) -> list[int]:
        return sorted(h for h, r in self.heads.items() if r.outcome is Outcome.ACCEPTED)

    def accepted_at(self, reaches: Callable[[str | None], bool]) -> list[tuple[int, HeadResult]]:
        """The accepted counts whose call reached a compiled entry `reaches`
        names (a port's own), in order, with their answers."""
        return [(h, r) for h, r in sorted(self.heads.items()) if r.outcome is Outcome.ACCEPTED and reaches(r.entry)]

    def caveats(self) -> list[str]:
        """What an accepted answer here does not rest on, in words: shown
        wherever its cells are (list, grid, pivot, release columns, page), so a
        mark never outlives its qualification."""
        if not self.accepted():
            return []
        basis = "validators and dispatch" if self.depth is Depth.DISPATCH else "validators only"
        out = [f"{basis}: {item}" for item in self.unchecked]
        pending = sorted(h for h, r in self.heads.items() if r.outcome is Outcome.ACCEPTED and r.pending)
        if pending:
            # Shown among the accepted, never `ok` for a gate: the first reason stands for the rest.
            first = self.heads[pending[0]].pending
            out.insert(0, f"pending: h_q {compact_set(pending)}: {first}")
        if self.depth is Depth.PARTIAL:
            out.insert(
                0, "partial: a compiled query answered before the launch; the Python acting on its answer did not run"
            )
        shaped = sorted(h for h, r in self.heads.items() if r.outcome is Outcome.ACCEPTED and r.shapes)
        if shaped:
            out.insert(
                0, f"some shapes: h_q {compact_set(shaped)} have a kernel only at some batch sizes and KV lengths"
            )
        if self.depth is Depth.FAKED_DEVICE:
            out.insert(
                0,
                "faked device: past a check on the tensors' device with CPU tensors that report cuda:0; the checks "
                "after it ran on them",
            )
        return out

    def by_outcome(self, outcome: Outcome) -> list[int]:
        return sorted(h for h, r in self.heads.items() if r.outcome is outcome)

    def refusal_groups(self, outcome: Outcome = Outcome.REJECTED) -> list[tuple[list[int], HeadResult]]:
        """h_q refused by the same check, each group with its own evidence:
        grouped by exception type, location and message (the h_q it names
        aside), in the order first seen."""
        groups: dict[tuple[Any, ...], list[int]] = {}
        first: dict[tuple[Any, ...], HeadResult] = {}
        for h in self.by_outcome(outcome):
            hr = self.heads[h]
            key = (hr.error_type, hr.location, without_count(hr.message or "", h))
            groups.setdefault(key, []).append(h)
            first.setdefault(key, hr)
        return [(hs, first[k]) for k, hs in groups.items()]

    def shape_groups(self) -> list[tuple[list[int], HeadResult]]:
        """Accepted h_q that have a kernel only at some shapes, grouped by what is said of them."""
        groups: dict[str, list[int]] = {}
        first: dict[str, HeadResult] = {}
        for h in self.accepted():
            hr = self.heads[h]
            if hr.shapes:
                key = without_count(hr.shapes, h)
                groups.setdefault(key, []).append(h)
                first.setdefault(key, hr)
        return [(hs, first[k]) for k, hs in groups.items()]

    @property
    def status(self) -> Outcome:
        """One word for the whole SM: the outcome shared by all h_q, or accepted
        when any h_q reached the boundary."""
        outcomes = {r.outcome for r in self.heads.values()}
        if Outcome.ACCEPTED in outcomes:
            return Outcome.ACCEPTED
        if len(outcomes) == 1:
            return next(iter(outcomes))
        if outcomes == {Outcome.REJECTED, Outcome.UNSUPPORTED_ARCH}:
            # the h_q the validators let through meet an architecture check: none runs here
            return Outcome.UNSUPPORTED_ARCH
        if outcomes == {Outcome.REJECTED, Outcome.UNSUPPORTED_CONFIG}:
            # the h_q the head check lets through meet a configuration check: none runs so configured
            return Outcome.UNSUPPORTED_CONFIG
        return Outcome.INCONCLUSIVE

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KernelSMResult:
        """Read back `to_dict` (per-h `heads`) or `to_dict(runs=True)` (`runs`)."""
        result = cls(
            data["kernel"], int(data["sm"]), data["flashinfer_version"], Depth(data.get("depth", "validators"))
        )
        result.notes = list(data.get("notes", []))
        result.config = dict(data.get("config", {}))
        result.key = data.get("key") or result.kernel
        result.unchecked = list(data.get("unchecked", []))
        result.metadata = data.get("metadata")
        result.signatures = dict(data.get("signatures", {}))
        items = _expand_runs(data["runs"]) if "runs" in data else data["heads"]
        if len(items) > MAX_RESULT_HEADS:
            raise ValueError(f"{len(items)} head counts, more than a result holds ({MAX_RESULT_HEADS})")
        for item in items:
            head = HeadResult.from_dict(item)
            result.heads[head.heads] = head
        return result

    def head_runs(self) -> list[dict[str, Any]]:
        """The per-h answers as runs of consecutive h_q answered alike:
        `{from, to, outcome, ...fields}`. Where a field differs only by the h_q
        it names ("got 65"), the run holds it once with `{h}` for that number
        and lists the field in `count_in`; `from_dict` gives back every h_q's
        own words exactly (a text that already holds `{h}` is never templated)."""
        runs: list[tuple[int, int, dict[str, Any], dict[str, Any]]] = []  # (from, to, first's own, template)
        for h in sorted(self.heads):
            own = self.heads[h].to_dict()
            del own["heads"]
            template = _count_template(own, h)
            if runs and runs[-1][1] == h - 1 and runs[-1][3] == template:
                runs[-1] = (runs[-1][0], h, runs[-1][2], template)
            else:
                runs.append((h, h, own, template))
        return [{"from": lo, "to": hi, **(own if lo == hi else template)} for lo, hi, own, template in runs]

    def to_dict(self, runs: bool = False) -> dict[str, Any]:
        """`runs`: the answers as `head_runs()` (hprobe.matrix/3) instead of one
        entry per h_q (hprobe.matrix/2)."""
        answers = (
            {"runs": self.head_runs()} if runs else {"heads": [self.heads[h].to_dict() for h in sorted(self.heads)]}
        )
        return {
            "kernel": self.kernel,
            "key": self.key,
            "config": self.config,
            "sm": self.sm,
            "flashinfer_version": self.flashinfer_version,
            "depth": self.depth.value,
            "unchecked": self.unchecked,
            "metadata": self.metadata,
            "signatures": self.signatures,
            "status": self.status.value,
            "accepted": self.accepted(),
            "notes": self.notes,
            **answers,
        }
