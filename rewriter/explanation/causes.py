"""The first thing that failed, as a ``Cause`` a user can act on: the matcher's deepest
failure or the engine's refusal, turned into one line that names the node and what it
was, with the details it saw and, for the usual mistakes, a hint."""

from __future__ import annotations

from ..dsl.unparse import show_equation
from ..expr.values import EvalFailure
from ..graph.view import GraphView, NodeId
from ..match.matcher import Failure, Match
from ..match.plan import CompiledRule, ConstantCheck, NeighborCheck
from ..rewrite.apply import Refused
from .describe import describe_value, node_label, node_name, op_name, value_source
from .model import Binding, Cause
from .wheres import check_details

# what usually helps, by cause
_HINTS = {
    "constant input": "a constant the pattern compares must be an initializer or a Constant node's output; "
    "make it one (or run constant folding on what computes it)",
    "read outside": "the rewrite would delete a value another node still reads; if the pattern should allow it, "
    "`keep` the node that produces it, or fuse into an op that also outputs it",
    "graph output": "the rewrite would delete a value that is a graph output",
    "placement": "fusions after partitioning take nodes of one provider the rule lists "
    "(see --providers, --layer-assignment and the rule's `providers`)",
    "kernel": "the replacement has no kernel on that provider for these types (a provider's .kernels file lists them)",
    "same name": "a name used twice in a pattern denotes one value; the model may order or group the "
    "expression differently (`x * (r * k)` is not `(x * r) * k`): write the pattern as the model computes it",
    "opset": "the replacement's op is not defined as built at the model's opset: guard the rule with "
    "`where opset() >= N`, or convert the model to a newer opset",
}


def equation_text(rule: CompiledRule, index: int) -> str:
    return show_equation(rule.rule.equations[index])


def bindings(
    view: GraphView,
    rule: CompiledRule,
    bound: dict[int, NodeId],
    failed: int | None = None,
    failed_node: NodeId | None = None,
) -> tuple[Binding, ...]:
    """Every equation in the order the matcher reaches them, with the node it bound to,
    the one it failed at, or none."""
    rows = []
    for step in rule.steps:
        eq = rule.rule.equations[step.equation]
        text = show_equation(eq)
        node = bound.get(step.equation)
        if node is not None and step.equation != failed:
            rows.append(Binding(text, eq.pos.line, "bound", node_name(view, node), op_name(view, node)))
        elif step.equation == failed:
            at = failed_node if failed_node is not None else node
            if at is None:
                rows.append(Binding(text, eq.pos.line, "failed"))
            else:
                rows.append(Binding(text, eq.pos.line, "failed", node_name(view, at), op_name(view, at)))
        else:
            rows.append(Binding(text, eq.pos.line, "not reached"))
    return tuple(rows)


def failure_cause(view: GraphView, rule: CompiledRule, failure: Failure, root: NodeId) -> tuple[Cause, int]:
    """The cause of a non-match, and the equation it failed at."""
    step = rule.steps[min(failure.depth, len(rule.steps) - 1)]
    equation = step.equation
    wanted = " or ".join(sorted({op for _, op in step.alternatives}))
    pattern = f"`{equation_text(rule, equation)}`"
    node = failure.node if failure.node is not None else root
    label = node_label(view, node)
    kind = failure.kind
    if kind == "root":
        return _root_cause(view, rule, failure, root), equation
    if kind == "op":
        link = f"'{failure.bindings.get(step.link or '', step.link)}'"
        if step.via == "output":
            message = f"{link} is computed by {label}, not by {wanted} as {pattern} wants"
        elif step.via == "input":
            message = f"{link} is read by {label}, not by {wanted} as {pattern} wants"
        else:
            message = f"{label} is not {wanted}"
        return Cause("op", message, node_name(view, node)), equation
    if kind == "link":
        value = failure.value or ""
        if step.via == "output":
            message = f"'{value}' is {value_source(view, value)}, not the output of {wanted} as {pattern} wants"
        else:
            message = f"nothing reads '{value}'; {pattern} wants a {wanted} reading it"
        owner = view.producer(value)
        return Cause("link", message, node_name(view, owner) if owner is not None else None), equation
    if kind == "input":
        return _input_cause(view, failure, node, pattern), equation
    if kind == "attribute":
        reason = failure.reason.removeprefix("attribute ")
        if ", wanted " in reason:  # (the matcher's words: "attribute axis=1, wanted -1")
            seen, wanted_value = reason.split(", wanted ", 1)
            message = f"attribute {seen} of {label}, the pattern wants {wanted_value} ({pattern})"
        else:
            message = f"{label}: {failure.reason} ({pattern})"
        return Cause("attribute", message, node_name(view, node)), equation
    if kind in ("where", "let"):
        text = failure.reason
        message = f"{text} at {label}"
        if failure.check is not None and kind == "where" and text.endswith(" does not hold"):
            message = f"{text[: -len(' does not hold')]} does not hold at {label}"
        details = check_details(view, rule, failure)
        return Cause(kind, message, node_name(view, node), details), equation
    return Cause(kind, f"{failure.reason} at {label}", node_name(view, node)), equation


