"""`hprobe suggest --repo --diff FILE`: the suggested rules and the pin they
need, written back into the consumer's own source as one unified diff (`git
apply` from the --repo directory), where that can be done mechanically:

- a constant of supported counts (a tuple, list or set of ints, at module level
  or on a class) that the rule reads, directly or through a helper of the tree:
  the literal's items are replaced by the new counts;
- a threshold expression returned by the rule (`64 if n <= 64 else 128`): the
  expression is replaced by the smallest new count >= n;
- every flashinfer requirement of the tree (pyproject.toml, requirements*.txt,
  requirements/*.txt, setup.py) that would still admit a release the new rules
  crash on: that requirement, and nothing else, is raised.

A padding change and the pin it needs are one change or none: when a
requirement that admits a crashing release cannot be rewritten (installed
metadata, hashes, `~=`, an upper bound below the release needed, no requirement
at all), the padding is left alone and the line says which requirement must
move, and where. Each edited file is parsed again and each rewritten rule
evaluated again before anything is written. Anything else is said in words,
never guessed. A site several classes share is rewritten only when every one
of them was judged and given the same rule."""

from __future__ import annotations

import ast
import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.version import Version

from hprobe.model.errors import InputError
from hprobe.model.padding import MAX_HEADS, Backend, NoPadding, PaddingRule, PadTo
from hprobe.rules.repo.extract import PaddingClass, RepoTables, evaluate_class, extract
from hprobe.rules.repo.interpreter.evaluate import NotEvaluable
from hprobe.rules.repo.interpreter.inline import find_inline, floor_constant
from hprobe.rules.repo.pin import NotRewritable, RepoPin, companion_pins, find_pins, rewrite
from hprobe.rules.repo.tree.mapping import HEADS_INLINE
from hprobe.rules.repo.tree.scan import ClassInfo, FunctionInfo, ModuleInfo, RepoIndex
from hprobe.rules.repo.tree.source import PythonSource, Span
from hprobe.system.fileio import read_text
from hprobe.system.parsing import parse_expression

MAX_HOPS = 3  # helper calls followed from the rule to a constant


@dataclass(frozen=True)
class Site:
    """A piece of the consumer's source a rewrite replaces."""

    path: str  # relative to the --repo directory
    span: Span
    kind: str  # "constant" or "threshold"
    name: str  # the constant's name, or the function's
    values: frozenset[int] = frozenset()  # a constant's counts

    @property
    def line(self) -> int:
        return self.span.line


@dataclass(frozen=True)
class Adoption:
    """The rule to write for one class, and the first release from which every
    count it pads to is safe (None: no release the pin could admit refuses it)."""

    rule: PaddingRule
    needs: Version | None = None
    changes: bool = True  # False: the rule pads every count as the current one does (only its pin may move)
    current: PaddingRule | None = None  # what the engine does now (a call path's: its counts as handed over)
    current_safe_from: Version | None = None  # where the current padding is safe from (None: not known)


@dataclass
class Patch:
    diff: bytes = b""  # exactly what is written: each file in its own encoding and line endings
    changed: list[str] = field(default_factory=list)  # each rewrite, in words
    not_rewritten: list[str] = field(default_factory=list)  # each rule left alone, and why
    # No change is needed: every rule judged stays as it is and no pin moves
    # (an empty diff is then the answer, not a failure to write one).
    nothing_needed: bool = False

    @property
    def text(self) -> str:
        """The diff for display (a file's non-UTF-8 bytes shown as U+FFFD)."""
        return self.diff.decode("utf-8", errors="replace")

    def to_dict(self) -> dict:
        return {
            "changed": self.changed,
            "not_rewritten": self.not_rewritten,
            "nothing_needed": self.nothing_needed,
            "diff": self.text,
        }


# Source edits: site -> (the new text, the classes it serves)
Edits = dict[Site, tuple[str, frozenset[str]]]


