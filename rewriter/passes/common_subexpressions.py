"""Built-in pass ``common_subexpression_elimination`` (ORT's ConstantSharing + CSE, level 1).

Two nodes compute the same thing when they have the same op, domain, attributes and the same
inputs — where equal small constants (same type, shape and bytes) count as the same input,
and an attribute set to its schema's default counts as absent (exporters write
``Reshape {allowzero: 0}`` beside a bare ``Reshape``).
The later node's outputs are replaced by the earlier one's, then it is dead and removed.
(Equal constants of the model as loaded are already shared while loading, see
passes/on_load.py; this pass merges the ones computed later.)

Not merged: nondeterministic ops, nodes with subgraphs, nodes whose outputs are graph
outputs (their names must stay), initializers a caller can override (graph inputs), and
nodes placed differently (another layering annotation or execution provider).
"""

from __future__ import annotations

from functools import lru_cache

from onnx import AttributeProto

from ..graph.state import GraphState
from ..graph.view import GraphView, NodeId
from ..onnx_facts.placement import EXECUTION_PROVIDER_KEY, LAYER_ANNOTATION_KEY
from ..onnx_facts.schemas import attribute_default, attribute_value
from .on_load import contents_key

_NONDETERMINISTIC = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli", "Dropout"}
)


_KEYS_CACHE = "cse_constant_keys"  # name -> (tensor, key): a view's tensors are never edited
# key -> the first initializer seen with it, kept between runs: an incremental run looks up
# the constants its changed nodes read instead of going through every initializer again
_INDEX_CACHE = "cse_constant_index"


_PLAIN_ATTRIBUTES = frozenset(
    {AttributeProto.INT, AttributeProto.FLOAT, AttributeProto.STRING, AttributeProto.INTS, AttributeProto.FLOATS}
)


def _attribute_key(domain: str, op: str, version: int | None, attribute: AttributeProto) -> bytes | None:
    """An attribute's part of a node key: its bytes, or None when it holds its schema's
    default (a plain number, string or list of them; the op as this opset defines it).
    Tensors and graphs are keyed by their bytes alone, never kept in the cache below."""
    blob = attribute.SerializeToString()
    if attribute.type not in _PLAIN_ATTRIBUTES:
        return blob
    return None if _holds_default(domain, op, version, blob) else blob


@lru_cache(maxsize=4096)
def _holds_default(domain: str, op: str, version: int | None, blob: bytes) -> bool:
    attribute = AttributeProto.FromString(blob)
    default = attribute_default(domain, op, version, attribute.name)
    return default is not None and attribute_value(attribute) == default


def _constant_key(view: GraphView, value: str) -> tuple | None:
    tensor = view.initializers.get(value)
    if tensor is None or not view.is_initializer(value):
        return None
    cache = view.pass_caches.setdefault(_KEYS_CACHE, {})
    cached = cache.get(value)
    if cached is not None and cached[0] is tensor:
        return cached[1]
    key = contents_key(tensor, lambda: view.constant(value))
    cache[value] = (tensor, key)
    return key


class _Keys:
    """What makes two nodes the same computation, with equal small constants identified
    (``canonical`` maps each duplicate constant to the first one seen)."""

    def __init__(self, view: GraphView, fresh_index: bool) -> None:
        self.view = view
        self.canonical: dict[str, str] = {}
        if fresh_index:
            view.pass_caches[_INDEX_CACHE] = {}
        self.constants: dict[tuple, str] = view.pass_caches.setdefault(_INDEX_CACHE, {})
        self.known: set[str] = set()
        self.merged: set[str] = set()  # outputs of found duplicates and of their firsts

    def may_have_twin(self, node_id: NodeId) -> bool:
        """A cheap necessary condition for a duplicate: a twin reads the same non-constant
        value (one of the node's inputs, unless a merge renames it), so it is another
        reader of it with the same op.  Nodes of constants only are always compared."""
        view = self.view
        key = view.node_key(node_id)
        for value in view.inputs(node_id):
            if not value or view.is_initializer(value):
                continue  # equal constants of other names count as the same input
            if value in self.merged:
                return True
            return any(c != node_id and view.node_key(c) == key for c, _ in view.consumer_slots(value))
        return True

    def canon(self, value: str) -> str:
        if not value:
            return ""
        value = self.canonical.get(value, value)
        if value in self.known:
            return value
        view = self.view
        key = _constant_key(view, value)
        if key is None:
            self.known.add(value)
            return value
        first = self.constants.get(key)
        if first is None or first == value or _constant_key(view, first) != key:
            self.constants[key] = value  # (a first one since removed: this one takes over)
            self.known.add(value)
            return value
        self.canonical[value] = first
        return first

    def key(self, node_id: NodeId) -> tuple | None:
        """The node's key, or None when it must not be merged."""
        view = self.view
        domain, op = view.node_key(node_id)
        if op in _NONDETERMINISTIC or view.has_subgraphs(node_id):
            return None
        outputs = view.outputs(node_id)
        if any(o and view.is_graph_output(o) for o in outputs):
            return None
        proto = view.node(node_id)
        placement = view.metadata(node_id)
        attributes: tuple[bytes, ...] = ()
        if proto.attribute:
            version = view.opset(domain)
            blobs = (_attribute_key(domain, op, version, a) for a in proto.attribute)
            attributes = tuple(sorted(b for b in blobs if b is not None))
        return (
            domain,
            op,
            tuple(self.canon(i) for i in view.inputs(node_id)),
            len(outputs),
            attributes,
            placement.get(LAYER_ANNOTATION_KEY),
            placement.get(EXECUTION_PROVIDER_KEY),
        )  # never across placements


