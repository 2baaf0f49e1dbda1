"""Op schemas: ONNX's own, plus the contrib ops onnxruntime registers (com.microsoft...).

Used to check rules statically (does the op exist, arity, attribute names) and to give
attributes their default values when a node leaves them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache, lru_cache

import onnx
from onnx import AttributeProto, helper

ONNX_DOMAINS = ("", "ai.onnx")


@dataclass(frozen=True)
class OpInfo:
    """What the engine needs of one op schema version."""

    domain: str
    name: str
    since_version: int
    min_inputs: int
    max_inputs: int
    min_outputs: int
    max_outputs: int
    attributes: dict  # name -> (AttributeProto.AttributeType, default AttributeProto | None)
    commutative: bool
    inputs: tuple[tuple[str, bool], ...] = ()  # (type constraint or type, variadic) per input
    outputs: tuple[tuple[str, bool], ...] = ()
    required_inputs: tuple[bool, ...] = ()  # per formal input: must be given (not "")
    # type parameter -> the types it allows ("tensor(float)"...), and the parameters of
    # variadic formals whose values may differ in type (Loop's state, say)
    type_constraints: dict = field(default_factory=dict)
    heterogeneous: frozenset = frozenset()

    def formal(self, index: int, output: bool = False) -> str | None:
        """The type parameter (or fixed type) of input/output ``index`` (the last formal
        repeats when variadic); None past the end."""
        formals = self.outputs if output else self.inputs
        if index < len(formals):
            return formals[index][0]
        if formals and formals[-1][1]:
            return formals[-1][0]
        return None


# Ops whose two (or more) inputs may be given in any order.
COMMUTATIVE = frozenset(
    {
        ("", "Add"),
        ("", "Mul"),
        ("", "And"),
        ("", "Or"),
        ("", "Xor"),
        ("", "Equal"),
        ("", "Max"),
        ("", "Min"),
        ("", "Sum"),
        ("", "Mean"),
        ("", "BitwiseAnd"),
        ("", "BitwiseOr"),
        ("", "BitwiseXor"),
    }
)


def normalize_domain(domain: str) -> str:
    return "" if domain in ONNX_DOMAINS else domain


def _from_onnx(schema: onnx.defs.OpSchema) -> OpInfo:
    attributes = {}
    for name, attr in schema.attributes.items():
        default = attr.default_value if attr.default_value.type != AttributeProto.UNDEFINED else None
        # onnx's stubs declare AttrType as a plain class; at runtime it is an int enum
        attributes[name] = (int(attr.type), default)  # type: ignore[call-overload]
    domain = normalize_domain(schema.domain)
    variadic = onnx.defs.OpSchema.FormalParameterOption.Variadic
    return OpInfo(
        domain,
        schema.name,
        schema.since_version,
        schema.min_input,
        schema.max_input,
        schema.min_output,
        schema.max_output,
        attributes,
        (domain, schema.name) in COMMUTATIVE,
        tuple((p.type_str, p.option == variadic) for p in schema.inputs),
        tuple((p.type_str, p.option == variadic) for p in schema.outputs),
        tuple(p.option == onnx.defs.OpSchema.FormalParameterOption.Single for p in schema.inputs),
        {c.type_param_str: frozenset(c.allowed_type_strs) for c in schema.type_constraints},
        frozenset(
            p.type_str for p in (*schema.inputs, *schema.outputs) if p.option == variadic and not p.is_homogeneous
        ),
    )


def ort_attribute(attr) -> tuple[int, AttributeProto | None]:
    """An onnxruntime schema attribute's type and default (None when it has none).  The
    default is only bound as ``_default_value`` (a serialized AttributeProto): onnxruntime's
    Python schema API has no public name for it."""
    raw = getattr(attr, "_default_value", b"")
    default = AttributeProto.FromString(raw) if raw else None
    if default is not None and default.type == AttributeProto.UNDEFINED:
        default = None
    return (int(attr.type.value) if hasattr(attr.type, "value") else int(attr.type)), default


@lru_cache(maxsize=1)
def ort_operator_schemas() -> tuple:
    """onnxruntime's operator schemas (every domain and version); empty without onnxruntime."""
    try:
        from onnxruntime.capi import _pybind_state as ort_state

        return tuple(ort_state.get_all_operator_schema())
    except Exception:  # onnxruntime missing or without the schema API: ONNX ops only
        return ()


def _from_ort(schema) -> OpInfo:
    attributes = {name: ort_attribute(attr) for name, attr in schema.attributes.items()}

    def formal(params):
        return tuple((p.typeStr, str(p.option).endswith("Variadic")) for p in params)

    return OpInfo(
        schema.domain,
        schema.name,
        schema.since_version,
        schema.min_input,
        schema.max_input,
        schema.min_output,
        schema.max_output,
        attributes,
        False,
        formal(schema.inputs),
        formal(schema.outputs),
        tuple(str(p.option).endswith("Single") for p in schema.inputs),
        {c.type_param_str: frozenset(c.allowed_type_strs) for c in schema.type_constraints},
        frozenset(
            p.typeStr
            for p in (*schema.inputs, *schema.outputs)
            if str(p.option).endswith("Variadic") and not p.isHomogeneous
        ),
    )


