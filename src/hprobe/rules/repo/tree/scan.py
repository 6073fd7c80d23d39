"""Index a source tree with `ast`: modules, their constants, functions, classes and
imports. Nothing in the tree is imported or executed."""

from __future__ import annotations

import ast
import fnmatch
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hprobe.model.errors import InputError
from hprobe.rules.repo.tree.source import PythonSource
from hprobe.system.fileio import MAX_SOURCE_BYTES, regular_file
from hprobe.system.parsing import parse_module

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
# A name spelt whole, other than as the name of a `def` (a call, a reference).
_SPELLED = re.compile(r"(?<!\w)(?<!def )([A-Za-z_][A-Za-z0-9_]*)")
MAX_MRO = 64  # classes in one hierarchy; padding hierarchies are a handful deep
# AST depth of one file (each elif is a level). vLLM's and SGLang's deepest files
# reach 46; every walk of a file (parsing aside) is iterative or bounded by this.
MAX_NESTING = 120

# A file too large to parse is still searched for a call of FlashInfer, a
# block at a time, this far; past it, it may hold one.
SCAN_BLOCK = 1 << 20
MAX_SCANNED_BYTES = 256 << 20


@dataclass(frozen=True)
class Unread:
    """A module of the tree not read or not parsed."""

    path: Path
    shown: str  # as the user named the tree
    line: int  # where parsing stopped; 0 where the file was not read
    why: str  # "not read (...)", "not parsed: ..."


@dataclass
class ModuleInfo:
    name: str  # dotted, from the tree root
    path: str  # as shown to the user
    tree: ast.Module
    constants: dict[str, ast.expr] = field(default_factory=dict)
    functions: dict[str, FunctionInfo] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # local name -> (module, attr)
    # Module-level names whose one top-level definition is not the whole story:
    # bound again (under `if`, by `for`, `with`, a walrus, `global` in a
    # function, a star import after it), mutated in place (`X.append`,
    # `X[k] = v`), or, for a class or function, decorated, assigned into or
    # deleted from after its definition. name -> where and how, in words. A
    # rule that reads one is not evaluable: its value is not what it says.
    # Worked out on first read: most parsed modules are only searched for a call.
    _rebound: dict[str, str] | None = field(default=None, repr=False)

    @property
    def rebound(self) -> dict[str, str]:
        if self._rebound is None:
            self._rebound = rebindings(self.tree)
        return self._rebound


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
        raises_only = (
            len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.unparse(body[0])
        )
        return decorated or raises_only or not body