def build_patch(
    repo: RepoTables,
    adopted: dict[str, Adoption],
    published: list[Version],
    companion_releases: Callable[[str], Sequence[Version] | None] = lambda _name: None,
    holds: Callable[[str, Version], bool | None] | None = None,
) -> Patch:
    """`adopted`: class qualname -> the rule to write for it (judged classes
    only) and the release it needs. `published`: the releases a requirement
    could admit, oldest first: one that admits a release below what the
    patched rules need is raised in the same patch, or no padding changes.
    `companion_releases`: the published releases of a package released with
    flashinfer-python (None: not listed), so that its exact pin moves only to
    a release that exists. `holds`: whether a class's rule, as the patch
    leaves it, is safe at a release (None: not known there); the pin moves
    only to a release at which every other rule the patch settles is shown
    safe — the search asked each rule where its own boundary lies, not
    whether the others hold as far up as another's floor."""
    patch = Patch()
    repo = repo.indexed()
    index = repo.index
    assert index is not None, "extract() keeps the index"
    root = Path(repo.root) if Path(repo.root).is_dir() else Path(repo.root).parent
    edits, settled = _source_edits(repo, index, adopted, patch)
    pins = find_pins(root)
    while True:
        floor = max((n for q in settled if (n := adopted[q].needs) is not None), default=None)
        pin_files, blocked, left = _pin_edits(pins, root, floor, published, companion_releases)
        # A requirement that cannot move holds back every rule that needs it to.
        held = {q for q in settled if blocked and _needs_move(adopted[q].needs, blocked, published)}
        why = "; ".join(dict.fromkeys(blocked.values()))
        if not held and floor is not None and holds is not None and pin_files:
            # Only where the pin moves: a floor the requirement already admits changes no release.
            short = sorted(q for q in settled if adopted[q].needs != floor and holds(q, floor) is not True)
            if short:
                # The floor is where the rules that raise it are first safe; at
                # that release another rule is undecided or refused: raising the
                # pin there would trade it for them, so those rules are held.
                held = {q for q in settled if adopted[q].needs == floor}
                why = (
                    f"at flashinfer {floor} {', '.join('.'.join(q.split('.')[-2:]) for q in short)} "
                    f"{'is' if len(short) == 1 else 'are'} not shown safe (undecided or refused there), so the pin "
                    "does not move there"
                )
        if not held:
            break
        for q in sorted(held):
            if adopted[q].changes:
                said = (
                    f"{adopted[q].rule.describe()} needs flashinfer >= {adopted[q].needs}, and {why}: its padding is "
                    "left as it is"
                )
            else:
                # Kept as it is: nothing of its code changes, only the pin it needs cannot be written.
                said = f"as it is, it needs flashinfer >= {adopted[q].needs}, and {why}"
            # A path said already to move the pin (an unpadded call left to the
            # reader) is said once: where it holds from, and why the pin stays.
            moved = next(
                (i for i, w in enumerate(patch.not_rewritten) if w.startswith(f"{q}: ") and w.endswith(_MOVES)), None
            )
            if moved is not None:
                patch.not_rewritten[moved] = patch.not_rewritten[moved].removesuffix(_MOVES) + f", but {why}"
            else:
                patch.not_rewritten.append(f"{q}: {said}")
        settled -= held
        # A floor constant changes every path that owns it at once: one held path keeps it as it is.
        edits = {
            site: (text, owners - held)
            for site, (text, owners) in edits.items()
            if owners - held and not (site.kind == "floor" and owners & held)
        }
    files = _apply_source(root, index, repo, edits, adopted, patch)
    chunks = [_unified(rel, old, new) for rel, (old, new) in sorted(files.items())]
    why = _needed_by(adopted, settled, floor)
    for rel, (old_text, new_text, words) in sorted(pin_files.items()):
        chunks.append(_unified(rel, old_text.encode("utf-8"), new_text.encode("utf-8")))
        patch.changed.extend(f"{w}{why}" if ": flashinfer requirement " in w else w for w in words)
    patch.not_rewritten.extend(left)
    patch.diff = b"".join(chunks)
    return patch


