"""Compare rewriter with ONNX Runtime's own optimizer (and the Python peers) on real models.

    python bench/compare_ort.py tests/models/*.onnx --level basic
    python bench/compare_ort.py DIR/*.onnx --level extended --peers

For each model: node counts, subgraphs' nodes included (original, ours, ORT's via
optimized_model_filepath, and with --peers onnxscript's optimize_for_ort and
onnxruntime.transformers' optimize_model; an empty graph a peer gives for a model that
computes something counts as its failure, "-"), the op
histogram differences against ORT, the fused (non-standard-domain) ops each produced, whether
our output passes onnx.checker's full check, and the max absolute difference of outputs
against the original on random inputs, and again with masks padded as users pad a batch
(one item on the left, one on the right; ORT optimizations off).  Each peer's output is run
on the same inputs too: a peer whose output fails there or differs from the original by more
than the tolerance (1e-4, fp16 models 2e-2; quantized models only need to run) is marked
"!" and named with why, and the flag compares ours with the best peer whose output is sound
(a count bought by a rewrite that changes the model's numbers is no bar).  Exits 1 when any
model has more nodes than the best sound peer, fails the checker, or differs by more than
the tolerance.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

import rewriter

sys.path.insert(0, str(Path(__file__).resolve().parent))
from snapshot import TOLERANCE, feeds_for, model_dtype  # (symbolic dims sized consistently, e.g. past + 1)

QUANTIZED_OPS = {"QuantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger", "MatMulNBits"}

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
        model = onnx.load(options.optimized_model_filepath, load_external_data=False)
    # its large weights stay in the original's external data file, named relative to it
    onnx.external_data_helper.load_external_data_for_model(model, str(path.parent))
    return model


def onnxscript_optimized(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """onnxscript's optimize_for_ort (the fusions it ships for onnxruntime)."""
    try:
        from onnxscript import ir
        from onnxscript.rewriter.ort_fusions import optimize_for_ort

        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            optimized, _ = optimize_for_ort(
                ir.serde.deserialize_model(onnx.ModelProto.FromString(model.SerializeToString()))
            )
            return ir.serde.serialize_model(optimized)
    except Exception as error:  # a peer failing on a model is a result, not a crash
        print(f"    onnxscript failed: {str(error).splitlines()[0][:100] if str(error) else type(error)}")
        return None


TRANSFORMERS_TYPES = {  # anything else: bert (its encoder fusions)
    "gpt2": "gpt2",
    "vit": "vit",
    "unet": "unet",
    "unetuncond": "unet",
    "vaedec": "vae",
    "vaeenc": "vae",
    "sd3": "mmdit",
    "flux": "mmdit",
}


def transformers_optimized(path: Path) -> onnx.ModelProto | None:
    """onnxruntime.transformers' optimize_model with its default level for the model type;
    heads and hidden size 0 = detect from the graph."""
    try:
        from onnxruntime.transformers.optimizer import optimize_model

        family = path.name.split("_")[0]
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            return optimize_model(str(path), model_type=TRANSFORMERS_TYPES.get(family, "bert")).model
    except Exception as error:
        print(f"    transformers failed: {str(error).splitlines()[0][:100] if str(error) else type(error)}")
        return None


def node_count(graph: onnx.GraphProto) -> int:
    """Nodes of ``graph`` and of every subgraph in it (a merged decoder's If holds the model)."""
    count = 0
    for node in graph.node:
        count += 1
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                count += node_count(attribute.g)
            count += sum(node_count(g) for g in attribute.graphs)
    return count


def peer_count(model: onnx.ModelProto | None, original: onnx.ModelProto) -> int | None:
    """A peer's node count; None where it gave nothing or an empty graph for a model that
    computes something (the transformers optimizer's output for a merged decoder: a failure
    it does not report, not a result)."""
    if model is None:
        return None
    count = node_count(model.graph)
    return None if count == 0 and node_count(original.graph) else count


def fused(model: onnx.ModelProto | None) -> dict[str, int]:
    """Histogram of ops outside the standard domain (the fusions' products)."""
    if model is None:
        return {}
    return dict(Counter(n.op_type for n in model.graph.node if n.domain not in ("", "ai.onnx")))


def run(model: onnx.ModelProto, feeds, base_dir: Path) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    with tempfile.TemporaryDirectory(dir=base_dir) as tmp:  # external data resolves beside it
        path = Path(tmp) / "m.onnx"
        onnx.save(model, str(path))
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return session.run(None, feeds)


def max_difference(want: list[np.ndarray], got: list[np.ndarray]) -> float:
    return max(
        (
            float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0
            for a, b in zip(want, got)
        ),
        default=0.0,
    )


