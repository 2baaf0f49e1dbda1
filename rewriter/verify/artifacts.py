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


def describe(
    model: onnx.ModelProto,
    feeds: dict,
    draws: list[str],
    problem: str,
    rule: str,
    reproduce: str,
    outputs: dict | None = None,
) -> str:
    """Every drawn node, input and constant, the differing output before and after (with
    its absolute and relative errors), and the command that reproduces it."""
    with np.printoptions(precision=6, threshold=64, edgeitems=4, suppress=True):
        lines = [f"rule {rule}: {problem}", "", "reproduce: " + reproduce, "", "instance:"]
        lines += [f"  {d}" for d in draws]
        lines += ["", "inputs:"]
        lines += [f"  {k} ({v.dtype}{list(v.shape)}) = {np.array2string(v)}" for k, v in feeds.items()]
        lines += ["", "constants:"]
        for t in model.graph.initializer:
            value = onnx.numpy_helper.to_array(t)
            lines.append(f"  {t.name} ({value.dtype}{list(value.shape)}) = {np.array2string(value)}")
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
