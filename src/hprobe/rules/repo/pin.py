"""The consumer's flashinfer requirement, read from its own metadata: a wheel's or an
installed package's METADATA, pyproject.toml, requirements files, or a literal
`install_requires` in setup.py.

Each requirement is parsed with `packaging.requirements` and remembered where it
stands (file, line, and the requirement's own text), so that `suggest --diff`
rewrites exactly that requirement and nothing that merely mentions flashinfer
(a comment, another package, an `optional-dependencies` list read second)."""

from __future__ import annotations

import ast
import contextvars
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from hprobe.model.errors import InputError
from hprobe.model.pins import NAMES
from hprobe.rules.toml_source import parse_toml
from hprobe.system.fileio import present, read_text, regular_file
from hprobe.system.parsing import parse_module

if TYPE_CHECKING:
    from packaging.requirements import Requirement

# packaging.requirements (markers, tags, logging) is imported where a
# requirement is parsed: a warm check reads its pin back from a kept reading.

# Released in lockstep with flashinfer-python: an exact pin on the same version
# moves with it (vLLM pins flashinfer-cubin beside flashinfer-python).
COMPANIONS = {"flashinfer-cubin", "flashinfer-jit-cache"}


@dataclass(frozen=True)
class RepoPin:
    """One flashinfer requirement of the tree, where it stands."""

    spec: str  # a PEP 440 specifier set, e.g. "==0.7.2.post1"
    path: Path  # the file it came from
    line: int | None = None  # its line there
    kind: str = (
        "requirements"  # metadata, pyproject, poetry, pylock, uv.lock, poetry.lock, requirements, setup.py or setup.cfg
    )
    written: str = ""  # the requirement as the file writes it (without comment or options)
    locator: tuple = ()  # requirements: (begin, end, has options); pyproject: the key path; setup.py: its ast span

    @property
    def source(self) -> str:
        return f"{self.path}:{self.line}" if self.line is not None else str(self.path)

    @property
    def specifier(self) -> SpecifierSet:
        return SpecifierSet(self.spec)

    @property
    def name(self) -> str:
        from packaging.requirements import Requirement

        return Requirement(self.written).name if self.written else "flashinfer-python"


def find_pin(root: Path, problems: list[str] | None = None, unread: list[str] | None = None) -> RepoPin | None:
    """The first flashinfer requirement found, most authoritative source first:
    METADATA beside or inside the tree, pyproject.toml, lock files,
    requirements files. A requirement file that cannot be read is named in
    `problems`; each requirement that may hold the pin and cannot be read, in
    `unread` too."""
    found = find_pins(root, problems, unread)
    # A requirement pip would not install here (its marker is false) is still
    # raised by a patch (find_pins), but never read as the pin judged.
    pins = [p for p in found if _installs_here(p, problems)]
    if not pins:
        return None
    # An unversioned requirement says nothing of the release: a source that
    # names one is taken before it, and when sources disagree each is said.
    taken = next((p for p in pins if p.spec != ">=0"), pins[0])
    others = [
        p for p in pins if p is not taken and p.spec != taken.spec and canonicalize_name(p.name) not in COMPANIONS
    ]
    if others and problems is not None:
        why = (
            "the first that names a release"
            if pins[0].spec == ">=0" and taken is not pins[0]
            else "the most authoritative source (metadata, pyproject, lock files, requirements, setup.py)"
        )
        problems.append(
            f"flashinfer is pinned differently in the tree: {taken.spec} at {taken.source} is taken ({why}); also "
            f"{', '.join(f'{p.spec} at {p.source}' for p in others[:3])}"
        )
    return taken


# Files that make a folder a Python project (its requirements live there).
PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg")


def project_folders(base: Path, package: str | None = None) -> list[Path]:
    """The folders one level below `base` that are a Python project holding a
    package (`package` itself when named): where a repository keeps its Python
    part apart (SGLang's python/ with sglang/ and its pyproject.toml). Only
    where `base` is no project itself."""
    if any(present(base / name) for name in PROJECT_FILES):
        return []
    try:
        # A linked folder may lead out of the tree: only the tree's own are read.
        children = sorted(d for d in base.iterdir() if d.is_dir() and not d.is_symlink() and not d.name.startswith("."))
    except OSError:
        return []
    return [
        d
        for d in children
        if any(present(d / name) for name in PROJECT_FILES)
        and (
            regular_file(d / package / "__init__.py")
            if package
            else any(regular_file(p) for p in d.glob("*/__init__.py"))
        )
    ]


