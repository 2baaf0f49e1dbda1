"""The built-in passes' work done while a graph is loaded: constants taken out of it, as
ONNX Runtime does when it loads one.  ``load_hook`` (passes/__init__.py) hands this to the
model state for the built-ins a run's packs name, so the graph layer knows no pass by name.

Exported models carry hundreds of ``Constant`` nodes and (TorchScript's weight sharing) of
``Identity`` nodes reading initializers.  The ``constant_folding`` built-in would turn the
first into initializers and let the readers of the second read the initializer itself; doing
it while the graph is read means those nodes are never added to the view only to be removed
again (a tenth of the time of a BERT export's extended level).  The result is the same graph
the built-in's first round makes: the same rules apply (a graph output keeps its node; an
Identity of a constant above the built-in's size limit stays), and the report counts these
nodes under the built-in.

Likewise for ``common_subexpression_elimination``: equal small constants (a BERT export
repeats its scalars and shape constants in every layer: 378 of them) are read as the first
of them while loading, as that built-in's first round would merge them one by one.
"""

from __future__ import annotations

import sys

import numpy as np
from onnx import GraphProto, NodeProto, TensorProto, helper, numpy_helper

from ..graph.loaded_constants import LoadedConstants
from ..graph.proto_pool import ProtoPool
from ..graph.subgraphs import has_subgraphs, may_have_subgraphs
from ..graph.types import tensor_nbytes
from ..graph.view import constant_node_value
from ..onnx_facts.schemas import normalize_domain

_STANDARD = ("", "ai.onnx")


SHARED_CONSTANT_BYTES = 1024  # constants up to this size are compared by content


def contents_key(tensor: TensorProto, contents) -> tuple | None:
    """What makes two small constants the same value (type, shape, contents), as the
    common-subexpression built-in compares them; None for a constant larger than
    SHARED_CONSTANT_BYTES in the model, external or unreadable.  Contents are compared
    as little-endian bytes: a tensor's ``raw_data`` as it is (no array made), else
    ``contents()``, its array (None when unreadable)."""
    if tensor.data_location == TensorProto.EXTERNAL or tensor.ByteSize() > SHARED_CONSTANT_BYTES:
        return None
    if _LITTLE_ENDIAN and tensor.HasField("raw_data") and tensor.data_type != TensorProto.STRING:
        return ("const", tensor.data_type, tuple(tensor.dims), tensor.raw_data)
    array = contents()
    return None if array is None else ("const", tensor.data_type, tuple(array.shape), array.tobytes())


_LITTLE_ENDIAN = sys.byteorder == "little"  # (numpy's bytes are raw_data's layout)


def constant_node_tensor(node: NodeProto, pool: ProtoPool) -> TensorProto | None:
    """A Constant node's value as a tensor (named like its output; a ``value`` tensor is
    copied into ``pool``, the view's); None when unreadable."""
    tensor = None
    for attr in node.attribute:
        if attr.name == "value":
            tensor = pool.copy_tensor(attr.t)
            break
        if attr.name in ("value_string", "value_strings"):
            tensor = numpy_helper.from_array(np.array(helper.get_attribute_value(attr), dtype=object))
            break
    else:
        array = constant_node_value(node)  # value_float(s), value_int(s)
        tensor = None if array is None else numpy_helper.from_array(np.asarray(array))
    if tensor is not None:
        tensor.name = node.output[0]
    return tensor


def take_constants(
    graph: GraphProto, max_identity_bytes: int, pool: ProtoPool, share_equal: bool = False
) -> LoadedConstants:
    """The Constant nodes and the Identity nodes of constants that loading can replace
    (their tensors made in ``pool``, the view's).  With ``share_equal`` (the level runs the
    common-subexpression built-in), small constants equal to an earlier one are read as
    that one, as the built-in's first round would merge them (its first in the same order:
    initializers, then Constant nodes).  Graphs with subgraphs are left to the built-ins
    (their bodies may read the names)."""
    found = LoadedConstants(pool)
    outputs = {o.name for o in graph.output}
    sizes = {t.name: tensor_nbytes(t) for t in graph.initializer}
    for name in {i.name for i in graph.input}:
        sizes.pop(name, None)  # an initializer a caller can override is not a constant
    first_of: dict[tuple, str] = {}

    def shared(name: str, tensor: TensorProto) -> bool:
        """Whether an equal constant came first (then ``name`` is read as it)."""
        if name in outputs:
            return False  # (a graph output's name must stay)
        key = contents_key(tensor, lambda: _contents(tensor))
        if key is None:
            return False
        first = first_of.setdefault(key, name)
        if first == name:
            return False
        found.aliases[name] = first
        return True

    if share_equal:
        for tensor in graph.initializer:
            if tensor.name in sizes and shared(tensor.name, tensor):
                found.dropped.add(tensor.name)
    for index, node in enumerate(graph.node):
        op = node.op_type
        if op != "Constant" and op != "Identity":
            if may_have_subgraphs(normalize_domain(node.domain), op) and has_subgraphs(node):
                return LoadedConstants(pool)
            continue
        if (
            node.domain not in _STANDARD
            or len(node.output) != 1
            or node.output[0] in outputs
            or any(a.ref_attr_name for a in node.attribute)
        ):
            continue
        out = node.output[0]
        if op == "Constant" and not node.input:
            tensor = constant_node_tensor(node, pool)
            if tensor is not None:
                found.skipped.add(index)
                if share_equal and shared(out, tensor):
                    continue
                found.initializers.append(tensor)
                sizes[out] = tensor_nbytes(tensor)
        elif op == "Identity" and len(node.input) == 1:
            source = found.aliases.get(node.input[0], node.input[0])
            if sizes.get(source, max_identity_bytes + 1) <= max_identity_bytes:
                found.aliases[out] = source
                found.skipped.add(index)
    return found


def _contents(tensor: TensorProto) -> np.ndarray | None:
    try:
        return numpy_helper.to_array(tensor)
    except Exception:  # an unsupported type: not compared
        return None
