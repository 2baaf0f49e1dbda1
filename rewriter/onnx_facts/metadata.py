"""Reading and editing one entry of a node's ``metadata_props`` (placement lives there)."""

from __future__ import annotations

from onnx import NodeProto


def get_metadata(node: NodeProto, key: str) -> str | None:
    """The value of the first entry of ``key`` (None when absent)."""
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