@dataclass
class ClassInfo:
    name: str
    node: ast.ClassDef
    module: ModuleInfo
    bases: list[str]  # as written: "DeepseekV4Attention", "base.Attention"
    methods: dict[str, FunctionInfo] = field(default_factory=dict)
    attributes: dict[str, ast.expr] = field(default_factory=dict)
    # Names the class body binds more than once, or conditionally, or both as
    # a method and an attribute: name -> why (see ModuleInfo.rebound).
    rebound: dict[str, str] = field(default_factory=dict)

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
        # Modules not read or not parsed: dotted name -> (file, why). What they
        # would call is unknown; find_calls lists each that may call FlashInfer.
        self.unread: dict[str, Unread] = {}
        self._mro_cache: dict[str, list[ClassInfo]] = {}
        # (package, name) -> whether `from package import name` is its submodule
        self._submodule_only: dict[tuple[str, str], bool] = {}
        self._texts: dict[str, str | None] = {}
        self._identifiers: dict[str, frozenset[str]] = {}
        self._spelled: dict[str, frozenset[str]] = {}
        self._patched: dict[str, str] | None = None

    @classmethod
    def build(cls, root: Path, excludes: tuple[str, ...] = DEFAULT_EXCLUDES) -> RepoIndex:
        index = cls(root)
        base = root if root.is_dir() else root.parent
        for path in sorted(_python_files(root, excludes, index.problems)):
            index.files[_module_name(path.relative_to(base))] = path
        return index

    def modules_mentioning(self, words: set[str]) -> list[ModuleInfo]:
        """Parsed modules whose source contains any of `words`."""
        return list(self.each_module_mentioning(words))

    def each_module_mentioning(self, words: set[str]) -> Iterator[ModuleInfo]:
        """The same, each parsed only when the caller asks for it (a search
        that stops at its first find parses no further)."""
        return self._each_module(lambda name, text: self._mentions(name, text, words))

    def each_module_whose_text(self, accept: Callable[[str], bool]) -> Iterator[ModuleInfo]:
        """Parsed modules whose source `accept`s, each parsed only when asked for."""
        return self._each_module(lambda _, text: accept(text))

    def each_module_naming(self, name: str, also: frozenset[str] | None = None) -> Iterator[ModuleInfo]:
        """Parsed modules in which the identifier `name` appears whole and not
        as the name of its own `def`: every module that may call it. A call is
        spelt with the name as a word; a file that holds it only inside longer
        names (`_forward` in `_forward_impl`) or only defines it is not parsed.
        With `also`, only modules that spell one of those words as well, whole
        (the words a module spells are listed once its name test passes)."""
        return self._each_module(
            lambda module_name, text: (
                self._names(module_name, text, name)
                and (also is None or not self._spelled[module_name].isdisjoint(also))
            )
        )

    def count_naming(self, name: str) -> int:
        """How many modules `each_module_naming(name)` would parse (none parsed here)."""
        return sum(
            1
            for module_name in list(self.files)
            if (text := self._text(module_name)) and self._names(module_name, text, name)
        )

    def _names(self, module_name: str, text: str, name: str) -> bool:
        # The substring test first, in C over the whole tree; a module that
        # passes it has the words it spells, other than as a `def`, listed
        # once: asking for each of 10,000 helpers searched its text 10,000 times.
        if name not in text:
            return False
        if module_name not in self._spelled:
            self._spelled[module_name] = frozenset(_SPELLED.findall(text))
        return name in self._spelled[module_name]

    def _each_module(self, accept: Callable[[str, str], bool]) -> Iterator[ModuleInfo]:
        for module_name in list(self.files):
            text = self._text(module_name)
            if text is not None and accept(module_name, text):
                module = self.module(module_name, text)
                if module is not None:
                    yield module

    def mentioning(self, word: str) -> list[str]:
        """The files whose source contains `word`, unparsed (as the tree shows them)."""
        return [str(self._shown(self.files[name])) for name in list(self.files) if word in (self._text(name) or "")]

    def _mentions(self, name: str, text: str, words: set[str]) -> bool:
        # A few words: substring search in C. Many (a long class chain): one
        # identifier set per file, so the cost stays linear in the tree.
        if len(words) <= 16:
            return any(w in text for w in words)
        if name not in self._identifiers:
            self._identifiers[name] = frozenset(_IDENTIFIER.findall(text))
        return not self._identifiers[name].isdisjoint(words)

    def source_line(self, rel: str, line: int) -> str | None:
        """Line `line` of a file of the tree (given as shown), stripped, as Python reads it."""
        name = self.module_name_of(rel)
        text = self._text(name) if name is not None else None
        if text is None:
            return None
        lines = text.splitlines()
        return lines[line - 1].strip() if 0 < line <= len(lines) else None

    def _text(self, name: str) -> str | None:
        if name not in self._texts:
            path = self.files[name]
            text = None
            if not regular_file(path):
                self._not_read(name, path, "not read (not a regular file)")
            else:
                try:
                    # As Python reads it (BOM, PEP 263 coding line), so `ast`
                    # positions name the same characters a patch edits.
                    text = PythonSource.read(path, str(self._shown(path))).text
                except InputError as exc:
                    self._not_read(
                        name, path, f"not read ({exc.message}; at most {MAX_SOURCE_BYTES >> 20} MiB of Python source)"
                    )
            self._texts[name] = text
        return self._texts[name]

    def _not_read(self, name: str, path: Path, why: str, line: int | None = None) -> None:
        shown = str(self._shown(path))
        self.problems.append(f"{shown}{f':{line}' if line else ''}: {why}")
        self.unread[name] = Unread(path, shown, line or 0, why)

    def may_mention(self, name: str, words: set[str]) -> bool:
        """Whether a module not read (`unread`) may hold any of `words`: its
        text where it was read but not parsed, else its bytes, searched a
        block at a time up to MAX_SCANNED_BYTES; past that, or where it is
        no regular file, it may."""
        text = self._texts.get(name)
        if text is not None:
            return any(word in text for word in words)
        path = self.unread[name].path
        if not regular_file(path):
            return True
        wanted = [word.encode() for word in words]
        overlap = max(map(len, wanted), default=0)
        try:
            with path.open("rb") as handle:
                tail = b""
                for _ in range(MAX_SCANNED_BYTES // SCAN_BLOCK):
                    block = handle.read(SCAN_BLOCK)
                    if not block:
                        return False
                    window = tail + block
                    if any(word in window for word in wanted):
                        return True
                    tail = window[-overlap:]
        except OSError:
            return True
        return True

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
        problem = None  # (line, why)
        try:
            tree = parse_module(text, filename=str(rel))
        except SyntaxError as exc:
            problem = exc.lineno, f"not parsed: {exc.msg}"
        except (ValueError, RecursionError, MemoryError) as exc:
            problem = (
                None,
                f"not parsed: {exc if isinstance(exc, ValueError) else 'nested too deeply for Python parser'}",
            )
        else:
            problem = _too_deep(tree)
        if problem is not None:
            self._not_read(name, path, problem[1], problem[0])
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
        into other modules of the tree; None when it is not the tree's. A name
        some module on the way rebinds or mutates is ("rebound", why, module)."""
        if name in module.rebound:
            return "rebound", f"{module.path}: {name} is not what its definition says ({module.rebound[name]})", module
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
            # `import a.b as m` (or `import a`): the name is that module, where it is the tree's.
            module_bound = self.by_suffix(source)
            return ("module", module_bound, module_bound) if module_bound is not None else None
        other = self.by_suffix(source)
        if other is None or self._leaves_to_submodule(other, attr):
            # `from pkg import mid` is the submodule pkg.mid where the package
            # binds no `mid` of its own (nor may, through a star import).
            sub = self.by_suffix(f"{source}.{attr}")
            return ("module", sub, sub) if sub else None
        return self.lookup(other, attr, depth + 1)

    def _leaves_to_submodule(self, package: ModuleInfo, attr: str) -> bool:
        key = package.name, attr
        if key not in self._submodule_only:
            self._submodule_only[key] = _leaves_to_submodule(package, attr)
        return self._submodule_only[key]

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
        kind, value, where = found
        if kind == "rebound":
            # Kept in the hierarchy (a rule found through it is refused when
            # evaluated, by `taint`), never silently dropped from it.
            return where.classes.get(head) if not rest else None
        if kind == "class" and not rest:
            return value
        if kind == "module" and rest:
            *packages, name = rest.split(".")
            for part in packages:
                # `import pkg.mid` then `pkg.mid.Mid`: the submodule, where the
                # package binds no `mid` of its own that could stand for it.
                sub = self.by_suffix(f"{value.name}.{part}") if self._leaves_to_submodule(value, part) else None
                if sub is None:
                    return None
                value = sub
            return value.classes.get(name)
        return None

    def taint(self, cls: ClassInfo) -> str | None:
        """Why a class's hierarchy may not be what its source says (a class of
        it decorated, assigned into or deleted from after its definition, or
        made by a hook that may rewrite its body: a metaclass or other class
        keyword, `__init_subclass__`, `__class_getitem__`), or None."""
        for klass in self.mro(cls):
            why = klass.module.rebound.get(klass.name)
            if why is not None:
                return f"{klass.module.path}: class {klass.name} is changed after its definition ({why})"
            if [
                k
                for k in klass.node.keywords
                if not (k.arg == "metaclass" and ast.unparse(k.value) in _PLAIN_METACLASSES)
            ]:
                written = ", ".join(f"{k.arg or '**'}={ast.unparse(k.value)[:40]}" for k in klass.node.keywords)
                return (
                    f"{klass.module.path}:{klass.node.lineno}: class {klass.name} is made with {written}, which may "
                    "rewrite what its body defines"
                )
            hook = next((name for name in _CLASS_HOOKS if name in klass.methods or name in klass.attributes), None)
            if hook is not None:
                return (
                    f"{klass.module.path}:{klass.node.lineno}: class {klass.name} defines {hook}, which may rewrite "
                    "its subclasses or how their attributes read"
                )
        return None

    def patched_builtins(self) -> dict[str, str]:
        """Builtins the tree replaces (`builtins.len = ...`, `setattr(builtins,
        "len", ...)`, `__builtins__["len"] = ...`): name -> where. A rule that
        calls one is not evaluable. Read once per index, in the files that
        mention builtins."""
        if self._patched is None:
            self._patched = {}
            for module in self.modules_mentioning({"builtins"}):
                for node in ast.walk(module.tree):
                    for name in _builtin_patches(node):
                        self._patched.setdefault(name, f"{module.path}:{getattr(node, 'lineno', 0)}")
        return self._patched

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


def _leaves_to_submodule(package: ModuleInfo, attr: str) -> bool:
    """Whether `from package import attr` can only be a submodule: the package
    binds no such name at its top level (a definition, an import, any other
    binding), has no star import that might, and no module `__getattr__`
    (PEP 562), which Python asks before it imports the submodule."""
    if "__getattr__" in package.functions:
        return False
    # Every binding of the name, at the top or anywhere below it (a `global`
    # in a function binds it at the top too).
    for node in ast.walk(package.tree):
        if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
            return False
        if isinstance(node, ast.Name) and node.id == attr and isinstance(node.ctx, (ast.Store, ast.Del)):
            return False
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == attr:
            return False
        if isinstance(node, (ast.Global, ast.Nonlocal)) and attr in node.names:
            return False
        if isinstance(node, ast.alias) and (node.asname or node.name.split(".")[0]) == attr:
            return False
    return True


def _too_deep(tree: ast.AST) -> tuple[int | None, str] | None:
    """Expressions nested deeper than MAX_NESTING are refused at parse time:
    the evaluator recurses over them, and no padding rule is written so."""
    # Level by level: one list per depth rather than a (node, depth) pair per node.
    level: list[ast.AST] = [tree]
    for _ in range(MAX_NESTING + 1):
        level = [child for node in level for child in ast.iter_child_nodes(node)]
        if not level:
            return None
    return getattr(level[0], "lineno", None), f"not read: nested deeper than {MAX_NESTING} levels"


# Metaclasses that keep a class body as written (ABCMeta only records
# abstract methods).
_PLAIN_METACLASSES = ("ABCMeta", "abc.ABCMeta")
# Class hooks that run when a class is made or read, so that what its body
# says is not what its attributes are.
_CLASS_HOOKS = ("__init_subclass__", "__class_getitem__", "__set_name__")


def _builtin_patches(node: ast.AST) -> list[str]:
    """The builtins one statement replaces."""
    targets: list[ast.expr] = []
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    elif isinstance(node, ast.Delete):
        targets = node.targets
    names = []
    for target in targets:
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id in ("builtins", "__builtins__")
        ):
            names.append(target.attr)
        elif (
            isinstance(target, ast.Subscript)
            and isinstance(target.value, ast.Name)
            and target.value.id == "__builtins__"
        ):
            key = target.slice
            names.append(key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else "*")
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "setattr"
        and len(node.args) >= 2
    ):
        holder, key = node.args[0], node.args[1]
        if isinstance(holder, ast.Name) and holder.id in ("builtins", "__builtins__"):
            names.append(key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else "*")
    return names


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
    info.rebound = _class_rebindings(node)
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


def tree_shape(root: Path, excludes: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(the paths of the Python files an index of `root` reads, in the order
    it reads them; every name in the directories it walks, with `/` after a
    directory's): what a reading of the tree rests on besides the files'
    contents."""
    names: list[str] = []
    problems: list[str] = []
    # Strings, ordered part by part as Paths order (SGLang's 4,000 files:
    # building and sorting Paths was a third of a warm check's reading).
    files = sorted(
        _python_paths(root, DEFAULT_EXCLUDES + tuple(excludes), problems, names), key=lambda path: path.split(os.sep)
    )
    return files, sorted(names) + problems


