"""A traced call's head count at every combination of what it depends on at
run time: the values the mapping lists for what the engine fills from its
settings (mapping.RunValue), and which caller handed the query in where
callers hand in different counts (heads.py's splits). Combinations that give
the same count for every per-rank count are one answer, said by the values
they take; those whose trail ended (one caller's query hprobe cannot follow)
are kept apart, with where and why, for the stated assumption; those under
which a test on the way is false never reach the call, and are said so."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hprobe.rules.repo.interpreter.evaluate import NotEvaluable, Raises
from hprobe.rules.repo.tracing.heads import HeadTrail, NotReached, Unsure, caller_key

# The most combinations a trail is evaluated at; past it, callers are no longer
# told apart (they must agree), and past that the count is not evaluated.
MAX_COMBINATIONS = 256


@dataclass(frozen=True)
class TrailAxis:
    """One thing the count depends on at run time, and the values it takes."""

    key: str  # the run's key: a run value's name, or heads.caller_key(where)
    shown: str  # how answers name it: "k", or "from" for a caller
    values: tuple[Any, ...]
    names: tuple[str, ...]  # each value as said

    @property
    def caller(self) -> bool:
        return self.key.startswith(caller_key(""))

    def said(self, taken: list[int]) -> str:
        """The values at positions `taken`, as an answer names them."""
        if self.caller:
            return "from " + " or ".join(self.names[i] for i in taken)
        return f"{self.shown}={values_text(tuple(self.values[i] for i in taken))}"


@dataclass(frozen=True)
class Answer:
    """The counts one group of combinations hands FlashInfer (n -> count)."""

    counts: tuple[tuple[int, int | Raises], ...]
    words: str  # the values the group takes ("k=2, lse=False"); "" where nothing varies
    # Tests on the way hprobe could not decide, fixed for every answer: the
    # counts hold where they do, as (file:line, condition).
    where: tuple[tuple[str, str], ...] = ()
    # Tests on the way hprobe could not decide that vary with the run: the
    # call may not run at all with these values.
    unsure: tuple[Unsure, ...] = ()


@dataclass(frozen=True)
class Ended:
    """Combinations whose trail ended, all at the same place for the same reason."""

    end: NotEvaluable
    words: str


@dataclass(frozen=True)
class Unreached:
    """Combinations under which one test on the way is false: the call is not reached."""

    test: NotReached
    words: str


@dataclass(frozen=True)
class Answers:
    answers: tuple[Answer, ...]
    ended: tuple[Ended, ...]
    axes: tuple[TrailAxis, ...]
    unreached: tuple[Unreached, ...] = ()


def trail_axes(trail: HeadTrail, shown: Callable[[str], str], callers: bool = True) -> tuple[TrailAxis, ...]:
    """What the count depends on at run time; `shown` words a file:line."""
    axes = [TrailAxis(run.name, run.shown, run.values, tuple(map(str, run.values))) for run, _ in trail.runs]
    if callers:
        for where, handing in trail.splits:
            # Named by function and file:line, the file without its folders:
            # the callers of one function sit together, and a name is a label.
            names = tuple(f"{function} ({shown(at).rpartition('/')[2]})" for function, at in handing)
            axes.append(TrailAxis(caller_key(where), "from", tuple(range(len(handing))), names))
    return tuple(axes)


def combinations(axes: tuple[TrailAxis, ...]) -> list[dict[str, Any]] | None:
    """Every combination of the axes' values ([{}] when there are none); None
    past MAX_COMBINATIONS."""
    combos: list[dict[str, Any]] = [{}]
    for axis in axes:
        combos = [{**combo, axis.key: value} for combo in combos for value in axis.values]
        if len(combos) > MAX_COMBINATIONS:
            return None
    return combos


def evaluate_trail(trail: HeadTrail, counts: list[int], shown: Callable[[str], str]) -> Answers | NotEvaluable:
    """The trail's answers for per-rank counts `counts`; NotEvaluable where no
    combination gives one (the first reason met)."""
    axes = trail_axes(trail, shown)
    combos = combinations(axes)
    if combos is None:
        axes = trail_axes(trail, shown, callers=False)
        combos = combinations(axes)
    if combos is None:
        root, _, _ = trail.root.rpartition(":")
        return NotEvaluable(
            root, 0, f"{trail.said} depends on more than {MAX_COMBINATIONS} combinations of run-time values"
        )
    judged: dict[
        tuple[tuple[tuple[int, int | Raises], ...], tuple[tuple[str, str], ...], tuple[Unsure, ...]],
        list[dict[str, Any]],
    ] = {}
    ended: dict[tuple[str, int, str], tuple[NotEvaluable, list[dict[str, Any]]]] = {}
    unreached: dict[NotReached, list[dict[str, Any]]] = {}
    for combo in combos:
        evaluated = {n: trail.evaluate_said(n, run=combo) for n in counts}
        values = {n: value for n, (value, _, _) in evaluated.items()}
        said = tuple(sorted({test for _, tests, _ in evaluated.values() for test in tests}))
        unsure = tuple(sorted({test for _, _, tests in evaluated.values() for test in tests}))
        stop = next((v for v in values.values() if isinstance(v, NotEvaluable)), None)
        missed = [v for v in values.values() if isinstance(v, NotReached)]
        if stop is None and missed and len(missed) < len(values):
            # Reached at some counts and not others: no one answer holds for the combination.
            where, _, line = missed[0].where.rpartition(":")
            stop = NotEvaluable(
                where, int(line), f"a test on the call's way, `{missed[0].said}`, that holds at some counts only"
            )
        if stop is not None:
            stop = innermost(stop)
            ended.setdefault((stop.path, stop.line, stop.what), (stop, []))[1].append(combo)
            continue
        if missed:
            unreached.setdefault(missed[0], []).append(combo)
            continue
        key = tuple((n, v) for n, v in values.items() if isinstance(v, (int, Raises)))
        judged.setdefault((key, said, unsure), []).append(combo)
    if not judged and ended:
        return next(iter(ended.values()))[0]
    if not judged:
        test = next(iter(unreached))
        where, _, line = test.where.rpartition(":")
        return NotEvaluable(
            where,
            int(line),
            f"a test on the call's way, `{test.said}`, that holds at none of the values hprobe evaluates",
        )
    return Answers(
        tuple(Answer(key, _words(axes, members), said, unsure) for (key, said, unsure), members in judged.items()),
        tuple(Ended(stop, _words(axes, members)) for stop, members in ended.values()),
        axes,
        tuple(Unreached(test, _words(axes, members)) for test, members in unreached.items()),
    )


_WHERE = re.compile(r"(\S+?\.py):(\d+): (.+)", re.DOTALL)


def innermost(stop: NotEvaluable) -> NotEvaluable:
    """Where evaluation really stopped: a reason that starts with the file:line
    it was met at (each step of a trail adds its own) is that place's."""
    what, path, line = stop.what, stop.path, stop.line
    while (match := _WHERE.fullmatch(what)) is not None:
        path, line, what = match.group(1), int(match.group(2)), match.group(3)
    return NotEvaluable(path, line, what)


