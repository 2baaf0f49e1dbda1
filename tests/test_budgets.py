"""Bounds on what rules and models may make, in process: rule expressions (per match
attempt and per run), constant folding, growing packs, and the API's argument checks."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import init, model, optimize_with, tensor
from onnx import helper, numpy_helper

import rewriter
from rewriter import RuleError
from rewriter.errors import ArgumentError, GrowthError
from rewriter.expr import budget


def add_model(weight: np.ndarray | None = None) -> onnx.ModelProto:
    w = np.arange(4, dtype=np.float32) if weight is None else weight
    return model(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        [tensor("x", shape=list(w.shape))],
        [tensor("y", shape=list(w.shape))],
        [init("w", w)],
    )


def pack_with(body: str) -> str:
    return f"pack p level 1\nrule R {{ y = Add(x, w)\n{body}\n  => y = Sub(x, w) }}\n"


@pytest.mark.parametrize(
    "let",
    [
        "((10**60)**60)**60",
        '"ab" * 10**9',
        "[0] * 10**8",
        "reshape(arange(30000), [-1, 1]) * arange(30000)",
        "concat([zeros([5000000]), zeros([5000000]), zeros([5000000]), zeros([5000000])])",
        "arange(10**12)",
        "zeros([2**40])",
        "sum(reshape(arange(20000), [-1, 1]) + arange(20000))",
        "take([1, 2], arange(100000000))",
        "-(reshape(arange(30000), [-1, 1]) * arange(30000))",
        "array([[0] * 1000] * 100000)",
        "[[[0] * 1000] * 1000] * 1000 == [[[0] * 1000] * 1000] * 1000",
        "transpose(reshape(arange(20000), [1, -1])) @ reshape(arange(20000), [1, -1])",  # 3.2 GB, known before
        "sum(zeros([1200, 1200], int64) @ zeros([1200, 1200], int64))",  # 1.7 billion slow multiply-adds
    ],
)
def test_an_expression_past_its_budget_is_a_rule_error_with_its_position(let):
    with pytest.raises(RuleError, match="budget") as caught:
        optimize_with(add_model(), pack_with(f"  let k = {let}"))
    assert str(caught.value).startswith("<test>:3:") and caught.value.column >= 11


def test_values_made_by_several_lets_of_one_attempt_add_up():
    lets = "\n".join(f"  let k{i} = zeros([4000000])" for i in range(5))  # 16 MB each, 80 MB in all
    with pytest.raises(RuleError, match="budget") as caught:
        optimize_with(add_model(), pack_with(lets))
    assert caught.value.line == 7  # the fifth (lets start on line 3)


def test_a_computed_initializer_may_be_as_large_as_the_constants_it_reads():
    big = np.ones(24_000_000, np.float32)  # 96 MB: more than the base budget
    result = optimize_with(
        add_model(big), "pack p level 1\nrule Negated { y = Add(x, w) where const(w)\n  => y = Sub(x, -w) }\n"
    )
    assert result.report.applied("Negated") == 1


def test_integer_strings_are_not_formatted():
    result = optimize_with(add_model(), pack_with('  where ("%0999999999d" % 1) == "1"'))
    assert result.report.applied("R") == 0  # refused: not evaluated


def test_the_expressions_of_one_run_have_a_total_budget(monkeypatch):
    monkeypatch.setattr(budget, "RUN_BASE_BYTES", 64 << 20)
    nodes = [helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"]) for i in range(40)]
    m = model(nodes, [tensor("v0", shape=[2])], [tensor("v40", shape=[2])])
    with pytest.raises(RuleError, match="in this run"):
        optimize_with(m, "pack p level 1\nrule R { y = Relu(x) where len(list(arange(1000000))) == 5 => y = x }\n")


def test_a_budget_error_leaves_no_account_open():
    with pytest.raises(RuleError):
        optimize_with(add_model(), pack_with("  let k = zeros([2**40])"))
    assert not budget.attempt_open()
    optimize_with(add_model(), pack_with("  let k = zeros([4])"))  # the next run starts afresh


# ------------------------------------------------------------------ constant folding


def test_folding_knows_an_output_is_too_large_before_evaluating_it(monkeypatch):
    from rewriter.passes import constant_folding

    evaluated: list[str] = []
    original = constant_folding._run
    monkeypatch.setattr(
        constant_folding,
        "_run",
        lambda state, nodes, inits: evaluated.extend(n.op_type for n in nodes) or original(state, nodes, inits),
    )
    one = numpy_helper.from_array(np.ones((1, 1), np.float32), "one")
    target = numpy_helper.from_array(np.array([20000, 20000], np.int64), "t")
    m = model(
        [helper.make_node("Expand", ["one", "t"], ["e"]), helper.make_node("Add", ["x", "e"], ["y"])],
        [tensor("x", shape=[1, 1])],
        [tensor("y", shape=[20000, 20000])],
        [one, target],
    )
    after = rewriter.optimize(m, level="basic").model
    assert "Expand" not in evaluated and [n.op_type for n in after.graph.node] == ["Expand", "Add"]


def test_folding_a_doubling_chain_stops_at_its_growth_bound():
    nodes = [helper.make_node("Concat", [f"c{i}", f"c{i}"], [f"c{i + 1}"], axis=0) for i in range(30)]
    nodes.append(helper.make_node("Add", ["x", "c30"], ["y"]))
    m = model(nodes, [tensor("x", shape=[1])], [tensor("y", shape=None)], [init("c0", np.ones(4, np.float32))])
    after = rewriter.optimize(m, level="basic").model
    assert sum(t.ByteSize() for t in after.graph.initializer) < 200 << 20
    assert "Concat" in {n.op_type for n in after.graph.node}  # the rest stays a computation


def test_a_weight_standardized_by_full_size_steps_folds_whole(monkeypatch):
    """NF-ResNet's weight standardization, (w - mean(w)) / sqrt(var(w) + eps) * gain, makes
    a full-size constant at every step; each dies once the next step is folded.  The growth
    bound counts what stays: the chain folds to one weight (a gross count stopped halfway,
    leaving NF-ResNet's standardizations as computations ORT folds)."""
    from rewriter.passes import constant_folding

    monkeypatch.setattr(constant_folding, "GROWTH_SLACK", 0)  # room for twice the weights
    w = np.random.default_rng(0).standard_normal((64, 16, 3, 3)).astype(np.float32)
    axes = init("axes", np.array([1, 2, 3], np.int64))
    nodes = [
        helper.make_node("ReduceMean", ["w", "axes"], ["mean"]),
        helper.make_node("Sub", ["w", "mean"], ["centered"]),
        helper.make_node("Mul", ["centered", "centered"], ["squared"]),
        helper.make_node("ReduceMean", ["squared", "axes"], ["var"]),
        helper.make_node("Add", ["var", "eps"], ["var_eps"]),
        helper.make_node("Sqrt", ["var_eps"], ["std"]),
        helper.make_node("Div", ["centered", "std"], ["normed"]),
        helper.make_node("Mul", ["normed", "gain"], ["scaled"]),
        helper.make_node("Neg", ["scaled"], ["negated"]),
        helper.make_node("Neg", ["negated"], ["weight"]),
        helper.make_node("Conv", ["x", "weight"], ["y"], pads=[1, 1, 1, 1]),
    ]
    initializers = [
        init("w", w),
        axes,
        init("eps", np.float32(1e-5)),
        init("gain", np.full((64, 1, 1, 1), 0.5, np.float32)),
    ]
    m = model(nodes, [tensor("x", shape=[1, 16, 8, 8])], [tensor("y", shape=None)], initializers, opset=18)
    after = rewriter.optimize(m, level="basic").model
    assert [n.op_type for n in after.graph.node] == ["Conv"]
    weight = numpy_helper.to_array(next(t for t in after.graph.initializer if t.name == after.graph.node[0].input[1]))
    centered = w - w.mean(axis=(1, 2, 3), keepdims=True)
    expected = centered / np.sqrt((centered**2).mean(axis=(1, 2, 3), keepdims=True) + 1e-5) * 0.5
    np.testing.assert_allclose(weight, expected, rtol=1e-5, atol=1e-6)


def test_folding_runs_big_graphs_in_sessions_of_bounded_size(monkeypatch):
    from rewriter.passes import constant_folding

    sizes: list[int] = []
    original = constant_folding._run
    monkeypatch.setattr(constant_folding, "BATCH_BYTES", 1 << 20)
    monkeypatch.setattr(
        constant_folding, "_run", lambda state, nodes, inits: sizes.append(len(nodes)) or original(state, nodes, inits)
    )
    weights = [init(f"w{i}", np.full((256, 256), i, np.float32)) for i in range(6)]  # 256 KB each
    nodes = [helper.make_node("Transpose", [f"w{i}"], [f"t{i}"], perm=[1, 0]) for i in range(6)]
    nodes += [helper.make_node("MatMul", ["x", "t0"], ["m0"])]
    nodes += [helper.make_node("MatMul", [f"m{i - 1}", f"t{i}"], [f"m{i}"]) for i in range(1, 6)]
    m = model(nodes, [tensor("x", shape=[1, 256])], [tensor("m5", shape=[1, 256])], weights)
    after = rewriter.optimize(m, level="basic").model
    assert "Transpose" not in {n.op_type for n in after.graph.node}
    assert len(sizes) >= 3 and max(sizes) <= 2


# ------------------------------------------------------------------ growing packs


def test_a_pack_that_grows_the_graph_stops_with_the_rules_named():
    with pytest.raises(GrowthError, match="Grow"):
        optimize_with(
            add_model(),
            "pack g level 1\nrule Grow { y = Add(x, w) => y = Add(Neg(Neg(x)), w) }\n",
            max_rewrites=100_000,
        )


def test_max_rewrites_zero_allows_no_rewrite():
    with pytest.raises(rewriter.FixpointError, match="after 0 rewrites"):
        optimize_with(add_model(), pack_with(""), max_rewrites=0)


# ------------------------------------------------------------------ the API's arguments


@pytest.mark.parametrize(
    "call",
    [
        lambda m: rewriter.optimize(123),
        lambda m: rewriter.optimize(m, level=3.5),
        lambda m: rewriter.optimize(m, level=True),
        lambda m: rewriter.optimize(m, rules="mine.rules"),
        lambda m: rewriter.optimize(m, rules=[5]),
        lambda m: rewriter.optimize(m, providers=5),
        lambda m: rewriter.optimize(m, max_rewrites="10"),
        lambda m: rewriter.optimize(m, layer_assignment=["gpu(x)"]),
        lambda m: rewriter.optimize(m, provider_kernels="a.kernels"),
        lambda m: rewriter.optimize(m, bundled="no"),
        lambda m: rewriter.save_model(m, 5),
        lambda m: rewriter.save_model(m.SerializeToString(), "out.onnx"),
        lambda m: rewriter.save_model(m, "out.onnx", size_threshold="1"),
        lambda m: rewriter.load_model(None),
        lambda m: rewriter.load_pack(5),
        lambda m: rewriter.load_pack_text(b"pack p level 1"),
        lambda m: rewriter.check_pack("pack p level 1"),
        lambda m: rewriter.parse_level(None),
        lambda m: rewriter.register_predicate("p", None),
        lambda m: rewriter.verify(paths="mine.rules"),
        lambda m: rewriter.verify(examples="10"),
    ],
)
def test_an_argument_of_the_wrong_kind_is_the_librarys_own_error(call, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ArgumentError) as caught:
        call(add_model())
    assert isinstance(caught.value, rewriter.RewriterError) and isinstance(caught.value, TypeError)
    assert list(tmp_path.iterdir()) == []
