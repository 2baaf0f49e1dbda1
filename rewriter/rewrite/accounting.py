"""Every attribute of every node a rewrite deletes is accounted for.

A pattern that does not mention an attribute says nothing about it, so a replacement cannot
know its value: deleting a causal MultiHeadAttention (``unidirectional: 1``) for a pattern
that never looked at ``unidirectional`` would make it bidirectional.  The engine therefore
lets a rewrite delete a node only when each attribute the node sets is

* mentioned by the alternative it matched as (captured, required to a value, or ``{name: _}``:
  any value, said explicitly by the author), or
* copied by the replacement (``{...c}`` spreads every attribute of ``c``'s node), or
* at its schema default (an attribute whose schema gives no default cannot be).

The static half, a captured attribute the rule never reads, is ``dsl/check.py``'s.
"""

from __future__ import annotations

from ..graph.view import FUNCTION_ATTRIBUTE, GraphView, NodeId
from ..match.matcher import Match, values_equal
from ..onnx_facts.schemas import attribute_default


def unaccounted_attribute(view: GraphView, match: Match, deleted: set[NodeId]) -> tuple[str, NodeId] | None:
    """Why the rewrite would drop an attribute of a deleted node, and that node (None when
    it would not)."""
    spread = match.rule.spread
    for eq_index, node_id in match.nodes.items():
        if node_id not in deleted or eq_index in spread:
            continue
        values = view.attributes(node_id)
        if not values:
            continue
        plan = match.alternatives.get(eq_index)
        mentioned = plan.mentioned if plan is not None else frozenset()
        for name, value in values.items():
            if name not in mentioned and not _at_default(view, node_id, name, value):
                proto = view.node(node_id)
                shown = "the calling node's" if value is FUNCTION_ATTRIBUTE else f"{value!r}"
                return (
                    f"attribute {name}={shown} of {proto.op_type} node '{proto.name or node_id}' "
                    f"is not at its default and the rule does not account for it",
                    node_id,
                )
    return None


def _at_default(view: GraphView, node_id: NodeId, name: str, value: object) -> bool:
    if value is FUNCTION_ATTRIBUTE:
        return False
    domain, op = view.node_key(node_id)
    default = attribute_default(domain, op, view.opset(domain), name)
    return default is not None and values_equal(value, default)