@lru_cache(maxsize=1)
def _ort_schema_table() -> dict[tuple[str, str], list]:
    """onnxruntime's schemas by (domain, op), as onnxruntime gives them: each op's are made
    ``OpInfo``s when first asked for (all 883 at once took 50 ms of every run)."""
    table: dict[tuple[str, str], list] = {}
    for schema in ort_operator_schemas():
        # the standard domain is onnx.defs' — onnxruntime's entries there are kept as a
        # fallback for the ops it adds to it (LayerNormalization before opset 17,
        # SimplifiedLayerNormalization)
        table.setdefault((normalize_domain(schema.domain), schema.name), []).append(schema)
    return table


@cache
def _ort_versions(domain: str, op: str) -> tuple[OpInfo, ...]:
    """Every version onnxruntime registers of ``domain.op``, oldest first."""
    found = (_from_ort(schema) for schema in _ort_schema_table().get((domain, op), ()))
    return tuple(sorted(found, key=lambda info: info.since_version))


@lru_cache(maxsize=4096)
def find_schema(domain: str, op: str, version: int | None = None) -> OpInfo | None:
    """The schema of ``domain.op`` in force at opset ``version`` (latest when None)."""
    domain = normalize_domain(domain)
    if domain == "" or domain == "ai.onnx.ml" or domain == "ai.onnx.preview.training":
        try:
            if version is None:
                schema = onnx.defs.get_schema(op, domain)
            else:
                schema = onnx.defs.get_schema(op, int(version), domain)
            return _from_onnx(schema)
        except onnx.defs.SchemaError:
            if domain != "":
                return None
    versions = _ort_versions(domain, op)
    if not versions:
        return None
    if version is None:
        return versions[-1]
    eligible = [v for v in versions if v.since_version <= version]
    return eligible[-1] if eligible else versions[0]


@lru_cache(maxsize=1)
def _onnx_schema_history() -> dict[tuple[str, str], list]:
    table: dict[tuple[str, str], list] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        table.setdefault((normalize_domain(schema.domain), schema.name), []).append(schema)
    return table


@cache
def latest_opset(domain: str) -> int:
    """The newest version of a standard domain the installed onnx defines."""
    domain = normalize_domain(domain)
    return max(
        (s.since_version for (d, _), schemas in _onnx_schema_history().items() if d == domain for s in schemas),
        default=1,
    )


def onnx_op_names(domain: str) -> list[str]:
    """Every op name ONNX knows in a domain (for "did you mean" hints)."""
    domain = normalize_domain(domain)
    return sorted({name for d, name in _onnx_schema_history() if d == domain})


@lru_cache(maxsize=4096)
def op_signature(domain: str, op: str) -> OpInfo | None:
    """The union of every version of an op: loosest arity, every attribute any version has.

    Rules may target several opsets at once (``Slice`` with attributes before opset 10,
    with inputs after), so static checks accept what any version accepts."""
    domain = normalize_domain(domain)
    if domain in ("", "ai.onnx.ml", "ai.onnx.preview.training"):
        versions = [_from_onnx(s) for s in _onnx_schema_history().get((domain, op), [])]
        versions += _ort_versions(domain, op)
    else:
        versions = list(_ort_versions(domain, op))
    if not versions:
        return None
    attributes: dict = {}
    for info in sorted(versions, key=lambda v: v.since_version):
        attributes.update(info.attributes)
    latest = max(versions, key=lambda v: v.since_version)
    return OpInfo(
        domain,
        op,
        latest.since_version,
        min(v.min_inputs for v in versions),
        max(v.max_inputs for v in versions),
        min(v.min_outputs for v in versions),
        max(v.max_outputs for v in versions),
        attributes,
        latest.commutative,
    )


def known_domains() -> set[str]:
    return {"", "ai.onnx.ml"} | {d for d, _ in _ort_schema_table()}


def attribute_default(domain: str, op: str, version: int | None, name: str) -> object:
    """The default value of an attribute, as a Python value (None when it has none)."""
    value = _attribute_default(domain, op, version, name)
    return list(value) if type(value) is list else value  # (a list of the caller's own)


@cache
def _attribute_default(domain: str, op: str, version: int | None, name: str) -> object:
    info = find_schema(domain, op, version)
    if info is None or name not in info.attributes:
        return None
    default = info.attributes[name][1]
    return None if default is None else attribute_value(default)


def attribute_value(attr: AttributeProto) -> object:
    """An attribute as a plain Python value (strings decoded, tensors as numpy)."""
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8", errors="replace") for v in value]
    return value


def attribute_type(domain: str, op: str, version: int | None, name: str) -> int | None:
    info = find_schema(domain, op, version)
    if info is None or name not in info.attributes:
        return None
    return info.attributes[name][0]


def is_commutative(domain: str, op: str) -> bool:
    return (normalize_domain(domain), op) in COMMUTATIVE


@lru_cache(maxsize=1024)
def function_body_ops(domain: str, op: str, version: int | None) -> tuple[tuple[str, str], ...] | None:
    """The (domain, op) of each node of the ONNX function that defines ``op`` at opset
    ``version``, for an op onnx defines as a plain function (HardSwish: HardSigmoid, Mul);
    None when it has none (or only a body that depends on the node's types).  onnxruntime
    inlines such a node when no provider has a kernel for it."""
    if normalize_domain(domain) != "":
        return None
    try:
        schema = onnx.defs.get_schema(op, int(version or onnx.defs.onnx_opset_version()), "")
    except onnx.defs.SchemaError:
        return None
    body = schema.function_body.node  # (empty for an op without a plain function body)
    return tuple((normalize_domain(n.domain), n.op_type) for n in body) or None
