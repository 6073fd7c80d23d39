"""Past the validators on SM10x ragged prefill with `backend="cutlass"`: the
checks the cutlass module's run (`FMHACutlassSM100Run`,
`csrc/fmha_cutlass_sm100.cu`) makes over the head dims it is handed, ported
per code era and used only where every piece of C++ a port follows reads
exactly as it did (cxx.SourceFile.digest), as the other compiled ports are.

The run dispatches the pair (head dim of Q/K, head dim of V) through
`DISPATCH_head_dim`, which names the pairs the module's kernels are built for.
From 0.6.12 a pair it does not name is refused ("Unsupported head
dimensions"). Before that (`DISPATCH_context` without the check), such a pair
dispatches nothing and the run returns without a launch and without an error:
the output is left as it was allocated. That is refused here too, with those
words: a call an engine makes that computes nothing is not served.

What the kernel itself checks (CUTLASS's `can_implement`) is not read: a pair
the dispatch names is accepted with that said (probe's caveat), never more."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from hprobe.compiled.cxx import Fingerprint, located, matching_era
from hprobe.model.outcome import Depth, HeadResult, KernelSMResult, Outcome

ENTRY_MODULE = "get_fmha_module"
LAUNCH = "run"
RUN_FILE = "csrc/fmha_cutlass_sm100.cu"
RUN = "FMHACutlassSM100Run"
DISPATCH = "DISPATCH_head_dim"
CONTEXT = "DISPATCH_context"

_PAIRS = frozenset({(192, 128), (128, 128), (64, 64)})
_HEAD_DIM = frozenset({"5bbce72acd9c5222"})


@dataclass(frozen=True)
class Era:
    """One code era of the run: the digests of what it follows, the head-dim
    pairs its dispatch names, whether a pair it does not name is refused (or
    dispatches nothing, silently), and where the run reads the head dims: the
    tensors' sizes, or integer arguments the Python hands it."""

    releases: str
    fingerprint: Fingerprint
    pairs: frozenset[tuple[int, int]]
    refuses: bool
    dims_from_sizes: bool


# Newest first: the first era whose every digest matches is the release's.
ERAS: tuple[Era, ...] = (
    Era(
        "0.6.12 – 0.7.4",
        {
            RUN_FILE: {
                DISPATCH: _HEAD_DIM,
                CONTEXT: frozenset({"f7a444fadd3157d0"}),
                RUN: frozenset({"2aead5a31158f299"}),
            }
        },
        _PAIRS,
        refuses=True,
        dims_from_sizes=True,
    ),
    Era(
        "0.6.0 – 0.6.11.post3",
        {
            RUN_FILE: {
                DISPATCH: _HEAD_DIM,
                CONTEXT: frozenset({"09ef5c790de054e4"}),
                RUN: frozenset({"2aead5a31158f299"}),
            }
        },
        _PAIRS,
        refuses=False,
        dims_from_sizes=True,
    ),
    Era(
        "0.5.0 – 0.5.3",
        {
            RUN_FILE: {
                DISPATCH: _HEAD_DIM,
                CONTEXT: frozenset({"09ef5c790de054e4"}),
                RUN: frozenset({"8de83a2a9bc61ffc"}),
            }
        },
        _PAIRS,
        refuses=False,
        dims_from_sizes=False,
    ),
)

UNSUPPORTED = "Unsupported head dimensions"


def read_files() -> tuple[str, ...]:
    """Every file (under a release's `flashinfer/data`) these ports read."""
    return tuple(sorted({relative for era in ERAS for relative in era.fingerprint}))


@dataclass(frozen=True)
class RunCall:
    """The head dims the run reads from what it is handed."""

    head_dim_qk: int
    head_dim_vo: int


@dataclass(frozen=True)
class Refusal(Exception):
    """The run's dispatch over a pair it does not name: its words and where it stands."""

    message: str
    definition: str  # the macro it stands in
    needle: str  # text on the line that decides it, in the run's file


def parse_call(launch: str, era: Era) -> RunCall:
    """The head dims as the era's run reads them from its arguments, as
    device/boundary.launch_shape wrote them: `q`'s and `v`'s last sizes (the
    2nd and 4th arguments), or before 0.6.0 the two integer arguments the
    Python hands it (the 17th and 18th)."""
    parts = launch.split(";")
    if era.dims_from_sizes:
        if len(parts) < 4:
            raise ValueError(f"expected q, k and v among the run's arguments, got {len(parts)} arguments")
        qk, vo = parts[1].split(",")[-1], parts[3].split(",")[-1]
    else:
        if len(parts) != 19:
            raise ValueError(f"expected the run's 19 arguments, got {len(parts)}")
        qk, vo = parts[16], parts[17]
    try:
        return RunCall(int(qk), int(vo))
    except ValueError:
        raise ValueError("the run's head dims were not numbers") from None


