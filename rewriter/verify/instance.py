"""Draw a standalone model that instantiates a rule's pattern (with hypothesis).

Free variables become graph inputs (or initializers: always when the rule requires them
constant, sometimes otherwise), literals become one-element constants (within tolerance for
``~``), attributes are drawn where the pattern captures them, shapes follow the rule's
``example`` hints, then op knowledge (``inputs.py``), then the instance's main shape.
Near misses are drawn too: an intermediate that is a graph output or has an extra consumer,
a required constant that is an input, a literal outside its tolerance.  Every draw is
validated by onnx's checker (with shape inference); an invalid draw raises ``Reject``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import TensorProto, TypeProto, helper, numpy_helper, shape_inference

from ..dsl import ast as A
from ..dsl.schemas import find_schema, normalize_domain
from ..expr.dtypes import DTYPES
from .inputs import NodeContext, Spec, attribute_candidates, input_spec
from .variety import (FLOATS, element_types, mask_inputs, own_float_types, rank_hints, special_values,
                      unmentioned_attribute_values)

DEFAULT_OPSET = 17
NEAR_MISSES = ("intermediate-output", "extra-consumer", "input-not-constant", "literal-off", "shape-off")


class Reject(Exception):
    """This draw does not make a valid model; the campaign discards it."""


@dataclass
class Instance:
    model: onnx.ModelProto
    near_miss: str | None
    draws: list[str] = field(default_factory=list)   # what was drawn, for the report
    # integer graph inputs and the [low, high) their run-time values come from
    input_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)


def _where_calls(rule: A.Rule) -> list[A.Call]:
    """Every function call in the rule's ``where`` clauses."""
    calls: list[A.Call] = []

    def walk(e) -> None:
        if isinstance(e, A.Call):
            calls.append(e)
            for a in e.args:
                walk(a)
        for child in ("left", "right", "operand"):
            if hasattr(e, child):
                walk(getattr(e, child))
        for child in ("values", "operands", "items"):
            for c in getattr(e, child, ()) or ():
                walk(c)

    for where in rule.wheres:
        walk(where.expr)
    return calls


def const_required(rule: A.Rule) -> set[str]:
    """Variables a ``where`` requires constant (``const(x, ...)``, not under a ``not``)."""
    found: set[str] = set()
    stack = [(w.expr, False) for w in rule.wheres]
    while stack:
        expr, negated = stack.pop()
        if isinstance(expr, A.Unary) and expr.op == "not":
            stack.append((expr.operand, not negated))
        elif isinstance(expr, A.BoolOp):
            stack.extend((v, negated) for v in expr.values)
        elif isinstance(expr, A.Call) and expr.func == "const" and not negated:
            found.update(a.id for a in expr.args if isinstance(a, A.Name))
    return found


def _looks_at_consumers(rule: A.Rule) -> bool:
    return bool(_consumer_checked(rule))


def _consumer_checked(rule: A.Rule) -> set[str]:
    """Variables whose consumers a ``where`` looks at: near misses expose or share these
    first (a rule for a shared value applies only to such draws)."""
    return {a.id for call in _where_calls(rule) if call.func in ("single_use", "consumers", "is_output")
            for a in call.args if isinstance(a, A.Name)}


def _order(rule: A.Rule) -> list[int]:
    produced = {name: i for i, eq in enumerate(rule.equations) for name in eq.out_names}
    order: list[int] = []
    state: dict[int, int] = {}

    def visit(i: int) -> None:
        if state.get(i) == 2:
            return
        if state.get(i) == 1:
            raise Reject("cyclic pattern")
        state[i] = 1
        for alt in rule.equations[i].alternatives:
            for arg in alt.args:
                name = getattr(arg, "name", None)
                if name in produced:
                    visit(produced[name])
        state[i] = 2
        order.append(i)

    for i in range(len(rule.equations)):
        visit(i)
    return order