def _python_files(
    root: Path, excludes: tuple[str, ...], problems: list[str] | None = None, names: list[str] | None = None
) -> Iterator[Path]:
    return (Path(path) for path in _python_paths(root, excludes, problems, names))


def _python_paths(
    root: Path, excludes: tuple[str, ...], problems: list[str] | None = None, names: list[str] | None = None
) -> Iterator[str]:
    """The paths of the tree's Python files, walked without following
    symlinked directories. A directory that cannot be listed (permissions,
    /proc) is skipped and named in `problems`; a tree larger than the bounds
    is one input error, said before anything is parsed. `names`: every entry
    of each directory walked, relative to `root`."""
    if root.is_file():
        yield str(root)
        return
    excluded = _exclusion(excludes)
    prefix = os.path.join(str(root), "")
    strip = len(prefix) if str(root) == os.curdir else 0  # "./x.py" is the Path "x.py"
    found = seen = 0
    stack = [str(root)]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as listing:
                entries = list(listing)
        except OSError as exc:
            if problems is not None:
                problems.append(
                    f"{directory[len(prefix) :] if directory != str(root) else directory}: not read "
                    f"({exc.strerror or type(exc).__name__}); its Python files were not searched"
                )
            continue
        seen += len(entries)
        if seen > MAX_ENTRIES:
            raise InputError(
                f"--repo {root}: more than {MAX_ENTRIES:,} files and directories to walk; point --repo at the engine's "
                "source tree, or --exclude what is not"
            )
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = not is_dir and entry.name.endswith(".py") and entry.is_file()
            except OSError:
                continue
            rel = entry.path[len(prefix) :].replace(os.sep, "/")
            if names is not None:
                names.append(f"{rel}/" if is_dir else rel)
            if is_dir:
                if (
                    entry.name not in _SKIP_DIRS
                    and not entry.name.endswith(".dist-info")
                    and not excluded(rel, entry.name)
                ):
                    stack.append(entry.path)
            elif is_file and not excluded(rel, entry.name):
                found += 1
                if found > MAX_FILES:
                    raise InputError(
                        f"--repo {root}: more than {MAX_FILES:,} Python files; point --repo at the engine's source "
                        "tree, or --exclude what is not"
                    )
                yield entry.path[strip:]


