"""Provenance: which rule made a node, and which nodes it replaced, kept in the node's
``metadata_props`` (onnxruntime ignores them; other tools and people can read them).

* ``rewriter_rule``: the rule (or built-in step) that created the node;
* ``rewriter_replaced``: the names of the nodes that rewrite deleted, comma-separated
  (empty for a node that replaced nothing, such as a Cast the float16 step adds).

A node a later rewrite deletes takes its entries with it; its replacement records its own.
"""

from __future__ import annotations

from collections.abc import Iterable

from onnx import NodeProto

from .metadata import set_metadata

RULE_KEY = "rewriter_rule"
REPLACED_KEY = "rewriter_replaced"
FLOAT16_STEP = "float16_in_float32"  # the rule named by the Casts the float16 step adds


def record_provenance(node: NodeProto, rule: str, replaced: Iterable[str]) -> None:
    """Write the rule and the replaced nodes' names into ``node``'s metadata."""
    set_metadata(node, RULE_KEY, rule)
    set_metadata(node, REPLACED_KEY, ",".join(name for name in replaced if name))
