"""Peak memory of ``rewriter optimize`` against the size of the model it optimizes.

    python bench/memory.py [--size-mb 500] [--dir /tmp/rewriter-memory] [--level extended]
                           [--variants inline external transpose conv-bn fp16-cast] [--profile]

Generates (once, under ``--dir``; never in the repository) models of about ``--size-mb``
MB of weights with onnx.helper and numpy:

* ``inline`` / ``external``: a transformer-like model (attention-style mixing, residual,
  decomposed LayerNorm, erf Gelu, FFN), its tensors inline / as external data;
* ``transpose``: the same with every weight stored transposed behind a ``Transpose`` node
  (constant folding replaces each one);
* ``conv-bn``: a convolution network with BatchNormalization after each Conv (the basic
  pack folds each BatchNorm into its Conv's weights);
* ``fp16-cast``: the transformer with float16 weights behind ``Cast`` nodes (folding them
  doubles the weights: the optimized model is twice the input).

Each is optimized by the command line in a fresh process; the peak resident set of that
process (``getrusage`` of the child) is printed beside the model's size.  ``--profile``
runs the same optimization in this process while a thread samples the resident set and the
function the main thread is in, and prints where the peak was reached (where the copies
are).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import chain_model


def _block(i: int, x: str, hidden: int, rng: np.random.Generator, nodes: list, inits: list) -> str:
    """Self-attention-like mixing, a residual, decomposed LayerNorm, erf Gelu, an FFN."""

    def const(name: str, value) -> str:
        full = f"b{i}_{name}"
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), full))
        return full

    def node(op: str, inputs: list[str], **attrs) -> str:
        out = f"b{i}_{op.lower()}{len(nodes)}"
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def weight(rows: int, cols: int, name: str) -> str:
        return const(name, rng.standard_normal((rows, cols), dtype=np.float32) * 0.02)

    h = node("Add", [node("MatMul", [x, weight(hidden, hidden, "w")]), const("bias", np.zeros(hidden))])
    scores = node("Div", [node("MatMul", [h, node("Transpose", [h], perm=[0, 2, 1])]), const("scale", 8.0)])
    attn = node("MatMul", [node("Softmax", [scores], axis=-1), h])
    s = node("Add", [node("Identity", [attn]), x])
    m = node("ReduceMean", [s], axes=[-1])
    d = node("Sub", [s, m])
    v = node("ReduceMean", [node("Pow", [d, const("two", 2.0)])], axes=[-1])
    n = node("Div", [d, node("Sqrt", [node("Add", [v, const("eps", 1e-5)])])])
    ln = node("Add", [node("Mul", [n, const("gamma", np.ones(hidden))]), const("beta", np.zeros(hidden))])
    up = node("Add", [node("MatMul", [ln, weight(hidden, 4 * hidden, "up")]), const("up_bias", np.zeros(4 * hidden))])
    e = node("Erf", [node("Div", [up, const("sqrt2", 1.4142135)])])
    gelu = node("Mul", [node("Mul", [up, node("Add", [e, const("one", 1.0)])]), const("half", 0.5)])
    down = node("MatMul", [gelu, weight(4 * hidden, hidden, "down")])
    return node("Add", [down, ln])


def build_model(size_mb: int, hidden: int = 1024, seed: int = 0) -> onnx.ModelProto:
    """About ``size_mb`` MB of weights: blocks of 9 * hidden^2 floats."""
    rng = np.random.default_rng(seed)
    nodes: list = []
    inits: list = []
    x = "input"
    blocks = max(1, round(size_mb * 1e6 / (9 * hidden * hidden * 4)))
    for i in range(blocks):
        x = _block(i, x, hidden, rng, nodes, inits)
    return chain_model("memory", nodes, inits, x, hidden)


def _transposed(model: onnx.ModelProto) -> onnx.ModelProto:
    """Every 2-D weight stored transposed, read through a Transpose node."""
    return _weights_through(
        model,
        "_t",
        lambda a: np.ascontiguousarray(a.T),
        lambda src, dst: helper.make_node("Transpose", [src], [dst], perm=[1, 0]),
    )


def _half_cast(model: onnx.ModelProto) -> onnx.ModelProto:
    """Every 2-D weight stored as float16, read through a Cast to float."""
    return _weights_through(
        model,
        "_h",
        lambda a: a.astype(np.float16),
        lambda src, dst: helper.make_node("Cast", [src], [dst], to=TensorProto.FLOAT),
    )


def _weights_through(model: onnx.ModelProto, suffix: str, stored, reader) -> onnx.ModelProto:
    """Every 2-D weight kept as ``stored(array)`` under ``name + suffix`` and read back into
    its name by the node ``reader(stored_name, name)``, placed first."""
    graph = model.graph
    nodes = []
    for tensor in graph.initializer:
        if len(tensor.dims) == 2:
            name = tensor.name
            tensor.CopyFrom(numpy_helper.from_array(stored(numpy_helper.to_array(tensor)), name + suffix))
            nodes.append(reader(name + suffix, name))
    nodes.extend(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def conv_bn_model(size_mb: int, channels: int = 512, seed: int = 0) -> onnx.ModelProto:
    """Conv (3x3, ``channels`` to ``channels``) + BatchNormalization + Relu, repeated."""
    rng = np.random.default_rng(seed)
    nodes: list = []
    inits: list = []
    x = "input"
    layers = max(1, round(size_mb * 1e6 / (channels * channels * 9 * 4)))
    for i in range(layers):
        w = rng.standard_normal((channels, channels, 3, 3), dtype=np.float32) * 0.02
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        for part, value in (("scale", 1.0), ("bias", 0.0), ("mean", 0.0), ("var", 1.0)):
            inits.append(numpy_helper.from_array(np.full(channels, value, np.float32), f"{part}{i}"))
        nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1], name=f"conv{i}"))
        nodes.append(
            helper.make_node(
                "BatchNormalization",
                [f"c{i}", f"scale{i}", f"bias{i}", f"mean{i}", f"var{i}"],
                [f"b{i}"],
                name=f"bn{i}",
            )
        )
        nodes.append(helper.make_node("Relu", [f"b{i}"], [f"r{i}"], name=f"relu{i}"))
        x = f"r{i}"
    shape = [1, channels, 8, 8]
    graph = helper.make_graph(
        nodes,
        "conv_bn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, shape)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


VARIANTS = ("inline", "external", "transpose", "conv-bn", "fp16-cast")


def ensure_model(directory: Path, size_mb: int, variant: str) -> Path:
    """The variant's model file (made when missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{variant}{size_mb}.onnx"
    if path.exists():
        return path
    if variant == "conv-bn":
        model = conv_bn_model(size_mb)
    elif variant == "transpose":
        model = _transposed(build_model(size_mb))
    elif variant == "fp16-cast":
        model = _half_cast(build_model(2 * size_mb))  # float16: half the bytes
    else:
        model = build_model(size_mb)
    if variant == "external":
        onnx.save(
            model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=path.name + ".data"
        )
    else:
        onnx.save(model, str(path))
    return path


