"""Snapshot what rewriter does to a corpus of models, and diff two snapshots.

    python bench/snapshot.py MODEL_OR_DIR... --levels basic extended all --out snap.json
    python bench/snapshot.py --diff old.json new.json

The first form runs ``rewriter.optimize(path, level=L)`` on every ``.onnx`` given
(directories are expanded, ``--skip GLOB`` leaves files out) and records, per model and
level: node counts before and after, the op histogram after, how often each rule applied,
whether the result passes ``rewriter.check_model`` (onnx's checker knowing onnxruntime's
ONNX-domain ops, full check; the message when
not; the original model is checked too, so a failure it already had is told apart),
whether it runs in onnxruntime (CPU, optimizations off) and the largest absolute output
difference against the original on random inputs.  An error raised by rewriter is recorded
for that model and level; the run goes on.  It prints one line per model and level and a
summary, and writes everything to ``--out`` as JSON.  Models are keyed ``DIR/FILE`` (the
parent directory's name and the file name), so snapshots of the same corpus compare.

Random inputs come from ``rewriter.verify.compare.random_feeds`` with every symbolic dim
set to 2, except ``past_sequence_length`` (3) and ``total_sequence_length`` (5) of the
KV-cache exports; a dim given as an expression (the dynamo exporter's
``past_sequence_length + 1``) is evaluated.

The second form prints every model and level whose node count, op histogram, checker or
run status, or output difference (beyond 1e-4, or 2e-2 for fp16 models) changed, and exits
1 when anything got worse: more nodes, a new rewriter error, a checker or run failure that
was not there, or an output difference that went over the tolerance.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx

# any other symbolic dim: 2 (optimum names an image's dims: the corpus's images are 32 x 32, RGB)
DIM_SIZES = {
    "past_sequence_length": 3,
    "total_sequence_length": 5,
    "samples": 800,
    "num_channels": 3,
    "height": 32,
    "width": 32,
}
DEFAULT_DIM = 2
# models computing on integers (static or dynamic quantization): their outputs only have to
# run, as bench/compare_ort.py checks them, since every fusion of theirs rounds again (a
# QLinearConv's integer sum against a float Conv between Dequantize and Quantize: a step at
# each layer, a few at the end of 50); `rewriter verify` holds each rule to one step
INTEGER_OPS = {"QuantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger"}
TOLERANCE = {"fp32": 1e-4, "fp16": 2e-2, "quantized": math.inf}


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0][:300] if text else ''}"


# ---- taking a snapshot --------------------------------------------------------------------------


def model_files(paths: list[Path], skip: list[str]) -> list[Path]:
    files = []
    for path in paths:
        found = sorted(path.glob("*.onnx")) if path.is_dir() else [path]
        files += [f for f in found if not any(fnmatch.fnmatch(f.name, pattern) for pattern in skip)]
    return files


def dim_size(param: str) -> int:
    """A symbolic dim's size: DIM_SIZES, else an arithmetic expression over them (unknown
    names count DEFAULT_DIM), else DEFAULT_DIM."""
    if param in DIM_SIZES:
        return DIM_SIZES[param]
    try:
        tree = ast.parse(param, mode="eval")
    except SyntaxError:
        return DEFAULT_DIM

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            return DIM_SIZES.get(node.id, DEFAULT_DIM)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)):
            left, right = value(node.left), value(node.right)
            return {
                ast.Add: left + right,
                ast.Sub: left - right,
                ast.Mult: left * right,
                ast.FloorDiv: left // right if right else DEFAULT_DIM,
            }[type(node.op)]
        raise ValueError(param)

    try:
        return max(1, int(value(tree.body)))
    except (ValueError, ZeroDivisionError):
        return DEFAULT_DIM


def feeds_for(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """random_feeds (seed 0) on a copy of the model's inputs with every symbolic dim sized."""
    from rewriter.verify.compare import random_feeds

    inputs = onnx.ModelProto()
    inputs.graph.input.extend(model.graph.input)
    inputs.graph.initializer.extend(onnx.TensorProto(name=t.name) for t in model.graph.initializer)
    for vi in inputs.graph.input:
        for dim in vi.type.tensor_type.shape.dim:
            if not dim.HasField("dim_value"):
                dim.dim_value = dim_size(dim.dim_param) if dim.dim_param else DEFAULT_DIM
    return random_feeds(inputs, 0)