def _const_value(expr: A.Expr) -> object:
    from ..expr.evaluate import evaluate

    class _Empty:
        graph = None

        def lookup(self, name):
            raise KeyError(name)

        def node_attribute(self, var, attr):
            raise KeyError(var)

    return evaluate(expr, _Empty())


class _Builder:
    def __init__(self, data, rule: A.Rule) -> None:
        self.draw = data.draw
        self.rule = rule
        self.nodes: list[onnx.NodeProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.inits: list[TensorProto] = []
        self.types: dict[str, TypeProto] = {}
        self.values: dict[str, str] = {}          # pattern name -> graph value
        self.captures: dict[str, object] = {}
        self.domains: set[str] = set()
        self.draws: list[str] = []
        self.counter = 0
        self.used: set[str] = set()
        self.pattern_outputs: set[str] = set()   # values the pattern's own nodes produce
        self.ignored: set[str] = set()           # outputs a pattern skips with `_`
        self.const_names = const_required(rule)
        self.seed = self.draw(st.integers(0, 2**16), label="values seed")
        self.rng = np.random.default_rng(self.seed)
        # about one draw in four is a near miss; for rules that look at consumers, more
        kinds = [None] * (6 if _looks_at_consumers(rule) else 12) + list(NEAR_MISSES)
        self.near_miss = self.draw(st.sampled_from(kinds), label="near miss")
        examples = list(rule.examples)
        self.example = self.draw(st.sampled_from([*examples, None]), label="example") if examples else None
        self.symbols: dict[str, int] = {}
        self.hints: dict[str, A.Example] = {}
        if self.example is not None:
            self.hints = {item.name: item for item in self.example.items if item.name}
        self.opset = (self.example.opset if self.example is not None and self.example.opset else DEFAULT_OPSET)
        self.wrap_inputs = self.draw(st.booleans(), label="prologue")
        self.wrap_outputs = self.draw(st.booleans(), label="epilogue")
        rank = self.draw(st.sampled_from([1, 2, 3, 4, 0, 5]), label="main rank")  # rank 0 and 5 too
        self.main_shape = [self.draw(st.integers(1, 4), label="dim") for _ in range(rank)]
        # any element type every op of the pattern takes (onnxruntime refusing a draw, a
        # type without a kernel, just discards it)
        self.dtype = self.draw(st.sampled_from(element_types(rule, self.opset)), label="element type")
        self.masks = mask_inputs(rule, self.const_names)
        self.ranks = rank_hints(rule)
        self.rank_decided: dict[str, int | None] = {}
        self.input_ranges: dict[str, tuple[int, int]] = {}

    # ------------------------------------------------------------------- values
    def fresh(self, base: str) -> str:
        """A graph name for a pattern name (temporaries ``$1`` become ``t1``), unique."""
        name = "t" + base[1:] if base.startswith("$") else base
        while name in self.used:
            self.counter += 1
            name = f"{base.lstrip('$')}_{self.counter}"
        self.used.add(name)
        return name

    def _dims(self, dims) -> list[int]:
        out = []
        for d in dims:
            if isinstance(d, int):
                out.append(d)
            else:
                if d not in self.symbols:
                    # small, or now and then a multiple of a vector width (channel blocks)
                    small = st.integers(1, 4)
                    self.symbols[d] = self.draw(st.one_of(small, small, small, st.sampled_from([8, 16, 24, 32])),
                                                label=f"dim {d}")
                out.append(self.symbols[d])
        return out

    def _random(self, dtype: int, shape: list[int]) -> np.ndarray:
        np_dtype = helper.tensor_dtype_to_np_dtype(dtype)
        if np.issubdtype(np_dtype, np.floating):
            scale = self.draw(st.sampled_from([1.0, 0.5, 3.0]), label="value scale")
            return (self.rng.standard_normal(shape) * scale).astype(np_dtype)
        if np_dtype == np.bool_:
            return self.rng.integers(0, 2, shape).astype(bool)
        return self.rng.integers(0, 4, shape).astype(np_dtype)

    def _maybe_special(self, name: str | None, array: np.ndarray) -> np.ndarray:
        """A mask-like constant now and then holds infinities, NaN or extreme values (some
        of its elements, or all of them)."""
        if name not in self.masks or array.dtype.kind != "f" or not self.draw(st.integers(0, 3), label="special") == 0:
            return array
        dtype = helper.np_dtype_to_tensor_dtype(array.dtype)
        value = self.draw(st.sampled_from(special_values(dtype)), label="special value")
        array = np.array(array, copy=True)
        if array.size <= 1 or self.draw(st.booleans(), label="special everywhere"):
            array[...] = value
        else:
            array[self.rng.integers(0, 2, array.shape).astype(bool)] = value
        self.draws.append(f"{name}: holds {value}")
        return array

    def add_value(self, name: str, spec: Spec, constant: bool) -> str:
        value_name = self.fresh(name)
        if constant:
            array = spec.value if spec.value is not None else \
                self._maybe_special(name, self._random(spec.dtype, spec.shape))
            self.inits.append(numpy_helper.from_array(np.asarray(array), value_name))
            self.types[value_name] = helper.make_tensor_type_proto(
                helper.np_dtype_to_tensor_dtype(np.asarray(array).dtype), list(np.asarray(array).shape))
            self.draws.append(f"{value_name} = constant {np.asarray(array).dtype}{list(np.asarray(array).shape)}")
        else:
            graph_input = value_name
            if self.wrap_inputs:  # a prologue: the value is computed, not a graph input
                graph_input = self.fresh(f"{value_name}_in")
            declared = spec.shape if spec.dim_names is None else \
                [n if isinstance(n, str) else d for n, d in zip(spec.dim_names, spec.shape)]
            vi = helper.make_tensor_value_info(graph_input, spec.dtype, declared)
            self.inputs.append(vi)
            self.types[graph_input] = vi.type
            self.draws.append(f"{graph_input}: input {helper.tensor_dtype_to_string(spec.dtype)}{spec.shape}")
            if self.wrap_inputs:
                self.nodes.append(helper.make_node("Identity", [graph_input], [value_name],
                                                   name=f"prologue{len(self.nodes)}"))
                self.types[value_name] = vi.type
                self.draws.append(f"{value_name} = Identity({graph_input})")
        return value_name

    def free_input(self, name: str | None, ctx: NodeContext, slot: int) -> str:
        hint = self.hints.get(name) if name else None
        shape_of = self._shape_hint(hint)
        if shape_of is not None:  # `example s = shape(x)`: computed at run time from x
            value = self.fresh(name)
            node = helper.make_node("Shape", [shape_of], [value], name=f"n{len(self.nodes)}")
            self.nodes.append(node)
            self.infer(node)
            self.draws.append(f"{value} = Shape({shape_of})")
            return value
        if hint is not None and hint.value is not None:
            value = np.asarray(_const_value(hint.value))
            if value.dtype == np.float64:
                partner = ctx.type(0) if slot > 0 else None
                value = value.astype(helper.tensor_dtype_to_np_dtype(partner if partner in FLOATS else
                                                                      ctx.dtype if ctx.dtype in FLOATS else
                                                                      TensorProto.FLOAT))
            elif value.dtype.kind in "iu":
                value = value.astype(np.int64)
            return self.add_value(name, Spec(0, list(value.shape), self._maybe_special(name, value)), True)
        if hint is not None and hint.dims is not None:
            dtype = DTYPES[hint.dtype] if hint.dtype else ctx.dtype
            dims = self._dims(hint.dims)
            if self.near_miss == "shape-off" and len(dims) > 1:  # the hint's dims, moved around
                dims = list(self.draw(st.permutations(dims), label="shape off"))
            spec = Spec(dtype, dims, dim_names=list(hint.dims) if name in self._dynamic_inputs() else None)
        else:
            spec = input_spec(self.draw, ctx, slot)
            wanted = self.hinted_rank(name)
            if wanted is not None and len(spec.shape) != wanted and spec.value is None and not spec.const:
                dims = list(spec.shape)[-wanted:] if wanted else []
                dims = [self.draw(st.integers(1, 4), label="dim") for _ in range(wanted - len(dims))] + dims
                spec = Spec(spec.dtype, dims, None, spec.const, None)
        own = own_float_types(ctx.info, slot, spec.dtype) if spec.value is None else []
        if own and self.draw(st.integers(0, 2), label="own precision") == 0:
            spec = Spec(self.draw(st.sampled_from(own), label="mixed precision"), spec.shape,
                        None, spec.const, spec.dim_names)
        if spec.const or (spec.value is not None):
            constant = True
        elif name in self.const_names:
            constant = self.near_miss != "input-not-constant" or not self.draw(st.booleans(), label="drop const")
        else:
            constant = self.draw(st.sampled_from([False, False, False, True]), label="as initializer")
        value = self.add_value(name or "any", spec, constant)
        if not constant and ctx.op == "Gather" and slot == 1 and ctx.shape(0):
            axis = int(ctx.attrs.get("axis", 0) or 0)
            size = ctx.shape(0)[axis] if -len(ctx.shape(0)) <= axis < len(ctx.shape(0)) else 1
            self.input_ranges[self._graph_input(value)] = (-size, size)  # Gather reads negatives from the end
        return value

    def hinted_rank(self, name: str | None) -> int | None:
        """The rank a ``where`` asks of ``name`` (see variety.rank_hints), decided once per
        name: kept three draws in four (the fourth tries the rule with another rank)."""
        if name is None or name not in self.ranks:
            return None
        if name not in self.rank_decided:
            keep = self.draw(st.integers(0, 3), label=f"rank hint {name}") > 0
            self.rank_decided[name] = self.ranks[name] if keep else None
        return self.rank_decided[name]

    def _graph_input(self, value: str) -> str:
        """The graph input behind ``value`` (itself, or what its prologue Identity reads)."""
        for node in self.nodes:
            if node.op_type == "Identity" and node.output[0] == value and node.name.startswith("prologue"):
                return node.input[0]
        return value

    def _shape_hint(self, hint) -> str | None:
        """The graph value a hint ``s = shape(x)`` reads, once x is drawn."""
        if hint is None or not isinstance(hint.value, A.Call) or hint.value.func != "shape":
            return None
        args = hint.value.args
        if len(args) != 1 or not isinstance(args[0], A.Name):
            return None
        return self.values.get(args[0].id)

    def _dynamic_inputs(self) -> set[str]:
        """Inputs an example reads the shape of: declared with their symbolic dims, so
        the shape stays unknown until run time (dynamic axes)."""
        return {h.value.args[0].id for h in self.hints.values()
                if isinstance(h.value, A.Call) and h.value.func == "shape" and h.value.args
                and isinstance(h.value.args[0], A.Name)}

    def literal(self, lit: A.Literal, ctx: NodeContext, bind: str | None) -> str:
        value = float(lit.value) if not isinstance(lit.value, bool) else lit.value
        if lit.approx:
            value *= 1 + self.draw(st.sampled_from([0.0, 1e-7, -1e-6, 3e-5]), label="approx offset")
        if self.near_miss == "literal-off" and self.draw(st.booleans(), label="move literal"):
            value = value + 0.25 if not isinstance(value, bool) else not value
        # typed like a numeric partner (Where's bool condition is not one)
        partner = next((k for k in ctx.known if k is not None and k[0] != TensorProto.BOOL), None)
        dtype = TensorProto.BOOL if isinstance(value, bool) else (partner[0] if partner else ctx.dtype)
        shape = self.draw(st.sampled_from([[], [1]]), label="literal shape")
        array = np.full(shape, value, dtype=helper.tensor_dtype_to_np_dtype(dtype))
        return self.add_value(bind or "lit", Spec(dtype, shape, array), True)

    # ---------------------------------------------------------------- attributes
    def attributes(self, alt: A.OpPattern, ctx: NodeContext, rank: int) -> dict:
        info = find_schema(alt.domain, alt.op, self.opset)
        allowed = set(info.attributes) if info is not None else None
        attrs: dict = {}
        for pattern in alt.attrs:
            if allowed is not None and pattern.name not in allowed:
                continue
            expr = pattern.value
            if isinstance(expr, A.Name) and expr.id not in DTYPES:
                hint = self.hints.get(expr.id)
                if expr.id in self.captures:
                    value = self.captures[expr.id]
                elif hint is not None and hint.value is not None:
                    value = _const_value(hint.value)
                elif pattern.name == "perm":
                    # the identity (eliminations look for it), the default (reversal), or
                    # any permutation (of rank 3 to 5, most do not commute)
                    axes = list(range(rank))
                    kind = self.draw(st.sampled_from(["identity", "default", "any", "any"]), label="perm kind")
                    value = None if kind == "default" or not axes else axes if kind == "identity" else \
                        list(self.draw(st.permutations(axes), label="perm"))
                else:
                    candidates = attribute_candidates(alt.op, pattern.name, rank)
                    has_default = info is None or info.attributes[pattern.name][1] is not None
                    options = ([None] if has_default else []) + list(candidates or [])
                    value = self.draw(st.sampled_from(options), label=f"attr {pattern.name}") if options else None
                self.captures[expr.id] = value
            else:
                try:
                    value = _const_value(expr)
                except Exception:
                    continue
                candidates = attribute_candidates(alt.op, pattern.name, rank)
                if candidates and self.near_miss and self.draw(st.booleans(), label="attr off"):
                    value = self.draw(st.sampled_from(candidates), label=f"attr {pattern.name} off")
            if value is not None:
                attrs[pattern.name] = value
        return attrs

    def unmentioned_attribute(self, alt: A.OpPattern, ctx: NodeContext, inputs: list[str]) -> None:
        """Now and then an attribute the pattern does not mention, off its default (drawn
        once the inputs are, so spatial attributes fit their rank): the engine must refuse
        the match, or the replacement must keep its meaning."""
        first = self.known(inputs[0]) if inputs else None
        rank = len(first[1]) if first else len(self.main_shape)
        others = unmentioned_attribute_values(ctx.info, alt, rank)
        if others and self.draw(st.integers(0, 2), label="unmentioned attribute") == 0:
            name = self.draw(st.sampled_from(sorted(others)), label="which attribute")
            ctx.attrs[name] = self.draw(st.sampled_from(others[name]), label=f"attr {name}")

    # --------------------------------------------------------------------- nodes
    def known(self, value: str | None) -> tuple[int, list[int]] | None:
        if not value:
            return None
        t = self.types.get(value)
        if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
            return None
        dims = [d.dim_value for d in t.tensor_type.shape.dim]
        return t.tensor_type.elem_type, dims

    def _valid_alternatives(self, eq: A.Equation) -> list[A.OpPattern]:
        """The alternatives the instance's opset defines as written (``ReduceMean(x, ax)``
        only from opset 18, ``{axes: ax}`` only before); all of them when none is."""
        valid = []
        for alt in eq.alternatives:
            info = find_schema(normalize_domain(alt.domain), alt.op, self.opset)
            fixed = [a for a in alt.args if not isinstance(a, A.RestArg)]
            needed = sum(1 for a in fixed if not (isinstance(a, A.VarArg) and a.optional))
            if info is None or (needed <= info.max_inputs and all(p.name in info.attributes for p in alt.attrs)):
                valid.append(alt)
        return valid or list(eq.alternatives)

    def add_node(self, eq: A.Equation) -> None:
        alt = self.draw(st.sampled_from(self._valid_alternatives(eq)), label="alternative")
        domain = normalize_domain(alt.domain)
        if domain:
            self.domains.add(domain)
        first = alt.args[0] if alt.args else None
        first_known = self.known(self.values.get(getattr(first, "name", ""), ""))
        hinted = None if first_known else self.hinted_rank(getattr(first, "name", None))
        rank = len(first_known[1]) if first_known else hinted if hinted is not None else len(self.main_shape)
        ctx = NodeContext(alt.op, domain, self.opset, [], {}, self.main_shape, self.dtype,
                          find_schema(domain, alt.op, self.opset))
        ctx.attrs = self.attributes(alt, ctx, rank)
        inputs: list[str] = []
        for slot, arg in enumerate(alt.args):
            # what is known of every slot: those drawn so far, and later ones bound already
            # (a Gemm's first operand sized after the transposed second one)
            ctx.known = [self.known(v) for v in inputs] + [
                self.known(self.values.get(later.name, "")) if isinstance(later, A.VarArg) else None
                for later in alt.args[slot:]]
            if isinstance(arg, A.VarArg):
                if arg.name in self.values:
                    inputs.append(self.values[arg.name])
                elif arg.optional and not self.draw(st.booleans(), label=f"{arg.name} present"):
                    self.values[arg.name] = ""
                    inputs.append("")
                else:
                    self.values[arg.name] = self.free_input(arg.name, ctx, slot)
                    inputs.append(self.values[arg.name])
            elif isinstance(arg, A.LiteralArg):
                value = self.literal(arg.literal, ctx, arg.bind)
                if arg.bind:
                    self.values[arg.bind] = value
                inputs.append(value)
            elif isinstance(arg, A.AnyArg):
                inputs.append(self.free_input(None, ctx, slot))
            elif isinstance(arg, A.RestArg):
                extra = self.draw(st.integers(0, 2), label="rest count")
                names = [self.free_input(None, ctx, slot) for _ in range(extra)]
                self.values[arg.name] = ",".join(names)
                inputs.extend(names)
        while inputs and not inputs[-1]:
            inputs.pop()
        self.unmentioned_attribute(alt, ctx, inputs)
        outputs = []
        for out in eq.outs:
            name = self.fresh(out.name) if out.name else self.fresh("unused")
            if not out.name:
                self.ignored.add(name)  # an output the pattern skips (`_`): not a graph output
            if out.name:
                self.values[out.name] = name
            outputs.append(name)
        self.pattern_outputs.update(outputs)
        attrs = {k: v for k, v in ctx.attrs.items() if not k.startswith("_")}
        node = helper.make_node(alt.op, inputs, outputs, name=f"n{len(self.nodes)}", domain=domain or None, **attrs)
        self.nodes.append(node)
        self.infer(node)
        self.draws.append(f"{outputs} = {domain + '.' if domain else ''}{alt.op}({', '.join(inputs)}) {attrs or ''}")

    def infer(self, node: onnx.NodeProto) -> None:
        domain = normalize_domain(node.domain)
        try:
            schema = onnx.defs.get_schema(node.op_type, self.opset, domain)
            data = {t.name: t for t in self.inits if t.name in node.input}
            inferred = shape_inference.infer_node_outputs(
                schema, node, {i: self.types[i] for i in node.input if i in self.types}, data,
                opset_imports=[helper.make_opsetid("", self.opset)])
        except Exception as err:  # unknown to onnx (contrib op) or an invalid draw
            if domain:
                inferred = self._infer_with_ort(node)
            else:
                raise Reject(f"{node.op_type}: {str(err).splitlines()[0][:200]}") from None
        for name in node.output:
            if name in inferred:
                self.types[name] = inferred[name]

    def _infer_with_ort(self, node: onnx.NodeProto) -> dict:
        """Output types of an op onnx does not know, by running the partial model."""
        from .compare import random_feeds, run_model

        model = self.model([o for o in node.output if o])
        try:
            outputs = run_model(model, random_feeds(model, 0))
        except Exception as err:
            raise Reject(f"{node.op_type}: {str(err).splitlines()[0][:200]}") from None
        return {name: helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(array.dtype), list(array.shape))
                for name, array in outputs.items()}

    def model(self, output_names: list[str]) -> onnx.ModelProto:
        outputs = []
        for name in output_names:
            t = self.types.get(name)
            outputs.append(helper.make_value_info(name, t) if t is not None else onnx.ValueInfoProto(name=name))
        graph = helper.make_graph(list(self.nodes), "instance", list(self.inputs), outputs, list(self.inits))
        opsets = [helper.make_opsetid("", self.opset)] + [helper.make_opsetid(d, 1) for d in sorted(self.domains)]
        model = helper.make_model(graph, opset_imports=opsets)
        model.ir_version = 8 if self.opset <= 17 else 9 if self.opset <= 20 else 10
        return model


