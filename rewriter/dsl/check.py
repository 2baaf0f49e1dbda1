"""Static checks of parsed rules: the errors a rule author should see before any model runs.

Undefined names, a root outside the pattern, unknown ops (against ONNX's and onnxruntime's
schemas, or a domain the pack declares custom), wrong arity, unknown attributes, unknown
functions, a disconnected pattern.  Every problem is a ``RuleError`` with its position.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

import networkx as nx
from onnx import AttributeProto

from ..errors import Position, RuleError, expect
from ..expr.dtypes import DTYPES
from ..expr.functions import CONSTANTS, FUNCTIONS
from ..onnx_facts.schemas import OpInfo, known_domains, normalize_domain, onnx_op_names, op_signature
from . import ast as A
from .shape_examples import mentions_shape, shape_example
from .static_values import Static, matmul_problem, static_of
from .unparse import show
from .wellformed import BUILTIN_PASSES  # (`builtin NAME`; ``passes.BUILTINS`` implements exactly these)

# how an error names an attribute's type
_ATTRIBUTE_KINDS = {
    AttributeProto.INT: "an int",
    AttributeProto.STRING: "a string",
    AttributeProto.INTS: "a list of ints",
    AttributeProto.FLOATS: "a list of floats",
    AttributeProto.STRINGS: "a list of strings",
    AttributeProto.TENSOR: "a tensor",
    AttributeProto.GRAPH: "a graph",
}


@dataclass
class _Scope:
    tensors: set[str] = field(default_factory=set)  # values of the graph
    produced: set[str] = field(default_factory=set)  # outputs of pattern nodes
    scalars: set[str] = field(default_factory=set)  # attribute captures and lets


class _Checker:
    def __init__(self, pack: A.Pack) -> None:
        self.pack = pack
        self.errors: list[RuleError] = []
        self.custom_domains = set(pack.domains)
        self.lets: dict[str, Static] = {}  # what the text says of the current rule's lets

    def error(self, message: str, pos: Position) -> None:
        self.errors.append(RuleError(message, self.pack.file, pos.line, pos.column))

    # ------------------------------------------------------------------ ops
    def op_info(self, domain: str, op: str, pos: Position) -> OpInfo | None:
        domain = normalize_domain(domain)
        info = op_signature(domain, op)
        if info is not None:
            return info
        if domain in self.custom_domains:
            return None
        if domain and domain not in known_domains():
            self.error(f"unknown domain '{domain}' (declare it with `domain {domain}` to use custom ops)", pos)
            return None
        hint = ""
        close = difflib.get_close_matches(op, onnx_op_names(domain), n=1)
        if close:
            hint = f"; did you mean {close[0]}?"
        qualified = f"{domain}.{op}" if domain else op
        self.error(f"unknown op '{qualified}'{hint}", pos)
        return None

    def check_arity(
        self,
        info: OpInfo | None,
        n_inputs: int,
        n_outputs: int,
        variadic: bool,
        op: str,
        pos: Position,
        required_inputs: int | None = None,
    ) -> None:
        if info is None:
            return
        if n_inputs > info.max_inputs and not variadic:
            self.error(f"{op} takes at most {info.max_inputs} inputs, got {n_inputs}", pos)
        if required_inputs is not None and required_inputs < info.min_inputs and not variadic:
            self.error(f"{op} needs at least {info.min_inputs} inputs, got {required_inputs}", pos)
        if n_outputs > info.max_outputs:
            self.error(f"{op} has at most {info.max_outputs} outputs, got {n_outputs}", pos)

    def check_once(self, names: list[str], positions: list[Position], op: str) -> None:
        """An attribute named twice on one node (the last would silently win)."""
        seen: set[str] = set()
        for name, pos in zip(names, positions):
            if name in seen:
                self.error(f"attribute '{name}' of {op} is given twice", pos)
            seen.add(name)

    def check_attr_name(self, info: OpInfo | None, name: str, op: str, pos: Position) -> None:
        if info is not None and name not in info.attributes:
            close = difflib.get_close_matches(name, list(info.attributes), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            self.error(f"{op} has no attribute '{name}'{hint}", pos)

    def check_approx_attribute(self, info: OpInfo | None, attr: A.AttrPattern, op: str) -> None:
        """``{name: ~0.01}`` compares a float within tolerance: an attribute the schema
        types otherwise (an int, a string, a list) is an error (an op without a known
        schema matches only float values)."""
        kind = None if info is None else info.attributes.get(attr.name, (None,))[0]
        if kind is not None and kind != AttributeProto.FLOAT:
            what = _ATTRIBUTE_KINDS.get(kind, "not a float")
            self.error(
                f"attribute '{attr.name}' of {op} is {what}: ~ (within tolerance) compares a float only; "
                f"write the value itself",
                attr.value.pos if attr.value is not None else attr.pos,
            )

    # ---------------------------------------------------------- expressions
    def check_expr(self, expr: A.Expr, scope: _Scope, allow_ops: bool = False) -> None:
        if isinstance(expr, A.Name):
            if (
                expr.id not in scope.tensors
                and expr.id not in scope.scalars
                and expr.id not in DTYPES
                and expr.id not in CONSTANTS
            ):
                self.error(f"undefined name '{expr.id}'", expr.pos)
        elif isinstance(expr, A.AttrRef):
            if expr.var not in scope.produced:
                self.error(f"'{expr.var}.{expr.attr}': '{expr.var}' is not the output of a pattern node", expr.pos)
        elif isinstance(expr, A.Call):
            if expr.is_op:
                if not allow_ops:
                    self.error(f"op {expr.func}() can only appear in a replacement", expr.pos)
                return  # checked by check_replacement_call
            fn = FUNCTIONS.get(expr.func)
            if fn is None:
                close = difflib.get_close_matches(expr.func, list(FUNCTIONS), n=1)
                hint = f"; did you mean {close[0]}?" if close else ""
                self.error(f"unknown function '{expr.func}'{hint}", expr.pos)
            else:
                n = len(expr.args)
                if n < fn.min_args or (fn.max_args is not None and n > fn.max_args):
                    want = (
                        f"{fn.min_args}"
                        if fn.min_args == fn.max_args
                        else f"{fn.min_args}+"
                        if fn.max_args is None
                        else f"{fn.min_args}-{fn.max_args}"
                    )
                    self.error(f"{expr.func}() takes {want} arguments, got {n}", expr.pos)
            if expr.attrs is not None:
                self.error(f"function {expr.func}() takes no attribute block", expr.pos)
            for arg in expr.args:
                self.check_expr(arg, scope)
        else:
            if isinstance(expr, A.Binary) and expr.op == "@":
                problem = matmul_problem(expr, self.lets)
                if problem is not None:
                    message, at = problem
                    self.error(f"'{show(expr)}': {message}", at.pos)
            for child in A.operands(expr):
                self.check_expr(child, scope, allow_ops)

    # --------------------------------------------------------------- a rule
    def check_rule(self, rule: A.Rule) -> None:
        scope = _Scope()
        self.lets = {}
        pattern_graph = nx.Graph()
        for eq in rule.equations:
            node_id = ("node", id(eq))
            pattern_graph.add_node(node_id)
            for out in eq.out_names:
                if out in scope.produced:
                    self.error(f"'{out}' is defined twice in the pattern", eq.pos)
                scope.produced.add(out)
                scope.tensors.add(out)
                pattern_graph.add_edge(node_id, ("value", out))
            for alt in eq.alternatives:
                info = self.op_info(alt.domain, alt.op, alt.pos)
                variadic = any(isinstance(a, A.RestArg) for a in alt.args)
                fixed = [a for a in alt.args if not isinstance(a, A.RestArg)]
                # an optional input before a required one still holds its position
                # (GroupQueryAttention's past_key? before seqlens_k): count positions up to
                # the last required input
                required = max(
                    (i + 1 for i, a in enumerate(fixed) if not (isinstance(a, A.VarArg) and a.optional)), default=0
                )
                self.check_arity(info, len(fixed), len(eq.outs), variadic, alt.op, alt.pos)
                if info is not None and required < info.min_inputs and not variadic:
                    self.error(f"{alt.op} needs at least {info.min_inputs} inputs, got {required}", alt.pos)
                for i, arg in enumerate(alt.args):
                    if isinstance(arg, A.RestArg) and i != len(alt.args) - 1:
                        self.error("*rest must be the last input", arg.pos)
                    name = getattr(arg, "name", None) or getattr(arg, "bind", None)
                    if name:
                        scope.tensors.add(name)
                        pattern_graph.add_edge(node_id, ("value", name))
                    if isinstance(arg, A.LiteralArg) and arg.literal.approx and isinstance(arg.literal.value, bool):
                        self.error("~ needs a number", arg.pos)
        # attribute captures come after all tensor names are known (unification)
        for eq in rule.equations:
            for alt in eq.alternatives:
                info = op_signature(alt.domain, alt.op)
                self.check_once([attr.name for attr in alt.attrs], [attr.pos for attr in alt.attrs], alt.op)
                for attr in alt.attrs:
                    self.check_attr_name(info, attr.name, alt.op, attr.pos)
                    if isinstance(attr.value, A.Name) and attr.value.id in CONSTANTS:
                        self.error(
                            f"attribute '{attr.name}': '{attr.value.id}' names a constant, so this would "
                            f"compare, not capture (capture it under another name, or write the number)",
                            attr.value.pos,
                        )
                    if (
                        isinstance(attr.value, A.Name)
                        and attr.value.id not in scope.tensors
                        and attr.value.id not in DTYPES
                    ):
                        scope.scalars.add(attr.value.id)
        for eq in rule.equations:
            for alt in eq.alternatives:
                info = op_signature(alt.domain, alt.op)
                for attr in alt.attrs:
                    if isinstance(attr.value, A.Literal):
                        self.check_approx_attribute(info, attr, alt.op)
                    elif attr.value is not None and not isinstance(attr.value, A.Name):
                        self.check_expr(attr.value, scope)
        if rule.root not in scope.produced:
            self.error(f"root '{rule.root}' is not the output of a pattern node", rule.pos)
        elif any(eq.keep and rule.root in eq.out_names for eq in rule.equations):
            self.error(f"root '{rule.root}' is a kept node; the root is rewritten", rule.pos)
        if pattern_graph.number_of_nodes() and not nx.is_connected(pattern_graph):
            self.error("the pattern is not connected: every node must share a value with another", rule.pos)
        for let in rule.lets:
            if let.name in scope.tensors or let.name in scope.scalars:
                self.error(f"'{let.name}' is already bound", let.pos)
        for let in rule.lets:
            self.check_expr(let.expr, scope)
            scope.scalars.add(let.name)
            self.lets[let.name] = static_of(let.expr, self.lets)
        for where in rule.wheres:
            self.check_expr(where.expr, scope)
        for example in (item for group in rule.examples for item in group.items):
            if example.name is not None and example.name not in scope.tensors | scope.scalars:
                self.error(f"example for '{example.name}', which the pattern does not bind", example.pos)
            if example.dtype is not None and example.dtype not in DTYPES:
                self.error(f"unknown element type '{example.dtype}'", example.pos)
            if mentions_shape(example.value):
                # `s = shape(x)` (or pieces of it): s is drawn from Shape(x), x with symbolic dims
                found = shape_example(example.value)
                if found is None or found.tensor not in scope.tensors:
                    self.error(
                        "an example shape(...) takes one tensor of the pattern, whole or as "
                        "concat([shape(x)[i:j], [numbers], ...])",
                        example.pos,
                    )
            elif example.value is not None:
                self.check_expr(example.value, _Scope())
        self.check_replacement(rule, scope)
        self.check_attributes_accounted(rule, scope)

    def check_attributes_accounted(self, rule: A.Rule, scope: _Scope) -> None:
        """A captured attribute of a node the rewrite deletes must be read somewhere (a
        where, a let, the replacement), or the node's attributes copied (``{...c}``):
        otherwise the rule accepts any value and the rewrite drops it.  (Attributes a
        pattern does not mention are the engine's: they must be at their defaults.)"""
        used: set[str] = set()
        for clause in rule.wheres:
            used |= A.names_read(clause.expr)
        for let in rule.lets:
            used |= A.names_read(let.expr)
        for replacement in rule.replacement:
            used |= A.names_read(replacement.value)
        for eq in rule.equations:
            for alt in eq.alternatives:
                for attr in alt.attrs:
                    if attr.expr is not None and not isinstance(attr.expr, A.Name):
                        used |= A.names_read(attr.expr)
        spread = A.spread_names(rule)
        survivors = _surviving_equations(rule)
        for index, eq in enumerate(rule.equations):
            if index in survivors or any(name in spread for name in eq.out_names):
                continue  # never deleted, or every attribute copied: nothing is dropped
            for alt in eq.alternatives:
                for attr in alt.attrs:
                    value = attr.value
                    if isinstance(value, A.Name) and value.id in scope.scalars and value.id not in used:
                        self.error(
                            f"attribute '{attr.name}' of {alt.op} is captured as '{value.id}' but "
                            f"never used: the rewrite would drop it (use it, require a value "
                            f"with {{{attr.name}: VALUE}}, or write {{{attr.name}: _}} if any "
                            f"value is fine)",
                            attr.pos,
                        )

    def check_replacement(self, rule: A.Rule, scope: _Scope) -> None:
        defined: set[str] = set()
        kept_outputs = {name for eq in rule.equations if eq.keep for name in eq.out_names}
        replaced = {o.name for eq in rule.replacement for o in eq.outs if o.name}
        visible = _Scope(set(scope.tensors) - replaced, scope.produced, set(scope.scalars))
        for eq in rule.replacement:
            value = eq.value
            if len(eq.outs) > 1 and not (isinstance(value, A.Call) and value.is_op):
                self.error("several outputs need an op call on the right", eq.pos)
            if isinstance(value, A.Call) and value.is_op:
                self.check_replacement_call(value, visible, len(eq.outs), scope)
            else:
                self.check_expr(value, visible)
            for out in eq.outs:
                if out.name is None:
                    continue
                if out.name in defined:
                    self.error(f"'{out.name}' is defined twice in the replacement", out.pos)
                if out.name in scope.tensors and out.name not in scope.produced:
                    self.error(f"'{out.name}' is an input of the pattern and cannot be replaced", out.pos)
                if out.name in scope.scalars:
                    self.error(f"'{out.name}' is not a tensor of the pattern", out.pos)
                if out.name in kept_outputs:
                    self.error(f"'{out.name}' comes from a kept node and cannot be replaced", out.pos)
                defined.add(out.name)
                visible.tensors.add(out.name)

    def check_replacement_call(self, call: A.Call, scope: _Scope, n_outputs: int, pattern_scope: _Scope) -> None:
        """Inputs see ``scope`` (replaced values are gone); attribute expressions may also
        read the matched values (``op(y)``, ``y.alpha``), so they see ``pattern_scope``."""
        domain, op = A.split_op_name(call.func)
        info = self.op_info(domain, op, call.pos)
        self.check_arity(info, len(call.args), n_outputs, False, op, call.pos, required_inputs=len(call.args))
        attr_scope = _Scope(scope.tensors | pattern_scope.tensors, scope.produced, scope.scalars)
        named = [a for a in call.attrs or () if isinstance(a, A.AttrSet)]
        self.check_once([a.name for a in named], [a.pos for a in named], op)
        for attr in call.attrs or ():
            if isinstance(attr, A.AttrSpread):
                if attr.var not in scope.produced:
                    self.error(f"...{attr.var}: '{attr.var}' is not the output of a pattern node", attr.pos)
            else:
                self.check_attr_name(info, attr.name, op, attr.pos)
                self.check_expr(attr.value, attr_scope)
        for arg in call.args:
            if isinstance(arg, A.Call) and arg.is_op:
                self.check_replacement_call(arg, scope, 1, pattern_scope)
            else:
                self.check_expr(arg, scope)

    def check_pack(self) -> tuple[list[RuleError], dict[str, list[RuleError]]]:
        """(errors of the pack as a whole, errors of each rule by rule name)."""
        seen: dict[str, A.Rule] = {}
        for builtin in self.pack.builtins:
            if builtin not in BUILTIN_PASSES:
                self.error(f"unknown builtin '{builtin}' (known: {', '.join(sorted(BUILTIN_PASSES))})", self.pack.pos)
        if not 0 <= self.pack.level <= 4:
            self.error(
                f"level {self.pack.level} is not one of 0 (required), 1 (basic), 2 (extended), 3 (layout), 4",
                self.pack.pos,
            )
        by_rule: dict[str, list[RuleError]] = {}
        for rule in self.pack.rules:
            if rule.name in seen:
                self.error(f"rule '{rule.name}' is defined twice", rule.pos)
            seen[rule.name] = rule
            start = len(self.errors)
            self.check_rule(rule)
            if len(self.errors) > start:
                found = self.errors[start:]
                if rule.family:  # the text is the family's: name the instance that fails
                    found = [
                        RuleError(f"{e.message} (in {rule.name} = {rule.family})", e.file, e.line, e.column, e.snippet)
                        for e in found
                    ]
                by_rule.setdefault(rule.name, []).extend(found)
                del self.errors[start:]
        return self.errors, by_rule


def _surviving_equations(rule: A.Rule) -> set[int]:
    """Pattern nodes a rewrite never deletes: kept ones, those whose outputs the
    replacement reads, and (transitively) the pattern nodes those read from."""
    produced_by = {name: i for i, eq in enumerate(rule.equations) for name in eq.out_names}
    replaced = {o.name for eq in rule.replacement for o in eq.outs if o.name}
    read: set[str] = set()
    for eq in rule.replacement:
        if not (isinstance(eq.value, A.Call) and eq.value.is_op) and not isinstance(eq.value, A.Name):
            continue  # a computed constant reads values, not nodes
        read |= _values_read(eq.value)
    stack = [produced_by[name] for name in read - replaced if name in produced_by]
    stack += [i for i, eq in enumerate(rule.equations) if eq.keep]
    survivors: set[int] = set()
    while stack:
        index = stack.pop()
        if index in survivors:
            continue
        survivors.add(index)
        for alt in rule.equations[index].alternatives:
            for arg in alt.args:
                name = getattr(arg, "name", None)
                if name in produced_by:
                    stack.append(produced_by[name])
    return survivors


def _values_read(expr: A.Expr) -> set[str]:
    """The graph values a replacement expression takes as node inputs or aliases (names
    inside functions compute constants from them; attributes read no value)."""
    if isinstance(expr, A.Name):
        return {expr.id}
    if isinstance(expr, A.Call) and expr.is_op:
        found: set[str] = set()
        for arg in expr.args:
            found |= _values_read(arg)
        return found
    return set()


def check_pack(pack: A.Pack) -> list[RuleError]:
    """Every static problem of a pack, in source order (empty when it is fine)."""
    expect(pack, A.Pack, "check_pack()'s pack")
    checker = _Checker(pack)
    pack_errors, by_rule = checker.check_pack()
    families = {r.name: r.family for r in pack.rules}
    errors = pack_errors + _one_per_family_place(by_rule, families)
    return sorted(errors, key=lambda e: (e.line, e.column))


def _one_per_family_place(by_rule: dict[str, list[RuleError]], families: dict[str, str]) -> list[RuleError]:
    """A mistake in a family's text fails every instance at the same place: report it once,
    naming the first instance and how many more (500 instances made 500 lines)."""
    first: dict[tuple, RuleError] = {}
    more: dict[tuple, int] = {}
    plain: list[RuleError] = []
    for name, found in by_rule.items():
        suffix = f" (in {name} = {families.get(name)})"
        for error in found:
            if not families.get(name) or not error.message.endswith(suffix):
                plain.append(error)
                continue
            key = (error.file, error.line, error.column, error.message[: -len(suffix)])
            if key in first:
                more[key] = more.get(key, 0) + 1
            else:
                first[key] = error
    for key, count in more.items():
        error = first[key]
        message = f"{error.message[:-1]}; and {count} more instance{'s' * (count != 1)})"
        first[key] = RuleError(message, error.file, error.line, error.column, error.snippet)
    return plain + list(first.values())


def check_rules(pack: A.Pack) -> tuple[list[RuleError], dict[str, list[RuleError]]]:
    """The static problems of a pack: (the pack's own, each rule's by name), in source order.
    ``rewriter verify`` reports a rule with problems as failed and verifies the others."""
    pack_errors, by_rule = _Checker(pack).check_pack()
    order = lambda e: (e.line, e.column)
    return sorted(pack_errors, key=order), {name: sorted(found, key=order) for name, found in by_rule.items()}