def _input_cause(view: GraphView, failure: Failure, node: NodeId, pattern: str) -> Cause:
    label = node_label(view, node)
    value = failure.value
    inputs = view.inputs(node)
    if value is None:
        return Cause("input", f"{label}: {failure.reason} ({pattern})", node_name(view, node))
    slot = inputs.index(value) if value in inputs else None
    where = f"input {slot} of {label}" if slot is not None else f"an input of {label}"
    if " is not the constant " in failure.reason:
        literal = failure.reason.rsplit(" is not the constant ", 1)[1]
        message = f"{where} is '{value}', {value_source(view, value)}, not the constant {literal}"
        hint = _HINTS["constant input"] if _should_be_constant(view, value) else ""
        return Cause("input", message, node_name(view, node), (describe_value(view, value),), hint)
    bound = failure.bindings.get(failure.name) if failure.name else None
    if isinstance(bound, str) and bound:
        # a name the pattern uses twice: say what it already denotes, not only that it differs
        message = f"{where} is '{value}', but the pattern's `{failure.name}` is already '{bound}' ({pattern})"
        details = (describe_value(view, value), describe_value(view, bound))
        return Cause("input", message, node_name(view, node), details, _HINTS["same name"])
    message = f"{where} is '{value}': {failure.reason} ({pattern})"
    return Cause("input", message, node_name(view, node), (describe_value(view, value),))


def _root_cause(view: GraphView, rule: CompiledRule, failure: Failure, root: NodeId) -> Cause:
    """A neighbour the root must have (``CompiledRule.root_checks``), said of this root."""
    label = node_label(view, root)
    check = failure.root_check
    if isinstance(check, NeighborCheck) and check.kind == "producer":
        ops = " or ".join(sorted(op for _, op in check.ops))
        details = tuple(f"input {i}: {describe_value(view, v)}" for i, v in enumerate(view.inputs(root)))
        return Cause("root", f"no input of {label} is computed by {ops}", node_name(view, root), details)
    if isinstance(check, NeighborCheck):
        ops = " or ".join(sorted(op for _, op in check.ops))
        outputs = view.outputs(root)
        value = outputs[check.slot] if check.slot < len(outputs) else ""
        readers = sorted({c for c, _ in view.consumers(value)}, key=view.order_of) if value else []
        shown = ", ".join(node_label(view, r) for r in readers[:6]) or "nothing"
        return Cause(
            "root",
            f"output '{value}' of {label} is not read by {ops}",
            node_name(view, root),
            (f"'{value}' is read by {shown}",),
        )
    if isinstance(check, ConstantCheck):
        literals = " or ".join(f"{'~' if lit.approx else ''}{lit.value}" for lit in check.literals)
        details = tuple(f"input {i}: {describe_value(view, v)}" for i, v in enumerate(view.inputs(root)))
        hint = _HINTS["constant input"] if any(_should_be_constant(view, v) for v in view.inputs(root)) else ""
        return Cause("root", f"no input of {label} is the constant {literals}", node_name(view, root), details, hint)
    return Cause("root", f"{label}: {failure.reason}", node_name(view, root))


def _should_be_constant(view: GraphView, value: str) -> bool:
    """A value that is not a constant but looks meant to be one: a graph input, or computed
    from constants alone (a chain constant folding did not fold)."""
    if not value or view.is_constant(value):
        return False
    if view.is_graph_input(value):
        return True
    producer = view.producer(value)
    return producer is not None and all(view.is_constant(i) for i in view.inputs(producer) if i)


def refusal_cause(view: GraphView, match: Match, refusal: Refused | EvalFailure) -> Cause:
    """Why the engine refused a complete match (the attempt's head names the root)."""
    if isinstance(refusal, EvalFailure):
        return Cause("expression", f"the replacement cannot be computed: {refusal}", node_name(view, match.root))
    node = refusal.node if refusal.node is not None and view.has_node(refusal.node) else match.root
    details: tuple[str, ...] = ()
    if refusal.value and view.has_value(refusal.value):
        details = (describe_value(view, refusal.value),)
    if refusal.kind == "read outside":
        message = f"{node_label(view, node)} reads '{refusal.value}', which the rewrite would delete"
    elif refusal.kind == "opset":
        message = f"the replacement is invalid at the model's opset: {refusal}"
    else:
        message = str(refusal)
        if node != match.root and f"'{node_name(view, node)}'" not in message:
            message += f" (at {node_label(view, node)})"
    return Cause(refusal.kind, message, node_name(view, node), details, _HINTS.get(refusal.kind, ""))