def find_pins(root: Path, problems: list[str] | None = None, unread: list[str] | None = None) -> list[RepoPin]:
    """Every flashinfer requirement of the tree, most authoritative first: a
    patch that raises one must raise each that would still admit a release its
    rules crash on. Those of a project folder one level down (project_folders)
    come after the tree's own."""
    base = root if root.is_dir() else root.parent
    out: list[RepoPin] = []
    skipped: list[str] = []
    token = _SKIPPED.set(skipped)
    try:
        for folder in [base, *project_folders(base)]:
            for finder in (
                _from_metadata,
                _from_pyproject,
                _from_poetry,
                _from_pylock,
                _from_uv_lock,
                _from_poetry_lock,
                _from_requirements,
                _from_setup_py,
                _from_setup_cfg,
            ):
                try:
                    out.extend(finder(folder))
                except _Unreadable as exc:
                    skipped.append(str(exc))
    finally:
        _SKIPPED.reset(token)
    said = list(dict.fromkeys(skipped))
    if problems is not None:
        problems.extend(said)
    if unread is not None:
        unread.extend(said)
    return out


def _installs_here(pin: RepoPin, problems: list[str] | None) -> bool:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        marker = Requirement(pin.written).marker if pin.written else None
    except InvalidRequirement:
        return True
    if marker is None or marker.evaluate({"extra": ""}):
        return True
    if problems is not None:
        problems.append(
            f"{pin.written} at {pin.source}: its marker ({marker}) is false here, so pip would not install it; not "
            "read as the flashinfer pin"
        )
    return False


class _Unreadable(Exception):
    """A requirement file hprobe cannot read: named, the others still read."""


def _from_setup_cfg(base: Path) -> list[RepoPin]:
    """`[options] install_requires` (and `extras_require`) of setup.cfg, read
    with configparser as setuptools reads it: one requirement a line."""
    import configparser

    path = base / "setup.cfg"
    if not present(path):
        return []
    text = read_text(path, "setup.cfg")
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error as exc:
        raise InputError(f"{path}: not readable as setup.cfg ({type(exc).__name__})") from None
    values = [parser.get("options", "install_requires", fallback="")]
    if parser.has_section("options.extras_require"):
        values += [value for _, value in parser.items("options.extras_require")]
    lines = text.split("\n")
    out = []
    for value in values:
        for item in value.split("\n"):
            req = _flashinfer(item.split("#", 1)[0])
            if req is not None:
                number = next((i for i, line in enumerate(lines, 1) if item.strip() and item.strip() in line), None)
                out.append(RepoPin(str(req.specifier), path, number, "setup.cfg", item.strip()))
    return out


def _from_poetry(base: Path) -> list[RepoPin]:
    """`[tool.poetry.dependencies]` (and groups) of pyproject.toml, in Poetry's
    own version syntax (^, ~, *, a table with `version`), as the PEP 440
    specifier it means."""
    path = base / "pyproject.toml"
    if not present(path):
        return []
    text = read_text(path, "pyproject.toml")
    poetry = parse_toml(text, path).get("tool", {}).get("poetry", {})
    if not isinstance(poetry, dict):
        return []
    tables = [poetry.get("dependencies", {})]
    groups = poetry.get("group", {})
    if isinstance(groups, dict):
        tables += [g.get("dependencies", {}) for g in groups.values() if isinstance(g, dict)]
    out = []
    for deps in tables:
        if not isinstance(deps, dict):
            continue
        for name, value in deps.items():
            if canonicalize_name(str(name)) not in NAMES:
                continue
            constraint = value.get("version") if isinstance(value, dict) else value
            spec = poetry_specifier(str(constraint)) if isinstance(constraint, str) else None
            if spec is None:
                # A git or path dependency, or a constraint in another syntax:
                # which release it installs is not read.
                _skip(f"{path}: [tool.poetry] {name} = {value!r}: not a Poetry version constraint hprobe reads")
                continue
            number = next(
                (
                    i
                    for i, line in enumerate(text.split("\n"), 1)
                    if line.strip().startswith(str(name)) and str(constraint) in line
                ),
                None,
            )
            out.append(RepoPin(spec, path, number, "poetry", f"{name} {constraint}"))
    return out


