"""Past the validators on the CUDA-core GQA/MHA decode path: the checks the
compiled plan of `BatchDecodeWithPagedKVCacheWrapper` (`use_tensor_cores=False`)
makes over what it is handed, ported per code era and used only where every
piece of C++ a port follows reads exactly as it did (cxx.SourceFile.digest), as
the other compiled ports are.

`BatchDecodeWithPagedKVCachePlan` (`csrc/batch_decode.cu`) checks, in order:
the head dims of QK and VO are equal ("CUDA cores template only supports equal
head dim for QK and VO"), then dispatches `num_qo_heads / num_kv_heads`
(integer division) through `DISPATCH_GQA_GROUP_SIZE`
(`include/flashinfer/utils.cuh`), whose `else` raises "Unsupported group_size:
N". The dispatch instantiates the kernel for each group it names, so a group
it takes has a kernel. The launch's own dispatch (`decode.cuh`) is the same
macro over the same quotient: it refuses nothing the plan took.

Nothing in either checks that `num_qo_heads` is a multiple of `num_kv_heads`:
such a count is dispatched at the quotient, and what it computes is not
attention over the heads asked. It is left pending (never `ok`) with that
said, not refused: no check refuses it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from hprobe.compiled.cxx import Fingerprint, SourceFile, located, matching_era
from hprobe.compiled.files import data_dir
from hprobe.kernels.gqa_decode import TENSOR_CORE_MODULE, TENSOR_CORE_PLAN_UNREAD
from hprobe.model.outcome import Depth, HeadResult, KernelSMResult, Outcome

# The compiled plan whose checks are ported, and the launch that carries its
# arguments (device/boundary.Policy.recorded): the getter names the module.
PLAN_FUNCTION = "plan"
ENTRY_MODULE = "get_batch_decode_module"

PLAN_FILE = "csrc/batch_decode.cu"
DISPATCH_FILE = "include/flashinfer/utils.cuh"
PLAN = "BatchDecodeWithPagedKVCachePlan"
DISPATCH = "DISPATCH_GQA_GROUP_SIZE"

HEAD_DIMS_DIFFER = (
    "CUDA cores template only supports equal head dim for QK and VO, please use tensor cores template for different "
    "head dim"
)


@dataclass(frozen=True)
class Era:
    """One code era of the plan: the digests of what it follows, as the
    releases of the era ship them, and the groups its dispatch names."""

    releases: str
    fingerprint: Fingerprint
    group_sizes: frozenset[int]


# The plan's body reads one way in 0.5.x (cudaSetDevice, no indptr dtype check)
# and another from 0.6.0; neither changes what it checks over sizes.
_PLAN_DIGESTS = frozenset({"3e391e8da6d55b8e", "51327dd1c3e08e13"})

# Newest first: the first era whose every digest matches is the release's.
ERAS: tuple[Era, ...] = (
    Era(
        "0.7.1 – 0.7.4",
        {PLAN_FILE: {PLAN: _PLAN_DIGESTS}, DISPATCH_FILE: {DISPATCH: frozenset({"38cdbcc82a6fb523"})}},
        frozenset({1, 2, 3, 4, 6, 8, 16}),
    ),
    Era(
        "0.6.18 – 0.7.0.post1",
        {PLAN_FILE: {PLAN: _PLAN_DIGESTS}, DISPATCH_FILE: {DISPATCH: frozenset({"4a8f1e3f04e0da13"})}},
        frozenset({1, 2, 3, 4, 6, 8}),
    ),
    Era(
        "0.5.0 – 0.6.17",
        {PLAN_FILE: {PLAN: _PLAN_DIGESTS}, DISPATCH_FILE: {DISPATCH: frozenset({"c2859343480a774f"})}},
        frozenset({1, 2, 3, 4, 8}),
    ),
)


def read_files() -> tuple[str, ...]:
    """Every file (under a release's `flashinfer/data`) these ports read."""
    return tuple(sorted({relative for era in ERAS for relative in era.fingerprint}))


@dataclass(frozen=True)
class PlanCall:
    """What the plan is handed, by size (device/boundary.launch_shape, in the
    order of its C++ parameters; the same in every era)."""

    num_qo_heads: int
    num_kv_heads: int
    head_dim_qk: int
    head_dim_vo: int


@dataclass(frozen=True)
class Refusal(Exception):
    """A check of the plan that fails: its words, and where it stands."""

    message: str
    file: str  # under the release's flashinfer/data
    definition: str  # the function or macro it stands in
    needle: str  # text on the check's line, to place it in the release


def parse_call(launch: str) -> PlanCall:
    """The plan's 15 arguments as launch_shape wrote them."""
    parts = launch.split(";")
    if len(parts) != 15:
        raise ValueError(f"expected the plan's 15 arguments, got {len(parts)}")
    try:
        return PlanCall(int(parts[5]), int(parts[6]), int(parts[11]), int(parts[12]))
    except ValueError:
        raise ValueError("the plan's head counts or head dims were not numbers") from None


def check(era: Era, call: PlanCall) -> int:
    """The plan's checks in its own order: the group it dispatches, or the
    check that refuses the call."""
    if call.head_dim_qk != call.head_dim_vo:
        raise Refusal(HEAD_DIMS_DIFFER, PLAN_FILE, PLAN, "CUDA cores template only supports equal head dim")
    if call.num_kv_heads <= 0:
        raise ValueError("the plan was handed no KV heads")
    group = call.num_qo_heads // call.num_kv_heads
    if group not in era.group_sizes:
        raise Refusal(f"Unsupported group_size: {group}", DISPATCH_FILE, DISPATCH, "Unsupported group_size")
    return group


@lru_cache(maxsize=16)
def port_for(package: Path) -> Era | str:
    """The era whose port reads like this release's plan, or why none does."""
    return matching_era(package, ERAS, lambda era: era.fingerprint)


def reaches(entry: str | None) -> bool:
    """Whether a count that reached compiled `entry` went through the plan ported here."""
    return bool(entry) and str(entry).startswith(ENTRY_MODULE + ".")


def leave_unread(result: KernelSMResult, why: str) -> None:
    """The counts that reached the plan, its checks not evaluated (`why`):
    pending, never `ok` for the gate."""
    for h, head in result.accepted_at(reaches):
        result.heads[h] = replace(head, pending=f"{PLAN}'s own checks (compiled) not read: {why}")


def _tensor_core_pending(result: KernelSMResult) -> None:
    """The tensor-core path (the prefill template's plan, not read here): a
    count that is no multiple of the KV heads is left pending, never `ok`; the
    rest stand at the validators, the unread plan said among the caveats. The
    KV heads are the variant's own (its `kv_heads` axis), not read back from
    the launch, whose arguments' order is the release's."""
    kv = int(result.config.get("kv_heads", 0))
    for h, head in sorted(result.heads.items()):
        if head.outcome is not Outcome.ACCEPTED or not (head.entry or "").startswith(TENSOR_CORE_MODULE):
            continue
        if kv <= 0 or h % kv:
            result.heads[h] = replace(
                head,
                pending=f"{h} query heads over {kv} KV heads: no multiple of them; {TENSOR_CORE_PLAN_UNREAD}",
            )


def check_entries(result: KernelSMResult, package: Path) -> None:
    """Each accepted count whose call went through the compiled plan: refused
    where one of its checks fails (with the check's words and place in the
    release), pending where no port reads like the release, the plan was not
    recorded, or the count is no multiple of the KV heads."""
    _tensor_core_pending(result)
    reached = result.accepted_at(reaches)
    if not reached:
        return
    era = port_for(package)
    if isinstance(era, str):
        leave_unread(result, era)
        result.notes.append(f"compiled entry checks: {PLAN} not evaluated: {era}")
        return
    evaluated = False
    for h, head in reached:
        try:
            call = parse_call(head.launch or "")
            group = check(era, call)
        except Refusal as refusal:
            result.heads[h] = HeadResult(
                h,
                Outcome.REJECTED,
                error_type="compiled check",
                message=refusal.message,
                location=_located(package, refusal.file, refusal.definition, refusal.needle),
            )
            continue
        except ValueError as exc:
            result.heads[h] = replace(head, pending=f"{PLAN}'s own checks (compiled) not evaluated: {exc}")
            continue
        evaluated = True
        if call.num_qo_heads % call.num_kv_heads:
            result.heads[h] = replace(
                head,
                pending=(
                    f"{call.num_qo_heads} query heads over {call.num_kv_heads} KV heads: no check refuses it, and "
                    f"{DISPATCH} takes the quotient, group {group}: not attention over the heads asked"
                ),
            )
    if evaluated and result.depth is Depth.VALIDATORS:
        # The compiled dispatch answered for the counts it took, as a dispatch
        # table consulted in Python does.
        result.depth = Depth.DISPATCH
    result.notes.append(
        f"compiled entry checks: {PLAN}'s own checks ({era.releases} port of {PLAN_FILE} and {DISPATCH}: groups "
        f"{', '.join(map(str, sorted(era.group_sizes)))}), on the head counts each plan was handed"
    )


@lru_cache(maxsize=64)
def _located(package: Path, relative: str, definition: str, needle: str) -> str:
    where = located(package, relative, definition, needle)
    if relative == DISPATCH_FILE:
        # The macro's refusal, and the plan whose dispatch it is.
        plan = data_dir(package) / PLAN_FILE
        used = SourceFile(plan).line_of(DISPATCH) if plan.is_file() else None
        return f"{where} ({definition}, in {PLAN} at {PLAN_FILE}" + (f":{used})" if used else ")")
    return f"{where} ({definition})"