_MOVES = ", and the pin moves with it"


def _needed_by(adopted: dict[str, Adoption], settled: set[str], floor: Version | None) -> str:
    """Which paths the raised pin is for: the release is the plan's, and a
    path kept as it is moves it as much as a rewritten one."""
    owners = sorted(q for q in settled if floor is not None and adopted[q].needs == floor)
    if not owners:
        return ""
    named = [f"{'.'.join(q.split('.')[-2:])}{'' if adopted[q].changes else ', kept as it is,'}" for q in owners]
    return f" (the first release on which {' and '.join(named)} {'is' if len(named) == 1 else 'are'} safe)"


def _needs_move(needs: Version | None, blocked: dict[RepoPin, str], published: list[Version]) -> bool:
    return needs is not None and any(pin is _NO_PIN or _admits_below(pin, needs, published) for pin in blocked)


def _admits_below(pin: RepoPin | None, needs: Version, published: list[Version]) -> list[Version]:
    """Published releases below `needs` that the requirement admits (every one, for no requirement)."""
    return [v for v in published if v < needs and (pin is None or pin.specifier.contains(v, prereleases=True))]


def _source_edits(
    repo: RepoTables, index: RepoIndex, adopted: dict[str, Adoption], patch: Patch
) -> tuple[Edits, set[str]]:
    """The source edits the adopted rules ask for, and the classes whose rule
    the patched tree holds (rewritten, or already so)."""
    sites: dict[str, list[Site]] = {c.cls.qualname: _sites(index, c) for c in repo.classes if c.rule is not None}
    edits: Edits = {}
    settled: set[str] = set()
    for qualname, adoption in adopted.items():
        rule = adoption.rule
        item = next((c for c in repo.classes if c.cls.qualname == qualname), None)
        floor = _inline_floor(repo, index, qualname, adopted) if item is None and adoption.changes else None
        if isinstance(floor, tuple):
            written, value, owners = floor
            if written in edits and edits[written][0] != value:
                patch.not_rewritten.append(
                    f"{qualname}: {written.path}:{written.line} is asked for two different rules"
                )
                continue
            settled.add(qualname)
            edits[written] = (value, edits.get(written, ("", frozenset()))[1] | owners)
            continue
        if item is None or item.bound:
            # Code hprobe does not rewrite. Its pin still moves with the plan: a
            # rule kept as it is needs the release it is safe from, and where the
            # suggested rule is left to the reader, the current padding is kept
            # and the pin raised to where it is safe as it stands (an unpadded
            # call that crashes on the pinned release, safe from a later one).
            if adoption.changes:
                kept = adoption.current_safe_from
                also = f"; as it is, it holds from flashinfer {kept}{_MOVES}" if kept else ""
                why = (
                    f"padding written at the call itself: {floor}"
                    if isinstance(floor, str)
                    else _by_hand(qualname, item, adoption)
                )
                patch.not_rewritten.append(f"{qualname}: {why}; change it by hand to {rule.describe()}{also}")
                if kept is None:
                    continue
                adopted[qualname] = replace(adoption, rule=adoption.current or rule, needs=kept, changes=False)
            settled.add(qualname)
            continue
        if item.rule == rule or not adoption.changes:
            settled.add(qualname)
            continue
        site = _pick(sites.get(qualname, []), item.rule, rule)
        if site is None:
            patch.not_rewritten.append(
                f"{qualname} ({item.where}): not a constant of counts or a threshold expression; change it by hand to "
                f"{rule.describe()}"
            )
            continue
        sharers = [q for q, s in sites.items() if q != qualname and site in s]
        differ = [q for q in sharers if q not in adopted or adopted[q].rule != rule]
        if differ:
            why = ", ".join(
                f"{q} ({'not judged on the SMs selected' if q not in adopted else adopted[q].rule.describe()})"
                for q in differ
            )
            patch.not_rewritten.append(
                f"{qualname}: {site.name} ({site.path}:{site.line}) is shared with {why}: change it by hand"
            )
            continue
        text = _replacement(site, rule)
        if text is None:
            patch.not_rewritten.append(
                f"{qualname} ({item.where}): {rule.describe()} is not expressible at {site.path}:{site.line}; change "
                "it by hand"
            )
            continue
        if site in edits and edits[site][0] != text:
            patch.not_rewritten.append(f"{qualname}: {site.path}:{site.line} is asked for two different rules")
            continue
        settled.add(qualname)
        edits[site] = (text, edits.get(site, ("", frozenset()))[1] | {qualname})
    return edits, settled


