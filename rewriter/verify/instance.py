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

DEFAULT_OPSET = 17
NEAR_MISSES = ("intermediate-output", "extra-consumer", "input-not-constant", "literal-off", "shape-off")


class Reject(Exception):
    """This draw does not make a valid model; the campaign discards it."""


@dataclass
class Instance:
    model: onnx.ModelProto
    near_miss: str | None
    draws: list[str] = field(default_factory=list)   # what was drawn, for the report


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
    """Variables a ``where`` requires constant (``const(x, ...)``)."""
    return {a.id for call in _where_calls(rule) if call.func == "const"
            for a in call.args if isinstance(a, A.Name)}


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
        # about one draw in four is a near miss; more for rules that look at consumers
        plain = 3 if _looks_at_consumers(rule) else 12
        self.near_miss = self.draw(st.sampled_from([None] * plain + list(NEAR_MISSES)), label="near miss")
        examples = list(rule.examples)
        self.example = self.draw(st.sampled_from([*examples, None]), label="example") if examples else None
        self.symbols: dict[str, int] = {}
        self.hints: dict[str, A.Example] = {}
        if self.example is not None:
            self.hints = {item.name: item for item in self.example.items if item.name}
        self.opset = (self.example.opset if self.example is not None and self.example.opset else DEFAULT_OPSET)
        self.wrap_inputs = self.draw(st.booleans(), label="prologue")
        self.wrap_outputs = self.draw(st.booleans(), label="epilogue")
        rank = self.draw(st.sampled_from([1, 2, 3, 4, 0]), label="main rank")  # rank 0 too
        self.main_shape = [self.draw(st.integers(1, 4), label="dim") for _ in range(rank)]
        # float16 where the ops allow it (onnxruntime refusing a draw just discards it)
        self.dtype = self.draw(st.sampled_from([TensorProto.FLOAT] * 3 + [TensorProto.FLOAT16]),
                               label="element type")

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
                    self.symbols[d] = self.draw(st.integers(1, 4), label=f"dim {d}")
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

    def add_value(self, name: str, spec: Spec, constant: bool) -> str:
        value_name = self.fresh(name)
        if constant:
            array = spec.value if spec.value is not None else self._random(spec.dtype, spec.shape)
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
                value = value.astype(np.float32)
            elif value.dtype.kind in "iu":
                value = value.astype(np.int64)
            return self.add_value(name, Spec(0, list(value.shape), value), True)
        if hint is not None and hint.dims is not None:
            dtype = DTYPES[hint.dtype] if hint.dtype else ctx.dtype
            dims = self._dims(hint.dims)
            if self.near_miss == "shape-off" and len(dims) > 1:  # the hint's dims, moved around
                dims = list(self.draw(st.permutations(dims), label="shape off"))
            spec = Spec(dtype, dims, dim_names=list(hint.dims) if name in self._dynamic_inputs() else None)
        else:
            spec = input_spec(self.draw, ctx, slot)
        if spec.const or (spec.value is not None):
            constant = True
        elif name in self.const_names:
            constant = self.near_miss != "input-not-constant" or not self.draw(st.booleans(), label="drop const")
        else:
            constant = self.draw(st.sampled_from([False, False, False, True]), label="as initializer")
        return self.add_value(name or "any", spec, constant)

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
                    axes = list(range(rank))  # identity often: eliminations look for it
                    value = axes if self.draw(st.booleans(), label="perm identity") else \
                        list(self.draw(st.permutations(axes), label="perm"))
                    if not axes or self.draw(st.booleans(), label="perm default"):
                        value = None
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

    # --------------------------------------------------------------------- nodes
    def known(self, value: str | None) -> tuple[int, list[int]] | None:
        if not value:
            return None
        t = self.types.get(value)
        if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
            return None
        dims = [d.dim_value for d in t.tensor_type.shape.dim]
        return t.tensor_type.elem_type, dims

    def add_node(self, eq: A.Equation) -> None:
        alt = self.draw(st.sampled_from(list(eq.alternatives)), label="alternative")
        domain = normalize_domain(alt.domain)
        if domain:
            self.domains.add(domain)
        first = alt.args[0] if alt.args else None
        first_known = self.known(self.values.get(getattr(first, "name", ""), ""))
        rank = len(first_known[1]) if first_known else len(self.main_shape)
        ctx = NodeContext(alt.op, domain, self.opset, [], {}, self.main_shape, self.dtype)
        ctx.attrs = self.attributes(alt, ctx, rank)
        inputs: list[str] = []
        for slot, arg in enumerate(alt.args):
            ctx.known = [self.known(v) for v in inputs]
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
    """A valid model containing one instance of ``rule``'s pattern (or ``Reject``)."""
    builder = _Builder(data, rule)
    for index in _order(rule):
        builder.add_node(rule.equations[index])
    consumed = {i for node in builder.nodes for i in node.input}
    produced = [o for node in builder.nodes for o in node.output if o]
    outputs = [o for o in produced if o not in consumed and o not in builder.ignored]
    intermediates = [o for o in produced if o in consumed and o in builder.pattern_outputs]
    checked = [builder.values[n] for n in _consumer_checked(builder.rule) if builder.values.get(n) in intermediates]
    if checked and builder.draw(st.booleans(), label="near miss at a checked value"):
        intermediates = checked
    if builder.near_miss == "intermediate-output" and intermediates:
        outputs.append(builder.draw(st.sampled_from(intermediates), label="exposed"))
    elif builder.near_miss == "extra-consumer" and intermediates:
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
    return Instance(model, builder.near_miss, builder.draws)
