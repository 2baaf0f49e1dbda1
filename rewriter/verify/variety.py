"""What the ops' schemas allow beyond what a pattern captures, for the instance generator.

A careless rule is wrong only in situations its author did not think of, and a generator
that draws only what the pattern names never reaches them.  So instances also vary:

* the element type, over what every op of the pattern accepts (double and integers, not
  only float32/float16), and the type of an input whose schema type parameter is its own
  (BatchNormalization-15's statistics in float32 beside a float16 input);
* attributes the pattern does not mention, at values other than their defaults;
* constants that act as masks (the branches of a Where, what is added before a Softmax)
  holding infinities, NaN, or the type's extreme finite values.
"""

from __future__ import annotations

from functools import cache

import numpy as np
from onnx import AttributeProto, TensorProto

from ..dsl import ast as A
from ..onnx_facts.schemas import OpInfo, find_schema, normalize_domain
from ..partition.kernels import cpu_table

F, F16, D = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE
I32, I64 = TensorProto.INT32, TensorProto.INT64
FLOATS = (F, F16, D)
# element types drawn for a pattern, with their weights, when all its ops accept them
_WEIGHTS = {F: 6, F16: 2, D: 2, I64: 1, I32: 1}
TYPE_NAMES: dict[int, str] = {
    F: "tensor(float)",
    F16: "tensor(float16)",
    D: "tensor(double)",
    I64: "tensor(int64)",
    I32: "tensor(int32)",
}


def element_types(rule: A.Rule, opset: int) -> list[int]:
    """Element types to draw an instance of ``rule`` in, repeated by weight: those the
    first input of every pattern node accepts, by its schema and by onnxruntime's CPU
    kernels (instances run there; float32 when they share none)."""
    allowed = set(_WEIGHTS)
    for eq in rule.equations:
        alt = eq.alternatives[0]
        domain = normalize_domain(alt.domain)
        info = find_schema(domain, alt.op, opset)
        types = input_types(info, 0)
        if types is None or not any(TYPE_NAMES[t] in types for t in FLOATS):
            continue  # a condition, indices, a shape: not the data type of the pattern
        allowed &= {t for t in allowed if TYPE_NAMES[t] in types}
        kernel_types = _cpu_kernel_types(domain, alt.op, info)
        if kernel_types is not None:
            allowed &= {t for t in allowed if TYPE_NAMES[t] in kernel_types}
    if not allowed:
        return [F]
    return [t for t in _WEIGHTS for _ in range(_WEIGHTS[t]) if t in allowed]


def _cpu_kernel_types(domain: str, op: str, info: OpInfo | None) -> set[str] | None:
    """The types onnxruntime's CPU kernels of the op take for its first input (None when
    unknown: no constraint)."""

    if info is None:
        return None
    formal = info.formal(0)
    kernels = [k for k in cpu_table().by_op.get((domain, op), ()) if k.since <= info.since_version <= k.until]
    if not kernels or formal not in info.type_constraints:
        return None
    found: set[str] = set()
    for kernel in kernels:
        found |= set(kernel.types.get(formal, info.type_constraints[formal]))
    return found


def input_types(info: OpInfo | None, slot: int) -> frozenset | None:
    """The types (``"tensor(float)"``...) input ``slot`` of the schema takes; None: unknown."""
    if info is None:
        return None
    formal = info.formal(slot)
    if formal is None:
        return None
    return info.type_constraints.get(formal, frozenset({formal}) if "(" in formal else None)


def own_float_types(info: OpInfo | None, slot: int, main: int) -> list[int]:
    """Float types input ``slot`` may take apart from the node's main type: its schema
    type parameter differs from the first input's (mixed precision), or []."""
    if info is None or main not in FLOATS:
        return []
    formal, first = info.formal(slot), info.formal(0)
    if formal is None or formal == first or formal not in info.type_constraints:
        return []
    allowed = info.type_constraints[formal]
    return [t for t in FLOATS if t != main and TYPE_NAMES[t] in allowed]


