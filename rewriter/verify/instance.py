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

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NoReturn

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import TensorProto, TypeProto, helper, numpy_helper, shape_inference

from ..dsl import ast as A
from ..dsl.shape_examples import ShapeExample, shape_example
from ..expr.dtypes import DTYPES
from ..expr.evaluate import evaluate
from ..expr.values import EvalFailure, GraphFacts
from ..onnx_facts.schemas import find_schema, latest_opset, normalize_domain
from ..onnx_facts.validity import check_model
from .choices import chance, permutation, pick
from .compare import random_feeds, run_model, with_special
from .inputs import BROADCASTING, NodeContext, Spec, attribute_candidates, broadcast_partner, input_spec
from .variety import (
    FLOATS,
    TYPE_NAMES,
    attribute_opsets,
    element_types,
    input_types,
    mask_inputs,
    opset_range,
    own_float_types,
    rank_hints,
    special_values,
    unmentioned_attribute_values,
)

DEFAULT_OPSET = 17
NEAR_MISSES = ("intermediate-output", "extra-consumer", "input-not-constant", "literal-off", "shape-off")


@dataclass(frozen=True)
class Stratum:
    """A part of a rule's campaign, with its share of the examples: what it forces that a
    free draw reaches too seldom (shrinking stays inside the stratum)."""

    name: str
    share: float
    dynamic: bool | None = None  # inputs declared with symbolic dims (None: drawn)
    varied: bool = False  # hinted shapes and values, unmentioned attributes varied
    ranks: tuple[int, ...] = ()  # the instance's main rank, from these


STRATA = (
    Stratum("free", 0.4),
    Stratum("dynamic axes", 0.2, dynamic=True),
    Stratum("varied", 0.2, varied=True),
    Stratum("high ranks", 0.2, ranks=(3, 4, 5)),
)


SHAPING_ATTRIBUTES = {"spatial"}  # attributes that decide what shapes the inputs take


class Reject(Exception):
    """This draw does not make a valid model; the campaign discards it."""


@dataclass
class Instance:
    model: onnx.ModelProto
    near_miss: str | None
    draws: list[str] = field(default_factory=list)  # what was drawn, for the report
    # integer graph inputs and the [low, high) their run-time values come from
    input_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    # every graph input's dims at run time (declared symbolic, some of them)
    input_shapes: dict[str, list[int]] = field(default_factory=dict)
    # mask-like float graph inputs that hold a special value at run time: (value, where)
    input_specials: dict[str, tuple[float, str]] = field(default_factory=dict)


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


def _eliminates(rule: A.Rule) -> bool:
    """Whether the replacement makes a pattern value another one (``y = x``)."""
    return any(isinstance(eq.value, A.Name) for eq in rule.replacement)


def _wanted_by_wheres(rule: A.Rule) -> tuple[set[str], set[str], float]:
    """What the rule's top-level ``where`` conjuncts ask: optional inputs wanted absent
    (``absent(b)``) and present (``present(b)``), and how often a value whose readers the
    rule looks at should be shared (1/4 when it wants it private, ``single_use(s)``; 3/4
    when it wants it shared, ``not single_use(s)``, ``consumers(x) > 2 or is_output(x)``)."""
    absent: set[str] = set()
    present: set[str] = set()
    sharing = 0.5
    for where in rule.wheres:
        for conjunct in A.conjuncts(where.expr):
            if isinstance(conjunct, A.Unary) and conjunct.op == "not":
                negated, inner = True, conjunct.operand
            else:
                negated, inner = False, conjunct
            if isinstance(inner, A.Call) and inner.func in ("absent", "present"):
                names = {a.id for a in inner.args if isinstance(a, A.Name)}
                (absent if (inner.func == "absent") != negated else present).update(names)
                continue
            wants = _wants_shared(inner)
            if wants is not None:
                sharing = 0.75 if wants != negated else 0.25
    return absent, present, sharing