def _exclusion(patterns: tuple[str, ...]) -> Callable[[str, str], bool]:
    """Whether a path (relative, `/`-separated) or its name matches a pattern,
    as `fnmatch` matches: a pattern with `/` the whole path, else the name.
    One compiled expression for each kind: the walk asks it of every entry."""
    paths = [fnmatch.translate(p) for p in patterns if "/" in p]
    names = [fnmatch.translate(p) for p in patterns if "/" not in p]
    by_path = re.compile("|".join(f"(?:{p})" for p in paths)).match if paths else None
    by_name = re.compile("|".join(f"(?:{p})" for p in names)).match if names else None

    def excluded(rel: str, name: str) -> bool:
        return bool(
            (by_name is not None and by_name(os.path.normcase(name)))
            or (by_path is not None and by_path(os.path.normcase(rel)))
        )

    return excluded


# Methods that change a list, dict or set in place.
_MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "remove",
        "pop",
        "popitem",
        "clear",
        "update",
        "add",
        "discard",
        "setdefault",
        "sort",
        "reverse",
        "__setitem__",
        "__delitem__",
        "__iadd__",
        "__ior__",
        "difference_update",
        "intersection_update",
        "symmetric_difference_update",
    }
)
# Class decorators that never replace what the class body defines.
_HARMLESS_CLASS_DECORATORS = frozenset({"dataclass", "dataclasses.dataclass"})