def _inline_floor(
    repo: RepoTables, index: RepoIndex, qualname: str, adopted: dict[str, Adoption]
) -> tuple[Site, str, frozenset[str]] | str | None:
    """An inline padding that is "every count below one constant padded to
    it" rewritten by that constant's literal: the smallest value for which the
    tree, read again with it, pads each count judged as the adopted rule does
    and every other path of that code as before, with the judged paths it
    changes. None: not an inline padding; a string: why it is not rewritten."""
    mapping = repo.mapping
    inline = next(
        (
            m.inline
            for m in (mapping.calls if mapping is not None else [])
            if m.heads == HEADS_INLINE
            and m.inline is not None
            and qualname.startswith(f"{m.inline.function} (inline) -> ")
        ),
        None,
    )
    if inline is None or mapping is None:
        return None
    adoption = adopted[qualname]
    found = find_inline(index, inline)
    if isinstance(found, str):
        return found
    floor = floor_constant(index, found, inline)
    if isinstance(floor, str):
        return floor
    current = adoption.current
    want = {
        n: adoption.rule.pad(n) for n in range(1, MAX_HEADS + 1) if current is not None and current.pad(n) is not None
    }
    value = next(
        (
            c
            for c in sorted({0, *[v for v in want.values() if v is not None]})
            if all((c if n < c else n) == v for n, v in want.items())
        ),
        None,
    )
    if value is None or not want:
        return f"{adoption.rule.describe()} is not every count below one number padded to it"
    literal = floor.literal
    end = (literal.end_lineno or literal.lineno, literal.end_col_offset or literal.col_offset)
    site = Site(
        floor.module.path, Span(literal.lineno, literal.col_offset, *end), "floor", floor.name, frozenset({value})
    )
    # Read again with the new value: the count each judged path hands on is
    # the adopted one, and every other path of the code pads as it did.
    root = Path(repo.root) if Path(repo.root).is_dir() else Path(repo.root).parent
    name = index.module_name_of(site.path)
    try:
        source = PythonSource.read(root / site.path, site.path)
        patched = source.replaced([(site.span, str(value))]).text
        again = extract(
            Path(repo.root),
            mapping,
            repo.excludes,
            None,
            repo.overrides,
            index=index.with_texts({name: patched}) if name else None,
        )
    except (InputError, ValueError, SyntaxError) as exc:
        return f"the tree could not be read again with {floor.name} = {value} ({getattr(exc, 'message', None) or exc})"
    prefix = f"{inline.function} (inline) -> "
    everyone = tuple(model.name for model in repo.table.models)
    before, after = (
        _padded_by(repo.table.backends, prefix, everyone),
        _padded_by(again.table.backends, prefix, everyone),
    )
    for key in sorted(set(before) | set(after)):
        path, sm = key[0], key[1]
        if path in adopted:  # judged in this run: its own adopted rule, on the counts judged
            judged = adopted[path].current
            if judged is not None and judged.pad(key[3]) is None:
                continue
            expected = adopted[path].rule.pad(key[3])
        else:  # not judged: it must pad as it did
            expected = before.get(key)
        if after.get(key) != expected:
            return (
                f"{floor.name} also pads {path} on SM{sm}, whose padding this patch does not change"
                if path not in adopted
                else f"{floor.name} = {value} pads {path} otherwise than its own suggestion"
            )
    # Every judged path the new value changes owns the edit: it stands only
    # while the pin each of them needs can be written (build_patch).
    changed = frozenset(key[0] for key in set(before) | set(after) if before.get(key) != after.get(key))
    return site, str(value), changed | {qualname}