def poetry_specifier(constraint: str) -> str | None:
    """Poetry's `^0.6.13`, `~0.6.13`, `0.6.*`, `>=0.6,<0.8` as a PEP 440
    specifier (None when it is not one of these forms)."""
    parts = []
    for piece in constraint.split(","):
        piece = piece.strip()
        if piece in ("*", ""):
            continue
        if piece[0] in "^~" and not piece.startswith("~="):
            raw = piece[1:].strip()
            try:
                numbers = [int(x) for x in raw.split(".")]
            except ValueError:
                return None
            if piece[0] == "^":
                first = next((i for i, x in enumerate(numbers) if x), len(numbers) - 1)
                upper = numbers[: first + 1]
            else:
                upper = numbers[:2] if len(numbers) > 1 else numbers[:1]
            upper[-1] += 1
            parts += [f">={raw}", f"<{'.'.join(map(str, upper))}"]
        elif piece[0].isdigit():
            parts.append(f"=={piece}")
        else:
            parts.append(piece)
    spec = ",".join(parts)
    try:
        SpecifierSet(spec)
    except InvalidSpecifier:
        return None
    return spec or None


def _from_pylock(base: Path) -> list[RepoPin]:
    """A `pylock.toml` (PEP 751) locks one version of each package: `==` it."""
    out = []
    for path in sorted(base.glob("pylock*.toml")):
        text = read_text(path, "lock file")
        packages = parse_toml(text, path).get("packages", [])
        if not isinstance(packages, list):
            raise InputError(f"{path}: [[packages]] must be a list of tables")
        for item in packages:
            if (
                isinstance(item, dict)
                and canonicalize_name(str(item.get("name", ""))) in NAMES
                and isinstance(item.get("version"), str)
            ):
                try:
                    Version(item["version"])
                except InvalidVersion:
                    version = item["version"]
                    _skip(
                        f"{path}: {item['name']} version {version!r} is not a version; not read as the flashinfer pin"
                    )
                    continue
                number = next(
                    (
                        i
                        for i, line in enumerate(text.split("\n"), 1)
                        if line.strip() == f'version = "{item["version"]}"'
                    ),
                    None,
                )
                out.append(
                    RepoPin(f"=={item['version']}", path, number, "pylock", f"{item['name']}=={item['version']}")
                )
    return out


def _from_uv_lock(base: Path) -> list[RepoPin]:
    """uv's `uv.lock`: `[[package]]` tables, each one locked version."""
    return _locked_packages(base / "uv.lock", "uv.lock")


def _from_poetry_lock(base: Path) -> list[RepoPin]:
    """Poetry's `poetry.lock`: `[[package]]` tables, each one locked version."""
    return _locked_packages(base / "poetry.lock", "poetry.lock")


def _locked_packages(path: Path, kind: str) -> list[RepoPin]:
    """A lock file's `[[package]]` entries on flashinfer, each `==` its locked
    version (uv.lock and poetry.lock write them alike)."""
    if not present(path):
        return []
    text = read_text(path, "lock file")
    try:
        packages = parse_toml(text, path).get("package", [])
    except InputError as exc:
        raise _Unreadable(f"{exc}; not read for a flashinfer requirement") from None
    if not isinstance(packages, list):
        raise _Unreadable(f"{path}: [[package]] is not a list of tables; not read for a flashinfer requirement")
    out = []
    for item in packages:
        if not isinstance(item, dict) or canonicalize_name(str(item.get("name", ""))) not in NAMES:
            continue
        version = item.get("version")
        try:
            Version(str(version))
        except InvalidVersion:
            _skip(f"{path}: {item.get('name')} version {version!r} is not a version; not read as the flashinfer pin")
            continue
        number = next(
            (i for i, line in enumerate(text.split("\n"), 1) if line.strip() == f'version = "{version}"'), None
        )
        out.append(RepoPin(f"=={version}", path, number, kind, f"{item['name']}=={version}"))
    return out


def _flashinfer(text: str) -> Requirement | None:
    return _named(text, NAMES)


