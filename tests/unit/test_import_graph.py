"""The import graph of `shared/skiff` and `services/*` keeps the house walkable: module-level
imports form a DAG, no service reaches into another service, and no service imports the
launcher or the command line (`skiff.cli`, `skiff.cluster`).

Pure Python over `ast`, no imports of the code under test: `services/<svc>` is read as
`skiff.<svc>` (pyproject's package-dir), relative imports are resolved, and only imports that
run when a module is imported count as edges (those at module level or in a class body, not
under `if TYPE_CHECKING:`, not inside a function). Run it as a script
(`python tests/unit/test_import_graph.py`) for the full report, including the function-level
imports that would close a circle if they were moved to the top of their module."""

from __future__ import annotations

import ast
import sys
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT / "shared" / "skiff"
SERVICES = ROOT / "services"
LAUNCHER_PACKAGES = ("skiff.cli", "skiff.cluster")
# The one launcher module a service may read: the cluster state file's format, which the
# fence agent reads to power-cycle the nodes of a local cluster.
LAUNCHER_SHARED = ("skiff.cluster.state",)


@dataclass(frozen=True)
class Import:
    """One import statement's target, as written and as resolved to a module of the tree."""

    importer: str
    line: int
    name: str  # the dotted name imported (a module, or a module's attribute)
    target: str | None  # the most specific module of the tree it names; None if outside
    runtime: bool  # runs when the importer is imported (module level, not TYPE_CHECKING)
    in_function: bool  # runs when a function is called (a late import)


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    is_package: bool


def service_names() -> list[str]:
    return sorted(p.name for p in SERVICES.iterdir() if (p / "__init__.py").is_file())


def discover() -> dict[str, Module]:
    """Every module of the installed `skiff` package, by dotted name."""
    roots = [(SHARED, "skiff")] + [(SERVICES / svc, f"skiff.{svc}") for svc in service_names()]
    modules: dict[str, Module] = {}
    for base, prefix in roots:
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if any(not part.isidentifier() for part in parts):
                continue  # not importable (a script or data beside the code)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            modules[".".join([prefix, *parts])] = Module(
                ".".join([prefix, *parts]), path, is_package)
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _import_nodes(
    body: list[ast.stmt], *, runtime: bool, in_function: bool = False,
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
    """Each import statement under `body`, with whether it runs at import time and whether
    it sits in a function."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, runtime, in_function
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _import_nodes(node.body, runtime=False, in_function=True)
        elif isinstance(node, ast.ClassDef):
            yield from _import_nodes(node.body, runtime=runtime, in_function=in_function)
        elif isinstance(node, ast.If):
            yield from _import_nodes(node.body, runtime=runtime and not _is_type_checking(
                node.test), in_function=in_function)
            yield from _import_nodes(node.orelse, runtime=runtime, in_function=in_function)
        elif isinstance(node, ast.Try | ast.TryStar):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _import_nodes(block, runtime=runtime, in_function=in_function)
            for handler in node.handlers:
                yield from _import_nodes(handler.body, runtime=runtime, in_function=in_function)
        elif isinstance(node, ast.With | ast.AsyncWith | ast.For | ast.AsyncFor | ast.While):
            yield from _import_nodes(node.body, runtime=runtime, in_function=in_function)
            yield from _import_nodes(
                getattr(node, "orelse", []), runtime=runtime, in_function=in_function)
        elif isinstance(node, ast.Match):
            for case in node.cases:
                yield from _import_nodes(case.body, runtime=runtime, in_function=in_function)


def _resolve(name: str, modules: dict[str, Module]) -> str | None:
    """The longest prefix of `name` that is a module of the tree."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imports_of(module: Module, modules: dict[str, Module]) -> list[Import]:
    tree = ast.parse(module.path.read_text(), filename=str(module.path))
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    found: list[Import] = []
    for node, runtime, in_function in _import_nodes(tree.body, runtime=True):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" if alias.name != "*" else base
                     for alias in node.names]
        for name in names:
            if name != "skiff" and not name.startswith("skiff."):
                continue
            target = _resolve(name, modules)
            if target == module.name:
                continue  # a package naming one of its own attributes
            found.append(Import(module.name, node.lineno, name, target, runtime, in_function))
    return found


def all_imports() -> list[Import]:
    modules = discover()
    return [imp for module in modules.values() for imp in imports_of(module, modules)]