def _padded_by(
    backends: list[Backend], prefix: str, everyone: tuple[str, ...]
) -> dict[tuple[str, int, str, int], int | None]:
    """(path, SM, model, n) -> the count each backend whose name starts with
    `prefix` hands on: the same facts however a reading groups its backends."""
    out: dict[tuple[str, int, str, int], int | None] = {}
    for backend in backends:
        if not backend.name.startswith(prefix):
            continue
        for n in range(1, MAX_HEADS + 1):
            padded = backend.rule.pad(n)
            if padded is None:
                continue
            for sm in backend.sms:
                for model in backend.models or everyone:
                    out[backend.name, sm, model, n] = padded
    return out


def _by_hand(qualname: str, item: object | None, adoption: Adoption) -> str:
    """Why a rule is not rewritten mechanically, as the engine writes it."""
    current = adoption.current
    launched = (
        []
        if current is None
        else [(n, padded) for n in range(1, MAX_HEADS + 1) if (padded := current.pad(n)) is not None]
    )
    if item is None and launched and all(n == padded for n, padded in launched):
        return (
            "an unpadded call (the engine hands FlashInfer its count as it is): padding it is code to add before the "
            "call"
        )
    if item is None and "(inline)" in qualname:
        return "padding written at the call itself (inline code, not a rule or a constant of counts hprobe rewrites)"
    # A rule evaluated per SM, phase and setting (SGLang's): its branches are
    # code, not one constant to rewrite.
    return "a rule that branches on the SM, phase or settings"


def _apply_source(
    root: Path, index: RepoIndex, repo: RepoTables, edits: Edits, adopted: dict[str, Adoption], patch: Patch
) -> dict[str, tuple[bytes, bytes]]:
    """Each edited file's (old bytes, new bytes), after checking that it parses
    and that every rewritten rule evaluates to the rule adopted for it: a patch
    that would not is an error, never written."""
    by_file: dict[str, list[tuple[Site, str, frozenset[str]]]] = {}
    for site, (text, owners) in edits.items():
        by_file.setdefault(site.path, []).append((site, text, owners))
    out: dict[str, tuple[bytes, bytes]] = {}
    texts: dict[str, str] = {}
    for shown_rel, items in sorted(by_file.items()):
        # A rule file linked into the tree is patched where it really is; one
        # that lives outside the tree is not the tree's to patch.
        real = real_path_in_tree(root / shown_rel, root)
        if real is None:
            classes = sorted({q for _, _, o in items for q in o})
            raise InputError(
                f"{shown_rel}: a symlink to a file outside the tree; a patch of the tree cannot change it; nothing "
                f"written; change {', '.join(classes)} by hand"
            )
        rel = real
        try:
            source = PythonSource.read(root / rel, rel)
            new = source.replaced([(site.span, _rendered(source, site, text)) for site, text, _ in items])
            PythonSource.from_bytes(new.raw, rel).parse(rel)
        except (InputError, ValueError, SyntaxError) as exc:
            classes = sorted({q for _, _, o in items for q in o})
            raise InputError(
                f"{rel}: the patch would not be exact ({getattr(exc, 'message', None) or exc}); nothing written; "
                f"change {', '.join(classes)} by hand"
            ) from None
        name = index.module_name_of(shown_rel)
        if name is not None:
            texts[name] = new.text
        out[rel] = (source.raw, new.raw)
        for site, text, owners in items:
            rule = adopted[min(owners)].rule.describe()
            if site.kind != "floor":
                said = f"{site.name} ({site.kind}) → {rule}"
            elif text == "0":
                said = f"{site.name} → 0: no count is below it, so none is padded ({rule}, as suggested)"
            else:
                said = f"{site.name} → {text}: counts below {text} padded to {text}, as {rule} pads the counts judged"
            patch.changed.append(f"{site.path}:{site.line}: {said}")
    if texts:
        again = index.with_texts(texts)
        edited = {q for _, (_, owners) in edits.items() for q in owners}
        for item in repo.classes:
            if item.cls.qualname not in edited:
                continue
            want = adopted[item.cls.qualname].rule
            got = evaluate_class(again, item, repo.mapping.method if repo.mapping else "get_padded_num_q_heads")
            if got != want:
                shown = f"not evaluable ({got})" if isinstance(got, NotEvaluable) else got.describe()
                raise InputError(
                    f"{item.cls.qualname}: the patched source evaluates to {shown}, not {want.describe()}; nothing "
                    "written"
                )
    return out