def _named(text: str, names: set[str]) -> Requirement | None:
    """A requirement on one of `names`; one without a version admits every
    release, said as `>=0` rather than dropped. One that names a URL, not a
    version, is no pin: said in find_pins' problems, never read as one."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(text.strip())
    except InvalidRequirement as exc:
        # pip refuses such a line too; one naming flashinfer is said, never passed over in silence.
        named = _LEADING_NAME.match(text)
        if named and canonicalize_name(named.group(1)) in names:
            _skip(
                f"{text.strip()}: not a requirement pip reads ({str(exc).splitlines()[0]}); not read as the flashinfer "
                "pin"
            )
        return None
    if canonicalize_name(req.name) not in names:
        return None
    if req.url:
        _skip(f"{text.strip()}: names a URL, not a version pin; not read as the flashinfer pin")
        return None
    if not str(req.specifier):
        req.specifier = SpecifierSet(">=0")
    return req


_LEADING_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")

# What `_named` set aside in the current find_pins, for its problems.
_SKIPPED: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("hprobe_skipped_pins", default=None)


def _from_metadata(base: Path) -> list[RepoPin]:
    # An unpacked wheel holds NAME-VERSION.dist-info beside the package; an
    # installed package (site-packages/vllm) has it as a sibling.
    candidates = sorted(base.glob("*.dist-info/METADATA")) + sorted(
        base.parent.glob(f"{base.name}-*.dist-info/METADATA")
    )
    out = []
    for meta in candidates:
        for number, line in enumerate(read_text(meta, "package metadata").split("\n"), 1):
            if line.startswith("Requires-Dist:"):
                written = line.split(":", 1)[1].strip()
                req = _flashinfer(written)
                if req is not None:
                    out.append(RepoPin(str(req.specifier), meta, number, "metadata", written))
    return out


def _from_pyproject(base: Path) -> list[RepoPin]:
    path = base / "pyproject.toml"
    if not present(path):
        return []
    text = read_text(path, "pyproject.toml")
    project = parse_toml(text, path).get("project", {})
    if not isinstance(project, dict):
        raise InputError(f"{path}: [project] is not a table")
    optional = project.get("optional-dependencies", {})
    # `dependencies` first, whatever order the file writes them in: it is what
    # every install gets.
    lists: list[tuple[tuple[str, ...], object]] = [(("dependencies",), project.get("dependencies", []))]
    if isinstance(optional, dict):
        lists += [(("optional-dependencies", str(group)), deps) for group, deps in optional.items()]
    out = []
    for where, deps in lists:
        if not isinstance(deps, list):
            raise InputError(f"{path}: [project] {'.'.join(where)} must be a list of requirement strings")
        for index, dep in enumerate(deps):
            req = _flashinfer(str(dep))
            if req is not None:
                locator = (*where, index)
                out.append(
                    RepoPin(str(req.specifier), path, _pyproject_line(text, locator), "pyproject", str(dep), locator)
                )
    return out


def _pyproject_line(text: str, locator: tuple) -> int | None:
    """The line of one dependency string: the file written back by tomlkit with
    that one item replaced, and the first line that differs."""
    try:
        marked = _pyproject_with(text, locator, "hprobe-locates-this-line")
    except Exception:  # noqa: BLE001  # tomlkit's own errors: the line is then not named, the pin still read
        return None
    for number, (a, b) in enumerate(zip(text.split("\n"), marked.split("\n"), strict=False), 1):
        if a != b:
            return number
    return None


def _pyproject_with(text: str, locator: tuple, new: str) -> str:
    import tomlkit  # a round-trip parser, needed only to locate and rewrite

    doc = tomlkit.parse(text)
    container = doc["project"]
    for key in locator[:-1]:
        container = container[key]
    items = container
    index = locator[-1]
    old = items[index]
    if not isinstance(old, tomlkit.items.String):
        raise ValueError("not a string")
    # The item's own quoting (basic or literal) is kept; tomlkit keeps the rest
    # of the document as written.
    items[index] = tomlkit.string(new, literal=old.type.is_literal(), multiline=old.type.is_multiline())
    return tomlkit.dumps(doc)


_COMMENT = re.compile(r"(^|\s)#")


_INCLUDE = re.compile(r"^\s*(?:-r|-c|--requirement|--constraint)(?:\s+|=)(\S+)")
MAX_REQUIREMENT_FILES = 64


def _from_requirements(base: Path) -> list[RepoPin]:
    """requirements*.txt and requirements/*.txt, and the files their `-r`/`-c`
    lines include from inside the tree (a constraint pins as much as a
    requirement does). An include that names no file is said: pip would
    refuse the file, and a pin it holds cannot be read."""
    # The tree's own files by name are read wherever a link sends them (a pin
    # read is never one silently missing; a patch refuses to follow it out);
    # includes are followed only inside the tree.
    todo: list[tuple[Path, str | None]] = [
        (p, None) for p in sorted(base.glob("requirements*.txt")) + sorted(base.glob("requirements/*.txt"))
    ]
    seen: set[Path] = set()
    out = []
    while todo and len(seen) < MAX_REQUIREMENT_FILES:
        path, included_at = todo.pop(0)
        resolved = path.resolve()
        if resolved in seen or not (included_at is None or resolved.is_relative_to(base.resolve())):
            continue
        if not present(path):
            # Anything else that is not a regular file is refused by read_text.
            if included_at is not None:
                _skip(
                    f"{included_at} includes {path.name}, which is not there: a flashinfer pin it holds cannot be read"
                )
            continue
        seen.add(resolved)
        text = read_text(path, "requirements file")
        out.extend(_requirement_lines(path, text, NAMES))
        todo.extend(
            (path.parent / m.group(1), f"{path}:{number}")
            for number, line in enumerate(text.split("\n"), 1)
            if (m := _INCLUDE.match(line))
        )
    return out


def _skip(what: str) -> None:
    """Say a requirement that may hold the pin and cannot be read (find_pins)."""
    skipped = _SKIPPED.get()
    if skipped is not None:
        skipped.append(what)


def companion_pins(path: Path, text: str, spec: str) -> list[RepoPin]:
    """Requirements of a requirements file on a package released with
    flashinfer-python, pinned to exactly `spec`."""
    return [p for p in _requirement_lines(path, text, COMPANIONS) if p.spec == spec]


def _requirement_lines(path: Path, text: str, names: set[str]) -> list[RepoPin]:
    """Requirements on `names` of one requirements file, each with its span,
    read as pip reads the file: a byte-order mark dropped, a line ending in a
    backslash joined with the next (pip-compile's `\\` then `--hash=` lines),
    then comments removed."""
    out = []
    bom = 1 if text.startswith("\ufeff") else 0
    offset = bom
    lines = text[bom:].split("\n")
    number = 0
    while number < len(lines):
        first, start = number + 1, offset
        logical = lines[number]
        offset += len(lines[number]) + 1
        number += 1
        while logical.rstrip("\r").endswith("\\") and not logical.lstrip().startswith("#") and number < len(lines):
            logical = logical.rstrip("\r")[:-1] + lines[number]
            offset += len(lines[number]) + 1
            number += 1
        continued = number > first
        body = logical[: m.start()] if (m := _COMMENT.search(logical)) else logical
        body = body.rstrip("\r").rstrip("\\")
        stripped = body.strip()
        if not stripped or stripped.startswith("-"):
            continue  # options, -r/-c includes, editable installs
        requirement = stripped.split(" --", 1)[0].split("\t--", 1)[0].strip()  # per-requirement options (--hash) follow
        req = _named(requirement, names)
        if req is not None:
            # The span is exact only where the requirement stands on its own
            # line; one with options or continued lines is read, never rewritten.
            plain = not continued and stripped == requirement
            begin = start + body.index(requirement) if plain else start
            out.append(
                RepoPin(
                    str(req.specifier),
                    path,
                    first,
                    "requirements",
                    requirement,
                    (begin, begin + len(requirement), not plain),
                )
            )
    return out


def _from_setup_py(base: Path) -> list[RepoPin]:
    """`install_requires=[...]` written as a literal list of strings in setup.py,
    read with ast (never run)."""
    path = base / "setup.py"
    if not path.is_file():
        return []
    try:
        tree = parse_module(read_text(path, "setup.py"))
    except (SyntaxError, ValueError, InputError, RecursionError, MemoryError) as exc:
        why = getattr(exc, "message", None) or (
            "nested too deeply for Python's parser" if isinstance(exc, (RecursionError, MemoryError)) else str(exc)
        )
        raise _Unreadable(f"{path}: not read for a flashinfer requirement ({why})") from None
    out = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.keyword)
            and node.arg == "install_requires"
            and isinstance(node.value, (ast.List, ast.Tuple))
        ):
            for item in node.value.elts:
                if isinstance(item, ast.Constant) and isinstance(item.value, str):
                    req = _flashinfer(item.value)
                    if req is not None:
                        locator = (item.lineno, item.col_offset, item.end_lineno, item.end_col_offset)
                        out.append(RepoPin(str(req.specifier), path, item.lineno, "setup.py", item.value, locator))
    return out


# -- rewriting ---------------------------------------------------------------------


class NotRewritable(Exception):
    """A requirement hprobe will not rewrite mechanically; the message says why."""


def with_specifier(written: str, new_spec: str) -> str:
    """`written` (a requirement as the file writes it) with its version
    specifier replaced: the name, extras and marker stay as written. The result
    is parsed back and compared, never trusted."""
    from packaging.requirements import Requirement

    old = Requirement(written)
    head = re.match(r"\s*[A-Za-z0-9][A-Za-z0-9._-]*\s*(\[[^\]]*\])?\s*", written)
    marker_at = written.find(";")
    if head is None or "@" in written.split(";", 1)[0]:
        raise NotRewritable(f"{written!r}: not a name with a version specifier")
    tail = written[marker_at:] if marker_at >= 0 else ""
    spec_text = written[head.end() : marker_at if marker_at >= 0 else len(written)]
    if spec_text.strip().startswith("("):
        raise NotRewritable(f"{written!r}: a parenthesised specifier")
    prefix = written[: head.end()].rstrip()
    gap = spec_text[len(spec_text.rstrip()) :]  # the space before a marker, as written
    new = f"{prefix}{new_spec}{gap}{tail}"
    again = Requirement(new)
    if (again.name, again.extras, str(again.marker), again.specifier) != (
        old.name,
        old.extras,
        str(old.marker),
        SpecifierSet(new_spec),
    ):
        raise NotRewritable(f"{written!r}: rewriting it changed more than its version")
    return new


def rewrite(pin: RepoPin, text: str, new_spec: str) -> str:
    """The file's `text` with this one requirement given `new_spec`."""
    if pin.kind == "metadata":
        raise NotRewritable(f"{pin.source}: installed or built metadata, not the tree's own requirement")
    if pin.kind in ("setup.cfg", "poetry", "pylock", "uv.lock", "poetry.lock"):
        # Read so that no pin goes unseen; rewritten by the tool that owns the file.
        raise NotRewritable(
            f"{pin.source}: a {pin.kind} requirement ({pin.written}), which hprobe reads but does not rewrite"
        )
    new_written = with_specifier(pin.written, new_spec)
    if pin.kind == "requirements":
        # Located again in `text`: an earlier rewrite on another line of the
        # same file may have moved it (a line's number never changes).
        here = next(
            (
                p
                for p in _requirement_lines(pin.path, text, NAMES | COMPANIONS)
                if p.line == pin.line and p.written == pin.written
            ),
            None,
        )
        if here is None:
            raise NotRewritable(f"{pin.source}: the file changed since it was read")
        begin, end, extra = here.locator
        if extra:
            raise NotRewritable(f"{pin.source}: the requirement carries options (--hash) or continues on the next line")
        return text[:begin] + new_written + text[end:]
    if pin.kind == "pyproject":
        try:
            new = _pyproject_with(text, pin.locator, new_written)
        except Exception as exc:  # noqa: BLE001  # tomlkit's own errors on a file tomllib read: not rewritten, said why
            raise NotRewritable(
                f"{pin.source}: not rewritable with a round-trip TOML parser ({type(exc).__name__})"
            ) from None
        changed = [i for i, (a, b) in enumerate(zip(text.split("\n"), new.split("\n"), strict=False)) if a != b]
        if len(text.split("\n")) != len(new.split("\n")) or len(changed) != 1:
            raise NotRewritable(f"{pin.source}: rewriting the requirement would change more than its line")
        return new
    if pin.kind == "setup.py":
        from hprobe.rules.repo.tree.source import PythonSource, Span

        source = PythonSource(text.encode("utf-8"), "utf-8", text)
        span = Span(*pin.locator)
        quoted = source.segment(span)
        if quoted[:1] not in "\"'" or quoted[1:2] == quoted[:1] or not quoted.endswith(quoted[0]):
            raise NotRewritable(f"{pin.source}: not a plain string literal")
        literal = quoted[0] + new_written + quoted[0]
        if ast.literal_eval(literal) != new_written:
            raise NotRewritable(f"{pin.source}: the new requirement needs escaping")
        return source.replaced([(span, literal)]).text
    raise NotRewritable(f"{pin.source}: unknown requirement source")
