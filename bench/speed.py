"""Speed and memory of rewriter against its peers, measured in one run on the same models.

    python bench/speed.py                         # test models + synthetic 1k/10k graphs
    python bench/speed.py model.onnx --level extended --repeat 5 --sizes 1000 10000 100000

Per model: our ``optimize`` (median of --repeat runs on the in-memory model; loading and
saving excluded and reported separately), ONNX Runtime's optimizer (session creation at
the level minus session creation with all optimizations off), and — when installed —
onnxscript's ``optimize_for_ort`` and onnxruntime.transformers' ``optimize_model``.
Prints times, ratios ours/peer, our peak Python memory (tracemalloc) and our per-phase
split.  Install the optional peers with ``pip install onnxscript`` (transformers'
optimizer ships with onnxruntime but needs ``sympy`` and ``packaging``).
"""
from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
import tracemalloc
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import onnx
import onnxruntime as ort

import rewriter

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from synthetic import synthetic_model  # noqa: E402

ORT_LEVELS = {"basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
              "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}


def median_seconds(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def ort_seconds(model_bytes: bytes, level: str, repeat: int) -> float:
    def session(opt_level):
        options = ort.SessionOptions()
        options.graph_optimization_level = opt_level
        options.log_severity_level = 4
        return lambda: ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])

    with_opt = median_seconds(session(ORT_LEVELS[level]), repeat)
    without = median_seconds(session(ort.GraphOptimizationLevel.ORT_DISABLE_ALL), repeat)
    return max(with_opt - without, 1e-6)


def onnxscript_seconds(model: onnx.ModelProto, repeat: int) -> float | None:
    try:
        from onnxscript import ir
        from onnxscript.rewriter.ort_fusions import optimize_for_ort
    except Exception:
        return None

    def run():
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            optimize_for_ort(ir.serde.deserialize_model(model))
    try:
        return median_seconds(run, repeat)
    except Exception:
        return None


def transformers_seconds(path: Path, repeat: int) -> float | None:
    try:
        from onnxruntime.transformers.optimizer import optimize_model
    except Exception:
        return None

    def run():
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            optimize_model(str(path), model_type="bert", opt_level=0)
    try:
        return median_seconds(run, repeat)
    except Exception:
        return None


def measure(name: str, model: onnx.ModelProto, level: str, repeat: int, peers: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        start = time.perf_counter()
        onnx.save(model, str(path))
        save_s = time.perf_counter() - start
        start = time.perf_counter()
        model = onnx.load(str(path))
        load_s = time.perf_counter() - start
        rewriter.optimize(model, level=level)  # warm: rules parsed once per process
        ours = median_seconds(lambda: rewriter.optimize(model, level=level), repeat)
        result = rewriter.optimize(model, level=level)  # its phases: an untraced run
        tracemalloc.start()
        rewriter.optimize(model, level=level)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        row = {"model": name, "nodes": len(model.graph.node), "after": result.report.nodes_after,
               "ours": ours, "load": load_s, "save": save_s, "peak_mb": peak / 2**20,
               "phases": result.report.seconds,
               "ort": ort_seconds(model.SerializeToString(), level, repeat)}
        row["onnxscript"] = onnxscript_seconds(model, repeat) if peers else None
        row["transformers"] = transformers_seconds(path, repeat) if peers else None
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", type=Path)
    parser.add_argument("--level", default="extended", choices=sorted(ORT_LEVELS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 10000],
                        help="synthetic graph sizes (nodes)")
    parser.add_argument("--no-peers", action="store_true", help="skip the Python peers")
    args = parser.parse_args()
    paths = args.models or sorted((HERE.parent / "tests" / "models").glob("*.onnx"))
    cases = [(p.name, onnx.load(str(p))) for p in paths]
    cases += [(f"synthetic-{n}", synthetic_model(n)) for n in args.sizes]

    def ratio(ours: float, peer: float | None) -> str:
        return "-" if peer is None else f"{ours / peer:.2f}"

    header = (f"{'model':24} {'nodes':>6} {'after':>6} {'ours ms':>8} {'us/node':>8} {'ORT ms':>8} {'/ORT':>6} "
              f"{'oscript ms':>10} {'/osc':>6} {'transf ms':>9} {'/tr':>6} {'peak MB':>8} {'load ms':>8} {'save ms':>8}")
    print(header)
    rows = []
    for name, model in cases:
        row = measure(name, model, args.level, args.repeat, not args.no_peers)
        rows.append(row)
        fmt = lambda v: "-" if v is None else f"{v * 1000:.1f}"  # noqa: E731
        print(f"{row['model']:24} {row['nodes']:6} {row['after']:6} {row['ours'] * 1000:8.1f} "
              f"{row['ours'] / max(row['nodes'], 1) * 1e6:8.0f} {fmt(row['ort']):>8} {ratio(row['ours'], row['ort']):>6} "
              f"{fmt(row['onnxscript']):>10} {ratio(row['ours'], row['onnxscript']):>6} "
              f"{fmt(row['transformers']):>9} {ratio(row['ours'], row['transformers']):>6} "
              f"{row['peak_mb']:8.1f} {row['load'] * 1000:8.1f} {row['save'] * 1000:8.1f}", flush=True)
    print("\nper-phase split of our time (ms):")
    for row in rows:
        phases = ", ".join(f"{k} {v * 1000:.1f}" for k, v in row["phases"].items())
        print(f"  {row['model']:24} {phases}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
