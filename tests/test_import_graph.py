"""The package's import graph is a stack of floors: whole packages import only downwards, and nothing loops.

Every module belongs to its top-level package (``stratamem.pyramid.tiers`` to
``stratamem.pyramid``) or is a top-level module of its own (``stratamem.errors``).
:data:`LAYERS` gives each of them a floor, lowest first:

0. ground floor — errors, records (every value the layers exchange), text and budget
   checks, config, tokens, provider shapes, events, the model protocol, JSON reading;
1. leaf tools — encodings, embedders, summarizers, importers, export, the MCP budget;
2. storage — ``store`` and its backends;
3. engine parts over the store — recall, memory items, working state;
4. the pyramid (it extracts memory items);
5. context assembly (it reads the pyramid, items, recall and state);
6. what works over a whole memory — the agent loop, forgetting, search;
7. the facade — ``Memory`` and ``AsyncMemory``;
8. shells — CLI, MCP, web, framework integrations, testing helpers, the package root.

A package may import its own floor or lower ones; the graph of packages has no
cycle, so packages on one floor import each other in one direction only.
Imports under ``if TYPE_CHECKING:`` are annotations only and do not count.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import stratamem

ROOT = Path(stratamem.__file__).parent

LAYERS: dict[str, int] = {
    "stratamem.errors": 0,
    "stratamem.records": 0,
    "stratamem.text": 0,
    "stratamem.config": 0,
    "stratamem.envvars": 0,
    "stratamem.tokens": 0,
    "stratamem.providers": 0,
    "stratamem.events": 0,
    "stratamem.llm": 0,
    "stratamem._jsonio": 0,
    "stratamem._gcpause": 0,
    "stratamem._choices": 0,
    "stratamem._config_values": 0,
    "stratamem.formats": 1,
    "stratamem.embed": 1,
    "stratamem.summarize": 1,
    "stratamem.ingest": 1,
    "stratamem.exchange": 1,
    "stratamem.mcp_budget": 1,
    "stratamem.store": 2,
    "stratamem.retrieve": 3,
    "stratamem.items": 3,
    "stratamem.state": 3,
    "stratamem.pyramid": 4,
    "stratamem.context": 5,
    "stratamem.agentloop": 6,
    "stratamem.expand": 6,
    "stratamem.forget": 6,
    "stratamem.search": 6,
    "stratamem.memory": 7,
    "stratamem.aio": 7,
    "stratamem.cli": 8,
    "stratamem.mcp": 8,
    "stratamem.web": 8,
    "stratamem.integrations": 8,
    "stratamem.testing": 8,
    "stratamem.__main__": 8,
    "stratamem": 8,
}

# Where a storage backend is chosen: the store package's front door and ``open_store``.
CHOOSES_A_BACKEND = {"stratamem.store", "stratamem.store.open"}


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(module: str, path: Path) -> set[str]:
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    targets: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            names = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in MODULES else origin for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            while name not in MODULES and "." in name:
                name = name.rsplit(".", 1)[0]
            if name.startswith("stratamem") and name in MODULES and name != module:
                targets.add(name)
    return targets


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def package(module: str) -> str:
    """The top-level package (or top-level module) ``module`` belongs to."""
    return ".".join(module.split(".")[:2])


def layer(module: str) -> int:
    """The floor of ``module``'s package."""
    return LAYERS[package(module)]


PACKAGE_GRAPH: dict[str, set[str]] = defaultdict(set)
for _module, _targets in GRAPH.items():
    for _target in _targets:
        if package(_target) != package(_module):
            PACKAGE_GRAPH[package(_module)].add(package(_target))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_every_module_belongs_to_a_package_with_a_floor() -> None:
    assert sorted({package(m) for m in MODULES} - set(LAYERS)) == []
    assert sorted(set(LAYERS) - {package(m) for m in MODULES}) == []  # no floor for a package that is gone
    assert package("stratamem.store.sqlite.items") == "stratamem.store" and layer("stratamem.store.sql") == 2
    assert package("stratamem.records.nodes") == "stratamem.records" and layer("stratamem.records.items") == 0


def test_no_package_imports_a_higher_floor() -> None:
    upward = sorted(
        f"{a} ({layer(a)}) -> {b} ({layer(b)})" for a, targets in GRAPH.items() for b in targets if layer(b) > layer(a)
    )
    assert upward == []


def test_the_package_graph_has_no_cycle() -> None:
    assert _cycles(PACKAGE_GRAPH) == []


def test_no_module_cycle() -> None:
    # A package __init__ importing its own submodules is not a cycle of concepts.
    cycles = [c for c in _cycles(GRAPH) if not all(m.startswith(c[0] + ".") or m == c[0] for m in c)]
    assert cycles == []


def test_the_store_imports_only_the_floors_below_it() -> None:
    found = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if package(module) == "stratamem.store"
        for target in targets
        if package(target) != "stratamem.store" and layer(target) >= 2
    )
    assert found == []
    assert PACKAGE_GRAPH["stratamem.store"] <= {p for p, n in LAYERS.items() if n < 2}


def test_a_backend_is_chosen_only_at_the_store_front_door_or_by_a_shell() -> None:
    def backend(module: str) -> str | None:
        for name in ("sqlite", "postgres"):
            if module.startswith(f"stratamem.store.{name}"):
                return name
        return None

    found = sorted(
        f"{a} -> {b}"
        for a, targets in GRAPH.items()
        for b in targets
        if backend(b) and backend(a) != backend(b) and a not in CHOOSES_A_BACKEND and layer(a) < 8
    )
    assert found == []
