"""The import graph of tc_graph, read with ast (nothing is imported): the tuner depends on
the API and the compiler driver, never the other way round, so no cycle runs through
them (issue 15: api.py and the tuning database used to import each other). Every import
counts: inside functions, and for type checking only (a type's module is a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "tc_graph"
ONE_WAY = ("tc_graph.api", "tc_graph.compiler", "tc_graph.tune")

Graph = dict[str, set[str]]


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The tc_graph modules that `name` imports, anywhere in its text, with the packages
    each import runs (the root package aside: it imports everything)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[: len(base) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            found |= {target} | {f"{target}.{a.name}" for a in node.names}
    out = set()
    for target in found:
        parts = target.split(".")
        out |= {".".join(parts[:k]) for k in range(2, len(parts) + 1)} & modules.keys()
    return out - {name}


def _graph() -> Graph:
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def _cycles(graph: Graph) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_reader_sees_a_known_cycle() -> None:
    """The oracle: modules that import each other are a cycle, one importing them is not
    in it."""
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [{"a", "b"}]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_graph_holds_the_known_edges() -> None:
    graph = _graph()
    assert "tc_graph.compiler" in graph["tc_graph.api"]
    assert {"tc_graph.tune", "tc_graph.tune.db"} <= graph["tc_graph.compiler"]
    assert {"tc_graph.api", "tc_graph.compiler"} <= graph["tc_graph.tune.tuner"]


@pytest.mark.parametrize("root", ONE_WAY)
def test_no_cycle_through_the_api_the_compiler_or_the_tuner(root: str) -> None:
    for component in _cycles(_graph()):
        caught = sorted(m for m in component if m == root or m.startswith(f"{root}."))
        assert not caught, f"{caught} in an import cycle: {sorted(component)}"