def padded(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    """``feeds`` with every 2-D integer or bool input named like a mask padded as users pad
    a batch: the first item on the left (its first position 0), the second on the right
    (its last position 0), the others whole; None when the model has no such input.  Random
    masks may come out all ones or all zeros, which a fusion assuming one padding side
    reproduces."""
    masks = [n for n, a in feeds.items() if "mask" in n and a.ndim == 2 and a.shape[1] >= 2 and a.dtype.kind in "iub"]
    if not masks:
        return None
    changed = dict(feeds)
    for name in masks:
        mask = np.ones(feeds[name].shape, feeds[name].dtype)
        mask[0, 0] = 0
        if mask.shape[0] > 1:
            mask[1, -1] = 0
        changed[name] = mask
    return changed


def soundness(
    model: onnx.ModelProto | None, original: onnx.ModelProto, references: list[tuple[dict, list]], base_dir: Path
) -> str:
    """ "" when a peer's output reproduces the original on every (feeds, outputs) of
    ``references`` (within the model's tolerance; a quantized model's output only has to
    run: every fusion of it rounds again), else why not."""
    if model is None or peer_count(model, original) is None:
        return ""
    for feeds, want in references:
        try:
            got = run(model, feeds, base_dir)
        except Exception as error:
            return f"fails: {str(error).splitlines()[0][:120] if str(error) else type(error).__name__}"
        if any(n.op_type in QUANTIZED_OPS for n in original.graph.node):
            continue
        difference = max_difference(want, got)
        if difference > TOLERANCE[model_dtype(original)]:
            return f"differs by {difference:.2e}" + (" (padded masks)" if feeds is not references[0][0] else "")
    return ""


def compare(path: Path, level: str, peers: bool) -> dict:
    original = onnx.load(str(path))
    start = time.perf_counter()
    ours = rewriter.optimize(original, level=level)
    ours_seconds = time.perf_counter() - start
    theirs = ort_optimized(path, level)
    try:
        rewriter.check_model(ours.model, full_check=True)
        checker = "ok"
    except Exception as error:  # report, do not stop the sweep
        checker = f"FAIL {str(error).splitlines()[0][:60]}"
    feeds = feeds_for(original)
    try:
        want = run(original, feeds, path.parent)
    except Exception:  # the inputs drawn do not suit the original: nothing to compare against
        want = None
    references = [] if want is None else [(feeds, want)]
    if want is not None and (masked := padded(feeds)) is not None:
        try:
            references.append((masked, run(original, masked, path.parent)))
        except Exception:  # the original refuses these masks: compare on the random ones only
            pass
    diff = max(
        (max_difference(w, run(ours.model, f, path.parent)) for f, w in references),
        default=float("nan"),
    )
    script = onnxscript_optimized(original) if peers else None
    transformers = transformers_optimized(path) if peers else None
    ours_ops = Counter(n.op_type for n in ours.model.graph.node)
    ort_ops = Counter(n.op_type for n in theirs.graph.node)
    return {
        "model": path.name,
        "original": node_count(original.graph),
        "ours": node_count(ours.model.graph),
        "ort": node_count(theirs.graph),
        "onnxscript": peer_count(script, original),
        "transformers": peer_count(transformers, original),
        "fused": {
            "ours": fused(ours.model),
            "ORT": fused(theirs),
            "onnxscript": fused(script),
            "transformers": fused(transformers),
        },
        "unsound": {
            who: why
            for who, model in (("ORT", theirs), ("onnxscript", script), ("transformers", transformers))
            if (why := soundness(model, original, references, path.parent))
        },
        "tolerance": TOLERANCE[model_dtype(original)],
        "checker": checker,
        "max_abs_diff": diff,
        "ms": ours_seconds * 1000,
        "only_ours": dict(ours_ops - ort_ops),
        "only_ort": dict(ort_ops - ours_ops),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--level", default="basic", choices=sorted(ORT_LEVELS))
    parser.add_argument(
        "--peers",
        action="store_true",
        help="also run onnxscript's optimize_for_ort and onnxruntime.transformers' optimize_model (extended level)",
    )
    parser.add_argument("--histograms", action="store_true", help="print each one's fused-op histogram")
    args = parser.parse_args()
    print(
        f"{'model':32} {'orig':>5} {'ours':>5} {'ORT':>5} {'oscript':>7} {'transf':>6} {'checker':8} "
        f"{'max|diff|':>10} {'ms':>7}"
    )
    worst = 0
    for path in args.models:
        try:
            row = compare(path, args.level, args.peers)
        except Exception as error:  # (onnxruntime cannot load the original, say): the sweep goes on
            print(f"{path.name:32} ERROR {str(error).splitlines()[0][:160] if str(error) else type(error).__name__}")
            worst = 1
            continue
        counts = {"ORT": row["ort"], "onnxscript": row["onnxscript"], "transformers": row["transformers"]}
        sound = [n for who, n in counts.items() if n is not None and who not in row["unsound"]]
        best = min(sound, default=None)
        flag = "" if best is None or row["ours"] <= best else "  <-- more than the best peer"
        if not flag and any(n is not None and n < row["ours"] for n in counts.values()):
            flag = "  (above an unsound peer only)"
        marked = {who: show(n) + ("!" if who in row["unsound"] else "") for who, n in counts.items()}
        print(
            f"{row['model']:32} {row['original']:5} {row['ours']:5} {marked['ORT']:>5} "
            f"{marked['onnxscript']:>7} {marked['transformers']:>6} {row['checker']:8} "
            f"{row['max_abs_diff']:10.2e} {row['ms']:7.1f}{flag}"
        )
        for who, why in row["unsound"].items():
            print(f"    {who}'s output is unsound on these inputs: {why}")
        if row["only_ours"] or row["only_ort"]:
            print(f"    ops only in ours: {row['only_ours']}   only in ORT's: {row['only_ort']}")
        if args.histograms:
            for who, histogram in row["fused"].items():
                print(f"    fused by {who + ':':13} {dict(sorted(histogram.items()))}")
        if flag.startswith("  <--") or row["checker"] != "ok" or row["max_abs_diff"] > row["tolerance"]:
            worst = 1
    return worst


def show(count: int | None) -> str:
    return "-" if count is None else str(count)


if __name__ == "__main__":
    sys.exit(main())
