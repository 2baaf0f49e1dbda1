"""Placement: where a node runs, kept in its metadata, and inherited by new nodes.

Before partitioning that is the node's layering annotation (``layer_ann``); after it, the
execution provider the partitioner recorded (``execution_provider``).  The rewriter calls
``inherit_placement`` for every node it creates, so a rule cannot forget it.
"""
from __future__ import annotations

from onnx import NodeProto

LAYER_ANNOTATION_KEY = "layer_ann"
EXECUTION_PROVIDER_KEY = "execution_provider"
PLACEMENT_KEYS = (LAYER_ANNOTATION_KEY, EXECUTION_PROVIDER_KEY)


def get_metadata(node: NodeProto, key: str) -> str | None:
    for entry in node.metadata_props:
        if entry.key == key:
            return entry.value
    return None


def set_metadata(node: NodeProto, key: str, value: str | None) -> None:
    """Set (or, with None, remove) one metadata entry in place, the others kept in order
    (and any repeated entry of the key dropped)."""
    props = node.metadata_props
    places = [i for i, entry in enumerate(props) if entry.key == key]
    for i in reversed(places if value is None else places[1:]):
        del props[i]
    if value is None:
        return
    if places:
        props[places[0]].value = value
    else:
        entry = props.add()
        entry.key, entry.value = key, value


def annotation_of(node: NodeProto) -> str | None:
    return get_metadata(node, LAYER_ANNOTATION_KEY)


def provider_of(node: NodeProto) -> str | None:
    return get_metadata(node, EXECUTION_PROVIDER_KEY)


def inherit_placement(root: NodeProto, new: NodeProto) -> None:
    """Give ``new`` the root's placement entries (replacing any it had)."""
    for key in PLACEMENT_KEYS:
        value = get_metadata(root, key)
        if value is not None:
            set_metadata(new, key, value)
