"""Online mode: optimize with the packs, then open an ``onnxruntime.InferenceSession`` on the
result in one call, as ONNX Runtime's docs describe online optimization beside offline.

ONNX Runtime's own optimizer still runs on our output (its NCHWc layout, kernels it picks
per machine), with one exception chosen by measurement: where the CPU provider leads, its
SkipLayerNormFusion and EmbedLayerNormFusion are disabled.  onnxruntime's CPU kernels for
those fused ops are slower than the Add and LayerNormalization they replace (1.2x-8x, see
rules/layout.rules): our extended level fuses SkipLayerNormalization (and its simplified
form) as every peer does and our layout level splits them back on the CPU (given
``layout_may_grow``, on here), so the default level here is "all"; with
the fusions on, onnxruntime would fuse them back (BERT: 0.80 of ORT_ENABLE_ALL's time on
the original with them, 0.67 without; MobileNetV3 1.01 -> 1.00; ViT 0.81 -> 0.76).
"""

from __future__ import annotations

import inspect
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from onnx import ModelProto, TensorProto

from .dsl import Pack
from .errors import ArgumentError, ModelError, RewriterError, expect
from .graph.tensor_data import graph_tensors
from .onnx_facts.providers import CPU, provider_list
from .pipeline import optimize

# ONNX Runtime optimizers that would redo what our CPU packs leave out on purpose
CPU_SLOWER_FUSIONS = ("SkipLayerNormFusion", "EmbedLayerNormFusion")
_PROTOBUF_LIMIT = 2**31 - 1024  # larger models go to onnxruntime as a file with external data


def InferenceSession(  # (named like the onnxruntime class it returns)
    model: ModelProto | str | os.PathLike,
    level: str | int = "all",
    providers: Sequence[str] | str | None = None,
    rules: Sequence[str | os.PathLike | Pack] | None = None,
    session_options: Any = None,
    **optimize_options: Any,
) -> Any:
    """Optimize ``model`` with the packs up to ``level`` for ``providers`` (our names or
    onnxruntime's, priority first; CPU when not given) and return an
    ``onnxruntime.InferenceSession`` on the result with the same providers.

    ``session_options`` (an ``onnxruntime.SessionOptions``, changed in place) keeps the
    caller's settings; its graph optimization level is set to ORT_ENABLE_ALL, and where the
    CPU provider leads, the fusions in ``CPU_SLOWER_FUSIONS`` are disabled (see the module
    docstring).  Other keyword arguments go to ``rewriter.optimize`` (``layout_may_grow`` is
    on unless given: the session is the point, not the node count).  The optimized model
    is passed to onnxruntime in memory (through a temporary file past protobuf's 2 GB)."""
    import onnxruntime as ort

    _check_arguments(model, providers, session_options, optimize_options, ort.SessionOptions)
    order = provider_list(providers if providers is None or isinstance(providers, str) else list(providers))
    available = set(ort.get_available_providers())
    missing = [p for p in order if p not in available]
    if missing:
        raise RewriterError(f"onnxruntime here has no {', '.join(missing)} (it has {', '.join(sorted(available))})")
    # a session is about speed, never the node count: the layout level keeps what it makes
    optimize_options.setdefault("layout_may_grow", True)
    result = optimize(model, level=level, rules=rules, providers=order, **optimize_options)
    options = session_options if session_options is not None else ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    disabled = list(CPU_SLOWER_FUSIONS) if order[0] == CPU else []
    optimized = result.model
    if optimized.ByteSize() < _PROTOBUF_LIMIT:
        return ort.InferenceSession(
            optimized.SerializeToString(), options, providers=order, disabled_optimizers=disabled
        )
    with tempfile.TemporaryDirectory() as folder:
        import onnx

        path = Path(folder) / "model.onnx"
        onnx.save(optimized, str(path), save_as_external_data=True, location="model.onnx.data")
        return ort.InferenceSession(str(path), options, providers=order, disabled_optimizers=disabled)


def _check_arguments(
    model: object, providers: object, session_options: object, optimize_options: dict[str, Any], options_type: type
) -> None:
    """What would otherwise fail inside onnxruntime or half-way (an ``AttributeError`` on a
    provider given with its options, the optimized model handed over before onnxruntime
    found it cannot read it), said first as the library's own error."""
    if providers is not None:
        expect(providers, (str, list, tuple), "providers")
        if isinstance(providers, (list, tuple)):
            for item in providers:  # (onnxruntime's (name, options) pairs are not taken)
                expect(item, str, "each of providers (a name: CUDA, CPUExecutionProvider...)")
    if session_options is not None:
        expect(session_options, options_type, "session_options")
    passed_on = set(inspect.signature(optimize).parameters) - {"model_or_path", "level", "rules", "providers"}
    for name in optimize_options:
        if name not in passed_on:
            raise ArgumentError(
                f"InferenceSession() got an unexpected keyword argument '{name}' "
                f"(besides its own it takes rewriter.optimize's: {', '.join(sorted(passed_on))})"
            )
    if isinstance(model, ModelProto):
        for _, tensor in graph_tensors(model.graph):
            if tensor.data_location == TensorProto.EXTERNAL:
                raise ModelError(
                    f"tensor '{tensor.name}' keeps its data in an external file, which a model given in "
                    f"memory cannot reach: give the model's path, or load it with its data "
                    f"(onnx.load(path, load_external_data=True))"
                )