def _pin_edits(
    pins: list[RepoPin],
    root: Path,
    floor: Version | None,
    published: list[Version],
    companion_releases: Callable[[str], Sequence[Version] | None],
) -> tuple[dict[str, tuple[str, str, list[str]]], dict[RepoPin, str], list[str]]:
    """The requirement files rewritten so that none admits a release below
    `floor`: path -> (old text, new text, words); the requirements that
    would have to move but cannot: requirement -> why, in words; and the
    companion pins left as they are, in words."""
    from hprobe.model.pins import raised_pin

    left: list[str] = []
    if floor is None or not _admits_below(None, floor, published):
        return {}, {}, left
    if not pins:
        return (
            {},
            {
                _NO_PIN: (
                    "the tree declares no flashinfer requirement (pyproject.toml, requirements*.txt, "
                    f"requirements/*.txt, setup.py): add 'flashinfer-python>={floor}'"
                )
            },
            left,
        )
    files: dict[str, tuple[str, str, list[str]]] = {}
    blocked: dict[RepoPin, str] = {}
    for pin in pins:
        below = _admits_below(pin, floor, published)
        if not below:
            continue
        new_spec = raised_pin(pin.spec, floor)
        where = _shown(pin, root)
        if new_spec is None:
            blocked[pin] = (
                f"{where} requires flashinfer{pin.spec}, which admits {below[0]} and cannot be raised mechanically: "
                f"make it admit only >= {floor}"
            )
            continue
        if pin.kind == "metadata" or not pin.path.is_relative_to(root):
            blocked[pin] = (
                f"{where} (flashinfer{pin.spec}) is built or installed metadata, not a requirement the tree declares: "
                f"raise it to {new_spec} where it is declared"
            )
            continue
        real = real_path_in_tree(pin.path, root)
        if real is None:
            blocked[pin] = (
                f"{where} is a symlink to a file outside the tree, which a patch of the tree cannot change: raise it "
                f"to {new_spec} there"
            )
            continue
        rel = real
        if rel not in files:
            text = read_text(pin.path, "requirement file")
            files[rel] = (text, text, [])
        old, current, words = files[rel]
        try:
            new = rewrite(pin, current, new_spec)
        except NotRewritable as exc:
            blocked[pin] = f"{exc}: raise it to {new_spec} by hand"
            continue
        words.append(f"{rel}:{pin.line}: flashinfer requirement {pin.spec} → {new_spec}")
        if pin.spec.startswith("==") and new_spec.startswith("=="):
            new = _companions(pin, rel, new, new_spec, words, left, companion_releases)
        files[rel] = (old, new, words)
    return files, blocked, left


_NO_PIN = RepoPin("", Path("."), None, "none")


