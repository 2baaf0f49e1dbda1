"""Run models in onnxruntime (all optimizations off) and compare their outputs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper


def random_feeds(
    model: onnx.ModelProto,
    seed: int,
    dynamic_dim: int = 2,
    ranges: dict[str, tuple[int, int]] | None = None,
    shapes: dict[str, list[int]] | None = None,
    specials: dict[str, tuple[float, str]] | None = None,
) -> dict[str, np.ndarray]:
    """Random inputs for every graph input: normal floats, bools, 8- and 16-bit ints over
    their whole range (quantized data), other ints small and non-negative
    (0/1 for inputs named like masks or type ids, which index 2-row tables), or ints
    in ``ranges[name]`` = [low, high) where the caller knows better (Gather indices read
    from the end when negative).  Symbolic dims are ``dynamic_dim`` unless ``shapes``
    gives an input's dims.  ``specials[name]`` = (value, where): that float input holds
    the value everywhere, along whole rows of its last axis (a fully masked query), or in
    some elements."""
    rng = np.random.default_rng(seed)
    ranges, shapes = ranges or {}, shapes or {}
    initializers = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in initializers:
            continue
        tensor = vi.type.tensor_type
        shape = shapes.get(vi.name) or [
            d.dim_value if d.HasField("dim_value") else dynamic_dim for d in tensor.shape.dim
        ]
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        if np.issubdtype(dtype, np.floating):
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[vi.name] = rng.integers(0, 2, shape).astype(bool)
        elif vi.name in ranges:
            low, high = ranges[vi.name]
            feeds[vi.name] = rng.integers(low, high, shape).astype(dtype)
        elif dtype.itemsize <= 2:  # 8- and 16-bit ints hold quantized data: their whole range
            info = np.iinfo(dtype)
            feeds[vi.name] = rng.integers(int(info.min), int(info.max) + 1, shape).astype(dtype)
        else:
            high = 2 if any(k in vi.name for k in ("mask", "type")) else 4
            feeds[vi.name] = rng.integers(0, high, shape).astype(dtype)
    for name, (value, where) in (specials or {}).items():
        if name in feeds and feeds[name].dtype.kind == "f":
            feeds[name] = with_special(feeds[name], value, where, rng)
    return feeds


def with_special(array: np.ndarray, value: float, where: str, rng: np.random.Generator) -> np.ndarray:
    """A copy of ``array`` holding ``value`` everywhere, along whole rows of its last axis,
    or in some elements (``where``), the rows and elements chosen by ``rng``."""
    array = np.array(array, copy=True)
    if array.size <= 1 or where == "everywhere":
        array[...] = value
    elif where == "rows" and array.ndim >= 1:
        rows = rng.integers(0, 2, array.shape[:-1] + (1,)).astype(bool)
        array[np.broadcast_to(rows, array.shape)] = value
    else:
        array[rng.integers(0, 2, array.shape).astype(bool)] = value
    return array


def empty_feeds(model: onnx.ModelProto, shapes: dict[str, list[int]] | None = None) -> list[dict[str, np.ndarray]]:
    """Inputs with every symbolic dim 0 (an empty batch, no tokens), then, given the run-time
    ``shapes`` of the inputs, with each symbolic dim 0 alone (an empty batch of some tokens:
    onnxruntime's RotaryEmbedding refuses a cache of fewer rows than the tokens); none when
    no input has a symbolic dim.  A rewrite must not fail or crash where the original gives
    an empty result (onnxruntime's GroupQueryAttention divides by the batch size).
    A dim named only as the last axis of inputs of rank 3 or more (a hidden or head size,
    an image's width) stays at its drawn size (1 without ``shapes``): an empty input is an
    empty batch or sequence, and onnxruntime's attention kernels divide by a head size of 0
    (the original model killing the process, not the rewrite)."""
    initializers = {t.name for t in model.graph.initializer}
    inputs = [vi for vi in model.graph.input if vi.name not in initializers]
    emptied: dict[str, bool] = {}  # symbolic name -> whether some input has it off a feature axis
    for vi in inputs:
        dims = vi.type.tensor_type.shape.dim
        for axis, d in enumerate(dims):
            if not d.HasField("dim_value"):
                feature = len(dims) >= 3 and axis == len(dims) - 1
                emptied[d.dim_param] = emptied.get(d.dim_param, False) or not feature
    names = [name for name, empty in emptied.items() if empty]
    if not names:
        return []
    chosen: list[set[str]] = [set(names)]
    if shapes:
        chosen += [{name} for name in names if name]

    def feeds(zero: set[str]) -> dict[str, np.ndarray]:
        out = {}
        for vi in inputs:
            tensor = vi.type.tensor_type
            drawn = shapes.get(vi.name) if shapes else None
            dims = []
            for axis, d in enumerate(tensor.shape.dim):
                if d.HasField("dim_value"):
                    dims.append(d.dim_value)
                elif d.dim_param in zero:
                    dims.append(0)
                else:
                    dims.append(int(drawn[axis]) if drawn is not None and axis < len(drawn) else 1)
            out[vi.name] = np.zeros(dims, helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        return out

    return [feeds(zero) for zero in chosen]


def empty_result_problem(before: dict[str, np.ndarray], after: dict[str, np.ndarray]) -> str | None:
    """How the rewritten model's outputs on empty inputs differ from the original's (their
    shapes: the values of an empty result are none), or None."""
    for name, expected in before.items():
        got = after.get(name)
        if got is None or got.shape != expected.shape:
            return (
                f"on empty inputs (dynamic dims 0) output '{name}' has shape "
                f"{None if got is None else list(got.shape)}, the original's {list(expected.shape)}"
            )
    return None


def run_model(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    # drawn instances are tiny, and campaigns run side by side (a worker per core, or test
    # workers): one thread each, and no thread pool left spinning beside the others
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


DEFAULT_TOLERANCE = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-7}


@dataclass
class Difference:
    """The first output that differs, and the largest errors seen."""

    output: str
    message: str
    max_abs: float = 0.0
    max_rel: float = 0.0


def feeds_tolerance(feeds: dict[str, np.ndarray]) -> float:
    """The tolerance of the least precise float input: a float32 output computed from
    float16 inputs carries float16 rounding (a fused kernel that keeps an intermediate sum
    in float32 differs from the graph that rounded it to float16 by that much)."""
    return max((DEFAULT_TOLERANCE.get(v.dtype, 0.0) for v in feeds.values() if v.dtype.kind == "f"), default=0.0)


def compare_outputs(
    before: dict[str, np.ndarray],
    after: dict[str, np.ndarray],
    tolerance: float | None = None,
    inputs_tolerance: float = 0.0,
    integer_tolerance: int = 0,
) -> tuple[Difference | None, float, float]:
    """(first difference or None, max abs error, max rel error) over outputs by name.

    Floats agree when |a - b| <= tol * (1 + |a| + mean |a|) elementwise (tol per dtype, at
    least the inputs' tolerance, unless the rule sets one): the mean magnitude of the output
    stands for the size of what was summed to get it (a convolution over 24 channels
    rounds its weights' products differently once they are scaled, by more than one unit of
    a small result).  NaN must meet NaN and infinities their own sign.  Integers agree within
    ``integer_tolerance`` (the rule's; 0 unless it says so); other types must be equal."""
    worst_abs = worst_rel = 0.0
    for name, expected in before.items():
        if name not in after:
            return Difference(name, f"output '{name}' is missing after the rewrite"), worst_abs, worst_rel
        actual = after[name]
        if expected.shape != actual.shape or expected.dtype != actual.dtype:
            return (
                Difference(
                    name,
                    f"output '{name}' is {actual.dtype}{list(actual.shape)} after the rewrite, "
                    f"{expected.dtype}{list(expected.shape)} before",
                ),
                worst_abs,
                worst_rel,
            )
        if expected.dtype.kind in "iu" and integer_tolerance:
            steps = np.abs(expected.astype(np.int64) - actual.astype(np.int64))
            if steps.size and steps.max() > integer_tolerance:
                message = f"output '{name}' differs by {int(steps.max())} (integer tolerance {integer_tolerance})"
                return Difference(name, message, float(steps.max())), worst_abs, worst_rel
            worst_abs = max(worst_abs, float(steps.max()) if steps.size else 0.0)
            continue
        if expected.dtype.kind != "f":
            if not np.array_equal(expected, actual):
                if expected.dtype.kind in "iu" and expected.shape == actual.shape:  # by how much
                    steps = np.abs(expected.astype(np.int64) - actual.astype(np.int64))
                    worst_abs = max(worst_abs, float(steps.max()))
                    return (
                        Difference(name, f"output '{name}' differs by {int(steps.max())}", worst_abs),
                        worst_abs,
                        worst_rel,
                    )
                return Difference(name, f"output '{name}' differs"), worst_abs, worst_rel
            continue
        a, b = expected.astype(np.float64), actual.astype(np.float64)
        nan_a, nan_b = np.isnan(a), np.isnan(b)
        if (
            not np.array_equal(nan_a, nan_b)
            or not np.array_equal(np.isposinf(a), np.isposinf(b))
            or not np.array_equal(np.isneginf(a), np.isneginf(b))
        ):
            return Difference(name, f"output '{name}' has NaN/inf in other places"), worst_abs, worst_rel
        finite = np.isfinite(a)
        err = np.abs(a[finite] - b[finite])  # (inf - inf is not computed: no warning)
        if err.size:
            worst_abs = max(worst_abs, float(err.max()))
            worst_rel = max(worst_rel, float((err / (np.abs(a[finite]) + 1e-12)).max()))
        tol = tolerance if tolerance is not None else max(DEFAULT_TOLERANCE.get(expected.dtype, 1e-4), inputs_tolerance)
        magnitude = np.abs(a[finite])
        with np.errstate(over="ignore"):  # a mean of huge values may overflow: inf, a lax bound
            scale = magnitude.mean() if magnitude.size else 0.0
        bad = err > tol * (1 + magnitude + scale)
        if bad.any():
            return (
                Difference(
                    name,
                    f"output '{name}' differs: max abs error {float(err.max()):.3g}, tolerance {tol:g}",
                    float(err.max()),
                    worst_rel,
                ),
                worst_abs,
                worst_rel,
            )
    return None, worst_abs, worst_rel