def rebindings(tree: ast.Module) -> dict[str, str]:
    """Module-level names whose single top-level definition is not their value
    at run time (see ModuleInfo.rebound). Conservative: a name any construct
    may rebind or mutate is listed, whether or not that code runs."""
    out: dict[str, str] = {}
    bound, stars = _module_bindings(tree, out)
    for name, sites in bound.items():
        sites.sort()
        first_line, first_how = sites[0]
        if len(sites) > 1:
            line, how = sites[1]
            out.setdefault(name, f"line {line}: bound again ({how}) after line {first_line}")
        elif first_how not in ("=", "def", "import"):
            out.setdefault(name, f"line {first_line}: bound by {first_how}")
        later_star = next((s for s in stars if s > first_line), None)
        if later_star is not None:
            out.setdefault(name, f"line {later_star}: a star import after it may rebind it")
    for node in ast.walk(tree):
        _mutations(node, out)
    return out


def _module_bindings(tree: ast.Module, out: dict[str, str]) -> tuple[dict[str, list[tuple[int, str]]], list[int]]:
    """Every binding at module scope (the body, and blocks under if/for/while/
    try/with, not function or class bodies) as name -> [(line, how)], and the
    lines of star imports; decorated definitions go straight to `out`."""
    bound: dict[str, list[tuple[int, str]]] = {}
    stars: list[int] = []
    stack: list[tuple[ast.AST, bool]] = [(stmt, True) for stmt in tree.body]
    while stack:
        node, top = stack.pop()
        line = getattr(node, "lineno", 0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.setdefault(node.name, []).append((line, "def" if top else "a conditional definition"))
            stack.extend((deco, False) for deco in node.decorator_list)
            _decorated(node, out)
            continue
        for name, how in _targets(node, top):
            bound.setdefault(name, []).append((line, how))
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            stars.append(line)
        if isinstance(node, ast.Lambda):
            continue
        for child in ast.iter_child_nodes(node):
            if isinstance(
                child,
                (
                    ast.stmt,
                    ast.expr,
                    ast.excepthandler,
                    ast.comprehension,
                    ast.withitem,
                    ast.match_case,
                    ast.arguments,
                    ast.keyword,
                ),
            ):
                stack.append((child, False))
    return bound, stars


_HARMLESS_FUNCTION_DECORATORS = frozenset({"functools.cache", "cache", "lru_cache", "functools.lru_cache"})
# Decorators that leave a method what its body defines (the evaluator follows
# calls through them), and those a class body may bind besides without rebinding.
TRANSPARENT_METHOD_DECORATORS = frozenset(
    {"classmethod", "staticmethod", "override", "typing.override", *_HARMLESS_FUNCTION_DECORATORS}
)
_DECLARING_DECORATORS = TRANSPARENT_METHOD_DECORATORS | {"property", "abstractmethod", "abc.abstractmethod"}


def _decorated(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, out: dict[str, str]) -> None:
    """A decorator that may replace what the definition says: its name is rebound."""
    named = [ast.unparse(d) for d in node.decorator_list]
    if isinstance(node, ast.ClassDef):
        named = [n for n in named if n not in _HARMLESS_CLASS_DECORATORS]
    else:
        named = [
            n
            for n in named
            if n not in _HARMLESS_FUNCTION_DECORATORS and not n.startswith(("lru_cache(", "functools.lru_cache("))
        ]
    if named:
        out[node.name] = f"line {node.lineno}: decorated with @{named[0]}, which may replace what its body defines"


def _targets(node: ast.AST, top: bool) -> list[tuple[str, str]]:
    """The names a statement or expression binds in its scope, and how."""
    plain = "=" if top else "an assignment under if/for/while/try/with"
    if isinstance(node, ast.Assign):
        names = [n for t in node.targets for n in _names_in(t)]
        simple = len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        return [(n, plain if simple else "unpacking") for n in names]
    if isinstance(node, ast.AnnAssign):
        return [(n, plain if node.value is not None else "an annotation") for n in _names_in(node.target)]
    if isinstance(node, ast.AugAssign):
        return [(n, "an augmented assignment") for n in _names_in(node.target)]
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return [(n, "a for loop") for n in _names_in(node.target)]
    if isinstance(node, ast.withitem) and node.optional_vars is not None:
        return [(n, "with ... as") for n in _names_in(node.optional_vars)]
    if isinstance(node, ast.NamedExpr):
        return [(n, "a walrus") for n in _names_in(node.target)]
    if isinstance(node, ast.comprehension):
        return []  # its target is the comprehension's own
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [(node.name, "except ... as")]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [
            ((a.asname or a.name.split(".")[0]), "import" if top else "a conditional import")
            for a in node.names
            if a.name != "*"
        ]
    if isinstance(node, ast.Delete):
        return [(n, "del") for t in node.targets for n in _names_in(t)]
    if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        return [(node.name, "a match pattern")]
    return []


def _names_in(target: ast.AST) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for t in target.elts for n in _names_in(t)]
    if isinstance(target, ast.Starred):
        return _names_in(target.value)
    return []


