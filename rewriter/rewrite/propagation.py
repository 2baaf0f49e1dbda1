"""Placement propagation: new nodes inherit where the root node runs.

Before partitioning that is the root's layering annotation (``layer_ann``); after it, the
execution provider the partitioner recorded.  The rewriter calls this for every node it
creates, so a rule cannot forget it.
"""
from __future__ import annotations

from onnx import NodeProto

LAYER_ANNOTATION_KEY = "layer_ann"
EXECUTION_PROVIDER_KEY = "execution_provider"
PLACEMENT_KEYS = (LAYER_ANNOTATION_KEY, EXECUTION_PROVIDER_KEY)


def placement_of(node: NodeProto) -> dict[str, str]:
    return {p.key: p.value for p in node.metadata_props if p.key in PLACEMENT_KEYS}


def inherit_placement(root: NodeProto, new: NodeProto) -> None:
    """Copy the root's placement entries onto ``new`` (replacing any it had)."""
    placement = placement_of(root)
    if not placement:
        return
    kept = [p for p in new.metadata_props if p.key not in placement]
    del new.metadata_props[:]
    new.metadata_props.extend(kept)
    for key, value in placement.items():
        entry = new.metadata_props.add()
        entry.key = key
        entry.value = value
