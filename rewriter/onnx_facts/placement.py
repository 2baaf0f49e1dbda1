"""Placement: where a node runs, kept in its metadata, and inherited by new nodes.

Before partitioning that is the node's layering annotation (``layer_ann``); after it, the
execution provider the partitioner recorded (``execution_provider``).  The rewriter gives
every node it creates the root's entries (``copy_placement``), so a rule cannot forget it.
"""

from __future__ import annotations

from collections.abc import Mapping

from onnx import NodeProto

from .metadata import get_metadata, set_metadata

LAYER_ANNOTATION_KEY = "layer_ann"
EXECUTION_PROVIDER_KEY = "execution_provider"
PLACEMENT_KEYS = (LAYER_ANNOTATION_KEY, EXECUTION_PROVIDER_KEY)


def annotation_of(node: NodeProto) -> str | None:
    return get_metadata(node, LAYER_ANNOTATION_KEY)


def provider_of(node: NodeProto) -> str | None:
    return get_metadata(node, EXECUTION_PROVIDER_KEY)


def inherit_placement(root: NodeProto, new: NodeProto) -> None:
    """Give ``new`` the root's placement entries (replacing any it had)."""
    copy_placement({key: get_metadata(root, key) for key in PLACEMENT_KEYS}, new)


def copy_placement(root_metadata: Mapping[str, str | None], new: NodeProto) -> None:
    """``inherit_placement`` from the root's metadata already read (a dict of it)."""
    fresh = not new.metadata_props  # (a node just built: nothing to replace)
    for key in PLACEMENT_KEYS:
        value = root_metadata.get(key)
        if value is not None:
            if fresh:
                new.metadata_props.add(key=key, value=value)
            else:
                set_metadata(new, key, value)
