"""Index a source tree with `ast`: modules, their constants, functions, classes and
imports. Nothing in the tree is imported or executed."""

from __future__ import annotations

import ast
import fnmatch
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from hprobe.model.errors import InputError
from hprobe.rules.repo.source import PythonSource
from hprobe.system.fileio import MAX_SOURCE_BYTES, regular_file

# Directories never worth reading for padding rules.
_SKIP_DIRS = {".git", "__pycache__", "node_modules", ".mypy_cache"}
# Skipped by default, as globs over paths relative to the tree (a pattern with
# no `/` matches a directory name anywhere): test suites and their fixtures,
# vendored environments and build outputs hold classes that are not the
# consumer's serving code. `--exclude` adds patterns.
DEFAULT_EXCLUDES = ("tests", "test", "fixtures", ".venv", "venv", "site-packages", "build", "dist", ".tox")
MAX_FILES = 20_000  # Python files of one --repo tree (vLLM has about 3,000)
MAX_ENTRIES = 1_000_000  # files and directories walked to find them
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_MRO = 64  # classes in one hierarchy; padding hierarchies are a handful deep
MAX_NESTING = 500  # AST depth of one file (each elif is a level); real code stays far below


@dataclass
class ModuleInfo:
    name: str  # dotted, from the tree root
    path: str  # as shown to the user
    tree: ast.Module
    constants: dict[str, ast.expr] = field(default_factory=dict)
    functions: dict[str, FunctionInfo] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # local name -> (module, attr)