def innermost_why(why: str) -> str:
    """A reason as said from where it was met (its innermost file:line)."""
    stop = innermost(NotEvaluable("", 0, why))
    return f"{stop.path}:{stop.line}: {stop.what}" if stop.path else stop.what


def _words(axes: tuple[TrailAxis, ...], members: list[dict[str, Any]]) -> str:
    """The values a group of combinations takes: per axis where the group is
    every combination of them (an axis it takes whole is left out: the count
    does not depend on it there), else each combination in turn."""
    taken = [[i for i, v in enumerate(axis.values) if any(_same(m[axis.key], v) for m in members)] for axis in axes]
    product = 1
    for positions in taken:
        product *= len(positions)
    if product == len(members):
        return ", ".join(
            axis.said(positions)
            for axis, positions in zip(axes, taken, strict=True)
            if len(positions) < len(axis.values)
        )
    return "; ".join(
        ", ".join(axis.said([next(i for i, v in enumerate(axis.values) if _same(m[axis.key], v))]) for axis in axes)
        for m in members
    )


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def values_text(values: tuple[Any, ...]) -> str:
    """Values as said: runs of three or more consecutive integers as a range."""
    if (
        len(values) >= 3
        and all(type(v) is int for v in values)
        and list(values) == list(range(values[0], values[-1] + 1))
    ):
        return f"{values[0]}-{values[-1]}"
    return ", ".join(map(str, values))
