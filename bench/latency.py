"""Inference latency of our outputs against ONNX Runtime's own optimizer, per model and level.

    python bench/latency.py MODEL_OR_DIR... [--levels basic extended all all-may-grow] [--rounds 20]
                            [--threads 1 0] [--skip GLOB] [--out latency.json]

For every model, in one process and with one set of random inputs (bench/snapshot.py's,
symbolic dims 2, KV-cache lengths 3 and 5):

* ``ort``         the original under ORT_ENABLE_ALL (ONNX Runtime optimizes it itself);
* ``L offline``   our output at level L run with ORT_DISABLE_ALL (what we did, alone);
                  ``all-may-grow`` is ``--level all --layout-may-grow`` (the layout level
                  keeps its reorders and split fusions: the fastest offline form, larger);
* ``L online``    our output at level L under ORT_ENABLE_ALL (ONNX Runtime's passes after ours:
                  they must not be blocked by what we emit).

Sessions are created first (creation time is not measured), each runs 3 warm-up calls, then
``--rounds`` rounds run every variant once each, in an order that rotates from round to
round, so that a slow second on a shared machine hits every variant alike.  Reported per
variant: the median time and the spread (interquartile range / median), and the ratio of
medians against ``ort``.  ``--threads 1 0`` runs everything with one intra-op thread, then
with onnxruntime's default (all cores).  The summary gives the worst ratio per level and
mode over all models.

Reading it: a ratio is only as good as its spread.  On a shared 2-core machine medians move
by a few percent from run to run; treat a ratio within 1.00 +- 2x the spread as a tie, and
repeat the run (or raise ``--rounds``) before calling a model slower.  Tiny models (a few
microseconds per call) measure mostly session overhead.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))
from snapshot import feeds_for, key_of, model_files  # (same corpus keys and inputs)

import rewriter

LEVELS = ("basic", "extended", "all", "all-may-grow")
GROWN = "all-may-grow"  # --level all --layout-may-grow


def session(path: Path, optimize: bool, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    if threads:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def time_variants(sessions: dict[str, ort.InferenceSession], feeds: dict, rounds: int) -> dict[str, list[float]]:
    """Seconds per call of every variant, in rounds that rotate the order."""
    names = list(sessions)
    for name in names:
        for _ in range(3):
            sessions[name].run(None, feeds)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for index in range(rounds):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter()
            sessions[name].run(None, feeds)
            samples[name].append(time.perf_counter() - start)
    return samples


def spread(values: list[float]) -> float:
    quartiles = statistics.quantiles(values, n=4)
    return (quartiles[2] - quartiles[0]) / statistics.median(values)


def measure(path: Path, levels: list[str], rounds: int, threads: list[int], work: Path) -> dict:
    model = onnx.load(str(path))
    feeds = feeds_for(model)
    outputs = {}
    for level in levels:
        if level == GROWN:
            result = rewriter.optimize(model, level="all", layout_may_grow=True)
        else:
            result = rewriter.optimize(model, level=level)
        target = work / f"{path.stem}.{level}.onnx"
        rewriter.save_model(result, target)
        outputs[level] = target
    entry: dict = {"path": str(path), "threads": {}}
    for count in threads:
        sessions = {"ort": session(path, True, count)}
        for level, target in outputs.items():
            sessions[f"{level} offline"] = session(target, False, count)
            sessions[f"{level} online"] = session(target, True, count)
        names = {i.name for i in sessions["ort"].get_inputs()}
        samples = time_variants(sessions, {k: v for k, v in feeds.items() if k in names}, rounds)
        base = statistics.median(samples["ort"])
        entry["threads"][str(count or "default")] = {
            name: {
                "median_ms": statistics.median(values) * 1e3,
                "spread": spread(values),
                "ratio": statistics.median(values) / base,
            }
            for name, values in samples.items()
        }
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--levels", nargs="+", default=list(LEVELS[:3]), choices=LEVELS)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 0], help="0: onnxruntime's default")
    parser.add_argument("--skip", action="append", default=[])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    report: dict = {}
    worst: dict[tuple[str, str], tuple[float, str]] = {}
    with tempfile.TemporaryDirectory() as work:
        for path in model_files(args.paths, args.skip):
            key = key_of(path)
            try:
                entry = measure(path, args.levels, args.rounds, args.threads, Path(work))
            except Exception as error:  # a model onnxruntime or we cannot run: recorded, the run goes on
                report[key] = {"path": str(path), "error": f"{type(error).__name__}: {str(error).splitlines()[0]}"}
                print(f"{key:48s} error: {report[key]['error']}")
                continue
            report[key] = entry
            for threads, variants in entry["threads"].items():
                cells = "  ".join(
                    f"{name} {v['ratio']:.2f} (+-{v['spread']:.0%})" for name, v in variants.items() if name != "ort"
                )
                print(f"{key:48s} {threads:>7s} thr  ort {variants['ort']['median_ms']:.3f} ms  {cells}")
                for name, v in variants.items():
                    if name != "ort" and v["ratio"] > worst.get((threads, name), (0.0, ""))[0]:
                        worst[(threads, name)] = (v["ratio"], key)
    print("\nworst ratio against ONNX Runtime ENABLE_ALL on the original (lower is faster):")
    for (threads, name), (ratio, key) in sorted(worst.items()):
        print(f"  {threads:>7s} threads  {name:18s} {ratio:.3f}  ({key})")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