def _companions(
    pin: RepoPin,
    rel: str,
    text: str,
    new_spec: str,
    words: list[str],
    left: list[str],
    companion_releases: Callable[[str], Sequence[Version] | None],
) -> str:
    """Packages released with flashinfer-python (cubin, jit-cache), pinned
    exactly to the same release in the same file, move with it, where the
    index has that release of them (flashinfer-cubin stops at 0.6.13 there:
    later releases fetch their kernels on demand)."""
    target = Version(new_spec.removeprefix("=="))
    for other in companion_pins(pin.path, text, pin.spec):
        listed = companion_releases(other.name)
        if listed is not None and target not in listed:
            newest = f" (newest {max(listed)})" if listed else ""
            left.append(
                f"{rel}:{other.line}: {other.name}{other.spec} left as it is: the index has no {other.name} "
                f"{target}{newest}; change or drop it by hand"
            )
            continue
        try:
            text = rewrite(other, text, new_spec)
        except NotRewritable:
            continue
        words.append(
            f"{rel}:{other.line}: {other.name} requirement {other.spec} → {new_spec} (released with flashinfer-python)"
        )
    return text


def real_path_in_tree(path: Path, root: Path) -> str | None:
    """Where `path` really is, relative to the tree (symlinks and `..`
    resolved), or None when that is outside the tree."""
    real, base = path.resolve(), root.resolve()
    if real != base and base not in real.parents:
        return None
    return real.relative_to(base).as_posix()


def _shown(pin: RepoPin, root: Path) -> str:
    try:
        return f"{pin.path.relative_to(root).as_posix()}{f':{pin.line}' if pin.line else ''}"
    except ValueError:
        return pin.source


def _sites(index: RepoIndex, item: PaddingClass) -> list[Site]:
    """Rewrite sites a class's rule reads: constants of int counts reached from
    its function (through helpers), and its threshold return expressions."""
    found: list[Site] = []
    seen: set[str] = set()

    def walk(function: FunctionInfo, owner: ClassInfo | None, hops: int) -> None:
        if function.qualname + function.module.name in seen or hops > MAX_HOPS:
            return
        seen.add(function.qualname + function.module.name)
        params = [a.arg for a in function.node.args.args]
        for node in ast.walk(function.node):
            if isinstance(node, ast.Return) and node.value is not None and _threshold(node.value, params):
                found.append(_site(function.module, node.value, "threshold", function.qualname))
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                hit = index.lookup(function.module, node.id)
                if hit and hit[0] == "constant" and _counts(hit[1]):
                    found.append(_site(hit[2], hit[1], "constant", node.id))
                elif hit and hit[0] == "function":
                    walk(hit[1], None, hops + 1)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("cls", "self")
                and owner is not None
            ):
                for klass in index.mro(owner):
                    if node.attr in klass.attributes:
                        if _counts(klass.attributes[node.attr]):
                            found.append(
                                _site(
                                    klass.module, klass.attributes[node.attr], "constant", f"{klass.name}.{node.attr}"
                                )
                            )
                        break
                    if node.attr in klass.methods:
                        walk(klass.methods[node.attr], owner, hops + 1)
                        break

    walk(item.function, item.cls, 0)
    return list(dict.fromkeys(found))


def _site(module: ModuleInfo, node: ast.expr, kind: str, name: str) -> Site:
    end_line, end_col = node.end_lineno or node.lineno, node.end_col_offset or node.col_offset
    elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else []
    values = frozenset(e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, int))
    return Site(module.path, Span(node.lineno, node.col_offset, end_line, end_col), kind, name, values)


def _counts(node: ast.expr) -> bool:
    return (
        isinstance(node, (ast.Tuple, ast.List, ast.Set))
        and bool(node.elts)
        and all(
            isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool)
            for e in node.elts
        )
    )


