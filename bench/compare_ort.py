"""Compare rewriter with ONNX Runtime's own optimizer on real models, at one level.

    python bench/compare_ort.py tests/models/*.onnx --level basic

For each model: node counts (original, ours, ORT's via optimized_model_filepath), the op
histogram differences, whether our output passes onnx.checker's full check, and the max
absolute difference of outputs against the original on random inputs (ORT optimizations off).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

import rewriter
from rewriter.verify.compare import random_feeds

ORT_LEVELS = {
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "layout": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


def ort_optimized(path: Path, level: str) -> onnx.ModelProto:
    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.graph_optimization_level = ORT_LEVELS[level]
        options.optimized_model_filepath = str(Path(tmp) / "ort.onnx")
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return onnx.load(options.optimized_model_filepath, load_external_data=False)


def run(model: onnx.ModelProto, feeds, base_dir: Path) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    with tempfile.TemporaryDirectory(dir=base_dir) as tmp:  # external data resolves beside it
        path = Path(tmp) / "m.onnx"
        onnx.save(model, str(path))
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return session.run(None, feeds)


def compare(path: Path, level: str) -> dict:
    original = onnx.load(str(path))
    start = time.perf_counter()
    ours = rewriter.optimize(original, level=level)
    ours_seconds = time.perf_counter() - start
    theirs = ort_optimized(path, level)
    try:
        onnx.checker.check_model(ours.model, full_check=True)
        checker = "ok"
    except Exception as error:  # report, do not stop the sweep
        checker = f"FAIL {str(error).splitlines()[0][:60]}"
    feeds = random_feeds(original, 0)
    diff = max(float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0
               for a, b in zip(run(original, feeds, path.parent), run(ours.model, feeds, path.parent)))
    ours_ops = Counter(n.op_type for n in ours.model.graph.node)
    ort_ops = Counter(n.op_type for n in theirs.graph.node)
    return {"model": path.name, "original": len(original.graph.node), "ours": len(ours.model.graph.node),
            "ort": len(theirs.graph.node), "checker": checker, "max_abs_diff": diff,
            "ms": ours_seconds * 1000,
            "only_ours": dict(ours_ops - ort_ops), "only_ort": dict(ort_ops - ours_ops)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--level", default="basic", choices=sorted(ORT_LEVELS))
    args = parser.parse_args()
    print(f"{'model':28} {'orig':>5} {'ours':>5} {'ORT':>5} {'checker':8} {'max|diff|':>10} {'ms':>7}")
    worst = 0
    for path in args.models:
        row = compare(path, args.level)
        print(f"{row['model']:28} {row['original']:5} {row['ours']:5} {row['ort']:5} {row['checker']:8} "
              f"{row['max_abs_diff']:10.2e} {row['ms']:7.1f}")
        if row["only_ours"] or row["only_ort"]:
            print(f"    ops only in ours: {row['only_ours']}   only in ORT's: {row['only_ort']}")
        if row["ours"] > row["ort"] or row["checker"] != "ok" or row["max_abs_diff"] > 1e-4:
            worst = 1
    return worst


if __name__ == "__main__":
    sys.exit(main())
