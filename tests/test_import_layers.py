"""The package's floors: every module imports only from its own package or floors below it,
and no two modules import each other (directly or around a loop), lazily or not.

Read from the source with ``ast`` (imports inside functions count: a lazy import hides a
cycle, it does not remove it).  docs/architecture.md describes the same floors.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

import rewriter
from rewriter.dsl.check import BUILTIN_PASSES
from rewriter.passes import BUILTINS

PACKAGE = Path(rewriter.__file__).parent

# Lowest first.  A module may import from its own package and from any earlier floor.
FLOORS: list[set[str]] = [
    {"errors", "limits", "signals", "text_files", "resources", "disk_cache", "version"},
    {"onnx_facts"},
    {"expr"},
    {"dsl"},
    {"graph"},
    {"match"},
    {"passes"},
    {"partition"},
    {"rewrite"},
    {"explanation"},
    {"pipeline", "report"},
    {"verify", "online"},
    {"cli", "terminal", "__main__", "__init__"},
]
FLOOR_OF = {room: level for level, rooms in enumerate(FLOORS) for room in rooms}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def room(module: str) -> str:
    """The first component below ``rewriter`` (a subpackage or a top-level module)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def resolve(importer: Path, node: ast.ImportFrom) -> str:
    package = module_name(importer) if importer.name == "__init__.py" else module_name(importer).rpartition(".")[0]
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def known_module(name: str) -> bool:
    relative = Path(*name.split("."))
    return (PACKAGE.parent / relative.with_suffix(".py")).exists() or (PACKAGE.parent / relative).is_dir()


def import_graph() -> nx.DiGraph:
    """Module -> module it imports (``from pkg import mod`` counts as importing ``pkg.mod``)."""
    graph = nx.DiGraph()
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = module_name(path)
        graph.add_node(importer)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = resolve(path, node)
                targets = [f"{base}.{a.name}" if known_module(f"{base}.{a.name}") else base for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                if target.split(".")[0] == "rewriter" and target != importer:
                    graph.add_edge(importer, target)
    return graph


def test_every_room_has_a_floor():
    rooms = {room(m) for m in import_graph()}
    assert rooms <= set(FLOOR_OF), f"put these in FLOORS: {sorted(rooms - set(FLOOR_OF))}"


def test_no_module_imports_from_a_floor_above_its_own():
    upward = [
        f"{a} -> {b}" for a, b in import_graph().edges if room(a) != room(b) and FLOOR_OF[room(b)] > FLOOR_OF[room(a)]
    ]
    assert not upward, "imports from a higher floor:\n" + "\n".join(sorted(upward))


def test_no_import_cycle():
    graph = import_graph()
    # a package's __init__ importing its own modules is how packages export; the cycle that
    # matters is between modules (a module importing its package top counts)
    graph.remove_edges_from([(a, b) for a, b in list(graph.edges) if b.startswith(a + ".")])
    try:
        cycle = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        return
    pytest.fail("import cycle: " + " -> ".join(a for a, _ in cycle) + f" -> {cycle[0][0]}")


def test_the_language_names_exactly_the_builtin_passes_there_are():
    assert set(BUILTIN_PASSES) == set(BUILTINS)