def model_bytes(path: Path) -> int:
    """The model file plus the external data files beside it that it names."""
    header = onnx.load(str(path), load_external_data=False)
    names = {e.value for g in [header.graph] for t in g.initializer for e in t.external_data if e.key == "location"}
    return path.stat().st_size + sum((path.parent / n).stat().st_size for n in names)


def peak_rss_of_cli(model: Path, output: Path, level: str) -> tuple[int, float]:
    """Peak resident bytes and seconds of ``rewriter optimize`` in a fresh process."""
    child = (
        "import resource, subprocess, sys, time; start = time.perf_counter(); "
        "proc = subprocess.run(sys.argv[1:]); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, time.perf_counter() - start, proc.returncode)"
    )
    command = [sys.executable, "-m", "rewriter", "optimize", str(model), "-o", str(output), "--level", level, "-q"]
    out = subprocess.run([sys.executable, "-c", child, *command], capture_output=True, text=True, check=True)
    kilobytes, seconds, code = out.stdout.split()
    if code != "0":
        raise SystemExit(f"rewriter failed on {model}: exit {code}\n{out.stderr}")
    return int(kilobytes) * 1024, float(seconds)


def profile(model: Path, output: Path, level: str) -> None:
    """Run the CLI here, sampling RSS and the main thread's innermost rewriter frames."""
    from rewriter.cli import cli

    page = os.sysconf("SC_PAGE_SIZE")
    main = threading.main_thread().ident
    samples: list[tuple[int, str]] = []
    done = threading.Event()

    def where() -> str:
        frame = sys._current_frames().get(main)
        names = []
        while frame is not None and len(names) < 4:
            code = frame.f_code
            if "rewriter" in code.co_filename or "onnx" in code.co_filename:
                names.append(f"{Path(code.co_filename).stem}.{code.co_name}")
            frame = frame.f_back
        return " < ".join(names)

    def sample() -> None:
        while not done.is_set():
            with open("/proc/self/statm") as handle:
                rss = int(handle.read().split()[1]) * page
            samples.append((rss, where()))
            time.sleep(0.005)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        cli(["optimize", str(model), "-o", str(output), "--level", level, "-q"], standalone_mode=False)
    finally:
        done.set()
        thread.join()
    peak = max(samples)
    print(f"peak {peak[0] / 1e6:.0f} MB in {peak[1]}")
    shown: dict[str, int] = {}
    for rss, place in samples:
        shown[place] = max(shown.get(place, 0), rss)
    for place, rss in sorted(shown.items(), key=lambda kv: -kv[1])[:15]:
        print(f"  {rss / 1e6:8.0f} MB  {place}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/rewriter-memory"))
    parser.add_argument("--level", default="extended")
    parser.add_argument("--variants", nargs="*", default=["inline", "external"], choices=VARIANTS)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    for variant in args.variants:
        path = ensure_model(args.dir, args.size_mb, variant)
        output = args.dir / f"out_{path.name}"
        if args.profile:
            print(f"{variant}:")
            profile(path, output, args.level)
            continue
        size = model_bytes(path)
        peak, seconds = peak_rss_of_cli(path, output, args.level)
        print(
            f"{variant:10s} model {size / 1e6:7.0f} MB   peak RSS {peak / 1e6:7.0f} MB   "
            f"{peak / size:5.2f}x   {seconds:6.1f} s"
        )


if __name__ == "__main__":
    main()
