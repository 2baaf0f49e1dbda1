"""Execution provider names and the device designators of ONNX Runtime's layering setting.

Users may write ``CUDA`` or ``CUDAExecutionProvider``; the engine always stores the full
ONNX Runtime name.  Device designators (``cpu``, ``gpu``, ``cuda``, ``npu``...) name a kind
of device; each resolves to the first registered provider of that kind.
"""

from __future__ import annotations

from ..errors import RewriterError

CPU = "CPUExecutionProvider"

# short name (lower case) -> ONNX Runtime's provider name
_ALIASES = {
    "cpu": CPU,
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "trt": "TensorrtExecutionProvider",
    "rocm": "ROCMExecutionProvider",
    "migraphx": "MIGraphXExecutionProvider",
    "dml": "DmlExecutionProvider",
    "directml": "DmlExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "qnn": "QNNExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "nnapi": "NnapiExecutionProvider",
    "webgpu": "WebGpuExecutionProvider",
    "xnnpack": "XnnpackExecutionProvider",
    "vitisai": "VitisAIExecutionProvider",
    "acl": "ACLExecutionProvider",
    "armnn": "ArmNNExecutionProvider",
    "js": "JsExecutionProvider",
    "dnnl": "DnnlExecutionProvider",
}

# device kind of each provider, for the layering setting's designators
_KIND = {
    CPU: "cpu",
    "DnnlExecutionProvider": "cpu",
    "XnnpackExecutionProvider": "cpu",
    "ACLExecutionProvider": "cpu",
    "ArmNNExecutionProvider": "cpu",
    "CUDAExecutionProvider": "gpu",
    "TensorrtExecutionProvider": "gpu",
    "ROCMExecutionProvider": "gpu",
    "MIGraphXExecutionProvider": "gpu",
    "DmlExecutionProvider": "gpu",
    "WebGpuExecutionProvider": "gpu",
    "JsExecutionProvider": "gpu",
    "QNNExecutionProvider": "npu",
    "VitisAIExecutionProvider": "npu",
    "OpenVINOExecutionProvider": "npu",
    "CoreMLExecutionProvider": "npu",
    "NnapiExecutionProvider": "npu",
}
_VENDOR = {
    "nvidia": ("CUDAExecutionProvider", "TensorrtExecutionProvider"),
    "amd": ("ROCMExecutionProvider", "MIGraphXExecutionProvider"),
    "intel": ("OpenVINOExecutionProvider", "DmlExecutionProvider"),
}


def provider_name(name: str) -> str:
    """``CUDA`` / ``cuda`` / ``CUDAExecutionProvider`` -> ``CUDAExecutionProvider``."""
    text = name.strip()
    if text.endswith("ExecutionProvider"):
        known = {v.lower(): v for v in _ALIASES.values()}
        return known.get(text.lower(), text)
    full = _ALIASES.get(text.lower())
    if full is None:
        raise RewriterError(f"unknown execution provider '{name}' (use a name like CUDA, CPU or CUDAExecutionProvider)")
    return full


def provider_list(names: list[str] | tuple[str, ...] | str | None) -> list[str]:
    """The priority-ordered provider list: full names, duplicates dropped, CPU appended."""
    if names is None:
        names = []
    if isinstance(names, str):
        names = [n for n in names.split(",") if n.strip()]
    result: list[str] = []
    for name in names:
        full = provider_name(name)
        if full not in result:
            result.append(full)
    if CPU not in result:
        result.append(CPU)
    return result


def short_name(provider: str) -> str:
    """``CUDAExecutionProvider`` -> ``CUDA`` (for reports)."""
    return provider[: -len("ExecutionProvider")] if provider.endswith("ExecutionProvider") else provider


def resolve_device(designator: str, providers: list[str]) -> str | None:
    """The registered provider a layering designator names, or None (then it is skipped)."""
    text = designator.strip().lower()
    if text in ("cpu",):
        return next((p for p in providers if _KIND.get(p) == "cpu"), None)
    if text == "accelerator":
        return next((p for p in providers if _KIND.get(p, "npu") != "cpu"), None)
    if text in ("gpu", "npu"):
        return next((p for p in providers if _KIND.get(p) == text), None)
    if text.startswith("gpu:"):
        qualifier = text[4:]
        if qualifier.isdigit():  # one instance per EP type: the index selects the device only
            return next((p for p in providers if _KIND.get(p) == "gpu"), None)
        wanted = _VENDOR.get(qualifier, ())
        return next((p for p in providers if p in wanted), None)
    if text in _ALIASES:
        full = _ALIASES[text]
        return full if full in providers else None
    return None
