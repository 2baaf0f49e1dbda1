"""A counterexample as files a user can open: the models, the inputs, a readable report."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx


def write_artifacts(
    directory: Path, before: onnx.ModelProto, after: onnx.ModelProto | None, feeds: dict, report: str
) -> None:
    """``before.onnx``, ``after.onnx`` (when the engine produced one), ``inputs.npz`` and
    ``report.txt`` in ``directory`` (replacing an earlier counterexample's)."""
    directory.mkdir(parents=True, exist_ok=True)
    onnx.save(before, str(directory / "before.onnx"))
    if after is not None:
        onnx.save(after, str(directory / "after.onnx"))
    elif (directory / "after.onnx").exists():
        (directory / "after.onnx").unlink()
    np.savez(directory / "inputs.npz", **feeds)
    (directory / "report.txt").write_text(report, encoding="utf-8")


VALUES_LATER = "(values: written when the report is completed from before.onnx and inputs.npz)"


def describe(
    model: onnx.ModelProto,
    feeds: dict,
    draws: list[str],
    problem: str,
    rule: str,
    reproduce: str,
    outputs: dict | None = None,
    values: bool = True,
) -> str:
    """Every drawn node, input and constant, the differing output before and after (with
    its absolute and relative errors), and the command that reproduces it.  ``values``
    False leaves the inputs' and constants' values to ``complete_report``: the report kept
    beside every draw in case onnxruntime kills the process is written for each draw, and
    printing arrays is most of its cost."""
    with np.printoptions(precision=6, threshold=64, edgeitems=4, suppress=True):
        lines = [f"rule {rule}: {problem}", "", "reproduce: " + reproduce, "", "instance:"]
        lines += [f"  {d}" for d in draws]
        lines += value_lines(model, feeds) if values else ["", VALUES_LATER]
        if outputs:
            lines += ["", "outputs (before -> after):"]
            for name, (a, b) in outputs.items():
                lines.append(f"  {name}:\n    before {np.array2string(a)}\n    after  {np.array2string(b)}")
                if b is not None and a.shape == b.shape and a.dtype.kind == "f" == b.dtype.kind:
                    with np.errstate(all="ignore"):
                        err = np.abs(a.astype(np.float64) - b.astype(np.float64))
                        rel = err / (np.abs(a.astype(np.float64)) + 1e-12)
                    lines.append(f"    abs error {np.array2string(err)}\n    rel error {np.array2string(rel)}")
    return "\n".join(lines) + "\n"


def value_lines(model: onnx.ModelProto, feeds: dict) -> list[str]:
    """The report's inputs and constants sections (under ``describe``'s print options)."""
    lines = ["", "inputs:"]
    lines += [f"  {k} ({v.dtype}{list(v.shape)}) = {np.array2string(v)}" for k, v in feeds.items()]
    lines += ["", "constants:"]
    for t in model.graph.initializer:
        value = onnx.numpy_helper.to_array(t)
        lines.append(f"  {t.name} ({value.dtype}{list(value.shape)}) = {np.array2string(value)}")
    return lines


def complete_report(directory: Path) -> None:
    """Fill in the values a report written with ``values=False`` left out, from the
    ``before.onnx`` and ``inputs.npz`` beside it."""
    report = directory / "report.txt"
    text = report.read_text(encoding="utf-8")
    if VALUES_LATER not in text:
        return
    model = onnx.load(str(directory / "before.onnx"))
    with np.load(directory / "inputs.npz") as saved:
        feeds = {name: saved[name] for name in saved.files}
    with np.printoptions(precision=6, threshold=64, edgeitems=4, suppress=True):
        values = "\n".join(value_lines(model, feeds)[1:])  # (the blank line before is kept)
    report.write_text(text.replace(VALUES_LATER, values, 1), encoding="utf-8")
