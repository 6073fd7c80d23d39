"""The package's layout is its architecture: data flows one way, request →
support (probe or cache) → judge → advise → report → format, and no module
imports one above it. Read from the source with `ast`, every import counted
(inside functions and `TYPE_CHECKING` blocks too: a cycle hidden in a
function is still a cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

# Pure: runs without torch, flashinfer or a subprocess (the fast tier, `-m "pure and not slow"`).
pytestmark = pytest.mark.pure

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "hprobe"

# Lowest first. A module may import its own layer and any layer below it.
LAYERS = [
    "model",  # data: SMs, outcomes, verdicts, padding tables, releases; errors
    "system",  # the machine: files, subprocesses, streams, escaping, environment
    "device",  # the emulated GPU: session, fakes, stand-ins at the compiled boundary
    "kernels",  # one probe per kernel entry point
    "probe",  # a probe over SMs x heads -> outcomes with evidence
    "compiled",  # past the validators: kernel tables and ported selection code
    "rules",  # padding rules: TOML, --pad-fn, a consumer's tree
    "support",  # where answers come from: installed, fetched, cached, workers
    "judge",  # the only place verdicts are decided
    "advise",  # summary, suggest, pins, history search
    "report",  # report models, pivots, output formats
    "commands",  # request -> report, one function per command
    "cli",  # parse, call one command, render, exit
]
ROOT_MODULES = {"__init__", "__main__", "judge"}  # the package's face, `python -m`, and one single-module layer


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports() -> dict[str, set[str]]:
    modules = {_module(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.level == 0
                and node.module.split(".")[0] == "hprobe"
            ):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    found.add(sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.split(".")[0] == "hprobe")
            elif isinstance(node, ast.ImportFrom) and node.level:
                raise AssertionError(f"{path}: relative import; hprobe's modules import each other by full name")
        graph[name] = {m for m in found if m != name}
    return graph


def _layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return -1  # hprobe itself: its version only
    if parts[1] == "__main__":
        return len(LAYERS)
    return LAYERS.index(parts[1])


GRAPH = _imports()


def test_every_module_sits_in_a_layer():
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert top <= ROOT_MODULES, f"top-level modules that are no layer's face: {sorted(top - ROOT_MODULES)}"
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= set(LAYERS) | {"matrices"}, sorted(packages - set(LAYERS))
    assert {m.split(".")[1] for m in GRAPH if "." in m and m.split(".")[1] not in ("__main__",)} <= set(
        LAYERS
    ) | ROOT_MODULES


def test_no_import_points_up_a_layer():
    upward = sorted(f"{src} -> {dst}" for src, dsts in GRAPH.items() for dst in dsts if _layer(dst) > _layer(src))
    assert upward == []


def test_no_import_cycles():
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(GRAPH.get(node, set())):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [module])
    assert cycles == []


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if m.startswith("hprobe.report.formats.")))
def test_formats_only_render(module):
    """A format renders a report: it never decides a verdict or gives advice itself."""
    deciders = sorted(
        d
        for d in GRAPH[module]
        if d == "hprobe.judge" or d.startswith(("hprobe.advise", "hprobe.support", "hprobe.probe", "hprobe.commands"))
    )
    assert deciders == []


def test_the_cli_decides_nothing():
    """The CLI parses, calls one command, renders and exits: it reaches the
    layers that decide only through `commands`."""
    deciders = sorted(
        d
        for m in GRAPH
        if m.startswith("hprobe.cli")
        for d in GRAPH[m]
        if d == "hprobe.judge" or d.startswith(("hprobe.advise", "hprobe.probe", "hprobe.device"))
    )
    assert deciders == []


def _cli_format_mentions() -> list[str]:
    """Where cli/ imports a format's own module or spells a format's name."""
    from hprobe.report.formats import FORMATS

    modules = {f.module for f in FORMATS.values()}
    found = []
    for path in sorted((PACKAGE / "cli").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module in modules:
                found.append(f"{path.name}:{node.lineno} imports {node.module}")
            elif isinstance(node, ast.Constant) and node.value in FORMATS:
                found.append(f"{path.name}:{node.lineno} names {node.value!r}")
    return found


def test_the_cli_names_no_format():
    """Formats are one table (report/formats): the CLI asks it which format an
    option names, which files a site holds and what the environment wants on
    stderr, so adding a format touches no file under cli/."""
    assert _cli_format_mentions() == []


def test_the_checks_above_can_fail():
    """The layer test reads real imports: a module known to import the model is seen doing so."""
    assert "hprobe.model.outcome" in GRAPH["hprobe.judge"]
    assert _layer("hprobe.cli.app") > _layer("hprobe.judge") > _layer("hprobe.model.sm")
    from hprobe.report.formats import FORMATS

    assert len(FORMATS) >= 7 and "junit" in FORMATS  # the names the CLI test looks for are the registry's


def test_every_path_the_readme_names_exists():
    """The development notes name files to touch; a move that leaves them stale fails here."""
    import re

    root = PACKAGE.parent.parent
    readme = "\n".join(p.read_text() for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))])
    named = set(re.findall(r"`((?:src/hprobe|tests|matrices|bench)/[\w./<>-]+)`", readme))
    assert len(named) > 10
    missing = sorted(p for p in named if "<" not in p and not (PACKAGE.parent.parent / p.rstrip("/")).exists())
    assert missing == []


def test_report_imports_no_decider():
    """Reports carry their conclusions: nothing under report/ imports judge,
    advise or commands, so a format cannot decide while it renders."""
    offenders = sorted(
        (module, dep)
        for module, deps in GRAPH.items()
        if module.startswith("hprobe.report")
        for dep in deps
        if dep == "hprobe.judge" or dep.startswith(("hprobe.advise", "hprobe.commands"))
    )
    assert offenders == []


# Inside a package with parts of its own, lowest first: each group names the
# package's children (modules and subpackages; "" its own `__init__`), and no
# import inside the package runs from a lower group to a higher one. Every
# package with a subpackage is declared, every child placed: a new one must
# say where it stands.
PACKAGE_PARTS: dict[str, list[list[str]]] = {
    # what a kernel table is and how C++ is read, the ports over them, the depth they give
    "hprobe.compiled": [
        ["", "files", "cxx", "table"],
        ["trtllm_gen", "sm120_sparse", "gqa_decode", "cutlass_prefill"],
        ["depth"],
    ],
    # reports as data, then the formats that render them
    "hprobe.report": [["", "model", "pivot", "cache", "catalogue", "drift", "suggest"], ["formats"]],
    # tables and models, a consumer's tree read by its parts, the registry of rule sources
    "hprobe.rules": [["", "interface", "toml_source", "toml_writer", "models", "waivers"], ["repo"], ["sources"]],
    # reading a tree by its parts, put together by the modules of rules.repo itself
    "hprobe.rules.repo": [
        ["tree"],
        ["interpreter"],
        ["tracing"],
        ["", "extract", "kind", "pin", "patch", "padfn", "padfn_child"],
    ],
}


def _child(package: str, module: str) -> str | None:
    if module == package:
        return ""
    if module.startswith(package + "."):
        return module[len(package) + 1 :].split(".")[0]
    return None


def _part(package: str, module: str) -> int | None:
    child = _child(package, module)
    if child is None:
        return None
    return next(i for i, group in enumerate(PACKAGE_PARTS[package]) if child in group)


def _upward(*packages: str) -> list[str]:
    """The imports inside `packages` that run from a part to a higher one."""
    return sorted(
        f"{src} -> {dst}"
        for package in packages
        for src, dsts in GRAPH.items()
        for dst in dsts
        if (low := _part(package, src)) is not None and (high := _part(package, dst)) is not None and high > low
    )


def test_every_package_with_parts_places_each_of_them():
    packages = {
        ".".join(("hprobe", *p.parent.relative_to(PACKAGE).parts))
        for p in PACKAGE.rglob("__init__.py")
        if p.parent != PACKAGE
    }
    with_parts = {package.rsplit(".", 1)[0] for package in packages if package.count(".") >= 2}
    assert with_parts <= set(PACKAGE_PARTS), sorted(with_parts - set(PACKAGE_PARTS))
    for package, groups in PACKAGE_PARTS.items():
        children = {_child(package, m) for m in GRAPH if _child(package, m) is not None}
        placed = [c for group in groups for c in group]
        assert sorted(children) == sorted(placed), package


def test_no_import_inside_a_package_runs_up_its_parts():
    """Inside each package of PACKAGE_PARTS, an import runs from a part to one
    of its own group or below: the tree is read by the modules that put
    tree/, interpreter/ and tracing/ together, a port never imports the depth
    it serves, a report never imports a format."""
    assert _upward(*PACKAGE_PARTS) == []
    # The check reads real imports: the reader of a whole tree sits above tracing
    # and uses it; the depth sits above the ports and imports one.
    assert _part("hprobe.rules.repo", "hprobe.rules.repo.extract") == 3
    assert "hprobe.rules.repo.tracing.paths" in GRAPH["hprobe.rules.repo.extract"]
    assert _part("hprobe.compiled", "hprobe.compiled.depth") == 2
    assert any(d.startswith("hprobe.compiled.trtllm_gen") for d in GRAPH["hprobe.compiled.depth"])


def test_reading_a_tree_is_put_together_above_its_parts():
    """No import inside rules/repo/ runs from a part to one above it: the tree
    is read by the modules that put tree/, interpreter/ and tracing/ together,
    not from inside tree/."""
    assert _upward("hprobe.rules.repo") == []


# What the commands share (not commands themselves), and the two commands that
# are made of another: `report` is the matrix beside the check, and
# `check --baseline` asks drift's question of a recorded matrix.
_SHARED_BY_COMMANDS = {"hprobe.commands.request", "hprobe.commands.conclude"}
_MADE_OF_ANOTHER = {
    ("hprobe.commands.report", "hprobe.commands.matrix"),
    ("hprobe.commands.check", "hprobe.commands.drift"),
}


def test_no_command_runs_another_commands_code():
    """Each command makes its own pass down the layers: it imports from
    commands/ only what they share (the request, the conclusion) and, for the
    two made of another, that one. Shared steps belong to the layer that does
    them (rules/sources, support/answers, judge, advise/conclusion)."""
    commands = {m for m in GRAPH if m.startswith("hprobe.commands.")}
    crossing = sorted(
        f"{src} -> {dst}"
        for src in commands - _SHARED_BY_COMMANDS
        for dst in GRAPH[src]
        if dst in commands and dst not in _SHARED_BY_COMMANDS and (src, dst) not in _MADE_OF_ANOTHER
    )
    assert crossing == []
    assert {dst for src, dst in _MADE_OF_ANOTHER if dst in GRAPH[src]} == {
        "hprobe.commands.matrix",
        "hprobe.commands.drift",
    }
