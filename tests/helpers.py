"""Building small models with onnx.helper and running them in onnxruntime."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import rewriter
from rewriter.verify.compare import random_feeds as _random_feeds
from rewriter.verify.compare import run_model

MODELS = Path(__file__).parent / "models"
IR_VERSION = 8  # onnxruntime loads IR <= 10; onnx's helper would write a newer one


def tensor(name: str, dtype=TensorProto.FLOAT, shape=None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def init(name: str, value) -> TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def model(nodes, inputs, outputs, initializers=(), opset: int = 17, domains=(), value_info=()):
    graph = helper.make_graph(nodes, "test", inputs, outputs, list(initializers), value_info=list(value_info))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    m = helper.make_model(graph, opset_imports=opsets)
    m.ir_version = IR_VERSION
    return m


def ops(m: onnx.ModelProto) -> Counter:
    return Counter(n.op_type for n in m.graph.node)


def random_feeds(m: onnx.ModelProto, seed: int = 0, batch: int = 1) -> dict[str, np.ndarray]:
    return _random_feeds(m, seed, dynamic_dim=batch)


def run(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return list(run_model(m, feeds).values())


def assert_same_outputs(before: onnx.ModelProto, after: onnx.ModelProto, atol: float = 1e-5, seeds=(0, 1)) -> None:
    """Both models run in onnxruntime and agree on random inputs; `after` passes the checker."""
    rewriter.check_model(after, full_check=True)
    assert [o.name for o in before.graph.output] == [o.name for o in after.graph.output]
    for seed in seeds:
        feeds = random_feeds(before, seed)
        for a, b in zip(run(before, feeds), run(after, feeds)):
            assert a.shape == b.shape and a.dtype == b.dtype
            np.testing.assert_allclose(a, b, atol=atol, rtol=1e-5)


def optimize_with(m: onnx.ModelProto, rules_text: str, level="basic", **options):
    """Optimize with one pack given as text (and no bundled pack)."""
    pack = rewriter.load_pack_text(rules_text, "<test>")
    return rewriter.optimize(m, level=level, rules=[pack], bundled=False, **options)


def optimize_basic(m: onnx.ModelProto):
    return rewriter.optimize(m, level="basic")


def only(pack_name: str, rule: str) -> rewriter.Pack:
    """A bundled pack reduced to one rule and no builtins: the rule alone must do its job."""
    import dataclasses

    (pack,) = [p for p in rewriter.bundled_packs() if p.name == pack_name]
    (kept,) = [r for r in pack.rules if r.name == rule]
    return dataclasses.replace(pack, rules=(kept,), builtins=())


def check_rule(
    before: onnx.ModelProto, pack_name: str, rule: str, expect: bool, level: str, atol: float = 1e-5, **options
) -> onnx.ModelProto:
    """The rule alone applies (or not) and keeps the numbers; so does the whole pipeline."""
    alone = rewriter.optimize(before, level=level, rules=[only(pack_name, rule)], bundled=False, **options)
    assert alone.report.applied(rule) == (1 if expect else 0), alone.report.rules
    assert_same_outputs(before, alone.model, atol=atol)
    assert_same_outputs(before, rewriter.optimize(before, level=level, **options).model, atol=atol)
    return alone.model


def assert_fixpoint(optimized: onnx.ModelProto, level: str) -> None:
    """The engine revisits only what a rewrite can affect and re-runs built-ins only on
    what changed; if it missed anything, a second run would still find work."""
    again = rewriter.optimize(optimized, level=level, providers="CPU").report
    assert {r.rule: r.applied for r in again.rules if r.applied} == {}
    assert {name: n for name, n in again.builtins.items() if n} == {}
    assert again.nodes_after == again.nodes_before