def model_dtype(model: onnx.ModelProto) -> str:
    """quantized when it computes on integers (INTEGER_OPS), fp16 when any initializer or
    graph output is float16 (keep_io_types copies compute in fp16 behind fp32 inputs and
    outputs), else fp32."""
    if any(n.op_type in INTEGER_OPS for n in model.graph.node):
        return "quantized"
    fp16 = onnx.TensorProto.FLOAT16
    if any(t.data_type == fp16 for t in model.graph.initializer) or any(
        vi.type.tensor_type.elem_type == fp16 for vi in model.graph.output
    ):
        return "fp16"
    return "fp32"


def check(model: onnx.ModelProto) -> str:
    import rewriter

    try:
        rewriter.check_model(model, full_check=True)
        return "ok"
    except Exception as error:  # contrib ops in the ONNX domain, bad types, ...: a result
        return first_line(error)


def run(model: onnx.ModelProto, feeds: dict) -> tuple[dict | None, str]:
    from rewriter.verify.compare import run_model

    try:
        return run_model(model, feeds), "ok"
    except Exception as error:
        return None, first_line(error)


def output_difference(before: dict, after: dict) -> tuple[float | None, str]:
    """(max abs difference over the float outputs, "ok" or why they cannot be compared)."""
    from rewriter.verify.compare import compare_outputs

    difference, worst, _ = compare_outputs(before, after, tolerance=math.inf)
    return worst, "ok" if difference is None else difference.message


def snapshot_model(path: Path, levels: list[str]) -> dict:
    import rewriter

    entry: dict = {"path": str(path), "levels": {}}
    try:
        original = onnx.load(str(path))
    except Exception as error:
        entry["error"] = f"cannot load: {first_line(error)}"
        return entry
    dtype = model_dtype(original)
    feeds = feeds_for(original)
    expected, original_runs = run(original, feeds)
    entry.update(
        nodes=len(original.graph.node),
        dtype=dtype,
        tolerance=TOLERANCE[dtype],
        checker=check(original),
        runs=original_runs,
    )
    for level in levels:
        row: dict = {}
        entry["levels"][level] = row
        start = time.perf_counter()
        try:
            result = rewriter.optimize(path, level=level)
        except Exception as error:  # a rewriter bug on this model: record it, go on
            row["error"] = first_line(error)
            continue
        row["seconds"] = round(time.perf_counter() - start, 4)
        report = result.report
        row["nodes_before"], row["nodes_after"] = report.nodes_before, report.nodes_after
        row["ops_after"] = dict(sorted(report.ops_after.items()))
        rules: dict[str, int] = {}
        for count in report.rules:
            if count.applied:
                rules[count.rule] = rules.get(count.rule, 0) + count.applied
        row["rules"] = dict(sorted(rules.items()))
        row["builtins"] = dict(sorted((k, v) for k, v in report.builtins.items() if v))
        row["checker"] = check(result.model)
        actual, row["runs"] = run(result.model, feeds)
        if expected is not None and actual is not None:
            row["max_abs_diff"], row["outputs"] = output_difference(expected, actual)
        else:
            row["max_abs_diff"], row["outputs"] = None, "not compared (a model did not run)"
    return entry


def key_of(path: Path) -> str:
    return f"{path.resolve().parent.name}/{path.name}"