def check(era: Era, call: RunCall) -> None:
    """The run's dispatch over the head dims: nothing, or the refusal."""
    if (call.head_dim_qk, call.head_dim_vo) in era.pairs:
        return
    named = ", ".join(f"{qk}/{vo}" for qk, vo in sorted(era.pairs))
    if era.refuses:
        raise Refusal(
            f"{UNSUPPORTED}: head_dim_qk={call.head_dim_qk}, head_dim_vo={call.head_dim_vo}", CONTEXT, UNSUPPORTED
        )
    raise Refusal(
        f"no kernel for head_dim_qk={call.head_dim_qk}, head_dim_vo={call.head_dim_vo} (built for {named}): the run "
        "dispatches nothing and returns without an error, the output left as allocated",
        DISPATCH,
        f"#define {DISPATCH}",
    )


@lru_cache(maxsize=16)
def port_for(package: Path) -> Era | str:
    """The era whose port reads like this release's run, or why none does."""
    return matching_era(package, ERAS, lambda era: era.fingerprint)


# The runs the ragged wrapper ends at: cutlass's, and the fa2 template's.
FED_BY_THE_WRAPPER = frozenset({f"{ENTRY_MODULE}.{LAUNCH}", "get_batch_prefill_module.ragged_run"})


def reaches(entry: str | None) -> bool:
    """Whether a count that reached compiled `entry` is the run ported here."""
    return entry == f"{ENTRY_MODULE}.{LAUNCH}"


def leave_unread(result: KernelSMResult, why: str) -> None:
    """The counts that reached the run, its checks not evaluated (`why`):
    pending, never `ok` for the gate."""
    for h, head in result.accepted_at(reaches):
        result.heads[h] = replace(head, pending=f"{RUN}'s own checks (compiled) not read: {why}")


def _group_pending(result: KernelSMResult) -> None:
    """A count that is no multiple of the KV heads, at either backend's run:
    pending, never `ok`. No check read refuses it, and what the kernels do
    with such a count is decided in what hprobe does not read. The KV heads
    are the variant's own (its `kv_heads` axis; 0: as many as the query)."""
    kv = int(result.config.get("kv_heads", 0))
    if kv <= 0:
        return
    for h, head in sorted(result.heads.items()):
        if head.outcome is Outcome.ACCEPTED and head.entry in FED_BY_THE_WRAPPER and h % kv:
            result.heads[h] = replace(
                head,
                pending=(
                    f"{h} query heads over {kv} KV heads: no multiple of them, and no check read refuses it (the "
                    "kernel's own checks are not read)"
                ),
            )


def check_entries(result: KernelSMResult, package: Path) -> None:
    """Each accepted count whose call reached the cutlass run: refused where
    its dispatch names no kernel for the head dims it was handed (with the
    check's words and place in the release), pending where no port reads like
    the release or the run's arguments were not kept; and at either
    backend's run, a count that is no multiple of the KV heads pending."""
    _group_pending(result)
    reached = result.accepted_at(reaches)
    if not reached:
        return
    era = port_for(package)
    if isinstance(era, str):
        leave_unread(result, era)
        result.notes.append(f"compiled entry checks: {RUN} not evaluated: {era}")
        return
    evaluated = False
    for h, head in reached:
        try:
            check(era, parse_call(head.launch or "", era))
        except Refusal as refusal:
            result.heads[h] = HeadResult(
                h,
                Outcome.REJECTED,
                error_type="compiled check",
                message=refusal.message,
                location=_located(package, refusal.definition, refusal.needle),
            )
            continue
        except ValueError as exc:
            result.heads[h] = replace(head, pending=f"{RUN}'s own checks (compiled) not evaluated: {exc}")
            continue
        evaluated = True
    if evaluated and result.depth is Depth.VALIDATORS:
        # The compiled dispatch answered for the counts it took.
        result.depth = Depth.DISPATCH
    result.notes.append(
        f"compiled entry checks: {RUN}'s head-dim dispatch ({era.releases} port of {RUN_FILE}: "
        f"{', '.join(f'{qk}/{vo}' for qk, vo in sorted(era.pairs))}), on the sizes each run was handed"
    )


@lru_cache(maxsize=64)
def _located(package: Path, definition: str, needle: str) -> str:
    return f"{located(package, RUN_FILE, definition, needle)} ({definition}, in {RUN})"
