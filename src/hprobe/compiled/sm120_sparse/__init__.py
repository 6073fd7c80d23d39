"""Past the validators on SM12x: the checks flashinfer's sparse-MLA
paged-attention entry (`sparse_mla_sm120_paged_attention`, the C++ of
`SparseMlaSm120PagedAttention`) makes over the sizes it is handed, ported per
code era and used only where every C++ function a port follows reads exactly
as it did (cxx.SourceFile.digest), as the trtllm-gen ports are.

A count whose call reaches this entry (device/boundary records what it was
handed) is refused with the entry's own words and place where one of its
checks fails, among them "Decode (num_tokens <= 64) must go through ..." and
the prefill dispatch's "Unsupported sparse-MLA prefill configuration"; where no
port reads like the release, the count is left pending ("entry checks not
read"), never `ok` for the gate."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from types import ModuleType

from hprobe.compiled.cxx import differences, located
from hprobe.compiled.sm120_sparse import era_0_6_14, era_0_6_18
from hprobe.compiled.sm120_sparse.era_0_6_14 import Call, Entry, Refusal
from hprobe.device.boundary import RECORDED_LAUNCHES
from hprobe.model.outcome import HeadResult, KernelSMResult, Outcome

# The compiled entry whose checks are ported: one whose calls the stand-in records.
ENTRY_FUNCTION = "sparse_mla_sm120_paged_attention"
assert ENTRY_FUNCTION in RECORDED_LAUNCHES

# Newest first: the first era whose every digest matches is the release's.
ERAS: tuple[tuple[str, ModuleType], ...] = (
    ("0.6.18 – 0.6.18.post1", era_0_6_18),
    ("0.6.14 – 0.6.17", era_0_6_14),
)


def read_files() -> tuple[str, ...]:
    """Every file (under a release's `flashinfer/data`) these ports read."""
    return tuple(sorted({relative for _era, module in ERAS for relative in module.FINGERPRINT}))


@dataclass(frozen=True)
class Port:
    era: str
    entry: Entry


@lru_cache(maxsize=16)
def port_for(package: Path) -> Port | str:
    """The era whose port reads like this release's entry, or why none does."""
    nearest: list[str] | None = None
    for era, module in ERAS:
        differs = differences(package, module.FINGERPRINT)
        if not differs:
            return Port(era, module.Entry())
        if nearest is None or len(differs) < len(nearest):
            nearest = differs
    assert nearest is not None
    shown = ", ".join(nearest[:3]) + (f" and {len(nearest) - 3} more" if len(nearest) > 3 else "")
    return f"no port of its C++ in hprobe ({shown} read differently from the nearest ported release)"


def parse_call(launch: str) -> Call:
    """The sizes device/boundary.launch_shape recorded, as the entry's parameters."""
    parts = launch.split(";")
    if len(parts) != 12:
        raise ValueError(f"expected the entry's 12 arguments, got {len(parts)}")

    def shape(text: str) -> tuple[int, ...] | None:
        return None if text == "-" else tuple(int(d) for d in text.split(",") if d)

    q, kv, indices, output, out_lse, _scale, model_type, topk_length, sink, extra_kv, extra_idx, extra_len = parts
    found = [shape(x) for x in (q, kv, indices, output, out_lse)]
    required = [s for s in found if s is not None]
    if len(required) != len(found):
        raise ValueError("a tensor the entry requires was not handed over")
    q_shape, kv_shape, indices_shape, output_shape, lse_shape = required
    return Call(
        q_shape,
        kv_shape,
        indices_shape,
        output_shape,
        lse_shape,
        int(model_type),
        shape(topk_length),
        shape(sink),
        shape(extra_kv),
        shape(extra_idx),
        shape(extra_len),
    )


def _reached(result: KernelSMResult) -> list[tuple[int, HeadResult]]:
    """The accepted counts whose call reached the entry, in order."""
    return [
        (h, head)
        for h, head in sorted(result.heads.items())
        if head.outcome is Outcome.ACCEPTED and head.entry and head.entry.endswith("." + ENTRY_FUNCTION)
    ]


def leave_unread(result: KernelSMResult, why: str) -> None:
    """The counts that reached the entry, its checks not evaluated (`why`):
    pending, never `ok` for the gate."""
    for h, head in _reached(result):
        result.heads[h] = replace(head, pending=f"{ENTRY_FUNCTION}'s own checks (compiled) not read: {why}")


def check_entries(result: KernelSMResult, package: Path) -> None:
    """Each accepted count whose call reached the entry: refused where one of
    its checks fails (with the check's words and place in the release), left
    pending where no port reads like the release or the call was not
    recorded. Counts that reached other entries are left as they are."""
    reached = _reached(result)
    if not reached:
        return
    port = port_for(package)
    if isinstance(port, str):
        leave_unread(result, port)
        result.notes.append(f"compiled entry checks: {ENTRY_FUNCTION} not evaluated: {port}")
        return
    for h, head in reached:
        try:
            port.entry.check(parse_call(head.launch or ""))
        except Refusal as refusal:
            result.heads[h] = HeadResult(
                h,
                Outcome.REJECTED,
                error_type="compiled check",
                message=refusal.message,
                location=_located(package, refusal.file, refusal.function, refusal.needle),
            )
        except ValueError as exc:
            result.heads[h] = replace(head, pending=f"{ENTRY_FUNCTION}'s own checks (compiled) not evaluated: {exc}")
    result.notes.append(
        f"compiled entry checks: {ENTRY_FUNCTION}'s own checks ({port.era} port of sparse_mla_sm120.cu and its "
        "prefill dispatch), on the sizes each call handed it"
    )


@lru_cache(maxsize=256)
def _located(package: Path, relative: str, function: str, needle: str) -> str:
    return f"{located(package, relative, function, needle)} ({function})"
