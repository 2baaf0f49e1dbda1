"""rewriter: ONNX graph optimizations written as text rules.

    import rewriter
    result = rewriter.optimize("model.onnx", level="basic")
    onnx.save(result.model, "model.opt.onnx"); print(result.report.nodes_after)

Everything else (parser, graph view, matcher, rewriter) lives in subpackages.

The public names are imported when first used (PEP 562), not with the package: the
command line is a module of this package, and ``rewriter --version`` or ``--help`` should
not pay for onnx, onnxruntime, NetworkX and hypothesis (half a second) to print a line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import ArgumentError, FixpointError, GrowthError, ModelError, RewriterError, RuleError
from .verify import verify  # (a light package: its campaign is imported by the first call)
from .version import __version__

if TYPE_CHECKING:  # what __getattr__ imports, for type checkers and editors
    from .dsl import Pack, Rule, check_pack, load_pack, load_pack_text
    from .explanation import Attempt, Binding, Cause, Explanation, Note
    from .expr.functions import register_predicate
    from .graph.model_io import load_model, save_model
    from .online import InferenceSession
    from .onnx_facts.validity import check_model, register_onnxruntime_schemas
    from .pipeline import Report, Result, bundled_packs, explain, optimize, parse_level

__all__ = [
    "ArgumentError",
    "Attempt",
    "Binding",
    "Cause",
    "Explanation",
    "FixpointError",
    "GrowthError",
    "InferenceSession",
    "ModelError",
    "Note",
    "Pack",
    "Report",
    "Result",
    "RewriterError",
    "Rule",
    "RuleError",
    "__version__",
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


def __getattr__(name: str) -> Any:
    """A public name, imported on first use and then kept as an ordinary attribute.  The
    imports are written out (not ``importlib``) so that tests/test_import_layers.py sees them."""
    if name in ("Pack", "Rule", "check_pack", "load_pack", "load_pack_text"):
        from . import dsl

        value = getattr(dsl, name)
    elif name == "register_predicate":
        from .expr import functions

        value = functions.register_predicate
    elif name in ("load_model", "save_model"):
        from .graph import model_io

        value = getattr(model_io, name)
    elif name in ("check_model", "register_onnxruntime_schemas"):
        from .onnx_facts import validity

        value = getattr(validity, name)
    elif name in ("Attempt", "Binding", "Cause", "Explanation", "Note"):
        from . import explanation

        value = getattr(explanation, name)
    elif name == "InferenceSession":
        from .online import InferenceSession

        value = InferenceSession
    elif name in ("Report", "Result", "bundled_packs", "explain", "optimize", "parse_level"):
        from . import pipeline

        value = getattr(pipeline, name)
    else:
        raise AttributeError(f"module 'rewriter' has no attribute '{name}'")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