def _merge_constants(view: GraphView, keys: _Keys) -> None:
    for value, first in list(keys.canonical.items()):
        if view.is_initializer(value) and first != value:
            view.replace_uses(value, first)
            view.remove_dead([value])


def _merge(view: GraphView, duplicate: NodeId, first: NodeId) -> int:
    """Make ``duplicate``'s consumers read ``first``'s outputs; returns nodes removed."""
    outputs = [o for o in view.outputs(duplicate) if o]
    for mine, theirs in zip(view.outputs(duplicate), view.outputs(first)):
        if mine:
            view.replace_uses(mine, theirs)
    return view.remove_dead(outputs)


def eliminate_common_subexpressions(state: GraphState, changed: list[NodeId] | None = None) -> int:
    """Merge duplicate constants and duplicate nodes; returns the number of nodes removed.

    With ``changed`` (nodes created or rewired since the last run) only those nodes are
    compared, each with the other readers of its least-read input (a duplicate reads the
    same values), and so on for the readers of anything merged."""
    if changed is not None:
        return _eliminate_among(state.view, changed)
    view = state.view
    keys = _Keys(view, fresh_index=True)
    for name in list(view.initializers):  # equal constants: the first of each stays
        keys.canon(name)
    seen: dict[tuple, NodeId] = {}
    duplicates: list[tuple[NodeId, NodeId]] = []
    # in graph order (topological as loaded; rewrites place new nodes at their root): a
    # twin's inputs are the node's own, so either can stay, and the order only decides
    # how much of a chain of twins one pass finds
    for node_id in sorted(view.node_ids(), key=view.order_of):
        if not keys.may_have_twin(node_id):
            continue
        key = keys.key(node_id)
        if key is None:
            continue
        first = seen.setdefault(key, node_id)
        if first != node_id:
            duplicates.append((node_id, first))
            for mine, theirs in zip(view.outputs(node_id), view.outputs(first)):
                if mine:
                    keys.canonical[mine] = theirs
                    keys.merged.update((mine, theirs))
    _merge_constants(view, keys)
    removed = 0
    for node_id, first in duplicates:
        if view.has_node(node_id):
            removed += _merge(view, node_id, first)
    return removed


def _eliminate_among(view: GraphView, changed: list[NodeId]) -> int:
    keys = _Keys(view, fresh_index=False)
    for node_id in changed:  # new constants are read by changed nodes (else they are dead)
        if view.has_node(node_id):
            for name in view.inputs(node_id):
                if name and name not in keys.known and view.is_initializer(name):
                    keys.canon(name)
    start = len(view.changes)
    _merge_constants(view, keys)
    removed = 0
    queue = sorted({*changed, *view.changed_since(start)}, key=view.order_of)
    start = len(view.changes)
    while queue:
        for node_id in queue:
            if not view.has_node(node_id):
                continue
            inputs = [i for i in view.inputs(node_id) if i]
            if not inputs:
                continue
            # a duplicate reads every input too: look among the readers of the rarest one
            # with the same op (most nodes have none: then no key is computed)
            rarest = min(inputs, key=view.consumer_count)
            op = view.node_key(node_id)
            others = [c for c, _ in view.consumers(rarest) if c != node_id and view.node_key(c) == op]
            key = keys.key(node_id) if others else None
            if key is None:
                continue
            for other in dict.fromkeys(others):
                if view.has_node(other) and keys.key(other) == key:
                    first, duplicate = sorted((node_id, other), key=view.order_of)
                    removed += _merge(view, duplicate, first)
                    break
        queue = view.changed_since(start)  # readers of merged outputs: compare them too
        start = len(view.changes)
    return removed
