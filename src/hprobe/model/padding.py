"""A padding table: the consumer's rule that rounds per-rank h_q up before a kernel call."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hprobe.model.assumption import Assumption
from hprobe.model.call import CallForm

# The largest head count hprobe takes anywhere (tables, --heads, rules): far above
# any model's, and checked before any set of counts is built.
MAX_HEADS = 4096


class PaddingRule(ABC):
    """Maps a per-rank head count n to the count the consumer launches with."""

    @abstractmethod
    def pad(self, n: int) -> int | None:
        """The padded count, or None where the consumer raises for n."""

    @abstractmethod
    def describe(self) -> str: ...

    def largest(self) -> int:
        """The largest count this rule can produce (bounds what a probe must cover)."""
        return 0


@dataclass(frozen=True)
class PadTo(PaddingRule):
    """Round n up to the first listed value >= n; above the last, the consumer raises."""

    values: tuple[int, ...]

    def pad(self, n: int) -> int | None:
        for value in self.values:
            if value >= n:
                return value
        return None

    def describe(self) -> str:
        return "pad_to " + "{" + ", ".join(map(str, self.values)) + "}"

    def largest(self) -> int:
        return max(self.values)


@dataclass(frozen=True)
class PadMap(PaddingRule):
    """An explicit n -> padded map; n not listed: the consumer raises."""

    mapping: tuple[tuple[int, int], ...]

    def pad(self, n: int) -> int | None:
        return dict(self.mapping).get(n)

    def describe(self) -> str:
        return "pad_map " + "{" + ", ".join(f"{k}->{v}" for k, v in self.mapping) + "}"

    def largest(self) -> int:
        return max((v for _, v in self.mapping), default=0)  # empty: the consumer refuses every count


@dataclass(frozen=True)
class NoPadding(PaddingRule):
    """n is launched as it is."""

    def pad(self, n: int) -> int | None:
        return n

    def describe(self) -> str:
        return "no padding"


@dataclass(frozen=True)
class PadMultiple(PaddingRule):
    """Round n up to a multiple of `multiple`; above `limit` (if any) the consumer raises."""

    multiple: int
    limit: int | None = None

    def pad(self, n: int) -> int | None:
        padded = -(-n // self.multiple) * self.multiple
        return None if self.limit is not None and padded > self.limit else padded

    def describe(self) -> str:
        return f"pad_multiple {self.multiple}" + (f" up to {self.limit}" if self.limit else "")

    def largest(self) -> int:
        return self.limit or 0


@dataclass(frozen=True)
class PadTile(PaddingRule):
    """A tile per range of n: n stays when min(n, tile) divides it, else it rounds
    up to a multiple of the tile (vLLM's trtllm-gen dense MLA rule). Entries are
    (largest n, tile); above the last, the consumer raises."""

    tiles: tuple[tuple[int, int], ...]

    def pad(self, n: int) -> int | None:
        for upto, tile in self.tiles:
            if n <= upto:
                return n if n % min(n, tile) == 0 else -(-n // tile) * tile
        return None

    def describe(self) -> str:
        return "pad_tile " + ", ".join(f"n<={upto}: {tile}" for upto, tile in self.tiles)

    def largest(self) -> int:
        upto, tile = self.tiles[-1]
        return -(-upto // tile) * tile


@dataclass(frozen=True)
class Where:
    """A place in a table file, for messages that point at it."""

    path: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.path}:{self.line}" if self.line else self.path


@dataclass(frozen=True)
class AttentionLayer:
    """One kind of GQA/MHA attention layer of a model (Gemma's global and sliding
    layers differ in KV heads and head dim): its geometry over the whole model."""

    name: str  # "attention" for a model whose layers are all alike
    num_kv_heads: int
    head_dim: int
    sinks: bool = False  # one learned sink per query head (gpt-oss)


def kv_heads_per_rank(kv: int, tp: int) -> int:
    """The KV heads one rank holds: split while there are enough, else one,
    replicated (vLLM's and SGLang's `max(1, kv // tp)`; both assert that one
    of kv and tp divides the other)."""
    return max(1, kv // tp)


@dataclass(frozen=True)
class Model:
    """A model in a padding table: its query heads and the TP degrees it is served at."""

    name: str
    num_q_heads: int
    tp: tuple[int, ...]
    where: Where
    # The model families whose engine paths it takes (matrices/models/mla.toml: dense-mla,
    # dsa, dsv4, ...); () = every path (a table's own model, or --heads).
    families: tuple[str, ...] = ()
    # Config attributes an engine's rule reads (`self.q_head_norm`), by name.
    attributes: tuple[tuple[str, bool | int | str], ...] = ()
    citation: str = ""  # the published config its count comes from
    # The architectures that load it (its config's `architectures`): judged on
    # an engine tree only where the tree's model registry names one; () = any.
    architectures: tuple[str, ...] = ()
    asked: bool = False  # named with --model: judged whatever the tree serves
    # GQA/MHA models (matrices/models/gqa.toml): each kind of attention layer;
    # () for MLA, whose one latent KV head every query head shares.
    layers: tuple[AttentionLayer, ...] = ()

    def takes(self, family: str | None) -> bool:
        """Whether this model is served by a path of `family` (None: any)."""
        return family is None or not self.families or family in self.families

    def per_rank(self) -> list[tuple[int, int]]:
        """(tp, heads per rank) for every TP degree. Validated at load time."""
        return [(tp, self.num_q_heads // tp) for tp in self.tp]

    def per_rank_layers(self) -> list[tuple[int, AttentionLayer, int, int]]:
        """(tp, layer, query heads, KV heads) per rank, for every TP degree and
        kind of GQA/MHA layer. Validated at load time."""
        return [
            (tp, layer, self.num_q_heads // tp, kv_heads_per_rank(layer.num_kv_heads, tp))
            for tp in self.tp
            for layer in self.layers
        ]


@dataclass(frozen=True)
class Backend:
    """A backend in a padding table: the kernel it calls, on which SMs, with which padding rule."""

    name: str
    kernel: str
    sms: tuple[int, ...]
    rule: PaddingRule
    where: Where
    # Axis values the kernel is called with (`backend`, `dtype`, `topk`, ...):
    # the probe variant this backend is judged against.
    options: tuple[tuple[str, str | int], ...] = ()
    key: str = ""  # the variant key, filled in once the kernel is known
    models: tuple[str, ...] = ()  # judged for these models only; () = every model of the table
    # (model, n) -> which branch of the consumer's rule gave the padded count
    # (file:line and the SM, phase and settings it was evaluated under)
    branches: tuple[tuple[tuple[str, int], str], ...] = ()
    reach: Reach | None = None  # None: the rule feeds FlashInfer whenever it runs
    # Where, inside the function holding the call, the call runs (the tests on
    # its way, tracing/guards.py): "cp_world > 1 (backend.py:304)"; "" unguarded.
    guard: str = ""
    # A test on the way that varies with the run and that hprobe cannot decide,
    # in words: the call may never run with these counts, so only an accepted
    # count is concluded (ok wherever it runs); any other is `assumed`.
    unsure_reach: str = ""
    # Judged for these per-rank counts only; () = every count. A path that picks
    # its backend by count is one Backend per backend picked, each for its counts.
    counts: tuple[int, ...] = ()
    tps: tuple[int, ...] = ()  # served at these TP degrees only (an engine path guarded by TP); () = every one
    # The assumption this backend's counts rest on (a call path whose head
    # count hprobe could not follow), with where the trail ended; its verdicts
    # are `assumed`, never ok or broken. None: the counts are the engine's own.
    assumed: str | None = None
    assumption: Assumption | None = None  # what `assumed` rests on
    # The count the rule gives is the query's own heads regrouped (draft tokens
    # folded into heads by a reshape), not a padding: judged as the work the
    # call does, so never `reducible`.
    regrouped: bool = False
    # Probe axes the engine sets in a way hprobe does not read (a traced call's
    # query dtype): the call is probed at each of their values, and a case is
    # concluded only where every one gives the same verdict.
    unread: tuple[tuple[str, tuple[str | int, ...]], ...] = ()
    alternatives: tuple[str, ...] = ()  # the variant keys at the other values, filled with `key`
    # False: `sms` are every SM the kernel serves, not the engine's own (a
    # traced call no mapping entry places): a kernel that refuses an SM whatever
    # h_q is says nothing of a path the engine may never take there.
    sms_read: bool = True
    # One of a traced call's answers (one per run-time value, or per caller
    # whose trail ended): the call they answer for, which the summary says once.
    answer_of: str | None = None
    # The engine's calls this backend's counts reach FlashInfer through, as
    # written: each is bound against the release's own signature of its entry
    # (a keyword the release lacks is a refusal at every count). () = not read
    # from an engine (a table's backend).
    calls: tuple[CallForm, ...] = ()
    # (model, n) -> why the engine's own code crashes before the call, with
    # where (Python's error on a flashinfer object the engine uses as that
    # release's object does not allow): broken at that count, whatever the kernel says.
    crashes: tuple[tuple[tuple[str, int], str], ...] = ()

    def crash(self, model: str, n: int) -> str | None:
        return next((why for key, why in self.crashes if key == (model, n)), None)

    def judged_as(self, n: int, padded: int | None) -> int:
        """The count a case is judged as needing: the per-rank count, or the
        regrouped count itself."""
        return padded if self.regrouped and padded is not None else n

    @property
    def variant_key(self) -> str:
        return self.key or self.kernel

    def covers(self, model: str, n: int, tp: int | None = None) -> bool:
        """Whether this backend serves `model` at per-rank count `n` (at TP degree `tp`)."""
        return (
            (not self.models or model in self.models)
            and (not self.counts or n in self.counts)
            and (tp is None or not self.tps or tp in self.tps)
        )

    def cases(self, models: list[Model]) -> list[tuple[Model, int, int]]:
        """(model, tp, per-rank count) of every case this backend serves."""
        return [(m, tp, n) for m in models for tp, n in m.per_rank() if self.covers(m.name, n, tp)]

    def source_for(self, model: str, n: int) -> str:
        return dict(self.branches).get((model, n), str(self.where))


@dataclass(frozen=True)
class Reach:
    """Under which engine setting a rule's count reaches FlashInfer, and what the
    engine does by default: a verdict holds for the FlashInfer path only, and
    a rule the default path shares is not FlashInfer's alone to change."""

    flag: str  # the engine's option, e.g. --dsv4-attn-backend
    value: str  # the value under which the count reaches FlashInfer, e.g. trtllm
    default: str  # the default, as the engine's source gives it, in words
    default_reaches: bool | None  # True: by default FlashInfer runs; False: only when asked; None: unknown
    otherwise: str  # what the rule serves under every other value (not probed)
    source: str = ""  # file:line the default was read from
    # Where the default is FlashInfer under some settings only: those settings,
    # as the engine's own code tests them (an FP8 KV cache); "" otherwise.
    default_when: str = ""

    def scope(self) -> str:
        """The settings a FlashInfer-only verdict or change holds under, in words."""
        if self.default_when:
            return f"by default where {self.default_when}, else under {self.flag} {self.value}"
        return f"under {self.flag} {self.value} only"

    def words(self) -> str:
        if self.default_reaches:
            return f"reaches FlashInfer by default ({self.flag} default {self.default})"
        where = f" ({self.source})" if self.source else ""
        if self.default_when:
            return (
                f"reaches FlashInfer by default where {self.default_when}, else only under {self.flag} {self.value}; "
                f"the engine's default is {self.default}{where}; elsewhere this rule serves {self.otherwise} "
                "(not probed): the verdict covers the FlashInfer path only"
            )
        default = "unknown" if self.default_reaches is None else self.default
        return (
            f"reaches FlashInfer only under {self.flag} {self.value}; the engine's default is {default}{where}, "
            f"where this rule serves {self.otherwise} (not probed): the verdict covers the FlashInfer path only"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "flag": self.flag,
            "value": self.value,
            "default": self.default,
            "default_reaches": self.default_reaches,
            "otherwise": self.otherwise,
            "source": self.source,
            "default_when": self.default_when,
            "words": self.words(),
        }


@dataclass(frozen=True)
class Provenance:
    """Where in a released engine a table's fact is written: the line says it."""

    engine: str  # its package name on the index (vllm, sglang)
    release: str
    file: str  # inside the engine's wheel
    line: int
    says: str  # the line's text, stripped

    def __str__(self) -> str:
        return f"{self.engine} {self.release} {self.file}:{self.line}"


@dataclass
class PaddingTable:
    """A padding table: models and the backends whose rules pad their per-rank head counts."""

    name: str
    source: str
    path: str
    requires_flashinfer: str | None
    models: list[Model]
    backends: list[Backend]
    notes: list[str] = field(default_factory=list)
    # Judged on exactly these releases (a rule evaluated against one release's
    # own tables); () = the releases --flashinfer, --pin or the pin name.
    releases: tuple[str, ...] = ()
    provenance: tuple[Provenance, ...] = ()  # where a shipped table's facts are in a released engine


@dataclass(frozen=True)
class CallPathRecord:
    """One call of a probed FlashInfer entry in an engine's tree, as a report
    lists it: where, what it calls, and whether (and how) its head count is
    judged. Every call found is listed; none is dropped."""

    site: str  # file:line as the user named the tree
    function: str  # the calling function's qualname
    calls: str  # the FlashInfer name called
    status: str  # judged, by-rule, not-evaluable, assumed or unresolved
    detail: str  # how its count is decided, or why it is not judged
    kernel: str | None
    phase: str | None = None
    backends: tuple[str, ...] = ()  # the table's backends that judge it
    # The SMs on which the engine takes this path (a call the mapping says
    # runs only on SM12x); () where it does not say.
    sms: tuple[int, ...] = ()

    @property
    def judged(self) -> bool:
        return self.status in ("judged", "by-rule")

    def runs_on(self, sms: Sequence[int]) -> bool:
        """Whether the engine may take this path on one of `sms`: a call not
        judged there leaves the gate undecided only where it runs."""
        return not self.sms or any(sm in self.sms for sm in sms)

    def to_dict(self) -> dict[str, Any]:
        return {
            "site": self.site,
            "function": self.function,
            "calls": self.calls,
            "status": self.status,
            "detail": self.detail,
            "kernel": self.kernel,
            "phase": self.phase,
            "backends": list(self.backends),
            "sms": list(self.sms),
        }