def _wants_shared(expr: A.Expr) -> bool | None:
    """Whether a constraint holds for a value read elsewhere too (True) or only for a
    private one (False); None when it says nothing about readers."""
    if isinstance(expr, A.Call) and expr.func in ("single_use", "is_output"):
        return expr.func == "is_output"
    if isinstance(expr, A.Unary) and expr.op == "not":
        inner = _wants_shared(expr.operand)
        return None if inner is None else not inner
    if (
        isinstance(expr, A.Compare)
        and len(expr.ops) == 1
        and any(isinstance(o, A.Call) and o.func == "consumers" for o in expr.operands)
    ):
        op = (
            expr.ops[0]
            if isinstance(expr.operands[0], A.Call)
            else {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(expr.ops[0], expr.ops[0])
        )
        return op in (">", ">=")
    if isinstance(expr, A.BoolOp):
        votes = [v for v in (_wants_shared(x) for x in expr.values) if v is not None]
        return (any(votes) if expr.op == "or" else all(votes)) if votes else None
    return None


def _consumer_checked(rule: A.Rule) -> set[str]:
    """Variables whose consumers a ``where`` looks at: near misses expose or share these
    first (a rule for a shared value applies only to such draws)."""
    return {
        a.id
        for call in _where_calls(rule)
        if call.func in ("single_use", "consumers", "is_output")
        for a in call.args
        if isinstance(a, A.Name)
    }


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

    class _Empty:
        graph = _NO_GRAPH

        def lookup(self, name: str) -> object:
            raise KeyError(name)

        def node_attribute(self, var: str, attr: str) -> object:
            raise KeyError(var)

    return evaluate(expr, _Empty())


class _NoGraph:
    """The graph of an expression evaluated on its own (``_const_value``): there is none,
    so whatever asks about a value fails the evaluation."""

    def _none(self, what: str) -> NoReturn:
        raise EvalFailure(f"{what} is asked of a graph, and a constant expression has none")

    def is_constant(self, value: str) -> bool:
        self._none(f"'{value}'")

    def constant(self, value: str) -> np.ndarray | None:
        self._none(f"'{value}'")

    def elem_type(self, value: str) -> int | None:
        self._none(f"'{value}'")

    def shape(self, value: str) -> list[int | str | None] | None:
        self._none(f"'{value}'")

    def consumer_count(self, value: str) -> int:
        self._none(f"'{value}'")

    def is_graph_output(self, value: str) -> bool:
        self._none(f"'{value}'")

    def opset(self, domain: str) -> int | None:
        self._none(f"the opset of '{domain}'")

    def op_type(self, value: str) -> str | None:
        self._none(f"'{value}'")

    def producer_node(self, value: str) -> onnx.NodeProto | None:
        self._none(f"'{value}'")

    def settled_dim(self, dim: int | str) -> int | str:
        return dim


_NO_GRAPH: GraphFacts = _NoGraph()


class _Builder:
    def __init__(self, data, rule: A.Rule, stratum: Stratum = STRATA[0]) -> None:
        self.draw = data.draw
        self.rule = rule
        self.nodes: list[onnx.NodeProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.inits: list[TensorProto] = []
        self.types: dict[str, TypeProto] = {}  # as declared (symbolic dims, dynamic axes)
        self.concrete: dict[str, TypeProto] = {}  # at run time: what inputs are drawn against
        self.values: dict[str, str] = {}  # pattern name -> graph value
        self.captures: dict[str, object] = {}
        self.domains: set[str] = set()
        self.draws: list[str] = []
        self.counter = 0
        self.used: set[str] = set()
        self.pattern_outputs: set[str] = set()  # values the pattern's own nodes produce
        self.ignored: set[str] = set()  # outputs a pattern skips with `_`
        self.const_names = const_required(rule)
        self.seed = self.draw(st.integers(0, 2**16), label="values seed")
        self.rng = np.random.default_rng(self.seed)
        # about one draw in four is a near miss
        kinds = [None] * 12 + list(NEAR_MISSES)
        self.near_miss = pick(self.draw, kinds, label="near miss")
        examples = list(rule.examples)
        self.example = pick(self.draw, [*examples, None], label="example") if examples else None
        self.symbols: dict[str, int] = {}
        self.hints: dict[str, A.Example] = {}
        if self.example is not None:
            self.hints = {item.name: item for item in self.example.items if item.name}
        if self.example is not None and self.example.opset:
            self.opset = self.example.opset
        else:  # the opset the rule's wheres ask for (17 when they allow it)
            low, high = opset_range(rule)
            self.opset = min(max(DEFAULT_OPSET, low), high, latest_opset(""))
            # one draw in three where an attribute the pattern mentions still exists
            older = attribute_opsets(rule, low, self.opset)
            if older and self.chance(3, "an older opset"):
                self.opset = pick(self.draw, older, label="older opset")
        self.wrap_inputs = self.chance(2, "prologue")
        self.wrap_outputs = self.chance(2, "epilogue")
        if _eliminates(rule) and not (self.wrap_inputs or self.wrap_outputs):
            # an elimination between a graph input and a graph output is refused (the
            # output must keep its name): a draw in eight tries that, the rest can apply
            self.wrap_outputs = not self.chance(8, "bare elimination")
        rank = pick(self.draw, stratum.ranks or [1, 2, 3, 4, 0, 5], label="main rank")  # rank 0 and 5 too
        # the instance's dims come mostly from a pool of two sizes, so they often coincide:
        # a bias broadcast along the wrong axis, a transposition of the wrong axes, is
        # then silently wrong instead of refused for its shape
        self.dim_pool = [self.draw(st.integers(1, 4), label="pooled dim") for _ in range(2)]
        self.main_shape = [self.dim() for _ in range(rank)]
        # any element type every op of the pattern takes (onnxruntime refusing a draw, a
        # type without a kernel, just discards it)
        self.dtype = pick(self.draw, element_types(rule, self.opset), label="element type")
        self.masks = mask_inputs(rule, self.const_names)
        self.spread = A.spread_names(rule)
        self.wanted_absent, self.wanted_present, self.sharing = _wanted_by_wheres(rule)
        self.input_shapes: dict[str, list[int]] = {}
        self.input_specials: dict[str, tuple[float, str]] = {}
        # one instance in five declares its inputs' dims symbolically (dynamic axes); one in
        # four sets an attribute the pattern does not mention off its default, one in four
        # gives a hinted input another rank or a broadcasting shape
        self.dynamic = self.chance(5, "dynamic dims") if stratum.dynamic is None else stratum.dynamic
        # half of those name every dim apart: inference then cannot tell equal sizes either,
        # so a rewrite that moves dims of equal size (a wrong perm) gets past the engine
        self.unrelated_dims = self.dynamic and self.chance(2, "unrelated dims")
        self.vary_unmentioned = stratum.varied or self.chance(4, "vary an attribute")
        self.vary_hinted = stratum.varied or self.chance(4, "vary a hinted shape")
        self.hinted_variations = 2 if stratum.varied else 1  # how many hinted items vary
        # the varied stratum, half the time: a symbol several hinted shapes share drawn as 1
        # in some of them (declared shapes only: a dynamic one would name a size it has not)
        self.ones: set[tuple[str, int]] = set()
        if stratum.varied and not self.dynamic and self.chance(2, "symbol to one"):
            self.ones = self._shared_symbol_ones()
        # which: drawn up front, each hinted name as likely as the next (deciding item by
        # item as the pattern reaches them favoured the first few: a mask hinted after q, k
        # and v was varied once in sixteen such draws)
        self.vary_names: set[str] = set()
        if self.vary_hinted and self.hints:
            order = permutation(self.draw, list(self.hints), label="varied hints")
            self.vary_names = set(order[: self.hinted_variations])
        self.ranks = rank_hints(rule)
        self.rank_decided: dict[str, int | None] = {}
        self.input_ranges: dict[str, tuple[int, int]] = {}

    # ------------------------------------------------------------------- values
    def dim(self) -> int:
        """A dim size: one of the instance's pool three times in four, else any of 1..4."""
        if self.chance(4, "fresh dim"):
            return self.draw(st.integers(1, 4), label="dim")
        return pick(self.draw, self.dim_pool, "dim")

    def chance(self, one_in: float, label: str) -> bool:
        return chance(self.draw, one_in, label)

    def _shared_symbol_ones(self) -> set[tuple[str, int]]:
        """The (hinted name, axis) pairs to draw as 1: of one symbol that several hinted
        shapes name, each of its places with even chance (at least one)."""
        named = [
            (n, i, d) for n, item in self.hints.items() for i, d in enumerate(item.dims or []) if isinstance(d, str)
        ]
        shared = sorted({d for _, _, d in named if sum(d == e for _, _, e in named) > 1})
        if not shared:
            return set()
        symbol = pick(self.draw, shared, label="symbol to one")
        places = [(n, i) for n, i, d in named if d == symbol]
        ones = {place for place in places if self.chance(2, "this one to one")}
        return ones or {places[0]}

    def _ones_off(self, name: str, dims: list[int]) -> list[int]:
        """dims, with those ``ones`` chose drawn as 1: a broadcasting partner where the
        rule may want the size the other shapes give that symbol (angles of one batch item
        where a rule needs them per item, a bias of one row where it needs one per row)."""
        return [1 if (name, i) in self.ones else size for i, size in enumerate(dims)]

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
                    self.symbols[d] = (
                        self.dim()
                        if not self.chance(4, f"dim {d} a block")
                        else pick(self.draw, [8, 16, 24, 32], f"dim {d}")
                    )
                out.append(self.symbols[d])
        return out

    def _random(self, dtype: int, shape: list[int], divisor: bool = False) -> np.ndarray:
        """Random contents: normal floats at a drawn scale (for double also large ones,
        where a computation done in float32 shows), bools, small ints (never 0 for a
        divisor, negative ones too), or for 8- and 16-bit ints also their whole range."""
        np_dtype = helper.tensor_dtype_to_np_dtype(dtype)
        if np.issubdtype(np_dtype, np.floating):
            scales = [1.0, 0.5, 3.0] + ([1e4] if np_dtype == np.float64 else [])
            scale = pick(self.draw, scales, label="value scale")
            return (self.rng.standard_normal(shape) * scale).astype(np_dtype)
        if np_dtype == np.bool_:
            return self.rng.integers(0, 2, shape).astype(bool)
        if divisor:
            values = self.rng.integers(1, 5, shape)
            return (
                (values * np.where(self.rng.integers(0, 2, shape) == 1, 1, -1)).astype(np_dtype)
                if np.issubdtype(np_dtype, np.signedinteger)
                else values.astype(np_dtype)
            )
        if np_dtype.itemsize <= 2 and pick(self.draw, ["full", "small"], label="integer range") == "full":
            # 8- and 16-bit integers are quantized data, not indices: their whole range
            # (kernels that sum products in 16 bits saturate only near its ends)
            info = np.iinfo(np_dtype)
            return self.rng.integers(int(info.min), int(info.max) + 1, shape).astype(np_dtype)
        return self.rng.integers(0, 4, shape).astype(np_dtype)

    def _special_choice(self, dtype: int) -> tuple[float, str]:
        """A special value (-inf twice as often: masks mostly hold it) and where it goes."""
        low, high = special_values(dtype)[3:5]
        value = pick(
            self.draw, [float("-inf"), float("-inf"), low, float("nan"), float("inf"), high], label="special value"
        )
        return value, pick(self.draw, ["everywhere", "rows", "some"], label="special where")

    def _maybe_special_input(self, name: str | None, graph_input: str, dtype: int) -> None:
        """A mask-like graph input now and then holds infinities, NaN or extreme values at
        run time, as ``_maybe_special`` does for constants (the feeds apply it)."""
        is_float = np.issubdtype(helper.tensor_dtype_to_np_dtype(dtype), np.floating)
        if name not in self.masks or not is_float or not self.chance(3, "special"):
            return
        value, where = self._special_choice(dtype)
        self.input_specials[graph_input] = (value, where)
        self.draws.append(f"{graph_input}: holds {value} ({where}) at run time")

    def _maybe_special(self, name: str | None, array: np.ndarray) -> np.ndarray:
        """A mask-like constant now and then holds infinities, NaN or extreme values (masks
        are mostly -inf or the type's minimum): everywhere, along whole rows (a fully
        masked query), or in some elements."""
        if name not in self.masks or array.dtype.kind != "f" or not self.chance(3, "special"):
            return array
        value, where = self._special_choice(helper.np_dtype_to_tensor_dtype(array.dtype))
        array = with_special(array, value, where, self.rng)
        self.draws.append(f"{name}: holds {value} ({where})")
        return array

    def add_value(self, name: str, spec: Spec, constant: bool) -> str:
        value_name = self.fresh(name)
        if constant:
            array = (
                spec.value
                if spec.value is not None
                else self._maybe_special(name, self._random(spec.dtype, spec.shape, spec.divisor))
            )
            self.inits.append(numpy_helper.from_array(np.asarray(array), value_name))
            self.types[value_name] = self.concrete[value_name] = helper.make_tensor_type_proto(
                helper.np_dtype_to_tensor_dtype(np.asarray(array).dtype), list(np.asarray(array).shape)
            )
            self.draws.append(f"{value_name} = constant {np.asarray(array).dtype}{list(np.asarray(array).shape)}")
        else:
            graph_input = value_name
            if self.wrap_inputs:  # a prologue: the value is computed, not a graph input
                graph_input = self.fresh(f"{value_name}_in")
            declared: Sequence[int | str]
            if spec.dim_names is not None:
                declared = [n if isinstance(n, str) else d for n, d in zip(spec.dim_names, spec.shape)]
            elif self.dynamic and self.unrelated_dims:  # nothing known of any dim
                declared = [f"{graph_input}_d{i}" for i in range(len(spec.shape))]
            elif self.dynamic:  # dims unknown until run time: shape changes get past inference
                declared = [d if d == 1 else f"n{d}" for d in spec.shape]  # equal sizes, one name
            else:
                declared = spec.shape
            vi = helper.make_tensor_value_info(graph_input, spec.dtype, declared)
            self.inputs.append(vi)
            self.input_shapes[graph_input] = list(spec.shape)
            if spec.divisor and np.issubdtype(helper.tensor_dtype_to_np_dtype(spec.dtype), np.integer):
                self.input_ranges[graph_input] = (1, 5)
            self.types[graph_input] = vi.type
            self.concrete[graph_input] = helper.make_tensor_type_proto(spec.dtype, list(spec.shape))
            self.draws.append(f"{graph_input}: input {helper.tensor_dtype_to_string(spec.dtype)}{spec.shape}")
            self._maybe_special_input(name, graph_input, spec.dtype)
            if self.wrap_inputs:
                self.nodes.append(
                    helper.make_node("Identity", [graph_input], [value_name], name=f"prologue{len(self.nodes)}")
                )
                self.types[value_name] = vi.type
                self.concrete[value_name] = self.concrete[graph_input]
                self.draws.append(f"{value_name} = Identity({graph_input})")
        return value_name

    def _computed_shape(self, name: str, of: str, found: ShapeExample) -> str:
        """``Shape(of)``, or the example's pieces of it and numbers joined (a view target
        that splits a dim); as the shape-off near miss, its dims in another order first (a
        Gather of the Shape, which a rule's ``dims()`` reads as well): a target that names
        the same sizes elsewhere, which a rule about a tensor's own shape must refuse."""
        value = self.fresh(name)
        known = self.concrete.get(of)
        rank = len(known.tensor_type.shape.dim) if known is not None else 0
        order = list(range(rank))
        if self.near_miss == "shape-off" and rank > 1:
            order = permutation(self.draw, order, label="shape off")
        shape = value if found.whole else self.fresh(f"{name}_shape")
        whole = shape if order == list(range(rank)) else self.fresh(f"{name}_all")
        self._add_node("Shape", [of], whole, f"{whole} = Shape({of})")
        if whole != shape:
            indices = self._int64_constant(f"{name}_order", order)
            self._add_node("Gather", [whole, indices], shape, f"{shape} = Gather({whole}, {order})", axis=0)
        if found.whole:
            return value
        parts = []
        for kind, piece in found.pieces:
            part = self.fresh(f"{name}_part")
            if kind == "numbers":
                parts.append(self._int64_constant(f"{name}_part", list(piece)))
                continue
            start, end = piece
            end = np.iinfo(np.int64).max if end is None else end
            bounds = [self._int64_constant(f"{name}_at", [v]) for v in (start or 0, end)]
            self._add_node("Slice", [shape, *bounds], part, f"{part} = {shape}[{start}:{piece[1]}]")
            parts.append(part)
        self._add_node("Concat", parts, value, f"{value} = Concat({', '.join(parts)})", axis=0)
        return value

    def _add_node(self, op: str, inputs: list[str], output: str, draw: str, **attrs) -> None:
        self.nodes.append(helper.make_node(op, inputs, [output], name=f"n{len(self.nodes)}", **attrs))
        self.infer(self.nodes[-1])
        self.draws.append(draw)

    def _int64_constant(self, name: str, values: list[int]) -> str:
        value = self.fresh(name)
        self.inits.append(numpy_helper.from_array(np.array(values, np.int64), value))
        self.types[value] = self.concrete[value] = helper.make_tensor_type_proto(TensorProto.INT64, [len(values)])
        return value

    def free_input(self, name: str | None, ctx: NodeContext, slot: int) -> str:
        hint = self.hints.get(name) if name else None
        found = shape_example(hint.value) if hint is not None else None
        shape_of = self.values.get(found.tensor) if found is not None else None
        if found is not None and shape_of is not None and name:  # `example s = shape(x)`: at run time
            return self._computed_shape(name, shape_of, found)
        if hint is not None and hint.value is not None and self.vary_hinted and name in self.vary_names:
            self.hinted_varied()  # the hinted value replaced by one op knowledge draws
            hint = None
        if hint is not None and hint.value is not None and name:  # (a hint is looked up for a name)
            array = np.asarray(_const_value(hint.value))
            if array.dtype == np.float64:
                partner = ctx.type(0) if slot > 0 else None
                chosen = partner if partner in FLOATS else ctx.dtype if ctx.dtype in FLOATS else TensorProto.FLOAT
                allowed = input_types(ctx.info, slot)
                if allowed and TYPE_NAMES.get(chosen) not in allowed:  # QLinearConv's scales: float only
                    chosen = next((t for t in FLOATS if TYPE_NAMES.get(t) in allowed), chosen)
                array = array.astype(helper.tensor_dtype_to_np_dtype(chosen))
            elif array.dtype.kind in "iu":
                array = typed_like_sibling(array.astype(hinted_integer_type(array.dtype, ctx, slot)), ctx, slot)
            return self.add_value(name, Spec(0, list(array.shape), self._maybe_special(name, array)), True)
        if hint is not None and hint.dims is not None:
            dtype = DTYPES[hint.dtype] if hint.dtype else ctx.dtype
            dims, names = self._dims(hint.dims), list(hint.dims)
            if self.near_miss == "shape-off" and len(dims) > 1:  # the hint's dims, moved around
                order = permutation(self.draw, range(len(dims)), label="shape off")
                dims, names = [dims[i] for i in order], [names[i] for i in order]
            # declared as the example names its dims: an input whose shape the example reads,
            # or with dynamic axes an example that names some (its symbols unknown until run
            # time, its numbers known: batch and sequence dynamic, heads and head size not,
            # as exporters declare them; so rules that need the head size apply there too)
            named = name in self._dynamic_inputs() or (
                self.dynamic and not self.unrelated_dims and any(isinstance(d, str) for d in names)
            )
            if not named and name:
                dims = self._vary_hinted(name, self._ones_off(name, dims), ctx, slot)
            spec = Spec(dtype, dims, dim_names=names if named else None)
        else:
            spec = schema_typed(input_spec(self.draw, ctx, slot), ctx, slot)
            wanted = self.hinted_rank(name)
            if wanted is not None and len(spec.shape) != wanted and spec.value is None and not spec.const:
                dims = list(spec.shape)[-wanted:] if wanted else []
                dims = [self.dim() for _ in range(wanted - len(dims))] + dims
                spec = dataclasses.replace(spec, shape=dims, dim_names=None)
        if ctx.op in ("Div", "Mod") and slot == 1 and not ctx.domain:
            spec = dataclasses.replace(spec, divisor=True)
        info = ctx.info
        own = own_float_types(info, slot, spec.dtype) if spec.value is None else []
        # inputs of one type parameter share the type (BatchNormalization's scale and B)
        sibling = next(
            (
                known[0]
                for i, known in enumerate(ctx.known)
                if own and info is not None and i != slot and known and info.formal(i) == info.formal(slot)
            ),
            None,
        )
        if sibling is not None:
            spec = dataclasses.replace(spec, dtype=sibling)
        elif own and self.chance(3, "own precision"):
            spec = dataclasses.replace(spec, dtype=pick(self.draw, own, label="mixed precision"))
        if spec.const or (spec.value is not None):
            constant = True
        elif name in self.const_names:
            constant = self.near_miss != "input-not-constant" or not self.chance(2, "drop const")
        else:
            constant = pick(self.draw, [False, False, False, True], label="as initializer")
        value = self.add_value(name or "any", spec, constant)
        gathered = ctx.shape(0) if not constant and ctx.op == "Gather" and slot == 1 else None
        if gathered:
            axis = int(ctx.attrs.get("axis", 0) or 0)
            size = gathered[axis] if -len(gathered) <= axis < len(gathered) else 1
            self.input_ranges[self._graph_input(value)] = (-size, size)  # Gather reads negatives from the end
        return value

    def optional_present(self, name: str) -> bool:
        """Whether an optional input is given: mostly as the rule's wheres want it
        (``absent(b)``), else half the time."""
        one_in = 8 if name in self.wanted_absent else 8 / 7 if name in self.wanted_present else 2
        return self.chance(one_in, f"{name} present")

    def hinted_absent(self, name: str) -> bool:
        """Whether an example gives the optional input ``name`` as ``none`` (drawn absent:
        a present one would be an initializer holding nothing)."""
        hint = self.hints.get(name)
        return hint is not None and hint.value is not None and _const_value(hint.value) is None

    def hinted_varied(self) -> None:
        """One hinted item was varied (one per instance, two in the varied stratum)."""
        self.hinted_variations -= 1
        self.vary_hinted = self.hinted_variations > 0

    def hinted_rank(self, name: str | None) -> int | None:
        """The rank a ``where`` asks of ``name`` (see variety.rank_hints), decided once per
        name: kept three draws in four (the fourth tries the rule with another rank)."""
        if name is None or name not in self.ranks:
            return None
        if name not in self.rank_decided:
            keep = not self.chance(4, f"rank hint {name} off")
            self.rank_decided[name] = self.ranks[name] if keep else None
        return self.rank_decided[name]

    def _graph_input(self, value: str) -> str:
        """The graph input behind ``value`` (itself, or what its prologue Identity reads)."""
        for node in self.nodes:
            if node.op_type == "Identity" and node.output[0] == value and node.name.startswith("prologue"):
                return node.input[0]
        return value

    def _vary_hinted(self, name: str, dims: list[int], ctx: NodeContext, slot: int) -> list[int]:
        """A hinted shape, now and then with a leading axis more or less, only one of its last
        two axes (a vector: a MatMul reads a 1-D operand as a row or a column, and
        onnxruntime's FusedMatMul transposes A wrongly beside a 1-D B, which a rewrite into
        transA met), one dim another size (a channel count off the block, say), or (an operand
        of a broadcasting op) as a partner that broadcasts against the other operand: what the
        example shows is one case of the rule, not all it claims."""

        if not self.vary_hinted or name not in self.vary_names:
            return dims
        self.hinted_varied()
        vary = pick(self.draw, ["fewer axes", "more axes", "resized", "broadcast", "vector"], label="vary hinted shape")
        other = next((k for i, k in enumerate(ctx.known) if i != slot and k is not None), None)
        if vary == "fewer axes" and len(dims) > 1:
            return dims[1:]
        if vary == "vector" and len(dims) > 1:  # its last axis, or the one before (a contracted one)
            return [dims[pick(self.draw, [-1, -2], label="vector axis")]]
        if vary == "more axes" and len(dims) < 5:
            return [2] + dims
        if vary == "resized" and dims:
            axis = self.draw(st.integers(0, len(dims) - 1), label="resized axis")
            return dims[:axis] + [pick(self.draw, [1, 2, 3, 5, 8, 12, 16, 20, 24, 32], "new size")] + dims[axis + 1 :]
        if vary == "broadcast" and ctx.op in BROADCASTING and not ctx.domain and other is not None:
            return broadcast_partner(self.draw, list(other[1]))
        return dims

    def _dynamic_inputs(self) -> set[str]:
        """Inputs an example reads the shape of: declared with their symbolic dims, so
        the shape stays unknown until run time (dynamic axes)."""
        found = (shape_example(h.value) for h in self.hints.values())
        return {f.tensor for f in found if f is not None}

    def approximately(self, lit: A.Literal) -> float:
        """A number ``~lit`` matches (off by up to a third of the tolerance), or now and
        then, in a near miss, one it does not."""
        value = float(lit.value) * (1 + pick(self.draw, [0.0, 1e-7, -1e-6, 3e-5], label="approx offset"))
        if self.near_miss == "literal-off" and self.chance(2, "move literal"):
            value += 0.25
        return value

    def literal(self, lit: A.Literal, ctx: NodeContext, bind: str | None) -> str:
        value: float | bool = lit.value if isinstance(lit.value, bool) else float(lit.value)
        if lit.approx:
            value = self.approximately(lit)
        elif self.near_miss == "literal-off" and self.chance(2, "move literal"):
            value = value + 0.25 if not isinstance(value, bool) else not value
        # typed like a numeric partner (Where's bool condition is not one)
        partner = next((k for k in ctx.known if k is not None and k[0] != TensorProto.BOOL), None)
        dtype = TensorProto.BOOL if isinstance(value, bool) else (partner[0] if partner else ctx.dtype)
        shape = pick(self.draw, [[], [1]], label="literal shape")
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
                candidates = attribute_candidates(alt.op, pattern.name, rank)
                varied = (
                    hint is not None
                    and hint.value is not None
                    and candidates
                    and self.vary_hinted
                    and expr.id in self.vary_names
                )
                if varied:
                    self.hinted_varied()  # the hinted value drawn like an unhinted one
                if expr.id in self.captures:
                    value = self.captures[expr.id]
                elif hint is not None and hint.value is not None and not varied:
                    value = _const_value(hint.value)
                elif pattern.name == "perm":
                    # the identity (eliminations look for it), the default (reversal), or
                    # any permutation (of rank 3 to 5, most do not commute)
                    axes = list(range(rank))
                    kind = pick(self.draw, ["identity", "default", "any", "any"], label="perm kind")
                    value = (
                        None
                        if kind == "default" or not axes
                        else axes
                        if kind == "identity"
                        else list(permutation(self.draw, axes, label="perm"))
                    )
                else:
                    candidates = attribute_candidates(alt.op, pattern.name, rank)
                    has_default = info is None or info.attributes[pattern.name][1] is not None
                    options = ([None] if has_default else []) + list(candidates or [])
                    value = pick(self.draw, options, label=f"attr {pattern.name}") if options else None
                self.captures[expr.id] = value
            elif isinstance(expr, A.Literal):  # `{alpha: ~0.01}`: within the tolerance, or (a near miss) not
                value = self.approximately(expr)
            else:
                if expr is None:  # `{name: _}`: nothing to evaluate
                    continue
                try:
                    value = _const_value(expr)
                except Exception:
                    continue
                candidates = attribute_candidates(alt.op, pattern.name, rank)
                if candidates and self.near_miss and self.chance(2, "attr off"):
                    value = pick(self.draw, candidates, label=f"attr {pattern.name} off")
            if value is not None:
                attrs[pattern.name] = value
        return attrs

    def shaping_attributes(self, alt: A.OpPattern, ctx: NodeContext, rank: int) -> None:
        """``{name: _}`` attributes that decide the inputs' shapes (an opset 7-8
        BatchNormalization's ``spatial``: statistics per element), drawn before the inputs."""
        others = unmentioned_attribute_values(ctx.info, alt, rank)
        for pattern in alt.attrs:
            if (
                pattern.any_value
                and pattern.name in SHAPING_ATTRIBUTES
                and others.get(pattern.name)
                and self.chance(2, f"vary {pattern.name}")
            ):
                ctx.attrs[pattern.name] = pick(self.draw, others[pattern.name], label=f"attr {pattern.name}")

    def unmentioned_attribute(self, alt: A.OpPattern, ctx: NodeContext, inputs: list[str]) -> None:
        """Now and then an attribute the pattern does not mention, off its default, and often
        one it says any value of (``{name: _}``): drawn once the inputs are, so spatial
        attributes fit their rank.  The engine must refuse the match, or the replacement
        must keep its meaning."""
        first = self.known(inputs[0]) if inputs else None
        rank = len(first[1]) if first else len(self.main_shape)
        channels = first[1][1] if first and len(first[1]) > 1 else None
        others = unmentioned_attribute_values(ctx.info, alt, rank, channels)
        for pattern in alt.attrs:
            if pattern.any_value and others.get(pattern.name) and pattern.name not in SHAPING_ATTRIBUTES:
                required = (
                    ctx.info is not None
                    and pattern.name in ctx.info.attributes
                    and ctx.info.attributes[pattern.name][1] is None
                    and pattern.name not in ctx.attrs
                )
                if required or self.chance(2, f"vary {pattern.name}"):
                    ctx.attrs[pattern.name] = pick(self.draw, others[pattern.name], label=f"attr {pattern.name}")
        unmentioned = sorted(n for n in others if n not in {a.name for a in alt.attrs})
        # a node whose attributes the replacement copies ({...c}) claims to keep the meaning
        # of every value: vary one half the time; elsewhere one per instance, now and then
        spread = self.spread & set(ctx.outputs)
        if unmentioned and (spread or self.vary_unmentioned) and self.chance(2, "unmentioned attribute"):
            self.vary_unmentioned = False  # (one per instance: the others stay at their defaults)
            name = pick(self.draw, unmentioned, label="which attribute")
            ctx.attrs[name] = pick(self.draw, others[name], label=f"attr {name}")

    # --------------------------------------------------------------------- nodes
    def known(self, value: str | None) -> tuple[int, list[int]] | None:
        """``value``'s element type and dims at run time (a symbolic declared dim is a
        number here: inputs drawn against it must match what runs)."""
        if not value:
            return None
        t = self.concrete.get(value)
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
        alt = pick(self.draw, self._valid_alternatives(eq), label="alternative")
        domain = normalize_domain(alt.domain)
        if domain:
            self.domains.add(domain)
        first = alt.args[0] if alt.args else None
        first_known = self.known(self.values.get(getattr(first, "name", ""), ""))
        hinted = None if first_known else self.hinted_rank(getattr(first, "name", None))
        rank = len(first_known[1]) if first_known else hinted if hinted is not None else len(self.main_shape)
        ctx = NodeContext(
            alt.op,
            domain,
            self.opset,
            [],
            {},
            self.main_shape,
            self.dtype,
            find_schema(domain, alt.op, self.opset),
            dim=self.dim,
            outputs=list(eq.out_names),
        )
        ctx.attrs = self.attributes(alt, ctx, rank)
        self.shaping_attributes(alt, ctx, rank)
        inputs: list[str] = []
        for slot, arg in enumerate(alt.args):
            # what is known of every slot: those drawn so far, and later ones bound already
            # (a Gemm's first operand sized after the transposed second one)
            ctx.known = [self.known(v) for v in inputs] + [
                self.known(self.values.get(later.name, "")) if isinstance(later, A.VarArg) else None
                for later in alt.args[slot:]
            ]
            if isinstance(arg, A.VarArg):
                if arg.name in self.values:
                    inputs.append(self.values[arg.name])
                elif arg.optional and (
                    slot >= _max_inputs(ctx) or self.hinted_absent(arg.name) or not self.optional_present(arg.name)
                ):
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
                # `example rest: [N, 8, H, W]` sizes each of them (then one at least)
                sized = arg.name if arg.name in self.hints else None
                extra = self.draw(st.integers(1 if sized else 0, 2), label="rest count")
                names = [self.free_input(sized, ctx, slot) for _ in range(extra)]
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
        """The node's output types, as declared (``types``) and at run time (``concrete``)."""
        declared = self._infer(node, self.types)
        concrete = self._infer(node, self.concrete) if self.dynamic else declared
        for name in node.output:
            if name in declared:
                self.types[name] = declared[name]
            if name in concrete:
                self.concrete[name] = concrete[name]

    def _infer(self, node: onnx.NodeProto, types: dict[str, TypeProto]) -> dict[str, TypeProto]:
        domain = normalize_domain(node.domain)
        try:
            schema = onnx.defs.get_schema(node.op_type, self.opset, domain)
            data = {t.name: t for t in self.inits if t.name in node.input}
            return shape_inference.infer_node_outputs(
                schema,
                node,
                {i: types[i] for i in node.input if i in types},
                data,
                opset_imports=[helper.make_opsetid("", self.opset)],
            )
        except Exception as err:  # unknown to onnx (contrib op) or an invalid draw
            if domain:
                return self._infer_with_ort(node)
            raise Reject(f"{node.op_type}: {str(err).splitlines()[0][:400]}") from None

    def _infer_with_ort(self, node: onnx.NodeProto) -> dict:
        """Output types of an op onnx does not know, by running the partial model."""

        model = self.model([o for o in node.output if o])
        try:
            outputs = run_model(model, random_feeds(model, 0, shapes=self.input_shapes))
        except Exception as err:
            raise Reject(f"{node.op_type}: {str(err).splitlines()[0][:400]}") from None
        return {
            name: helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(array.dtype), list(array.shape))
            for name, array in outputs.items()
        }

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


def _max_inputs(ctx: NodeContext) -> int:
    """How many inputs the op takes at the instance's opset (an optional input past them,
    Pad's axes before opset 18, is drawn absent: present it only made invalid models)."""
    return ctx.info.max_inputs if ctx.info is not None else 1 << 30


def hinted_integer_type(dtype: np.dtype, ctx: NodeContext, slot: int) -> np.dtype:
    """The element type an integer hint is drawn in: its own (``array([2, 2], int32)``) where
    the op's schema takes it at ``slot`` (GroupQueryAttention's seqlens_k is int32 only), else
    int64 where the schema takes that or says nothing (a plain ``[2, 2]``), else the first
    integer type the schema takes."""
    allowed = input_types(ctx.info, slot)
    own = TYPE_NAMES.get(helper.np_dtype_to_tensor_dtype(dtype))
    if allowed and own in allowed:
        return dtype
    if not allowed or TYPE_NAMES[TensorProto.INT64] in allowed:
        return np.dtype(np.int64)
    for candidate in TYPE_NAMES:
        if TYPE_NAMES[candidate] in allowed and helper.tensor_dtype_to_np_dtype(candidate).kind in "iu":
            return helper.tensor_dtype_to_np_dtype(candidate)
    return np.dtype(np.int64)


def typed_like_sibling(array: np.ndarray, ctx: NodeContext, slot: int) -> np.ndarray:
    """An integer hint in the integer type of an input already drawn that shares its type
    parameter, where its values fit: ``xz = 3`` beside a uint8 ``x`` (a zero point, a Pad's
    value) is a uint8, as the op requires; the schema alone only says T1 is int8 or uint8."""
    info = ctx.info
    if info is None:
        return array
    for other, known in enumerate(ctx.known):
        if other == slot or not known or info.formal(other) != info.formal(slot):
            continue
        dtype = helper.tensor_dtype_to_np_dtype(known[0])
        if dtype.kind in "iu" and np.array_equal(array.astype(dtype).astype(array.dtype), array):
            return array.astype(dtype)
    return array


def schema_typed(spec: Spec, ctx: NodeContext, slot: int) -> Spec:
    """``spec`` in a type the op's schema takes at ``slot`` (an int64 shape, sizes or
    repeats input drawn as float made an invalid model): int64 where the schema allows it,
    else its one type; unchanged where the type is allowed or unknown."""
    allowed = input_types(ctx.info, slot)
    if spec.value is not None or not allowed or TYPE_NAMES.get(spec.dtype) in allowed:
        return spec
    for dtype in (TensorProto.INT64, TensorProto.FLOAT, *TYPE_NAMES):
        if TYPE_NAMES.get(dtype) in allowed:
            return dataclasses.replace(spec, dtype=dtype)
    return spec


def draw_instance(data, rule: A.Rule, stratum: Stratum = STRATA[0]) -> Instance:
    """A valid model containing one instance of ``rule``'s pattern (or ``Reject``: also
    when onnx's helpers cannot even build what was drawn)."""
    try:
        return _draw_instance(data, rule, stratum)
    except (ValueError, TypeError, KeyError, IndexError, ZeroDivisionError) as err:
        raise Reject(f"cannot build the draw: {err.__class__.__name__}: {str(err)[:160]}") from None


def _draw_instance(data, rule: A.Rule, stratum: Stratum) -> Instance:
    builder = _Builder(data, rule, stratum)
    for index in _order(rule):
        builder.add_node(rule.equations[index])
    consumed = {i for node in builder.nodes for i in node.input}
    produced = [o for node in builder.nodes for o in node.output if o]
    outputs = [o for o in produced if o not in consumed and o not in builder.ignored]
    intermediates = [o for o in produced if o in consumed and o in builder.pattern_outputs]
    checked = [builder.values[n] for n in _consumer_checked(builder.rule) if builder.values.get(n) in intermediates]
    sharing = builder.near_miss if builder.near_miss in ("intermediate-output", "extra-consumer") else None
    if checked and builder.chance(1 / builder.sharing, "share a checked value"):
        # a rule that looks at a value's readers is about both cases (a fusion for a
        # private sum, another for a shared one): half the draws share such a value
        intermediates = checked
        sharing = pick(builder.draw, ["intermediate-output", "extra-consumer"], label="how shared")
    if sharing == "intermediate-output" and intermediates:
        outputs.append(pick(builder.draw, intermediates, label="exposed"))
    elif sharing == "extra-consumer" and intermediates:
        target = pick(builder.draw, intermediates, label="extra consumer of")
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
        check_model(model, full_check=True)
    except Exception as err:
        raise Reject(f"invalid model: {str(err).splitlines()[0][:200]}") from None
    return Instance(
        model, builder.near_miss, builder.draws, builder.input_ranges, builder.input_shapes, builder.input_specials
    )
