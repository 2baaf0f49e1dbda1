"""rewriter: ONNX graph optimizations written as text rules.

    import rewriter
    result = rewriter.optimize("model.onnx", level="basic")
    onnx.save(result.model, "model.opt.onnx"); print(result.report.nodes_after)

Everything else (parser, graph view, matcher, rewriter) lives in subpackages.
"""

from __future__ import annotations

from .dsl import Pack, Rule, check_pack, load_pack, load_pack_text
from .errors import ArgumentError, FixpointError, GrowthError, ModelError, RewriterError, RuleError
from .explanation import Attempt, Binding, Cause, Explanation, Note
from .expr.functions import register_predicate
from .graph.model_io import load_model, save_model
from .onnx_facts.validity import check_model, register_onnxruntime_schemas
from .pipeline import Report, Result, bundled_packs, explain, optimize, parse_level
from .verify import verify

__version__ = "0.1.0"

__all__ = [
    "ArgumentError",
    "Attempt",
    "Binding",
    "Cause",
    "Explanation",
    "FixpointError",
    "GrowthError",
    "ModelError",
    "Note",
    "Pack",
    "Report",
    "Result",
    "RewriterError",
    "Rule",
    "RuleError",
    "bundled_packs",
    "check_model",
    "check_pack",
    "explain",
    "load_model",
    "load_pack",
    "load_pack_text",
    "optimize",
    "parse_level",
    "register_onnxruntime_schemas",
    "register_predicate",
    "save_model",
    "verify",
]