def runtime_graph(
    imports: list[Import], *, with_late: bool = False, with_typing: bool = False,
) -> dict[str, dict[str, int]]:
    """importer → {imported module: line} over the imports that run at import time (and,
    `with_late`, those inside functions as if they were at the top of their module;
    `with_typing`, those under `if TYPE_CHECKING:`)."""
    graph: dict[str, dict[str, int]] = {}
    for imp in imports:
        typing_only = not imp.runtime and not imp.in_function
        if imp.target is not None and (imp.runtime or (with_late and imp.in_function)
                                       or (with_typing and typing_only)):
            graph.setdefault(imp.importer, {}).setdefault(imp.target, imp.line)
    return graph


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's components with more than one module (each one a knot of circles)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:  # iterative: the graph may be deep
        nonlocal counter
        work: list[tuple[str, Iterator[str]]] = [(start, iter(graph.get(start, {})))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph.get(child, {}))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def _shortest_path(
    graph: dict[str, dict[str, int]], start: str, goal: str, within: set[str],
) -> list[str] | None:
    came_from: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path = [node]
            while (prev := came_from[path[-1]]) is not None:
                path.append(prev)
            return path[::-1]
        for child in sorted(graph.get(node, {})):
            if child in within and child not in came_from:
                came_from[child] = node
                queue.append(child)
    return None


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Circles that together use every edge inside each knot: the shortest circle through
    each such edge, without repeats. Breaking all of them unties the knot."""
    found: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()
    for component in strongly_connected(graph):
        members = set(component)
        for source in component:
            for target in sorted(graph.get(source, {})):
                if target not in members:
                    continue
                back = _shortest_path(graph, target, source, members)
                assert back is not None  # same component: a way back exists
                circle = [source, *back[:-1]]
                turn = circle.index(min(circle))
                key = tuple(circle[turn:] + circle[:turn])
                if key not in seen:
                    seen.add(key)
                    found.append(list(key))
    return found


def describe_cycle(circle: list[str], graph: dict[str, dict[str, int]], *,
                   runtime: dict[str, dict[str, int]] | None = None) -> str:
    """`a (line 3) → b (line 9) → a`: each module and the line of its import of the next;
    edges missing from `runtime` (when given) are marked as typing-only."""
    pairs = zip(circle, circle[1:] + circle[:1], strict=True)
    steps = [f"{a} (line {graph[a][b]}"
             + (", TYPE_CHECKING" if runtime is not None and b not in runtime.get(a, {})
                else "") + ")"
             for a, b in pairs]
    return " → ".join([*steps, circle[0]])


def service_of(module: str, services: list[str]) -> str | None:
    parts = module.split(".")
    if len(parts) > 1 and parts[0] == "skiff" and parts[1] in services:
        return parts[1]
    return None


def _names(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == package or name.startswith(package + ".") for package in packages)


def cross_service_imports(imports: list[Import]) -> list[Import]:
    """Imports (at any level, even for type checking) from one service into another."""
    services = service_names()
    return [imp for imp in imports
            if (mine := service_of(imp.importer, services)) is not None
            and (theirs := service_of(imp.name, services)) is not None
            and mine != theirs]


def launcher_imports(imports: list[Import]) -> list[Import]:
    """Imports (at any level) from a service into the command line or the launcher, but
    for the cluster state's format."""
    services = service_names()
    return [imp for imp in imports
            if service_of(imp.importer, services) is not None
            and _names(imp.name, LAUNCHER_PACKAGES) and not _names(imp.name, LAUNCHER_SHARED)]


def circle_dodging_imports(imports: list[Import]) -> list[Import]:
    """Function-level imports of a tree module that sit on an import circle once every
    function-level import is read as a module-level one: late imports that (alone or with
    other late imports) keep a circle from showing."""
    graph = runtime_graph(imports, with_late=True)
    dodging = []
    for imp in imports:
        if not imp.in_function or imp.target is None:
            continue
        if imp.target == imp.importer or _shortest_path(
                graph, imp.target, imp.importer, set(graph) | {imp.importer}) is not None:
            dodging.append(imp)
    return dodging


def _listing(found: list[Import]) -> str:
    lines = dict.fromkeys(f"  {imp.importer} (line {imp.line}) imports {imp.name}"
                          for imp in found)
    return "\n".join(lines)


