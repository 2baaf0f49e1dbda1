"""Whether a model is valid: onnx's checker, knowing the ops onnxruntime adds to the ONNX domain.

onnxruntime defines a few ops in the default domain that onnx does not, above all
``SimplifiedLayerNormalization`` (what RMSNorm fuses into before opset 23).  onnx's checker
refuses them ("No Op registered"), although onnxruntime runs them.  The project's rule: an
output that onnxruntime runs and whose every op has a known schema is valid.  So before
checking, the schemas of those ops are registered with onnx (``onnx.defs.register_schema``,
once per process), built from onnxruntime's own schema list: inputs, outputs, type
constraints, attributes and their defaults.  Ops onnx already knows are never touched.

A user checks an output the same way: ``rewriter.check_model(model)``, or
``rewriter.register_onnxruntime_schemas()`` and then ``onnx.checker.check_model``.
"""

from __future__ import annotations

import os
from functools import lru_cache

import onnx
import onnx.defs
from onnx import ModelProto
from onnx.defs import OpSchema

from .schemas import ort_attribute, ort_operator_schemas


def check_model(model: ModelProto | str | os.PathLike, full_check: bool = True) -> None:
    """``onnx.checker.check_model`` with onnxruntime's ONNX-domain ops known; raises
    ``onnx.checker.ValidationError`` (or onnx's inference error) as onnx does."""
    register_onnxruntime_schemas()
    onnx.checker.check_model(model, full_check=full_check)


@lru_cache(maxsize=1)
def register_onnxruntime_schemas() -> tuple[str, ...]:
    """Register with onnx the ops onnxruntime defines in the default domain that onnx lacks
    (every version onnxruntime has), and the versions it defines before onnx has the op
    (LayerNormalization before opset 17); returns their names.  Idempotent."""
    raw = ort_operator_schemas()
    first: dict[str, int] = {}  # op -> the first opset onnx defines it at
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain == "":
            first[schema.name] = min(first.get(schema.name, schema.since_version), schema.since_version)
    added: list[str] = []
    for schema in sorted(raw, key=lambda s: (s.name, s.since_version)):
        if schema.domain not in ("", "ai.onnx") or schema.since_version >= first.get(schema.name, 10**9):
            continue
        try:
            onnx.defs.register_schema(_to_onnx(schema))
        except Exception:  # a schema onnx cannot express (or registered already): skip it
            continue
        added.append(schema.name)
    return tuple(dict.fromkeys(added))


def _to_onnx(schema) -> OpSchema:
    """An onnx ``OpSchema`` with the same signature as an onnxruntime schema."""

    def formal(param) -> OpSchema.FormalParameter:
        option = str(param.option).rsplit(".", 1)[-1]
        return OpSchema.FormalParameter(
            param.name,
            param.typeStr,
            param_option=getattr(OpSchema.FormalParameterOption, option),
            is_homogeneous=bool(param.isHomogeneous),
        )

    attributes = []
    for name, attr in schema.attributes.items():
        type_number, default = ort_attribute(attr)
        if default is not None:
            attributes.append(OpSchema.Attribute(name, default, attr.description))
        else:
            kind = OpSchema.AttrType(type_number)  # type: ignore[call-arg]  # onnx stubs: an int enum at run time
            attributes.append(OpSchema.Attribute(name, kind, attr.description, required=bool(attr.required)))
    return OpSchema(
        schema.name,
        "",
        schema.since_version,
        schema.doc or "",
        inputs=[formal(p) for p in schema.inputs],
        outputs=[formal(p) for p in schema.outputs],
        type_constraints=[(c.type_param_str, list(c.allowed_type_strs), "") for c in schema.type_constraints],
        attributes=attributes,
    )
