"""Is each fusion's kernel faster than what it replaces?  Per fusion and size, on the CPU.

    python bench/fusion_latency.py [--sizes 8x64 64x256 197x768] [--only NAME ...] [--rounds 300]

Every case is a small subgraph the way exporters write it (a residual Add and a
LayerNormalization, a decomposed RMSNorm, x * Sigmoid(x), ...), on a [1, S, H] activation.
The bundled packs optimize it at the extended level (CPU), and both models run in
onnxruntime with its optimizations off and one intra-op thread, interleaved in one process;
the ratio is the fused model's median time over the original's (below 1: the fusion pays).
A case whose rules do not fire says so instead of a ratio.

Why: a fusion is only worth its rule if the fused kernel is faster for the shapes models
have (issue 19 found onnxruntime's CPU SkipLayerNormalization several times slower than
the Add and LayerNormalization it replaces).  Where the answer depends on the size, the rule
says so in a constraint with the measured reason; this script is how it was measured.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import rewriter

F = TensorProto.FLOAT
RNG = np.random.default_rng(0)


def constant(name: str, value: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=np.float32), name)


def graph(nodes, inputs: list[str], outputs: list[str], inits, s: int, h: int, out_width: int | None = None):
    width = out_width or h
    g = helper.make_graph(
        nodes,
        "case",
        [helper.make_tensor_value_info(i, F, [1, s, h]) for i in inputs],
        [helper.make_tensor_value_info(o, F, [1, s, width]) for o in outputs],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def layer_norm_inits(h: int) -> list:
    return [constant("gamma", RNG.standard_normal(h)), constant("beta", RNG.standard_normal(h))]


def skip_layer_norm(s: int, h: int):
    nodes = [
        helper.make_node("Add", ["x", "r"], ["t"]),
        helper.make_node("LayerNormalization", ["t", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-5),
    ]
    return graph(nodes, ["x", "r"], ["y"], layer_norm_inits(h), s, h)


def skip_layer_norm_shared_sum(s: int, h: int):
    nodes = [
        helper.make_node("Add", ["x", "r"], ["t"]),
        helper.make_node("LayerNormalization", ["t", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-5),
    ]
    return graph(nodes, ["x", "r"], ["y", "t"], layer_norm_inits(h), s, h)


def layer_norm_decomposed(s: int, h: int):
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1]),
        helper.make_node("Sub", ["x", "m"], ["d"]),
        helper.make_node("Pow", ["d", "two"], ["p"]),
        helper.make_node("ReduceMean", ["p"], ["v"], axes=[-1]),
        helper.make_node("Add", ["v", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["sd"]),
        helper.make_node("Div", ["d", "sd"], ["n"]),
        helper.make_node("Mul", ["n", "gamma"], ["g"]),
        helper.make_node("Add", ["g", "beta"], ["y"]),
    ]
    inits = layer_norm_inits(h) + [constant("two", 2.0), constant("eps", 1e-5)]
    return graph(nodes, ["x"], ["y"], inits, s, h)


def rms_nodes(x: str, y: str) -> list:
    return [
        helper.make_node("Pow", [x, "two"], ["p"]),
        helper.make_node("ReduceMean", ["p"], ["v"], axes=[-1]),
        helper.make_node("Add", ["v", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["sd"]),
        helper.make_node("Div", [x, "sd"], ["n"]),
        helper.make_node("Mul", ["n", "gamma"], [y]),
    ]


def rms_norm(s: int, h: int):
    inits = [constant("gamma", RNG.standard_normal(h)), constant("two", 2.0), constant("eps", 1e-6)]
    return graph(rms_nodes("x", "y"), ["x"], ["y"], inits, s, h)


def skip_rms_norm(s: int, h: int):
    inits = [constant("gamma", RNG.standard_normal(h)), constant("two", 2.0), constant("eps", 1e-6)]
    nodes = [helper.make_node("Add", ["x", "r"], ["t"]), *rms_nodes("t", "y")]
    return graph(nodes, ["x", "r"], ["y", "t"], inits, s, h)


def gelu_erf(s: int, h: int):
    nodes = [
        helper.make_node("Div", ["x", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["a"]),
        helper.make_node("Mul", ["x", "a"], ["m"]),
        helper.make_node("Mul", ["m", "half"], ["y"]),
    ]
    inits = [constant("sqrt2", 1.4142135), constant("one", 1.0), constant("half", 0.5)]
    return graph(nodes, ["x"], ["y"], inits, s, h)


def bias_gelu(s: int, h: int):
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"]),
        helper.make_node("Add", ["mm", "bias"], ["x1"]),
        helper.make_node("Div", ["x1", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["a"]),
        helper.make_node("Mul", ["x1", "a"], ["m"]),
        helper.make_node("Mul", ["m", "half"], ["y"]),
    ]
    inits = [
        constant("w", RNG.standard_normal((h, 4 * h)) * 0.05),
        constant("bias", RNG.standard_normal(4 * h)),
        constant("sqrt2", 1.4142135),
        constant("one", 1.0),
        constant("half", 0.5),
    ]
    return graph(nodes, ["x"], ["y"], inits, s, h, out_width=4 * h)


def silu(s: int, h: int):
    nodes = [helper.make_node("Sigmoid", ["x"], ["g"]), helper.make_node("Mul", ["x", "g"], ["y"])]
    return graph(nodes, ["x"], ["y"], [], s, h)


def matmul_scale(s: int, h: int):
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Mul", ["mm", "k"], ["y"])]
    inits = [constant("w", RNG.standard_normal((h, h)) * 0.05), constant("k", 0.125)]
    return graph(nodes, ["x"], ["y"], inits, s, h)


CASES: dict[str, Callable[[int, int], onnx.ModelProto]] = {
    "SkipLayerNorm": skip_layer_norm,
    "SkipLayerNormSharedSum": skip_layer_norm_shared_sum,
    "LayerNormDecomposed": layer_norm_decomposed,
    "RMSNorm": rms_norm,
    "SkipRMSNorm": skip_rms_norm,
    "GeluErf": gelu_erf,
    "BiasGelu": bias_gelu,
    "SiLU": silu,
    "MatMulScale": matmul_scale,
}


def session(m: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    return ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])


def median_times(sessions: list[ort.InferenceSession], feeds: dict, rounds: int) -> list[float]:
    samples: list[list[float]] = [[] for _ in sessions]
    for s in sessions:
        for _ in range(5):
            s.run(None, feeds)
    for index in range(rounds):
        order = range(len(sessions)) if index % 2 else reversed(range(len(sessions)))
        for k in order:
            start = time.perf_counter()
            sessions[k].run(None, feeds)
            samples[k].append(time.perf_counter() - start)
    return [statistics.median(v) for v in samples]


def fused_ops(before: onnx.ModelProto, after: onnx.ModelProto) -> str:
    added = Counter(n.op_type for n in after.graph.node) - Counter(n.op_type for n in before.graph.node)
    return ",".join(sorted(added)) or "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["8x64", "64x64", "64x256", "197x768"], help="SxH")
    parser.add_argument("--only", nargs="*", default=None, help="case names")
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    sizes = [tuple(int(v) for v in size.split("x")) for size in args.sizes]
    print(f"{'case':24s} {'S x H':>9s} {'original':>10s} {'fused':>10s} {'ratio':>6s}  fused into")
    for name, build in CASES.items():
        if args.only and name not in args.only:
            continue
        for s, h in sizes:
            before = build(s, h)
            after = rewriter.optimize(before, level="extended", providers="CPU").model
            feeds = {i.name: RNG.standard_normal((1, s, h)).astype(np.float32) for i in before.graph.input}
            if len(after.graph.node) >= len(before.graph.node):
                print(f"{name:24s} {s:4d}x{h:<4d} {'':>10s} {'':>10s} {'':>6s}  (no rule fired)")
                continue
            t0, t1 = median_times([session(before), session(after)], feeds, args.rounds)
            times = f"{t0 * 1e6:8.1f}us {t1 * 1e6:8.1f}us {t1 / t0:6.2f}"
            print(f"{name:24s} {s:4d}x{h:<4d} {times}  {fused_ops(before, after)}")


if __name__ == "__main__":
    main()