def unmentioned_attribute_values(
    info: OpInfo | None, alt: A.OpPattern, rank: int, channels: int | None = None
) -> dict[str, list]:
    """For each attribute of the op the pattern does not mention, or mentions as ``_`` (any
    value: where a careless author's unchecked attribute ends up): values other than its
    default worth drawing (only attributes whose meaning is known here: a value the
    instance's shapes can take; ``channels``, the first input's channel dim, sizes a
    ``channels`` attribute)."""
    if info is None:
        return {}
    mentioned = {a.name for a in alt.attrs if not a.any_value}
    spatial = max(rank - 2, 1)
    axes = list(range(rank))
    table: dict[str, list] = {
        "strides": [[2] * spatial],
        "dilations": [[2] * spatial],
        "pads": [[1] * (2 * spatial)],
        "ceil_mode": [1],
        "count_include_pad": [1],
        "alpha": [0.3, 2.0],
        "beta": [0.5, 2.0],
        "epsilon": [0.1, 1.0],
        "momentum": [0.5],
        "keepdims": [0],
        "noop_with_empty_axes": [1],
        "transA": [1],
        "transB": [1],
        "allowzero": [1],
        "approximate": ["tanh"],
        "unidirectional": [1],
        "mask_filter_value": [-1.0],
        "fmod": [1],
        "select_last_index": [1],
        "training_mode": [1],
        "spatial": [0],
        "seed": [3.0],
        "scale": [0.5],
        "min": [-0.5],
        "max": [0.5],
        "axis": [a for a in (0, 1, -2) if -rank <= a < rank] if rank else [],
        "stash_type": [0],
        "to": [TensorProto.DOUBLE],
        "saturate": [0],
        "largest": [0],
        "perm": [axes, axes[::-1], axes[1:] + axes[:1]] if rank >= 2 else [],
        "channels": [c for c in {channels, (channels or 0) - 4, (channels or 0) - 1} if c and c > 0],
    }
    found = {}
    for name, (kind, _) in info.attributes.items():
        if name in mentioned or name not in table or not table[name]:
            continue
        values = [_as_kind(v, kind) for v in table[name]]
        found[name] = [v for v in values if v is not None]
    return {name: values for name, values in found.items() if values}


def _as_kind(value, kind: int):
    """A table value as the attribute type the schema declares (None when it cannot be)."""
    if kind == AttributeProto.INT and isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    if kind == AttributeProto.FLOAT and isinstance(value, (int, float)):
        return float(value)
    if kind == AttributeProto.STRING:
        return value if isinstance(value, str) else None
    if kind in (AttributeProto.INTS, AttributeProto.FLOATS):
        return value if isinstance(value, list) else None
    return value if not isinstance(value, (list, str)) else None


def special_values(dtype: int) -> list[float]:
    """Non-finite and extreme values of a float type (what masks hold)."""
    float_types: dict[int, type[np.floating]] = {F: np.float32, F16: np.float16, D: np.float64}
    np_type = np.dtype(float_types.get(dtype, np.float32))
    info = np.finfo(np_type)
    return [float("-inf"), float("inf"), float("nan"), float(info.min), float(info.max)]


SCORE_OPS = frozenset({"MatMul", "FusedMatMul", "Gemm", "Einsum", "Mul", "Div", "Tanh"})  # what computes scores


def mask_inputs(rule: A.Rule, constants: set[str]) -> set[str]:
    """Pattern values that act as masks: the branches of a Where, the constants (of
    ``constants``, those the rule requires constant) added to a value a Softmax reads, and a
    free value added to scores the pattern computes (by a product, a scale or a cap: a mask
    that arrives at run time, an attention mask).  (The scores beside them are data:
    non-finite scores are not what a mask rule is about; where both operands are free,
    which is the mask is unknown.)"""
    softmax_reads = {
        arg.name
        for eq in rule.equations
        for alt in eq.alternatives
        if alt.op in ("Softmax", "LogSoftmax")
        for arg in alt.args
        if isinstance(arg, A.VarArg)
    }
    # what computes each pattern value (nested calls are equations of their own)
    producer = {name: eq.alternatives[0].op for eq in rule.equations for name in eq.out_names}
    found: set[str] = set()
    for eq in rule.equations:
        for alt in eq.alternatives:
            names = [getattr(arg, "name", None) for arg in alt.args]
            if alt.op == "Where":
                found.update(n for n in names[1:3] if n)
            elif alt.op in ("Add", "Sub") and set(eq.out_names) & softmax_reads:
                found.update(n for n in names if n in constants)
                scores = [producer.get(n or "") in SCORE_OPS for n in names]
                if len(names) == 2 and scores.count(True) == 1:
                    found.update(n for n, s in zip(names, scores) if not s and n and n not in producer)
    return found


