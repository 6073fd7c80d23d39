"""Which flashinfer pin a padding rule needs: per count, the first published
release from which every SM of a backend accepts it on the fast path (a binary
search over releases, see history.py), and whether the consumer's pin admits a
release below that.

Pure: the caller passes `safe_at(version, sms, count)`, which probes (service.py
does, through the result cache). Nothing here imports a probe."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from hprobe.advise.history import FirstTrue, first_true
from hprobe.model.heads import compact_set
from hprobe.model.pins import raised_pin
from hprobe.model.sm import sm_names

# (version, SMs, count) -> True (safe on every SM), False (refused on one), None (unknown)
SafeAt = Callable[[Version, tuple[int, ...], int], "bool | None"]


@dataclass(frozen=True)
class CountPin:
    """Since when one count is safe on every SM of a backend."""

    count: int
    found: FirstTrue[Version]

    @property
    def since(self) -> Version | None:
        return self.found.first

    def words(self) -> str:
        f = self.found
        if f.first is None and any(state for _, state in f.seen):
            return f"{self.count}: refused by {f.last_false}, the newest release seen, after releases that accepted it"
        if f.first is None:
            return f"{self.count}: accepted by no release searched"
        if f.last_false is None:
            return f"{self.count}: from {f.first} (the start of the search)"
        exact = "" if f.adjacent else f" (somewhere after {f.last_false}; releases between were inconclusive)"
        return f"{self.count}: from {f.first}{exact}"

    def safe_ranges(self) -> list[tuple[Version, Version | None]]:
        """The runs of releases seen safe, oldest first, each from its first to its
        last release seen safe (None: up to the newest seen). A release between two
        seen ones was not probed; a run is what was seen, not a promise for those."""
        runs: list[tuple[Version, Version | None]] = []
        start: Version | None = None
        last: Version | None = None
        for version, state in self.found.seen:
            if state is None:
                continue
            if state and start is None:
                start = version
            if not state and start is not None:
                assert last is not None
                runs.append((start, last))
                start = None
            last = version
        if start is not None:
            runs.append((start, None))
        return runs

    def to_dict(self) -> dict:
        f = self.found
        return {
            "count": self.count,
            "safe_ranges": [{"from": str(a), "to": str(b) if b else None} for a, b in self.safe_ranges()],
            "since": str(f.first) if f.first else None,
            "last_refusing": str(f.last_false) if f.last_false else None,
            "exact": f.adjacent or (f.first is not None and f.last_false is None),
            "non_monotonic": [{"accepted": str(a), "then_refused": str(b)} for a, b in f.regressions],
            "probed": [{"version": str(v), "safe": s} for v, s in f.seen],
        }


ENTRY_START = "where the entry point first exists"


@dataclass
class PinAdvice:
    """The pin a rule needs on some SMs, and what the current pin admits."""

    sms: tuple[int, ...]
    searched: tuple[str, str]  # first and last release of the search
    current_pin: str | None
    rule_counts: dict[int, CountPin] = field(default_factory=dict)  # the suggested rule's counts
    no_padding: dict[int, CountPin] = field(default_factory=dict)  # the per-rank counts themselves
    admitted_below: list[str] = field(default_factory=list)  # releases the pin admits below `needs`
    admitted: list[str] = field(default_factory=list)  # published releases the pin admits
    # Where the search started, in words: the pin's floor, the installed
    # release, --since, or where the entry point first exists (--since first)
    started: str = ENTRY_START
    # What the answers at a release seen rest on, where that is less than the
    # kernel checks (release -> why): "safe from 0.7.4" at its validators only
    # says so, and so does each run of a count safe, refused and safe again.
    shallow: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def _needs(pins: dict[int, CountPin]) -> Version | None:
        if not pins or any(p.since is None for p in pins.values()):
            return None
        return max(p.since for p in pins.values() if p.since is not None)

    @property
    def needs(self) -> Version | None:
        """The lowest release from which every count of the suggested rule is safe."""
        return self._needs(self.rule_counts)

    @property
    def no_padding_needs(self) -> Version | None:
        return self._needs(self.no_padding)

    @property
    def regressions(self) -> list[str]:
        """Counts accepted by a release and refused by a later one, one line
        per history: counts with the same releases on each side share it
        (every pair of such releases, said one by one, ran to dozens of lines)."""
        sides: dict[int, tuple[set[Version], set[Version]]] = {}
        for p in [*self.rule_counts.values(), *self.no_padding.values()]:
            accepted, refused = sides.setdefault(p.count, (set(), set()))
            for a, b in p.found.regressions:
                accepted.add(Version(str(a)))
                refused.add(Version(str(b)))
        histories: dict[tuple[tuple[Version, ...], tuple[Version, ...]], list[int]] = {}
        for count, (accepted, refused) in sorted(sides.items()):
            if accepted:
                histories.setdefault((tuple(sorted(accepted)), tuple(sorted(refused))), []).append(count)
        return [
            f"{_counts_words(counts)} accepted in {_releases_words(accepted)}, then refused in "
            f"{_releases_words(refused)}"
            for (accepted, refused), counts in histories.items()
        ]

    def new_pin(self) -> str | None:
        """The current pin with its lower bound raised to `needs`; None when it
        needs no change or cannot be rewritten mechanically."""
        needs = self.needs
        if needs is None or not self.admitted_below:
            return None
        return raised_pin(self.current_pin, needs)

    def words(self) -> list[str]:
        sms = sm_names(self.sms)
        lines = []
        needs = self.needs
        if needs is None:
            never = [p.count for p in self.rule_counts.values() if p.since is None]
            lines.append(
                f"{sms}: the suggested rule's counts {compact_set(never)} are accepted by no release in "
                f"{self.searched[0]}..{self.searched[1]}"
            )
        else:
            exact = self.rule_counts and all(
                p.found.adjacent or p.found.last_false is None for p in self.rule_counts.values()
            )
            if not exact:
                first = "first release seen safe; releases just below it were inconclusive"
            elif str(needs) == self.searched[0] and self.started != ENTRY_START:
                # Safe where the search began: whether an older release is too was not asked.
                first = "safe from where the search began; `--since first` asks the older releases"
            else:
                first = "first safe release"
            lines.append(
                f"{sms}: the suggested rule is safe from flashinfer {needs} ({first}; searched "
                f"{self.searched[0]}..{self.searched[1]}, from {self.started})"
            )
            if self.current_pin is not None and not self.admitted_below and self.admitted:
                span = self.admitted[0] if len(self.admitted) == 1 else f"{self.admitted[0]}–{self.admitted[-1]}"
                lines.append(f"{sms}: safe on every release your pin {self.current_pin!r} admits ({span})")
            if self.admitted_below:
                refused = sorted(
                    p.count
                    for p in self.rule_counts.values()
                    if p.since is not None and p.since > Version(self.admitted_below[0])
                )
                new = self.new_pin()
                raise_to = f"raise it to {new!r}" if new else f"raise its lower bound to {needs}"
                lines.append(
                    f"{sms}: your pin {self.current_pin!r} admits {self.admitted_below[0]}, which refuses "
                    f"{compact_set(refused)}: {raise_to}, or keep the current padding"
                )
            elif self.current_pin is None:
                lines.append(
                    f"{sms}: no pin: add requires_flashinfer '>={needs}' so that no older release is installed beside "
                    "this rule"
                )
        no_pad = self.no_padding_needs
        if no_pad is not None:
            lines.append(f"{sms}: no padding at all is safe from flashinfer {no_pad}")
        else:
            never = [p.count for p in self.no_padding.values() if p.since is None]
            if never:
                lines.append(
                    f"{sms}: no padding at all: n={compact_set(never)} is accepted by no release in "
                    f"{self.searched[0]}..{self.searched[1]}"
                )
        for release in sorted({str(v) for v in (needs, no_pad) if v is not None} & set(self.shallow)):
            lines.append(
                f"{sms}: at flashinfer {release} the answers rest on its validators only ({self.shallow[release]})"
            )
        lines.extend(f"{sms}: history is not monotonic: {r}" for r in self.regressions)
        lines.extend(self._holes(sms))
        return lines

    def _holes(self, sms: str) -> list[str]:
        """Where a count is safe, refused and safe again: each run it was seen safe
        in, with the depth its answers rest on."""
        lines = []
        for name, pins in (("the suggested rule", self.rule_counts), ("no padding", self.no_padding)):
            for pin in pins.values():
                runs = pin.safe_ranges()
                if not pin.found.regressions or not runs:
                    continue
                said = "; ".join(self._run_words(pin, a, b) for a, b in runs)
                lines.append(f"{sms}: {name}, n={pin.count}: safe on {said}")
        return lines

    def _run_words(self, pin: CountPin, first: Version, last: Version | None) -> str:
        inside = [str(v) for v, state in pin.found.seen if state and v >= first and (last is None or v <= last)]
        shallow = [v for v in inside if v in self.shallow]
        depth = (
            "validators only"
            if len(shallow) == len(inside)
            else "every check seen"
            if not shallow
            else f"validators only at {', '.join(shallow)}"
        )
        span = f"{first} and later" if last is None else (str(first) if first == last else f"{first}..{last}")
        return f"{span} ({depth}; {len(inside)} seen)"

    def to_dict(self) -> dict:
        return {
            "sms": list(self.sms),
            "searched": list(self.searched),
            "searched_from": self.started,
            "current_pin": self.current_pin,
            "needs": str(self.needs) if self.needs else None,
            "new_pin": self.new_pin(),
            "pin_admits_unsafe": self.admitted_below,
            "pin_admits": self.admitted,
            "no_padding_needs": str(self.no_padding_needs) if self.no_padding_needs else None,
            "rule_counts": [p.to_dict() for p in self.rule_counts.values()],
            "no_padding": [p.to_dict() for p in self.no_padding.values()],
            "non_monotonic": self.regressions,
            "validators_only": dict(self.shallow),
            "advice": self.words(),
        }


def advise(
    sms: tuple[int, ...],
    rule_counts: set[int],
    per_rank: set[int],
    versions: list[Version],
    current_pin: str | None,
    safe_at: SafeAt,
    admitted: list[str] | None = None,
    started: str = "where the entry point first exists",
    parallel: int = 1,
    prepare: Callable[[list[Version]], None] | None = None,
    answered: Callable[[Version], bool] | None = None,
) -> PinAdvice:
    """Search `versions` (published, oldest first) per count. The state of one
    release is probed once and shared by every count (safe_at caches);
    `parallel`, `prepare` and `answered`: a round of releases probed at once
    (history.py)."""
    advice = PinAdvice(
        sms, (str(versions[0]), str(versions[-1])), current_pin, admitted=admitted or [], started=started
    )
    for count in sorted(rule_counts | per_rank):

        def state(v: Version, c: int = count) -> bool | None:
            return safe_at(v, sms, c)

        found = CountPin(count, first_true(versions, state, parallel=parallel, prepare=prepare, answered=answered))
        if count in rule_counts:
            advice.rule_counts[count] = found
        if count in per_rank:
            advice.no_padding[count] = found
    needs = advice.needs
    if current_pin is not None and needs is not None:
        specifier = SpecifierSet(current_pin)
        advice.admitted_below = [str(v) for v in versions if v < needs and specifier.contains(v)]
    return advice


def _counts_words(counts: list[int]) -> str:
    return str(counts[0]) if len(counts) == 1 else f"n={compact_set(counts)}"


def _releases_words(releases: tuple[Version, ...]) -> str:
    """A few releases by name; more as their span and how many were seen in it."""
    if len(releases) <= 3:
        return ", ".join(map(str, releases))
    return f"{releases[0]}..{releases[-1]} ({len(releases)} releases seen)"