def _mutations(node: ast.AST, out: dict[str, str]) -> None:
    """In-place changes of a name anywhere in the module (functions included,
    run or not): `X.append(...)`, `X[k] = v`, `del X[k]`, `X.attr = v`,
    `setattr(X, ...)`, `global X` with a binding in the function."""
    line = getattr(node, "lineno", 0)
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _MUTATORS and isinstance(func.value, ast.Name):
            out.setdefault(func.value.id, f"line {line}: changed in place ({func.value.id}.{func.attr})")
        if (
            isinstance(func, ast.Name)
            and func.id in ("setattr", "delattr")
            and node.args
            and isinstance(node.args[0], ast.Name)
        ):
            out.setdefault(node.args[0].id, f"line {line}: {func.id}() on it")
    elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, (ast.Subscript, ast.Attribute)):
                    root = part.value
                    while isinstance(root, (ast.Subscript, ast.Attribute)):
                        root = root.value
                    if isinstance(root, ast.Name) and root.id not in ("self", "cls"):
                        out.setdefault(
                            root.id, f"line {line}: assigned into or deleted from ({ast.unparse(target)[:60]})"
                        )
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        declared = {
            name for stmt in ast.walk(node) if isinstance(stmt, (ast.Global, ast.Nonlocal)) for name in stmt.names
        }
        for name in sorted(declared):
            out.setdefault(name, f"line {line}: declared global in {node.name}(), which may rebind it")