def _threshold(node: ast.expr, params: list[str]) -> bool:
    """`A if n <= K else (B if ... else C)`: int leaves, tests comparing a parameter with an int."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and not isinstance(node.value, bool)
    if not isinstance(node, ast.IfExp):
        return False
    test = node.test
    simple = (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and {type(test.left), type(test.comparators[0])} == {ast.Name, ast.Constant}
        and any(isinstance(x, ast.Name) and x.id in params for x in (test.left, test.comparators[0]))
    )
    return simple and _threshold(node.body, params) and _threshold(node.orelse, params)


def _pick(sites: list[Site], current: PaddingRule | None, rule: PaddingRule) -> Site | None:
    """The one site that carries the current rule: a constant holding exactly
    its counts, else a threshold expression (when it is the only one)."""
    values = set(current.values) if isinstance(current, PadTo) else None
    constants = [s for s in sites if s.kind == "constant" and values is not None and s.values == values]
    if len(constants) == 1:
        return constants[0]
    thresholds = [s for s in sites if s.kind == "threshold"]
    return thresholds[0] if len(thresholds) == 1 and not constants else None


def _replacement(site: Site, rule: PaddingRule) -> str | None:
    if site.kind == "constant":
        if not isinstance(rule, PadTo):
            return None  # a list of supported counts cannot say "no padding" for every n
        return ", ".join(str(v) for v in rule.values)  # brackets kept: only the items change
    if isinstance(rule, NoPadding):
        return "{param}"
    if isinstance(rule, PadTo):
        items = ", ".join(str(v) for v in rule.values) + ("," if len(rule.values) == 1 else "")
        return f"min(h for h in ({items}) if h >= {{param}})"
    return None


def _rendered(source: PythonSource, site: Site, replacement: str) -> str:
    """The text that replaces `site`: a constant keeps its brackets, a threshold
    names the rule's own parameter, a floor is the new int."""
    original = source.segment(site.span)
    if site.kind == "floor":
        if not original.isdigit():
            raise ValueError(f"{site.path}:{site.line}: {original[:40]!r} is not the literal that was read")
        return replacement
    if site.kind == "constant":
        opener, closer = original[:1], original[-1:]
        if opener not in ("(", "[", "{") or closer not in (")", "]", "}"):
            raise ValueError(f"{site.path}:{site.line}: {original[:40]!r} is not the literal that was read")
        single = "," if opener == "(" and "," not in replacement else ""
        return f"{opener}{replacement}{single}{closer}"
    return replacement.replace("{param}", _param_of(original))


def _param_of(expression: str) -> str:
    tree = parse_expression(expression)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            return node.id
    raise ValueError(expression)  # _threshold admitted only expressions naming a parameter


def _unified(rel: str, old: bytes, new: bytes) -> bytes:
    """A unified diff of one file in git's line model (a line ends at `\\n`
    only; every other byte kept as it is), its name quoted as git quotes it."""
    a_lines = _git_lines(old)
    b_lines = _git_lines(new)
    lines = difflib.unified_diff(a_lines, b_lines, git_quoted(f"a/{rel}"), git_quoted(f"b/{rel}"), lineterm="\n")
    out = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    return out.encode("latin-1")


def _git_lines(data: bytes) -> list[str]:
    # latin-1 maps each byte to one character and back, whatever the file's encoding.
    parts = data.decode("latin-1").split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


_ESCAPES = {
    0x07: "\\a",
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0B: "\\v",
    0x0C: "\\f",
    0x0D: "\\r",
    0x22: '\\"',
    0x5C: "\\\\",
}


def git_quoted(name: str) -> str:
    """A path as git writes it in a diff header: as is, or in double quotes with
    C escapes (octal for every byte outside printable ASCII) when it holds a
    quote, a backslash, a control or a non-ASCII character."""
    raw = name.encode("utf-8", errors="surrogateescape")
    if not any(b < 0x20 or b >= 0x7F or b in b'"\\' for b in raw):
        return name
    body = "".join(_ESCAPES.get(b) or (chr(b) if 0x20 <= b < 0x7F else f"\\{b:03o}") for b in raw)
    return f'"{body}"'
