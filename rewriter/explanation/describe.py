"""Nodes and values of the graph, and the values expressions compute, as short text for an
explanation: ``'div' (Div)``, ``'sqrt2' (graph input, float[1])``, ``[1, 8, 16]``."""

from __future__ import annotations

import numpy as np

from ..expr.dtypes import DTYPES
from ..expr.values import Ref
from ..graph.view import GraphView, NodeId

_TYPE_NAMES = {number: name for name, number in reversed(DTYPES.items())}
MAX_TEXT = 100  # characters of one shown value
MAX_ELEMENTS = 8  # elements of a constant shown in full


def node_name(view: GraphView, node_id: NodeId) -> str:
    return view.node(node_id).name or f"#{node_id}"


def op_name(view: GraphView, node_id: NodeId) -> str:
    domain, op = view.node_key(node_id)
    return f"{domain}.{op}" if domain else op


def node_label(view: GraphView, node_id: NodeId) -> str:
    """``'div' (Div)``."""
    return f"'{node_name(view, node_id)}' ({op_name(view, node_id)})"


def type_text(view: GraphView, value: str) -> str:
    """``float[1, 8, 16]``; ``?`` for what inference does not know."""
    elem = view.elem_type(value)
    dtype = _TYPE_NAMES.get(elem, f"type {elem}") if elem else "?"
    shape = view.shape(value)
    if shape is None:
        return dtype
    return dtype + "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def value_source(view: GraphView, value: str) -> str:
    """Where a value comes from: ``a graph input``, ``an initializer``, ``the output of
    'div' (Div)``..."""
    if not value:
        return "absent"
    if view.is_graph_input(value):
        if value in view.initializers:
            return "a graph input (its initializer is only a default: it can be fed, so it is not a constant)"
        return "a graph input"
    if view.is_initializer(value):
        return "an initializer"
    if view.is_outer(value):
        return "a value of the enclosing graph"
    producer = view.producer(value)
    if producer is None:
        return "a value nothing produces"
    return f"the output of {node_label(view, producer)}"


def describe_value(view: GraphView, value: str) -> str:
    """``'sqrt2' (a graph input, float[1])``; a small constant with its contents."""
    if not value:
        return "an absent input"
    parts = [value_source(view, value), type_text(view, value)]
    array = view.constant(value)
    if array is not None and array.size <= MAX_ELEMENTS:
        parts[-1] += f" = {show(array)}"
    if view.is_graph_output(value):
        parts.append("a graph output")
    return f"'{value}' ({', '.join(parts)})"


def show(value: object) -> str:
    """A value an expression computed, as rule text: ``true``, ``none``, ``[1, 8, 16]``,
    ``'x'`` for a value of the graph; cut at ``MAX_TEXT`` characters."""
    text = _show(value)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


def _show(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, Ref):
        return f"'{value.name}'"
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return _show(value[()])
        with np.printoptions(threshold=MAX_ELEMENTS, precision=8, edgeitems=3):
            return np.array2string(value, separator=", ").replace("\n", "")
    if isinstance(value, np.generic):
        return _show(value.item())
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)