def draw_instance(data, rule: A.Rule) -> Instance:
    """A valid model containing one instance of ``rule``'s pattern (or ``Reject``: also
    when onnx's helpers cannot even build what was drawn)."""
    try:
        return _draw_instance(data, rule)
    except (ValueError, TypeError, KeyError, IndexError, ZeroDivisionError) as err:
        raise Reject(f"cannot build the draw: {err.__class__.__name__}: {str(err)[:160]}") from None


def _draw_instance(data, rule: A.Rule) -> Instance:
    builder = _Builder(data, rule)
    for index in _order(rule):
        builder.add_node(rule.equations[index])
    consumed = {i for node in builder.nodes for i in node.input}
    produced = [o for node in builder.nodes for o in node.output if o]
    outputs = [o for o in produced if o not in consumed and o not in builder.ignored]
    intermediates = [o for o in produced if o in consumed and o in builder.pattern_outputs]
    checked = [builder.values[n] for n in _consumer_checked(builder.rule) if builder.values.get(n) in intermediates]
    sharing = builder.near_miss if builder.near_miss in ("intermediate-output", "extra-consumer") else None
    if checked and builder.draw(st.booleans(), label="share a checked value"):
        # a rule that looks at a value's readers is about both cases (a fusion for a
        # private sum, another for a shared one): half the draws share such a value
        intermediates = checked
        sharing = builder.draw(st.sampled_from(["intermediate-output", "extra-consumer"]), label="how shared")
    if sharing == "intermediate-output" and intermediates:
        outputs.append(builder.draw(st.sampled_from(intermediates), label="exposed"))
    elif sharing == "extra-consumer" and intermediates:
        target = builder.draw(st.sampled_from(intermediates), label="extra consumer of")
        extra = helper.make_node("Identity", [target], [f"{target}_extra"], name="extra")
        builder.nodes.append(extra)
        builder.infer(extra)
        outputs.append(f"{target}_extra")
    if not outputs:
        raise Reject("the pattern produces no output")
    if builder.wrap_outputs:  # an epilogue: pattern outputs feed a node, not the graph directly
        wrapped = []
        for name in outputs:
            final = builder.fresh(f"{name}_out")
            node = helper.make_node("Identity", [name], [final], name=f"epilogue{len(builder.nodes)}")
            builder.nodes.append(node)
            builder.infer(node)
            builder.draws.append(f"{final} = Identity({name})")
            wrapped.append(final)
        outputs = wrapped
    model = builder.model(outputs)
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as err:
        raise Reject(f"invalid model: {str(err).splitlines()[0][:200]}") from None
    return Instance(model, builder.near_miss, builder.draws, builder.input_ranges)
