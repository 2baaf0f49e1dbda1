"""Assign every node an execution provider, the way ONNX Runtime's partitioner does.

1. Nodes whose ``layer_ann`` a layer-assignment rule matches are pre-assigned to the
   provider its device resolves to — if that provider has a kernel for them; otherwise a
   warning, and they fall through to step 2.  Designators no registered provider answers
   are skipped with a warning.
2. Providers in priority order each claim the unassigned nodes they have kernels for (first
   come, first served).
3. A node nobody claimed whose op onnx defines as a function (HardSwish) is inlined by
   ONNX Runtime: it goes to the first provider, in priority order, with kernels for every op
   of its body, silently.  The CPU provider takes what is left, silently where it has a
   kernel once float16 is float (onnxruntime casts around it; float16.py makes that explicit);
   a node nobody can run is reported.

Afterwards every node records its provider in ``metadata_props['execution_provider']`` and
every ``layer_ann`` is removed, in subgraphs too.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from onnx import NodeProto

from ..graph.state import GraphState
from ..graph.subgraphs import has_subgraphs, subgraphs_of
from ..onnx_facts.placement import EXECUTION_PROVIDER_KEY, LAYER_ANNOTATION_KEY, get_metadata, set_metadata
from ..onnx_facts.providers import CPU, provider_list, resolve_device, short_name
from ..onnx_facts.schemas import function_body_ops
from .kernels import KernelTable, KernelTables
from .layering import first_match, parse_layer_assignment


@dataclass
class LayerDecision:
    """What one layer-assignment rule did."""

    rule: str
    provider: str | None  # None: its device matched no registered provider
    placed: int = 0  # nodes pre-assigned by it
    fell_back: int = 0  # nodes it matched whose provider had no kernel


@dataclass
class PartitionReport:
    providers: list[str]
    counts: dict[str, int] = field(default_factory=dict)  # provider -> nodes
    decisions: list[LayerDecision] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    float32_nodes: int = 0  # CPU nodes of a float16 model rewritten to compute in float32


def _clear_annotation(node: NodeProto) -> None:
    """Remove ``layer_ann`` from a node and every node of its subgraphs."""
    if get_metadata(node, LAYER_ANNOTATION_KEY) is not None:
        set_metadata(node, LAYER_ANNOTATION_KEY, None)
    if not has_subgraphs(node):
        return
    for sub in subgraphs_of(node):
        for inner in sub.node:
            _clear_annotation(inner)


def partition(
    state: GraphState,
    providers: list[str] | str | None = None,
    layer_assignment: str | None = None,
    kernels: KernelTables = KernelTables(),
) -> PartitionReport:
    """Assign providers to the main graph's nodes (see the module docstring); ``kernels``:
    where a provider's kernel table is looked up."""
    order = provider_list(providers)
    report = PartitionReport(order)
    tables: dict[str, KernelTable] = {p: kernels.table(p) for p in order}
    rules = parse_layer_assignment(layer_assignment)
    decisions = {rule.text: LayerDecision(rule.text, resolve_device(rule.device, order)) for rule in rules}
    for decision in decisions.values():
        if decision.provider is None:
            report.warnings.append(
                f"layer assignment {decision.rule}: no registered provider "
                f"is a '{decision.rule.split('(')[0]}' device; rule skipped"
            )
    report.decisions = list(decisions.values())

    view = state.view
    node_ids = sorted(view.node_ids(), key=view.order_of)  # each node decides alone: any fixed order
    assigned: dict[int, str] = {}
    annotated: set[int] = set()  # (their annotations are cleared at the end)
    for node_id in node_ids:  # 1. layering annotations
        annotation = view.metadata(node_id).get(LAYER_ANNOTATION_KEY)
        if annotation is None:
            continue
        annotated.add(node_id)
        rule = first_match([r for r in rules if decisions[r.text].provider is not None], annotation)
        if rule is None:
            continue
        decision = decisions[rule.text]
        provider = decision.provider
        if provider is None:  # (not among the rules matched: skipped above)
            continue
        proto = view.node(node_id)
        if tables[provider].supports(view, proto):
            assigned[node_id] = provider
            decision.placed += 1
        else:
            decision.fell_back += 1
            report.warnings.append(
                f"node '{proto.name or proto.op_type}' ({proto.op_type}) is annotated for "
                f"{short_name(provider)} by {rule.text}, which has no kernel for it; "
                f"assigned by capability instead"
            )
    for provider in order:  # 2. first come, first served by priority
        table = tables[provider]
        for node_id in node_ids:
            if node_id not in assigned and table.supports(view, view.node(node_id), node_id):
                assigned[node_id] = provider
    for node_id in node_ids:  # 3. functions onnxruntime inlines, then CPU fallback
        if node_id not in assigned:
            proto = view.node(node_id)
            body = function_body_ops(proto.domain, proto.op_type, view.opset(proto.domain))
            runs_body = [p for p in order if body and all(tables[p].by_op.get(key) for key in body)]
            if runs_body:
                assigned[node_id] = runs_body[0]
                continue
            assigned[node_id] = CPU
            if CPU in tables and tables[CPU].supports_in_float32(view, node_id):
                continue  # float16 the CPU runs in float32 (see float16.py)
            report.warnings.append(
                f"no provider has a kernel for node '{proto.name or proto.op_type}' "
                f"({proto.domain + '.' if proto.domain else ''}{proto.op_type}); "
                f"left on CPU"
            )
    for node_id, provider in assigned.items():
        proto = view.node(node_id)
        view.set_metadata(node_id, EXECUTION_PROVIDER_KEY, provider)
        if node_id in annotated or view.has_subgraphs(node_id):
            _clear_annotation(proto)
            view.metadata_changed(node_id)
    report.counts = dict(Counter(assigned[n] for n in node_ids))
    return report
