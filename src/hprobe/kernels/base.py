"""The interface every kernel probe implements, and the axes a probe's support depends on."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hprobe.kernels.offers import Metadata, capability_metadata
from hprobe.model.compiled import TrtllmGenCall
from hprobe.model.errors import InputError
from hprobe.model.sm import SM

__all__ = ["Axis", "KernelProbe", "Metadata", "PreparedCall", "Value", "Variant"]

Value = str | int


@dataclass
class PreparedCall:
    """One call into flashinfer, ready to run: only h_q differs between calls."""

    fn: Callable[..., Any]
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class Axis:
    """One input besides h_q that decides whether a kernel accepts a call."""

    name: str  # as on the command line (`--page-size` -> page_size) and in tables
    default: Value  # what a common serving configuration uses
    choices: tuple[Value, ...] = ()  # () = any positive integer
    sweep: bool = False  # `matrix` probes every choice unless told otherwise
    help: str = ""
    # other values worth trying as witnesses when a check refuses every h_q:
    # a configuration that passes it shows the check is about the configuration
    witnesses: tuple[Value, ...] = ()

    def parse(self, text: Value) -> Value:
        if isinstance(self.default, int):
            try:
                number = int(text)
            except (TypeError, ValueError):
                raise InputError(f"{self.name} {text!r}: expected an integer") from None
            value: Value = number
            if number < 0:
                raise InputError(f"{self.name} {text!r}: must not be negative")
        else:
            value = str(text)
        if self.choices and value not in self.choices:
            raise InputError(f"{self.name} {text!r}: expected one of {', '.join(map(str, self.choices))}")
        return value


@dataclass(frozen=True)
class Variant:
    """A probe with every axis fixed: what one row of a matrix describes."""

    probe: KernelProbe
    config: tuple[tuple[str, Value], ...] = field(default=())

    @property
    def values(self) -> dict[str, Value]:
        return dict(self.config)

    @property
    def key(self) -> str:
        """`trtllm-mla[backend=xqa,dtype=fp8]`: only values that differ from the defaults."""
        defaults = {a.name: a.default for a in self.probe.axes}
        extra = [f"{k}={v}" for k, v in self.config if defaults.get(k) != v]
        return f"{self.probe.id}[{','.join(extra)}]" if extra else self.probe.id


class KernelProbe(ABC):
    """Calls one flashinfer entry point with synthetic inputs in which only h_q varies."""

    #: id used on the command line and in padding tables
    id: str
    #: dotted path of the public entry point
    entry_point: str
    #: SMs the kernel is built for; probed by default when no GPU is visible
    default_sms: tuple[int, ...]
    #: one line for `hprobe kernels`
    summary: str
    #: the inputs besides h_q that support depends on
    axes: tuple[Axis, ...] = ()
    #: compiled functions whose result Python only passes on to the launch (a
    #: plan's schedule): they return no plan (device/boundary.HANDED_ON) so the
    #: call goes on to the launch
    pass_through_calls: tuple[str, ...] = ()
    #: compiled plans whose own checks over their arguments hprobe reads from
    #: the release's C++ (compiled/): let through with their arguments kept,
    #: for the launch that follows to carry (device/boundary.Policy.recorded)
    recorded_calls: tuple[str, ...] = ()
    #: compiled launches whose own checks over their arguments hprobe reads
    #: from the release's C++: the launch carries what it was handed
    #: (device/boundary.Policy.launches)
    recorded_launches: tuple[str, ...] = ()
    #: other FlashInfer names an engine calls that reach this probe's entry point
    #: and its checks (a private function the public one forwards to)
    also_called_as: tuple[str, ...] = ()
    #: keywords of the entry point that pick which runner serves a call, and
    #: the axis each sets: an engine's call path is probed with what its call
    #: passes for them (read from its source), never with a simpler call
    dispatch_keywords: dict[str, str] = {}
    #: where the entry takes the query whose second-to-last axis is the head
    #: count (keyword, position): an engine's call of it is followed from there
    #: back to the layer's query; None: hprobe does not follow this entry's count
    query_argument: tuple[str, int] | None = None
    #: whether an engine's calls of this entry are read by `check --repo`
    #: (False: a probe for `matrix` whose engine side is not built; its calls
    #: are neither found nor judged, and the README says which)
    engine_reading: bool = True

    @property
    def called_as(self) -> tuple[str, ...]:
        """The FlashInfer names whose calls in an engine this probe answers for."""
        return (self.entry_point.rsplit(".", 1)[-1], *self.also_called_as)

    @abstractmethod
    def prepare(
        self, entry: Callable[..., Any], sm: SM, heads: int, config: dict[str, Value], alternative: int = 0
    ) -> PreparedCall:
        """Build the call for `heads` query heads on `sm` with the axis values in
        `config`. `entry` is the loaded release's entry point; adapt to its
        signature by inspecting it. `alternative` picks one of the input
        conventions releases disagree on (see `input_alternatives`)."""

    def input_alternatives(self, entry: Callable[..., Any], config: dict[str, Value]) -> int:
        """How many input conventions to try, in order, for `config` with the
        loaded release's `entry`: releases changed some (a workspace dtype, the
        query dtype beside an fp8 KV cache) without a signature change. The
        first under which any call reaches the boundary is the one the release
        takes. A convention the entry's signature cannot take is not counted."""
        return 1

    def offered(self, entry: Callable[..., Any], config: dict[str, Value]) -> str | None:
        """Why the loaded release cannot take `config` at all, from its signature
        (a parameter it does not have), or None. Such a configuration is
        `absent`, not `rejected`. Which values an existing parameter takes is
        never read from text: it is probed."""
        return None

    def compiled_checks(self, entry: str) -> str | None:
        """What the compiled function `entry` (module.function) is known to check
        beyond Python -- what a CPU probe cannot see -- or None."""
        return None

    def compiled_call(self, entry: str, config: dict[str, Value]) -> TrtllmGenCall | None:
        """The call that reaching `entry` makes into a launcher whose selection
        hprobe evaluates at compiled depth (trtllm-gen's FMHA), as this probe's
        inputs for `config` make it; None where `entry` is no such launcher."""
        return None

    # The compiled entries `compiled_call` answers for (an entry reached starts
    # with one of them): what deepen will ask can be worked out before the
    # probe says which counts reach them.
    compiled_launchers: tuple[str, ...] = ()

    def pending_selection(self, entry: str) -> str | None:
        """Why an accepted count that reached compiled `entry` waits on a
        compiled selection hprobe does not evaluate for this probe (the count
        is then pending: never `ok` for the gate), or None."""
        return None

    def compiled_calls(self, config: dict[str, Value]) -> set[TrtllmGenCall]:
        """Every call into a launcher compiled depth evaluates that `config` can make."""
        return {call for entry in self.compiled_launchers if (call := self.compiled_call(entry, config)) is not None}

    def path(self, entry: str, config: dict[str, Value]) -> str | None:
        """When reaching `entry` means a slower kernel serves the call than the
        one the kernel family is built around: why, in a few words. None: fast path."""
        return None

    def dispatch_depth(self, entry: str) -> bool:
        """True when reaching `entry` means a Python dispatch table was consulted
        on the way (the answer then rests on validators and dispatch)."""
        return False

    def metadata(
        self, session: Any, entry: Callable[..., Any], sm: SM, config: dict[str, Value], heads: list[int]
    ) -> Metadata | None:
        """What the release's capability metadata claims, if it exposes any:
        by default the entry point's `supported_compute_capability` /
        `backend_requirement` attributes."""
        return capability_metadata(entry, sm, config.get("backend"))

    def swept_needlessly(self, config: dict[str, Value]) -> bool:
        """True for a combination a sweep should skip because it cannot describe
        a real call (a sparse-only backend without top-k); asked for explicitly,
        it is still probed."""
        return False

    def built_for(self, entry: str) -> set[int] | None:
        """SM majors the compiled code at `entry` is built for, where that code
        names them (trtllm-gen's cubins: SM10x), else None. Used only to say
        that an SM reached code of another family; never to decide an outcome."""
        return None

    def families(self, config: dict[str, Value] | None = None) -> set[int]:
        """SM majors the kernel (for `config`: the chosen backend) is built for.
        Used only to say when an acceptance on another SM rests on validators
        that have no SM check; never to decide an outcome."""
        return {sm // 10 for sm in self.default_sms}

    # -- variants ----------------------------------------------------------------------

    def axis(self, name: str) -> Axis | None:
        return next((a for a in self.axes if a.name == name), None)

    def variant(self, values: dict[str, Value] | None = None) -> Variant:
        values = dict(values or {})
        unknown = sorted(set(values) - {a.name for a in self.axes})
        if unknown:
            known = ", ".join(a.name for a in self.axes) or "none"
            raise InputError(f"kernel {self.id} has no axis {unknown[0]!r} (its axes: {known})")
        config = tuple((a.name, a.parse(values[a.name]) if a.name in values else a.default) for a in self.axes)
        return Variant(self, config)

    def variants(self, overrides: dict[str, list[Value]] | None = None) -> list[Variant]:
        """Every combination of the overridden values, sweep axes' choices and defaults."""
        overrides = overrides or {}
        combos: list[dict[str, Value]] = [{}]
        swept = False
        for axis in self.axes:
            if axis.name in overrides:
                values = [axis.parse(v) for v in overrides[axis.name]]
            elif axis.sweep and axis.choices:
                values, swept = list(axis.choices), True
            else:
                values = [axis.default]
            combos = [dict(c, **{axis.name: v}) for c in combos for v in values]
        if swept:
            combos = [c for c in combos if not self.swept_needlessly(c)]
        return [self.variant(c) for c in combos]
