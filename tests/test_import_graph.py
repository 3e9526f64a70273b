"""The package's import graph: layers only import downwards, and no module cycle exists.

Layers, lowest first (a module belongs to the layer of its longest listed prefix):

0. foundation — errors, records, config, tokens, provider shapes, events, the model protocol;
1. records and leaf tools — formats, embedders, summarizers, importers, export,
   and the record modules the stores exchange (item, node, manifest, conversation records);
2. storage — ``store`` (shared feature stores and SQL layer) and its backends;
3. the engine's concepts — retrieve, pyramid, items, state, context, agent loop, forget, search;
4. the facade — ``Memory`` and ``AsyncMemory``;
5. shells — CLI, MCP, web, framework integrations, testing helpers, the package root.

Imports under ``if TYPE_CHECKING:`` are annotations only and do not count.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import stratamem

ROOT = Path(stratamem.__file__).parent

LAYERS: dict[str, int] = {
    "stratamem.errors": 0, "stratamem._moved": 0, "stratamem._jsonio": 0, "stratamem._gcpause": 0, "stratamem.records": 0,
    "stratamem.config": 0, "stratamem.tokens": 0, "stratamem.providers": 0, "stratamem.events": 0,
    "stratamem.llm": 0,
    "stratamem.formats": 1, "stratamem.embed": 1, "stratamem.summarize": 1, "stratamem.ingest": 1,
    "stratamem.exchange": 1, "stratamem.mcp_budget": 1,
    "stratamem.items.records": 1, "stratamem.items.metrics": 1, "stratamem.pyramid.nodes": 1,
    "stratamem.context.manifest": 1, "stratamem.agentloop.state": 1,
    "stratamem.store": 2,
    "stratamem.retrieve": 3, "stratamem.pyramid": 3, "stratamem.items": 3, "stratamem.state": 3,
    "stratamem.context": 3, "stratamem.agentloop": 3, "stratamem.forget": 3, "stratamem.search": 3,
    "stratamem.memory": 4, "stratamem.aio": 4,
    "stratamem.cli": 5, "stratamem.mcp": 5, "stratamem.web": 5, "stratamem.integrations": 5,
    "stratamem.testing": 5, "stratamem.__main__": 5, "stratamem": 5,
}

# Known exceptions (issue 16 removed the last: NewItem, NewNode and the item view
# filter moved to stratamem.store.new_rows and stratamem.store.item_view).
KNOWN_BACKEND_IMPORTS: set[tuple[str, str]] = set()


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
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
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


def layer(module: str) -> int:
    """The layer of ``module``: that of its longest prefix in :data:`LAYERS`."""
    name = module
    while name not in LAYERS:
        name = name.rsplit(".", 1)[0]
    return LAYERS[name]


def backend(module: str) -> str | None:
    for name in ("sqlite", "postgres"):
        if module.startswith(f"stratamem.store.{name}"):
            return name
    return None


def test_every_module_has_a_layer() -> None:
    assert all(isinstance(layer(m), int) for m in MODULES)
    assert "stratamem.store.sql" in MODULES and layer("stratamem.store.sql") == 2


def test_no_module_imports_a_higher_layer() -> None:
    upward = sorted(f"{a} ({layer(a)}) -> {b} ({layer(b)})"
                    for a, targets in GRAPH.items() for b in targets
                    if layer(b) > layer(a) and a != "stratamem" and not b.startswith(a + "."))
    assert upward == []


def test_no_import_cycles() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
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

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    # A package __init__ importing its own submodules is not a cycle of concepts.
    cycles = [c for c in cycles if not all(m.startswith(c[0] + ".") or m == c[0] for m in c)]
    assert cycles == []


def test_outside_a_backend_only_known_modules_import_one() -> None:
    found = {(a, b) for a, targets in GRAPH.items() for b in targets
             if backend(b) and backend(a) != backend(b)
             and a not in {"stratamem.store", "stratamem.store.open"} and layer(a) < 5}
    assert found == KNOWN_BACKEND_IMPORTS


def test_store_imports_records_not_the_features_using_it() -> None:
    for module, targets in GRAPH.items():
        if module.startswith("stratamem.store"):
            assert all(layer(t) <= 2 for t in targets), (module, sorted(t for t in targets if layer(t) > 2))