# ops whose output has the rank of their first argument (the others are parameters)
RANK_KEEPING_OPS = frozenset(
    "Transpose Relu Sigmoid Tanh Neg Abs Identity Cast Softmax LogSoftmax Erf Sqrt Exp Log Reciprocal "
    "Floor Ceil Round Sign Clip Gelu HardSigmoid HardSwish LeakyRelu Elu Selu Softplus Mish Dropout "
    "DequantizeLinear QuantizeLinear LayerNormalization".split()
)


def rank_hints(rule: A.Rule) -> dict[str, int]:
    """Ranks the rule's ``where`` clauses ask of its values (``rank(x) == 3``), and rank 2
    for what a Gemm reads: a free input drawn without an ``example`` takes that rank, so
    draws are not mostly invalid before any constraint is tried."""
    hints: dict[str, int] = {}
    stack = [w.expr for w in rule.wheres]
    while stack:
        expr = stack.pop()
        if isinstance(expr, A.BoolOp):
            stack.extend(expr.values)
        elif isinstance(expr, A.Compare) and expr.ops == ("==",):
            left, right = expr.operands
            if isinstance(right, A.Call):
                left, right = right, left
            if (
                isinstance(left, A.Call)
                and left.func == "rank"
                and len(left.args) == 1
                and isinstance(left.args[0], A.Name)
                and isinstance(right, A.Num)
                and 0 <= right.value <= 6
            ):  # (a rank no instance can have is no hint)
                hints.setdefault(left.args[0].id, int(right.value))
    for eq in rule.equations:
        for alt in eq.alternatives:
            if alt.op == "Gemm" and not alt.domain:
                for arg in alt.args[:2]:
                    if isinstance(arg, A.VarArg):
                        hints.setdefault(arg.name, 2)
    # what a rank-keeping op reads (its first argument) has the rank of what it makes
    for _ in range(len(rule.equations)):
        for eq in rule.equations:
            for alt in eq.alternatives:
                if alt.op in RANK_KEEPING_OPS and alt.args and isinstance(alt.args[0], A.VarArg):
                    known = [hints[o] for o in eq.out_names if o in hints]
                    if known:
                        hints.setdefault(alt.args[0].name, known[0])
    return hints


def attribute_opsets(rule: A.Rule, low: int, high: int) -> list[int]:
    """Opsets in [low, high] where a pattern node has an attribute the pattern mentions that
    the op no longer has at ``high`` (BatchNormalization's ``spatial``, gone at 9): the
    newest such opset per attribute, so that a rule ignoring it is drawn where it exists."""
    found: set[int] = set()
    for eq in rule.equations:
        for alt in eq.alternatives:
            domain = normalize_domain(alt.domain)
            if domain:
                continue
            now = find_schema(domain, alt.op, high)
            for attr in alt.attrs:
                if now is not None and attr.name in now.attributes:
                    continue
                opset = _newest_with(alt.op, attr.name, low, high)
                if opset is not None:
                    found.add(opset)
    return sorted(found)


@cache
def _newest_with(op: str, attribute: str, low: int, high: int) -> int | None:
    for opset in range(high, max(low, 1) - 1, -1):
        info = find_schema("", op, opset)
        if info is not None and attribute in info.attributes:
            return opset
    return None


def opset_range(rule: A.Rule) -> tuple[int, int]:
    """The opsets the rule's ``where`` clauses allow (``opset() >= 23``, ``opset() < 10``):
    draws without an ``example opset`` are made in that range."""
    low, high = 1, 10**6
    for where in rule.wheres:
        for conjunct in A.conjuncts(where.expr):
            if not (isinstance(conjunct, A.Compare) and len(conjunct.ops) == 1):
                continue
            left, right = conjunct.operands
            if isinstance(left, A.Call) and left.func == "opset" and not left.args and isinstance(right, A.Num):
                bound = int(right.value)
                op = conjunct.ops[0]
                if op == ">=":
                    low = max(low, bound)
                elif op == ">":
                    low = max(low, bound + 1)
                elif op == "<":
                    high = min(high, bound - 1)
                elif op == "<=":
                    high = min(high, bound)
                elif op == "==":
                    low, high = max(low, bound), min(high, bound)
    return low, high
