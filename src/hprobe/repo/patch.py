"""`hprobe suggest --repo --diff FILE`: the suggested rules and pin written back
into the consumer's own source as a unified diff (`git apply` from the --repo
directory), where that can be done mechanically:

- a constant of supported counts (a tuple, list or set of ints, at module level
  or on a class) that the rule reads, directly or through a helper of the tree:
  the literal is replaced by the new counts;
- a threshold expression returned by the rule (`64 if n <= 64 else 128`): the
  expression is replaced by the smallest new count >= n;
- the flashinfer requirement in pyproject.toml, requirements*.txt or setup.py.

Anything else is said in words, never guessed. A site several classes share is
rewritten only when every one of them was judged and given the same rule."""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..fileio import read_text
from ..tables.model import NoPadding, PaddingRule, PadTo
from .extract import PaddingClass, RepoTables
from .scan import ClassInfo, FunctionInfo, ModuleInfo, RepoIndex

MAX_HOPS = 3  # helper calls followed from the rule to a constant


@dataclass(frozen=True)
class Site:
    """A piece of the consumer's source a rewrite replaces."""

    path: str  # relative to the --repo directory
    line: int
    col: int
    end_line: int
    end_col: int
    kind: str  # "constant" or "threshold"
    name: str  # the constant's name, or the function's
    values: frozenset[int] = frozenset()  # a constant's counts


@dataclass
class Patch:
    diff: str = ""
    changed: list[str] = field(default_factory=list)  # each rewrite, in words
    not_rewritten: list[str] = field(default_factory=list)  # each rule left alone, and why

    def to_dict(self) -> dict:
        return {"changed": self.changed, "not_rewritten": self.not_rewritten, "diff": self.diff}


def build_patch(repo: RepoTables, adopted: dict[str, PaddingRule], pin_for: Callable[[set[str]], str | None]) -> Patch:
    """`adopted`: class qualname -> the rule to write for it (judged classes
    only). `pin_for(classes)`: the pin those classes' rules need; asked for the
    classes whose rule the patch leaves right (rewritten, or already so), so a
    rule left alone never raises the pin."""
    patch = Patch()
    index = repo.index
    assert index is not None, "extract() keeps the index"
    root = Path(repo.root) if Path(repo.root).is_dir() else Path(repo.root).parent
    sites: dict[str, list[Site]] = {c.cls.qualname: _sites(index, c) for c in repo.classes if c.rule is not None}
    edits: dict[Site, str] = {}
    settled: set[str] = set()
    for qualname, rule in adopted.items():
        item = next((c for c in repo.classes if c.cls.qualname == qualname), None)
        if item is None or item.bound:
            # A rule evaluated per SM, phase and setting (SGLang's): its branches
            # are code, not one constant to rewrite.
            patch.not_rewritten.append(f"{qualname}: a rule that branches on the SM, phase or settings; change it by hand to {rule.describe()}")
            continue
        if item.rule == rule:
            settled.add(qualname)
            continue
        mine = sites.get(qualname, [])
        site = _pick(mine, item.rule, rule)
        if site is None:
            patch.not_rewritten.append(f"{qualname} ({item.where}): not a constant of counts or a threshold expression; change it by hand to {rule.describe()}")
            continue
        sharers = [q for q, s in sites.items() if q != qualname and site in s]
        differ = [q for q in sharers if adopted.get(q) != rule]
        if differ:
            why = ", ".join(f"{q} ({'not judged on the SMs selected' if q not in adopted else adopted[q].describe()})" for q in differ)
            patch.not_rewritten.append(f"{qualname}: {site.name} ({site.path}:{site.line}) is shared with {why}: change it by hand")
            continue
        text = _replacement(site, rule)
        if text is None:
            patch.not_rewritten.append(f"{qualname} ({item.where}): {rule.describe()} is not expressible at {site.path}:{site.line}; change it by hand")
            continue
        if edits.get(site, text) != text:
            patch.not_rewritten.append(f"{qualname}: {site.path}:{site.line} is asked for two different rules")
            continue
        settled.add(qualname)
        if site not in edits:
            edits[site] = text
            patch.changed.append(f"{site.path}:{site.line}: {site.name} ({site.kind}) → {rule.describe()}")
    by_file: dict[str, list[tuple[Site, str]]] = {}
    for site, text in edits.items():
        by_file.setdefault(site.path, []).append((site, text))
    chunks = []
    for rel, items in sorted(by_file.items()):
        old = read_text(root / rel, "source file")
        new = _apply(old, items)
        chunks.append(_unified(rel, old, new))
    new_pin = pin_for(settled)
    if new_pin is not None:
        chunks.append(_pin_chunk(repo, root, new_pin, patch))
    patch.diff = "".join(chunks)
    return patch


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
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("cls", "self") and owner is not None:
                for klass in index.mro(owner):
                    if node.attr in klass.attributes:
                        if _counts(klass.attributes[node.attr]):
                            found.append(_site(klass.module, klass.attributes[node.attr], "constant", f"{klass.name}.{node.attr}"))
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
    return Site(module.path, node.lineno, node.col_offset, end_line, end_col, kind, name, values)