def _class_rebindings(node: ast.ClassDef) -> dict[str, str]:
    """Names the class body binds more than once, conditionally, or both as a
    method and an attribute (the last binding is the one Python keeps)."""
    seen: dict[str, int] = {}
    out: dict[str, str] = {}
    for item in node.body:
        names: list[str] = []
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [item.name]
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                ast.unparse(d) not in _DECLARING_DECORATORS for d in item.decorator_list
            ):
                out.setdefault(item.name, f"line {item.lineno}: decorated with @{ast.unparse(item.decorator_list[0])}")
        elif isinstance(item, (ast.If, ast.For, ast.While, ast.Try, ast.With, ast.Match)):
            for inner in ast.walk(item):
                for name, _ in _targets(inner, False):
                    out.setdefault(
                        name,
                        f"line {getattr(inner, 'lineno', item.lineno)}: bound under a {type(item).__name__.lower()} "
                        "in the class body",
                    )
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    out.setdefault(
                        inner.name,
                        f"line {inner.lineno}: defined under a {type(item).__name__.lower()} in the class body",
                    )
            continue
        else:
            names = [n for n, how in _targets(item, True)]
            if isinstance(item, (ast.AugAssign, ast.Delete)) or (
                isinstance(item, ast.Assign) and not (len(item.targets) == 1 and isinstance(item.targets[0], ast.Name))
            ):
                for name in names:
                    out.setdefault(name, f"line {item.lineno}: bound by {type(item).__name__} in the class body")
        for name in names:
            if name in seen:
                out.setdefault(name, f"line {item.lineno}: bound again in the class body after line {seen[name]}")
            seen.setdefault(name, item.lineno)
    return out