def rewriter_version() -> dict:
    import onnxruntime

    import rewriter

    source = Path(rewriter.__file__).resolve().parent.parent
    info = {"rewriter": str(source), "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__}
    try:
        info["commit"] = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        info["dirty"] = bool(
            subprocess.run(
                ["git", "-C", str(source), "status", "--porcelain", "--", "rewriter", "rules", "grammar"],
                capture_output=True,
                text=True,
            ).stdout.strip()
        )
    except Exception:  # not a checkout (an installed wheel, an exported tree)
        pass
    return info


def worse_than_tolerance(entry: dict, row: dict) -> bool:
    return row.get("max_abs_diff") is not None and row["max_abs_diff"] > entry["tolerance"]


def problems(entry: dict, row: dict) -> list[str]:
    """What is wrong with one model/level, not counting what the original already had."""
    found = []
    if "error" in row:
        return [f"rewriter error: {row['error']}"]
    if row["checker"] != "ok" and entry["checker"] == "ok":
        found.append(f"checker: {row['checker']}")
    if row["runs"] != "ok" and entry["runs"] == "ok":
        found.append(f"does not run: {row['runs']}")
    if row.get("outputs", "ok") != "ok" and entry["runs"] == "ok" and row["runs"] == "ok":
        found.append(f"outputs: {row['outputs']}")
    if worse_than_tolerance(entry, row):
        found.append(f"max |diff| {row['max_abs_diff']:.3g} > {entry['tolerance']:g}")
    return found


def take(paths: list[Path], levels: list[str], out: Path, skip: list[str]) -> int:
    snapshot = {
        "meta": {**rewriter_version(), "levels": levels, "date": time.strftime("%Y-%m-%d %H:%M:%S")},
        "models": {},
    }
    files = model_files(paths, skip)
    print(f"{'model':48} {'level':8} {'nodes':>5} {'after':>5} {'checker':7} {'runs':4} {'max|diff|':>9}")
    for path in files:
        entry = snapshot_model(path, levels)
        key = key_of(path)
        snapshot["models"][key] = entry
        if "error" in entry:
            print(f"{key:48} {entry['error']}")
            continue
        notes = [] if entry["checker"] == "ok" else ["original fails the checker"]
        notes += [] if entry["runs"] == "ok" else [f"original does not run: {entry['runs']}"]
        for level, row in entry["levels"].items():
            if "error" in row:
                print(f"{key:48} {level:8} ERROR {row['error']}")
                continue
            diff = "-" if row["max_abs_diff"] is None else f"{row['max_abs_diff']:.2e}"
            flags = problems(entry, row)
            print(
                f"{key:48} {level:8} {entry['nodes']:5} {row['nodes_after']:5} "
                f"{'ok' if row['checker'] == 'ok' else 'FAIL':7} {'ok' if row['runs'] == 'ok' else 'FAIL':4} "
                f"{diff:>9}{'  <-- ' + '; '.join(flags) if flags else ''}"
            )
        for note in notes:
            print(f"    {note}")
        out.write_text(json.dumps(snapshot, indent=1))  # as it goes: a long run can be read early
    out.write_text(json.dumps(snapshot, indent=1))
    summarize(snapshot)
    print(f"wrote {out}")
    return 0


def summarize(snapshot: dict) -> None:
    rows = [
        (key, level, entry, row)
        for key, entry in snapshot["models"].items()
        for level, row in entry.get("levels", {}).items()
    ]
    print(f"\n{len(snapshot['models'])} models, {len(rows)} model/levels")
    groups = {
        "rewriter errors": [(k, lv, row["error"]) for k, lv, e, row in rows if "error" in row],
        "checker failures (original passes)": [
            (k, lv, row["checker"])
            for k, lv, e, row in rows
            if "error" not in row and row["checker"] != "ok" and e["checker"] == "ok"
        ],
        "checker failures (original fails too)": [
            (k, lv, row["checker"])
            for k, lv, e, row in rows
            if "error" not in row and row["checker"] != "ok" and e["checker"] != "ok"
        ],
        "run failures (original runs)": [
            (k, lv, row["runs"])
            for k, lv, e, row in rows
            if "error" not in row and row["runs"] != "ok" and e["runs"] == "ok"
        ],
        "output mismatches / differences over tolerance": [
            (k, lv, "; ".join(p for p in problems(e, row) if p.startswith(("outputs", "max"))))
            for k, lv, e, row in rows
            if "error" not in row
            and e["runs"] == "ok"
            and row["runs"] == "ok"
            and (row.get("outputs") != "ok" or worse_than_tolerance(e, row))
        ],
        "originals that do not run": [
            (k, "-", e["runs"]) for k, e in snapshot["models"].items() if e.get("runs", "ok") != "ok"
        ],
        "models that cannot be loaded": [(k, "-", e["error"]) for k, e in snapshot["models"].items() if "error" in e],
    }
    for title, items in groups.items():
        print(f"{title}: {len(items)}")
        for key, level, message in items:
            print(f"    {key} [{level}]: {message}")


# ---- diffing two snapshots -----------------------------------------------------------------------


def status(value: str | None) -> str:
    return "ok" if value == "ok" else f"FAIL ({value})"


def compare_row(entry: dict, old: dict, new: dict) -> tuple[list[str], bool]:
    """(lines describing what changed, whether anything got worse)."""
    lines, worse = [], False
    if "error" in old or "error" in new:
        if old.get("error") != new.get("error"):
            lines.append(f"rewriter error: {old.get('error', 'none')} -> {new.get('error', 'none')}")
            worse = "error" in new
        return lines, worse
    if old["nodes_after"] != new["nodes_after"]:
        worse |= new["nodes_after"] > old["nodes_after"]
        lines.append(f"nodes {old['nodes_after']} -> {new['nodes_after']}")
    if old["ops_after"] != new["ops_after"]:
        ops = sorted(set(old["ops_after"]) | set(new["ops_after"]))
        changes = [
            f"{op} {old['ops_after'].get(op, 0)}->{new['ops_after'].get(op, 0)}"
            for op in ops
            if old["ops_after"].get(op, 0) != new["ops_after"].get(op, 0)
        ]
        lines.append("ops: " + ", ".join(changes))
        for what in ("rules", "builtins"):  # what made the histogram change
            before, after = old.get(what, {}), new.get(what, {})
            changed = [
                f"{r} {before.get(r, 0)}->{after.get(r, 0)}"
                for r in sorted(set(before) | set(after))
                if before.get(r, 0) != after.get(r, 0)
            ]
            if changed:
                lines.append(f"{what}: " + ", ".join(changed))
    for what in ("checker", "runs", "outputs"):
        if old.get(what) != new.get(what):
            lines.append(f"{what}: {status(old.get(what))} -> {status(new.get(what))}")
            worse |= old.get(what) == "ok" and new.get(what) not in ("ok", None)
    tolerance = entry.get("tolerance", TOLERANCE["fp32"])
    was, now = old.get("max_abs_diff"), new.get("max_abs_diff")
    over_before, over_now = was is not None and was > tolerance, now is not None and now > tolerance
    if over_before != over_now or (over_now and was != now):
        lines.append(
            f"max |diff| {was if was is None else f'{was:.3g}'} -> "
            f"{now if now is None else f'{now:.3g}'} (tolerance {tolerance:g})"
        )
        worse |= over_now and (not over_before or now > was)
    return lines, worse


def diff(old_path: Path, new_path: Path) -> int:
    old, new = (json.loads(p.read_text())["models"] for p in (old_path, new_path))
    worse_count = changed_count = 0
    for key in sorted(set(old) | set(new)):
        if key not in new or key not in old:
            print(f"{key}: only in {'old' if key in old else 'new'}")
            changed_count += 1
            continue
        if "error" in old[key] or "error" in new[key]:
            if old[key].get("error") != new[key].get("error"):
                print(f"{key}: {old[key].get('error', 'loads')} -> {new[key].get('error', 'loads')}")
                changed_count += 1
            continue
        for level in sorted(set(old[key]["levels"]) | set(new[key]["levels"])):
            if level not in old[key]["levels"] or level not in new[key]["levels"]:
                continue  # a level taken in one snapshot only: nothing to compare
            lines, worse = compare_row(new[key], old[key]["levels"][level], new[key]["levels"][level])
            if lines:
                changed_count += 1
                worse_count += worse
                print(f"{key} [{level}]{'  WORSE' if worse else ''}")
                for line in lines:
                    print(f"    {line}")
    print(f"\n{changed_count} changed, {worse_count} worse")
    return 1 if worse_count else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    parser.add_argument("models", nargs="*", type=Path, help="model files or directories of them")
    parser.add_argument("--levels", nargs="+", default=["basic", "extended", "all"])
    parser.add_argument("--out", type=Path, default=Path("snapshot.json"))
    parser.add_argument("--skip", nargs="*", default=[], metavar="GLOB", help="file names to leave out")
    parser.add_argument("--diff", nargs=2, type=Path, metavar=("OLD", "NEW"), help="compare two snapshots")
    args = parser.parse_args(argv)
    if args.diff:
        return diff(*args.diff)
    if not args.models:
        parser.error("give models or directories, or --diff OLD NEW")
    return take(args.models, args.levels, args.out, args.skip)


if __name__ == "__main__":
    sys.exit(main())