def _counts(node: ast.expr) -> bool:
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and bool(node.elts) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool) for e in node.elts
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


def _apply(text: str, items: list[tuple[Site, str]]) -> str:
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    # Offsets are in UTF-8 bytes per line; the rules hprobe rewrites are ASCII.
    for site, replacement in sorted(items, key=lambda it: (it[0].line, it[0].col), reverse=True):
        begin = starts[site.line - 1] + site.col
        end = starts[site.end_line - 1] + site.end_col
        original = text[begin:end]
        if site.kind == "constant":
            opener, closer = original[0], original[-1]
            single = "," if opener == "(" and "," not in replacement else ""
            new = f"{opener}{replacement}{single}{closer}"
        else:
            param = _param_of(original)
            new = replacement.replace("{param}", param)
        text = text[:begin] + new + text[end:]
    return text


def _param_of(expression: str) -> str:
    tree = ast.parse(expression, mode="eval")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            return node.id
    raise ValueError(expression)  # _threshold admitted only expressions naming a parameter


def _unified(rel: str, old: str, new: str) -> str:
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{rel}", f"b/{rel}")
    out = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    return out


_REQUIREMENT = re.compile(r"(?P<name>flashinfer(?:[-_]python)?)(?P<extras>\[[^\]]*\])?(?P<spec>\s*[<>=!~][^\"';#\n]*?)(?=\s*(?:[\"';#]|$))", re.IGNORECASE | re.MULTILINE)


def _pin_chunk(repo: RepoTables, root: Path, new_pin: str, patch: Patch) -> str:
    if repo.pin is None:
        patch.not_rewritten.append(f"no flashinfer requirement in the tree's pyproject.toml, requirements*.txt or setup.py: add 'flashinfer-python{new_pin}' by hand")
        return ""
    path = repo.pin.path
    if path.name == "METADATA" or not path.is_relative_to(root):
        patch.not_rewritten.append(f"the pin {repo.pin.spec} comes from {repo.pin.source}, not the tree's own requirement files: change it to {new_pin} where it is declared")
        return ""
    rel = path.relative_to(root).as_posix()
    old = read_text(path, "requirement file")
    new, count = _REQUIREMENT.subn(lambda m: f"{m['name']}{m['extras'] or ''}{new_pin}", old, count=1)
    if not count or new == old:
        patch.not_rewritten.append(f"{rel}: the flashinfer requirement could not be rewritten mechanically: change it to {new_pin}")
        return ""
    patch.changed.append(f"{rel}: flashinfer requirement {repo.pin.spec} → {new_pin}")
    return _unified(rel, old, new)