def test_no_import_circles_among_skiff_modules() -> None:
    graph = runtime_graph(all_imports())
    found = cycles(graph)
    assert not found, (f"{len(found)} import circles (module-level imports must form a DAG):\n"
                       + "\n".join("  " + describe_cycle(c, graph) for c in found))


def test_no_service_imports_another_service() -> None:
    found = cross_service_imports(all_imports())
    assert not found, "services share code through skiff.*, never directly:\n" + _listing(found)


def test_no_service_imports_the_cli_or_the_launcher() -> None:
    found = launcher_imports(all_imports())
    assert not found, ("services do not import skiff.cli or skiff.cluster (but for "
                       "skiff.cluster.state, the cluster state file's format):\n"
                       + _listing(found))


def test_the_reader_resolves_relative_imports_and_tells_late_and_typing_ones(
    tmp_path: Path,
) -> None:
    source = tmp_path / "worker.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import status\n"
        "from ..api.types import Obj\n"
        "import skiff.clock\n"
        "if TYPE_CHECKING:\n"
        "    from .kubelet import Kubelet\n"
        "class Worker:\n"
        "    from .status import phase\n"
        "    def run(self) -> None:\n"
        "        from skiff.kubelet import kubelet\n")
    modules = {name: Module(name, source, False) for name in (
        "skiff.kubelet.worker", "skiff.kubelet.status", "skiff.kubelet.kubelet",
        "skiff.api.types", "skiff.clock")}
    modules["skiff.kubelet"] = Module("skiff.kubelet", source, True)
    found = [(imp.line, imp.target, imp.runtime, imp.in_function)
             for imp in imports_of(modules["skiff.kubelet.worker"], modules)]
    assert found == [
        (2, "skiff.kubelet.status", True, False),
        (3, "skiff.api.types", True, False),
        (4, "skiff.clock", True, False),
        (6, "skiff.kubelet.kubelet", False, False),
        (8, "skiff.kubelet.status", True, False),
        (10, "skiff.kubelet.kubelet", False, True),
    ]
    graph = runtime_graph(imports_of(modules["skiff.kubelet.worker"], modules))
    assert graph == {"skiff.kubelet.worker": {
        "skiff.kubelet.status": 2, "skiff.api.types": 3, "skiff.clock": 4}}


def test_the_whole_tree_is_read() -> None:
    modules = discover()
    imports = all_imports()
    assert {"skiff.apiserver", "skiff.kubelet", "skiff.api.types"} <= set(modules)
    assert all(imp.target is None or imp.target in modules for imp in imports)
    assert runtime_graph(imports)


def test_cycles_are_reported_as_chains() -> None:
    graph = {"skiff.a": {"skiff.b": 3}, "skiff.b": {"skiff.c": 4, "skiff.a": 9},
             "skiff.c": {"skiff.a": 5}, "skiff.d": {"skiff.a": 1}}
    found = cycles(graph)
    assert found == [["skiff.a", "skiff.b"], ["skiff.a", "skiff.b", "skiff.c"]]
    assert describe_cycle(found[0], graph) == (
        "skiff.a (line 3) → skiff.b (line 9) → skiff.a")


def main() -> int:
    imports = all_imports()
    graph = runtime_graph(imports)
    found = cycles(graph)
    print(f"{len(discover())} modules, {sum(map(len, graph.values()))} runtime edges")
    print(f"\nimport circles ({len(found)}, in {len(strongly_connected(graph))} knots):")
    for circle in found:
        print("  " + describe_cycle(circle, graph))
    print("\nservice → another service:\n" + _listing(cross_service_imports(imports)))
    print("\nservice → skiff.cli / skiff.cluster:\n" + _listing(launcher_imports(imports)))
    print("\nfunction-level imports that dodge a circle (informational):\n"
          + _listing(circle_dodging_imports(imports)))
    typed = runtime_graph(imports, with_typing=True)
    print("\ncircles closed only by `if TYPE_CHECKING:` imports (informational):")
    for circle in cycles(typed):
        if circle not in found:
            print("  " + describe_cycle(circle, typed, runtime=graph))
    services = service_names()
    print("\nshared library → a service (informational):\n" + _listing(
        [imp for imp in imports if service_of(imp.importer, services) is None
         and service_of(imp.name, services) is not None]))
    return 1 if found or cross_service_imports(imports) or launcher_imports(imports) else 0


if __name__ == "__main__":
    sys.exit(main())
