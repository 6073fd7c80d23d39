"""`--pad-fn`: call the consumer's own padding function. An explicit opt-in to
importing and running their code, unlike `--repo`, which only reads it.

The function runs in a child process (`padfn_child.py`), bounded in time: its
prints, `sys.exit`, `os._exit` or a hang can never fake a pass or break hprobe's
output; each ends in one line and exit 2.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from hprobe.model.errors import InputError
from hprobe.model.padding import MAX_HEADS, Backend, Model, PaddingTable, PadMap, Where
from hprobe.rules.interface import RuleInputs, RuleSource, SourceKind
from hprobe.system.bounded import Timeout, run_bounded, setting_from_env

PAD_FN_TIMEOUT = ("HPROBE_PAD_FN_TIMEOUT", 60.0)  # seconds for every call of the function together
_CHILD = Path(__file__).with_name("padfn_child.py")


def call_pad_fn(spec: str, counts: list[int]) -> tuple[Where, dict[int, int | tuple[str, str]]]:
    """Where the function is defined, and per count what it returned or
    (error type, message) when it raised."""
    target, sep, qualname = spec.rpartition(":")
    if not sep or not target or not qualname:
        raise InputError(f"--pad-fn {spec!r}: expected MODULE:QUALNAME or FILE.py:QUALNAME")
    if target.endswith(".py"):
        if not Path(target).is_file():
            raise InputError(f"--pad-fn {spec!r}: no such file {target}")
    limit = setting_from_env(PAD_FN_TIMEOUT)
    with tempfile.TemporaryDirectory(prefix="hprobe-pad-fn-") as tmp:
        out = Path(tmp) / "results.jsonl"
        request = {"spec": f"{target}:{qualname}", "counts": counts, "out": str(out)}
        # -B: no bytecode written beside the user's module; TMPDIR: whatever
        # their code leaves in temp goes with this directory.
        env = dict(os.environ, TMPDIR=tmp)
        try:
            proc = run_bounded(
                [sys.executable, "-I", "-B", "-c", _CHILD.read_text(encoding="utf-8")],
                limit,
                json.dumps(request),
                env=env,
            )
        except Timeout:
            raise InputError(
                f"--pad-fn {spec!r}: did not return within {limit:g} s for {len(counts)} head counts "
                f"({PAD_FN_TIMEOUT[0]} sets the limit)"
            ) from None
        records = (
            [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]
            if out.exists()
            else []
        )
    for item in records:
        if "error" in item:
            raise InputError(f"--pad-fn {spec!r}: {item['error']}")
    if not any("done" in item for item in records):
        calling = [item["calling"] for item in records if "calling" in item]
        during = f" while called for {calling[-1]} heads" if calling else " before it was called"
        tail = " ".join(proc.stderr.split())[-200:]
        raise InputError(
            f"--pad-fn {spec!r}: the process ended{during} (exit code {proc.returncode}); "
            f"a padding function must return a count or raise{': ' + tail if tail else ''}"
        )
    where = next(item["where"] for item in records if "where" in item)
    outputs: dict[int, int | tuple[str, str]] = {}
    for item in records:
        if "n" not in item:
            continue
        n = item["n"]
        if "raises" in item:
            outputs[n] = (item["raises"][0], item["raises"][1])
            continue
        value = item["value"]
        if not isinstance(value, int) or value < n:
            raise InputError(
                f"--pad-fn {spec!r}: returned {value if isinstance(value, str) else repr(value)} for {n}, not a count "
                f">= {n}"
            )
        if value > MAX_HEADS:
            raise InputError(f"--pad-fn {spec!r}: returned {value} for {n}, above {MAX_HEADS}")
        outputs[n] = value
    return Where(where[0], where[1]), outputs


class PadFnRuleSource(RuleSource):
    """A table whose rule is what the function returns for each per-rank count;
    a count it raises for is one the consumer refuses (said in a note)."""

    def __init__(self, spec: str, kernel: str, sms: tuple[int, ...], models: list[Model], options: tuple = ()):
        self.spec, self.kernel, self.sms, self.models, self.options = spec, kernel, sms, models, options

    def collect(self) -> PaddingTable:
        spec = self.spec
        counts = sorted({n for m in self.models for _, n in m.per_rank()})
        where, outputs = call_pad_fn(spec, counts)
        pairs: list[tuple[int, int]] = []
        notes: list[str] = []
        for n in counts:
            value = outputs[n]
            if isinstance(value, tuple):
                notes.append(f"{spec} raises for {n}: {value[0]}: {value[1]}")
            else:
                pairs.append((n, value))
        backend = Backend(spec, self.kernel, self.sms, PadMap(tuple(pairs)), where, self.options)
        return PaddingTable(
            f"--pad-fn {spec}", f"called {spec}", os.fspath(where.path), None, self.models, [backend], notes
        )


class PadFnSourceKind(SourceKind):
    """--pad-fn: the consumer's own function, run in a child process because they asked."""

    name = "pad-fn"

    def given(self, inputs: RuleInputs) -> bool:
        return inputs.pad_fn is not None

    def make(self, inputs: RuleInputs) -> list[RuleSource]:
        from hprobe.kernels import get_variant
        from hprobe.model.sm import parse_sm_list

        spec, kernel, sm, heads = inputs.pad_fn, inputs.kernel, inputs.sm, inputs.heads
        assert spec is not None
        if not kernel or not sm or heads is None:
            raise InputError(
                "--pad-fn needs --kernel (the kernel it feeds), --sm and --heads (the model's total query heads)"
            )
        variant = get_variant(kernel)
        tps = tuple(inputs.tp or [t for t in (1, 2, 4, 8, 16) if heads % t == 0])
        model = Model(f"{heads} heads", heads, tps, Where("--heads"))
        sms = tuple(s.number for s in parse_sm_list(sm))
        options = tuple((k, v) for k, v in variant.config if v != dict(variant.probe.variant().config)[k])
        return [PadFnRuleSource(spec, variant.probe.id, sms, [model], options)]
