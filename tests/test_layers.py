"""The package's layers, read from the source: no import cycle, the library without the research
tooling, and no function longer than 80 lines."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attnmatch

PACKAGE = Path(attnmatch.__file__).resolve().parent
SRC = PACKAGE.parent
MAX_FUNCTION_LINES = 80

# Import edges that close a cycle today, in modules reworked elsewhere, each with the reason
# it is still there. `test_no_import_cycles` ignores them; `test_known_cycle_edges_are_needed`
# fails once one closes no cycle any more, so that the entry is removed.
KNOWN_CYCLE_EDGES: dict[tuple[str, str], str] = {}

# Functions over the limit in modules rewritten elsewhere, each with the reason; the test
# fails once one is short enough, so that the entry is removed.
KNOWN_LONG_FUNCTIONS: dict[str, str] = {}

# The library: what users import and what `attnmatch rank`, `train` or `serve` run.
LIBRARY = (
    "attnmatch",
    "attnmatch.matcher",
    "attnmatch.models",
    "attnmatch.inputs",
    "attnmatch.data",
    "attnmatch.data.datasets",
    "attnmatch.training",
    "attnmatch.scoring",
    "attnmatch.cli",
)
RESEARCH = "attnmatch.research"

# ----------------------------------------------------------------- the import graph


def _modules(package: Path = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Every module under `package` by dotted name, with its file and whether it is a package."""
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
    return name == "TYPE_CHECKING"


def _imported_names(tree: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    """Every name an import of `tree` reads, at module level or inside a function: `a.b` for
    `import a.b`, `a.b.c` for `from a.b import c`. Imports under `if TYPE_CHECKING:` never run
    and are skipped (the `else:` branch is kept)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package that holds `module`
                parts = module.split(".") if is_package else module.split(".")[:-1]
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            yield from (f"{base}.{alias.name}" for alias in node.names)
        stack.extend(ast.iter_child_nodes(node))


def _resolve(name: str, modules: dict[str, tuple[Path, bool]]) -> str | None:
    """The module `name` reads from: the longest dotted prefix of `name` that is a module."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the modules of the package it imports.

    An edge goes to the module an import names (`from a.b import c` reads `a.b.c` if that is a
    module, else `a.b`). That Python runs a package's `__init__` before its submodules is no
    edge: with it, every package whose `__init__` gathers its submodules would be a cycle.
    """
    modules = _modules(package)
    graph: dict[str, set[str]] = {}
    for module, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        names = _imported_names(tree, module, is_package)
        graph[module] = {m for n in names if (m := _resolve(n, modules)) and m != module}
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected group of modules, as a path `[a, b, ..., a]`."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm; the graph is small
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while (top := stack.pop()) != node:
                group.add(top)
            groups.append(group | {node})

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_in(graph, group) for group in groups if len(group) > 1]


def _cycle_in(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest cycle through the group's first module (breadth first, inside the group)."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & group):
                if nxt == start:
                    return [*paths[node], start]
                if nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle in {sorted(group)}")  # pragma: no cover


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt == goal:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def _without_known_edges(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    return {m: {n for n in out if (m, n) not in KNOWN_CYCLE_EDGES} for m, out in graph.items()}


def test_no_import_cycles() -> None:
    """Imports inside functions (for start-up time) are edges too: none may close a cycle."""
    cycles = find_cycles(_without_known_edges(import_graph()))
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_known_cycle_edges_are_needed() -> None:
    graph = import_graph()
    for (importer, imported), why in KNOWN_CYCLE_EDGES.items():
        closes = imported in graph[importer] and _reaches(graph, imported, importer)
        assert closes, (
            f"{importer} -> {imported} closes no import cycle any more ({why}): remove it "
            "from KNOWN_CYCLE_EDGES"
        )


def test_the_graph_sees_imports_in_functions_but_not_type_checking(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from pkg.a import f\n")
    (package / "a.py").write_text("from typing import TYPE_CHECKING\nimport pkg.b\n")
    (package / "b.py").write_text(
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pkg import a\n"
        "def g():\n    from pkg.c import h\n"
    )
    (package / "c.py").write_text("def h():\n    from . import a\n")
    graph = import_graph(package)
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.c"}, "pkg.c": {"pkg.a"}}
    assert find_cycles(graph) == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]
    assert find_cycles(graph | {"pkg.c": set()}) == []


# ----------------------------------------------------------------- the library and research


def test_the_library_imports_no_research_module() -> None:
    """Statically: only the research package and the commands that run it import it."""
    users = sorted(
        f"{module} -> {imported}"
        for module, imported_modules in import_graph().items()
        for imported in imported_modules
        if imported.startswith(RESEARCH)
        and not module.startswith(RESEARCH)
        and module != "attnmatch.cli.research"
    )
    assert users == []


def test_the_library_loads_without_the_research_package() -> None:
    """In a fresh interpreter: importing the library (the service too, where its extra is
    installed) loads no module of `attnmatch.research`."""
    library = list(LIBRARY)
    if importlib.util.find_spec("fastapi") is not None:
        library.append("attnmatch.serving")
    probe = (
        "import importlib, json, sys\n"
        f"for name in {library!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert "attnmatch.matcher" in loaded  # the probe imported the library
    assert [m for m in loaded if m == RESEARCH or m.startswith(RESEARCH + ".")] == []


# ----------------------------------------------------------------- function length


def _function_lengths() -> Iterator[tuple[str, int]]:
    """(`path:name`, lines from its `def` to its last line, docstring included) of every
    function and method in the package."""
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                where = f"{path.relative_to(PACKAGE).as_posix()}:{node.name}"
                yield where, node.end_lineno - node.lineno + 1


def test_no_function_over_80_lines() -> None:
    long = [
        f"{where} ({lines} lines)"
        for where, lines in _function_lengths()
        if lines > MAX_FUNCTION_LINES and where not in KNOWN_LONG_FUNCTIONS
    ]
    assert long == [], f"split these into named steps (at most {MAX_FUNCTION_LINES} lines)"


def test_known_long_functions_are_needed() -> None:
    lengths = dict(_function_lengths())
    for where, why in KNOWN_LONG_FUNCTIONS.items():
        assert lengths.get(where, 0) > MAX_FUNCTION_LINES, (
            f"{where} is at most {MAX_FUNCTION_LINES} lines now ({why}): remove it from "
            "KNOWN_LONG_FUNCTIONS"
        )


def test_the_registry_is_complete_whichever_module_is_imported_first() -> None:
    """Importing a registry module first still runs `attnmatch.models`' __init__ (its parent
    package), which registers every model before a lookup can happen."""
    probe = (
        "from attnmatch.models._registry import list_models, list_presets\n"
        "import attnmatch.models as m\n"
        "assert list_models() == m.list_models() and len(list_models()) > 10, list_models()\n"
        "assert 'amvlstm_q' in list_presets()\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=120)
