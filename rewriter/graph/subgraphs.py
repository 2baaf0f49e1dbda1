"""Nodes that hold graphs (If, Loop, Scan, ...) and the outer values their bodies read.

A subgraph reading a value of the enclosing graph is a use of that value like an input:
the topology records it as an edge keyed ``"implicit:<name>"`` (see network.py), so no
rewrite deletes or renames a value a body still reads.
"""

from __future__ import annotations

from collections.abc import Iterator

from onnx import AttributeProto, GraphProto, NodeProto

_GRAPH_ATTRIBUTES = (AttributeProto.GRAPH, AttributeProto.GRAPHS)


# the standard ops with graph attributes (onnx's schemas, every version)
_CONTROL_FLOW = frozenset({"If", "Loop", "Scan", "SequenceMap"})


def may_have_subgraphs(domain: str, op: str) -> bool:
    """Whether a node of this (normalized) domain and op can hold a graph attribute: the
    standard control-flow ops and any op of another domain.  Asking this first spares
    reading the attributes of every other node."""
    return op in _CONTROL_FLOW or (domain != "" and domain != "ai.onnx.ml")


def has_subgraphs(node: NodeProto) -> bool:
    """Whether the node holds a graph attribute (If, Loop, Scan...): cheaper than asking
    ``subgraphs_of`` for the first one."""
    attributes = node.attribute
    if not attributes:
        return False
    for attr in attributes:
        if attr.type in _GRAPH_ATTRIBUTES:
            return True
    return False


def subgraphs_of(node: NodeProto) -> Iterator[GraphProto]:
    for attr in node.attribute:
        if attr.type == AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == AttributeProto.GRAPHS:
            yield from attr.graphs


def outer_references(graph: GraphProto) -> list[str]:
    """Names a graph (or its nested subgraphs) reads without defining, in first-use order."""
    seen: dict[str, None] = {}

    def walk(g: GraphProto, defined: set[str]) -> None:
        defined = defined | {i.name for i in g.input} | {t.name for t in g.initializer}
        defined |= {t.values.name for t in g.sparse_initializer}
        for inner in g.node:
            defined |= {o for o in inner.output if o}
        for inner in g.node:
            for name in inner.input:
                if name and name not in defined:
                    seen.setdefault(name)
            for sub in subgraphs_of(inner):
                walk(sub, defined)
        for out in g.output:
            if out.name not in defined:
                seen.setdefault(out.name)

    walk(graph, set())
    return list(seen)


def implicit_inputs(node: NodeProto) -> list[str]:
    """Outer-scope values read inside the node's subgraphs, in first-use order."""
    names: dict[str, None] = {}
    for sub in subgraphs_of(node):
        names.update(dict.fromkeys(outer_references(sub)))
    return list(names)


def rename_in_subgraph(graph: GraphProto, old: str, new: str) -> None:
    for inner in graph.node:
        for i, name in enumerate(inner.input):
            if name == old:
                inner.input[i] = new
        for sub in subgraphs_of(inner):
            rename_in_subgraph(sub, old, new)
    for out in graph.output:
        if out.name == old:
            out.name = new