@dataclass
class FunctionInfo:
    qualname: str
    node: ast.FunctionDef
    module: ModuleInfo

    @property
    def line(self) -> int:
        return self.node.lineno

    @property
    def abstract(self) -> bool:
        decorated = any(ast.unparse(d).endswith("abstractmethod") for d in self.node.decorator_list)
        body = [s for s in self.node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        raises_only = len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.unparse(body[0])
        return decorated or raises_only or not body


@dataclass
class ClassInfo:
    name: str
    node: ast.ClassDef
    module: ModuleInfo
    bases: list[str]  # as written: "DeepseekV4Attention", "base.Attention"
    methods: dict[str, FunctionInfo] = field(default_factory=dict)
    attributes: dict[str, ast.expr] = field(default_factory=dict)

    @property
    def qualname(self) -> str:
        return f"{self.module.name}.{self.name}"


class RepoIndex:
    """Python modules under a root, parsed on demand: a file is read with `ast` only
    when it may hold the method asked about, or defines a name that one of those
    imports. A large tree (vLLM) is then a text search plus a few parses."""

    def __init__(self, root: Path):
        self.root = root
        self.files: dict[str, Path] = {}  # dotted module name -> file
        self.modules: dict[str, ModuleInfo] = {}  # parsed so far
        self.problems: list[str] = []  # files that could not be parsed
        self._mro_cache: dict[str, list[ClassInfo]] = {}
        self._texts: dict[str, str | None] = {}
        self._identifiers: dict[str, frozenset[str]] = {}

    @classmethod
    def build(cls, root: Path, excludes: tuple[str, ...] = DEFAULT_EXCLUDES) -> RepoIndex:
        index = cls(root)
        base = root if root.is_dir() else root.parent
        for path in sorted(_python_files(root, excludes)):
            index.files[_module_name(path.relative_to(base))] = path
        return index

    def modules_mentioning(self, words: set[str]) -> list[ModuleInfo]:
        """Parsed modules whose source contains any of `words`."""
        found = []
        for name in list(self.files):
            text = self._text(name)
            if text is not None and self._mentions(name, text, words):
                module = self.module(name, text)
                if module is not None:
                    found.append(module)
        return found

    def _mentions(self, name: str, text: str, words: set[str]) -> bool:
        # A few words: substring search in C. Many (a long class chain): one
        # identifier set per file, so the cost stays linear in the tree.
        if len(words) <= 16:
            return any(w in text for w in words)
        if name not in self._identifiers:
            self._identifiers[name] = frozenset(_IDENTIFIER.findall(text))
        return not self._identifiers[name].isdisjoint(words)

    def _text(self, name: str) -> str | None:
        if name not in self._texts:
            path = self.files[name]
            text = None
            if not regular_file(path):
                self.problems.append(f"{self._shown(path)}: not read (not a regular file)")
            else:
                try:
                    # As Python reads it (BOM, PEP 263 coding line), so `ast`
                    # positions name the same characters a patch edits.
                    text = PythonSource.read(path, str(self._shown(path))).text
                except InputError as exc:
                    self.problems.append(f"{self._shown(path)}: not read ({exc.message}; at most {MAX_SOURCE_BYTES >> 20} MiB of Python source)")
            self._texts[name] = text
        return self._texts[name]

    def with_texts(self, texts: dict[str, str]) -> RepoIndex:
        """A fresh index of the same files in which the modules named read as
        `texts` (dotted name -> source): a patch checked before it is written."""
        again = RepoIndex(self.root)
        again.files = dict(self.files)
        again._texts = dict(texts)
        return again

    def module_name_of(self, rel: str) -> str | None:
        """The dotted name of a file given as shown to the user."""
        return next((n for n, p in self.files.items() if str(self._shown(p)) == rel), None)

    def _shown(self, path: Path) -> Path:
        base = self.root if self.root.is_dir() else self.root.parent
        return path.relative_to(base)

    def module(self, name: str, text: str | None = None) -> ModuleInfo | None:
        if name in self.modules:
            return self.modules[name]
        path = self.files.get(name)
        if path is None:
            return None
        rel = self._shown(path)
        text = text if text is not None else self._text(name)
        if text is None:
            self.files.pop(name, None)
            return None
        problem = None
        try:
            tree = ast.parse(text, filename=str(rel))
        except SyntaxError as exc:
            problem = f"{rel}{f':{exc.lineno}' if exc.lineno else ''}: not parsed: {exc.msg}"
        except (ValueError, RecursionError, MemoryError) as exc:
            problem = f"{rel}: not parsed: {'nested too deeply' if isinstance(exc, RecursionError) else exc}"
        else:
            problem = _too_deep(tree, rel)
        if problem is not None:
            self.problems.append(problem)
            self.files.pop(name, None)
            return None
        module = ModuleInfo(name, str(rel), tree)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        _fill(module, tree, package)
        self.modules[name] = module
        return module

    # -- names -------------------------------------------------------------------------

    def lookup(self, module: ModuleInfo, name: str, depth: int = 0):
        """(kind, value, defining module) for a top-level name, following imports
        into other modules of the tree; None when it is not the tree's."""
        if name in module.constants:
            return "constant", module.constants[name], module
        if name in module.functions:
            return "function", module.functions[name], module
        if name in module.classes:
            return "class", module.classes[name], module
        target = module.imports.get(name)
        if target is None or depth > 8:
            return None
        source, attr = target
        if attr is None:
            return None
        other = self.by_suffix(source)
        if other is None:
            sub = self.by_suffix(f"{source}.{attr}")
            return ("module", sub, sub) if sub else None
        return self.lookup(other, attr, depth + 1)

    def by_suffix(self, dotted: str) -> ModuleInfo | None:
        """The module `dotted` names, whether the tree root is the package's parent
        (`vllm.x.y`) or the package itself (`x.y` under root `vllm/`)."""
        if dotted in self.files:
            return self.module(dotted)
        for name in self.files:
            if dotted.endswith("." + name) or name.endswith("." + dotted):
                return self.module(name)
        return None

    def resolve_class(self, module: ModuleInfo, written: str) -> ClassInfo | None:
        head, _, rest = written.partition(".")
        found = self.lookup(module, head)
        if found is None:
            return None
        kind, value, _ = found
        if kind == "class" and not rest:
            return value
        if kind == "module" and rest:
            return value.classes.get(rest)
        return None

    def mro(self, cls: ClassInfo) -> list[ClassInfo]:
        """The class and its bases that live in the tree, depth-first, left to right
        (enough for single-inheritance padding hierarchies). Iterative, each class
        visited once and at most MAX_MRO of them: a 3,000-class chain costs a
        bounded walk, not a hang."""
        key = cls.qualname
        if key in self._mro_cache:
            return self._mro_cache[key]
        order: list[ClassInfo] = []
        seen: set[str] = set()
        stack = [cls]
        while stack and len(order) < MAX_MRO:
            klass = stack.pop()
            if klass.qualname in seen:
                continue
            seen.add(klass.qualname)
            order.append(klass)
            parents = [self.resolve_class(klass.module, base) for base in klass.bases]
            stack.extend(reversed([p for p in parents if p is not None]))
        self._mro_cache[key] = order
        return order

    def classes_with(self, method: str) -> list[ClassInfo]:
        """Every class that defines `method` or inherits it from a class of the
        tree. Files are parsed only when they mention the method or the name of
        a class already found (a subclass must name its base)."""
        found: dict[str, ClassInfo] = {}
        words = {method}
        while words:
            fresh: set[str] = set()
            for module in self.modules_mentioning(words):
                for cls in module.classes.values():
                    if cls.qualname in found:
                        continue
                    if any(method in k.methods for k in self.mro(cls)):
                        found[cls.qualname] = cls
                        fresh.add(cls.name)
            words = fresh
        return list(found.values())


def _too_deep(tree: ast.AST, rel: Path) -> str | None:
    """Expressions nested deeper than MAX_NESTING are refused at parse time:
    the evaluator recurses over them, and no padding rule is written so."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            return f"{rel}:{getattr(node, 'lineno', '?')}: not read: nested deeper than {MAX_NESTING} levels"
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return None


def _module_name(rel: Path) -> str:
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _fill(module: ModuleInfo, tree: ast.Module, package: str) -> None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            module.constants[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            module.constants[node.target.id] = node.value
        elif isinstance(node, ast.FunctionDef):
            module.functions[node.name] = FunctionInfo(node.name, node, module)
        elif isinstance(node, ast.ClassDef):
            module.classes[node.name] = _class_info(node, module)
        elif isinstance(node, ast.ImportFrom):
            source = resolve_relative(package, node.module, node.level)
            for alias in node.names:
                if alias.name != "*":
                    module.imports[alias.asname or alias.name] = (source, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                module.imports[local] = (alias.name if alias.asname else local, None)


def _class_info(node: ast.ClassDef, module: ModuleInfo) -> ClassInfo:
    info = ClassInfo(node.name, node, module, [ast.unparse(b) for b in node.bases])
    for item in node.body:
        if isinstance(item, ast.FunctionDef):
            info.methods[item.name] = FunctionInfo(f"{node.name}.{item.name}", item, module)
        elif isinstance(item, ast.Assign) and len(item.targets) == 1 and isinstance(item.targets[0], ast.Name):
            info.attributes[item.targets[0].id] = item.value
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
            info.attributes[item.target.id] = item.value
    return info


def resolve_relative(package: str, module: str | None, level: int) -> str:
    if not level:
        return module or ""
    parts = package.split(".") if package else []
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(p for p in parts + ([module] if module else []) if p)


def _python_files(root: Path, excludes: tuple[str, ...]):
    """The tree's Python files, walked without following symlinks. A
    directory that cannot be listed (permissions, /proc) is skipped; a tree
    larger than the bounds is one input error, said before anything is parsed."""
    if root.is_file():
        yield root
        return
    found = seen = 0
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as listing:
                entries = list(listing)
        except OSError:
            continue
        seen += len(entries)
        if seen > MAX_ENTRIES:
            raise InputError(f"--repo {root}: more than {MAX_ENTRIES:,} files and directories to walk; point --repo at the engine's source tree, or --exclude what is not")
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = not is_dir and entry.name.endswith(".py") and entry.is_file()
            except OSError:
                continue
            rel = Path(entry.path).relative_to(root)
            if is_dir:
                if entry.name not in _SKIP_DIRS and not entry.name.endswith(".dist-info") and not _excluded(rel, excludes):
                    stack.append(Path(entry.path))
            elif is_file and not _excluded(rel, excludes):
                found += 1
                if found > MAX_FILES:
                    raise InputError(f"--repo {root}: more than {MAX_FILES:,} Python files; point --repo at the engine's source tree, or --exclude what is not")
                yield Path(entry.path)


def _excluded(rel: Path, patterns: tuple[str, ...]) -> bool:
    text = rel.as_posix()
    return any(fnmatch.fnmatch(text, p) if "/" in p else fnmatch.fnmatch(rel.name, p) for p in patterns)
