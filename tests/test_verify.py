"""The verifier: seeded bugs are caught with the default budget, failures are shrunk and
saved as files a user can open, rules that never apply are findings, shipped packs pass."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import rewriter
from rewriter.dsl import parse_pack
from rewriter.errors import RewriterError
from rewriter.rewrite import apply as apply_module
from rewriter.verify import DEFAULT_EXAMPLES, verify
from rewriter.verify.compare import run_model

HEADER = "pack mutants level 1\n"


def verify_text(text: str, tmp_path, examples: int = DEFAULT_EXAMPLES, level: int = 1, **options):
    """Verify a pack given as text, unchecked (a rule the checker refuses fails verify)."""
    pack = parse_pack(text.replace("level 1", f"level {level}", 1), "mutants.rules")
    return verify(packs=[pack], examples=examples, out=tmp_path, seed=1, jobs=options.pop("jobs", 1), **options)


REPEATABLE = dict(shrink_attempts=20, budget_seconds=600.0)


def only_verdict(report):
    (verdict,) = report.verdicts
    return verdict


# ----------------------------------------------------------------- seeded mutants

GELU_WRONG_CONSTANT = (
    HEADER
    + """
rule GeluWrongConstant root e {
    d = Div(x, ~1.5)
    e = Erf(d)
    y = Mul(Mul(x, Add(e, 1.0)), 0.5)
  =>
    y = com.microsoft.Gelu(x)
}"""
)

CONV_BN_WITHOUT_EPSILON = (
    HEADER
    + """
rule ConvBatchNormNoEpsilon root c {
    c = Conv(x, W, B?)
    y = BatchNormalization(c, scale, b, mean, var) {epsilon}
  where const(W, B, scale, b, mean, var)
  let k = scale / sqrt(var)
  =>
    y = Conv(x, W * reshape(k, [-1] + [1] * (rank(W) - 1)), ((B ?? 0) - mean) * k + b) {...c}
}"""
)

# The same bug, said to the checker: `{epsilon: _}` (any value is fine) lets it through, and
# the fuzzing must catch it.
CONV_BN_EPSILON_ANY_VALUE = (
    HEADER
    + """
rule ConvBatchNormEpsilonAnyValue root c {
    c = Conv(x, W, B?)
    y = BatchNormalization(c, scale, b, mean, var) {epsilon: _}
  where const(W, B, scale, b, mean, var)
  let k = scale / sqrt(var)
  =>
    y = Conv(x, W * reshape(k, [-1] + [1] * (rank(W) - 1)), ((B ?? 0) - mean) * k + b) {...c}
}"""
)

CONV_ADD_WITHOUT_PER_CHANNEL_CHECK = (
    HEADER
    + """
rule ConvAddAnyShape root c {
    c = Conv(x, W, B?)
    y = Add(c, b)
  where const(W, B, b) and size(b) == shape(W)[0]
  =>
    y = Conv(x, W, (B ?? 0) + reshape(b, [-1])) {...c}
}"""
)

LAYER_NORM_IGNORING_AXIS = (
    HEADER
    + """
rule LayerNormAnyAxis root m {
    m = ReduceMean(x) {axes: ax}
    d = Sub(x, m)
    v = ReduceMean(Pow(d, 2.0)) {axes: ax}
    y = Div(d, Sqrt(Add(v, ~0.00001)))
  where opset() < 18 and is_float(x)
  example x: [B, S, H], opset 17
  =>
    y = LayerNormalization(x, ones([shape(x)[-1]], dtype(x)), zeros([shape(x)[-1]], dtype(x)))
        {axis: -1, epsilon: 0.00001}
}"""
)


LAYER_NORM_AXIS_ANY_VALUE = LAYER_NORM_IGNORING_AXIS.replace("{axes: ax}", "{axes: _}").replace(
    "LayerNormAnyAxis", "LayerNormAxisAnyValue"
)


@pytest.mark.parametrize(
    "text, level",
    [
        (GELU_WRONG_CONSTANT, 2),
        (CONV_BN_WITHOUT_EPSILON, 1),
        (CONV_BN_EPSILON_ANY_VALUE, 1),
        (LAYER_NORM_AXIS_ANY_VALUE, 1),
        (CONV_ADD_WITHOUT_PER_CHANNEL_CHECK, 1),
        (LAYER_NORM_IGNORING_AXIS, 1),
    ],
    ids=[
        "gelu-wrong-constant",
        "conv-bn-no-epsilon",
        "conv-bn-epsilon-any-value",
        "layernorm-axis-any-value",
        "conv-add-no-per-channel-check",
        "layernorm-ignores-axis",
    ],
)
def test_seeded_mutant_is_caught_with_the_default_budget(text, level, tmp_path):
    # (caught is all this asks: little shrinking)
    verdict = only_verdict(
        verify_text(
            text.replace("pack mutants level 1", "pack mutants level 1" + (" providers CPU" if level >= 2 else "")),
            tmp_path,
            level=level,
            shrink_attempts=5,
        )
    )
    assert verdict.verdict == "FAIL", verdict


def test_identity_elimination_that_ignores_graph_outputs_is_caught(tmp_path, monkeypatch):
    """An engine bug (graph outputs treated as ordinary values) must not pass verification."""
    original = apply_module.Rewriter.apply

    def buggy(self, match):
        real = type(self.view).is_graph_output
        monkeypatch.setattr(type(self.view), "is_graph_output", lambda view, value: False)
        try:
            return original(self, match)
        finally:
            monkeypatch.setattr(type(self.view), "is_graph_output", real)

    monkeypatch.setattr(apply_module.Rewriter, "apply", buggy)
    report = verify(
        packs=[p for p in rewriter.bundled_packs() if p.name == "basic"],
        rule="IdentityElimination",
        out=tmp_path,
        seed=1,
        shrink_attempts=5,
        jobs=1,
    )
    assert only_verdict(report).verdict == "FAIL"


# ------------------------------------------------------------------ what a user gets


@pytest.fixture(scope="module")
def conv_bn_failure(tmp_path_factory):
    """One failing campaign, shared by the tests below: shrinking bounded by attempts alone
    (a generous time budget), so a slow machine keeps the same counterexample."""
    out = tmp_path_factory.mktemp("verify")
    return only_verdict(verify_text(CONV_BN_EPSILON_ANY_VALUE, out, **REPEATABLE)), out


def test_a_failure_is_saved_as_files_that_reproduce_it(conv_bn_failure):
    verdict, out = conv_bn_failure
    folder = verdict.artifacts
    assert folder == out / "mutants" / "ConvBatchNormEpsilonAnyValue"
    before = onnx.load(str(folder / "before.onnx"))
    after = onnx.load(str(folder / "after.onnx"))
    feeds = dict(np.load(folder / "inputs.npz"))
    report = (folder / "report.txt").read_text()
    assert "reproduce: rewriter verify" in report and "inputs:" in report and "constants:" in report
    assert "outputs (before -> after)" in report
    a, b = run_model(before, feeds), run_model(after, feeds)
    assert any(not np.allclose(a[k], b[k], atol=1e-4) for k in a)


def test_the_saved_counterexample_is_shrunk(conv_bn_failure):
    verdict, _ = conv_bn_failure
    before = onnx.load(str(verdict.artifacts / "before.onnx"))
    assert len(before.graph.node) <= 4  # the pattern itself, at most wrapped
    sizes = [int(np.prod(t.dims)) for t in before.graph.initializer]
    assert max(sizes) <= 64


def test_a_rule_that_never_applies_is_reported_unverified(tmp_path):
    never = HEADER + "rule Never { y = Relu(x) where rank(x) == 99 => y = Neg(x) }"
    verdict = only_verdict(verify_text(never, tmp_path, examples=20))
    assert verdict.verdict == "unverified" and "never applied" in verdict.message


def test_a_correct_rule_passes_and_counts_its_draws(tmp_path):
    verdict = only_verdict(
        verify(
            packs=[p for p in rewriter.bundled_packs() if p.name == "basic"],
            rule="ConvBatchNormFusion",
            examples=12,
            out=tmp_path,
            seed=3,
        )
    )
    assert verdict.verdict == "ok"
    assert 8 <= verdict.applied <= 12  # examples count rewritten instances
    assert verdict.applied <= verdict.draws  # draws also count those left alone
    assert verdict.near_misses >= verdict.near_misses_refused


@pytest.mark.slow
def test_every_shipped_rule_verifies_with_the_default_budget(tmp_path):
    report = verify(examples=DEFAULT_EXAMPLES, out=tmp_path, seed=0)
    bad = [(v.rule, v.verdict, v.message) for v in report.verdicts if v.verdict != "ok"]
    assert not bad


SHORT_CAMPAIGN_SHARES = 8  # the short campaign in shares pytest-xdist spreads over its workers
# the strata it draws in: a fourth of the time of all four (the dynamic-axes and varied
# strata draw many instances onnx refuses before one is rewritten); `pytest -m slow` and
# `rewriter verify` draw in every stratum
SHORT_STRATA = ("free", "high ranks")
# rewritten draws per rule: enough to catch a rule that is wrong outright (the mutants below
# and the slow campaign measure how much is caught).  A rule whose draws rarely apply can
# use up a stratum's draws before one does: give it an example clause for each of its forms
SHORT_EXAMPLES = 2


@pytest.mark.parametrize("share", range(SHORT_CAMPAIGN_SHARES))
def test_every_shipped_rule_verifies_quickly(share, tmp_path):
    """The short CI version of the campaign: every rule applies and keeps the numbers (2
    rewritten draws of each bundled rule, in the free and high-rank strata; the
    slow test above draws 50 in all four).  Each share takes every eighth rule of every pack
    and verifies it in this process (one job): the shares run on the test workers side by
    side, not a verify pool contending with them."""
    verdicts, names = [], []
    for pack in rewriter.bundled_packs():
        share_names = [rule.name for rule in pack.rules][share::SHORT_CAMPAIGN_SHARES]
        names += share_names
        if share_names:
            verdicts += verify(
                packs=[pack],
                rule=share_names,
                examples=SHORT_EXAMPLES,
                out=tmp_path,
                seed=0,
                jobs=1,
                strata=SHORT_STRATA,
            ).verdicts
    assert [v.rule for v in verdicts] == names
    bad = [(v.rule, v.verdict, v.message) for v in verdicts if v.verdict != "ok"]
    assert not bad


# ----------------------------------------------------------- repeatable, parallel, explained


def test_the_same_seed_gives_the_same_counterexample(conv_bn_failure, tmp_path):
    """Shrinking stops after a number of attempts, not a time: one seed, one answer."""
    first, _ = conv_bn_failure
    again = only_verdict(verify_text(CONV_BN_EPSILON_ANY_VALUE, tmp_path, **REPEATABLE))
    assert first.verdict == again.verdict == "FAIL"
    assert first.message == again.message and first.max_abs == again.max_abs
    assert (first.artifacts / "report.txt").read_text() == (again.artifacts / "report.txt").read_text()


def test_the_summary_gives_the_counterexamples_error(conv_bn_failure):
    """The table's errors for a failed rule are the saved counterexample's, not the largest
    seen among the draws that passed."""
    from rewriter.verify.compare import compare_outputs

    verdict, _ = conv_bn_failure
    folder = verdict.artifacts
    feeds = dict(np.load(folder / "inputs.npz"))
    before = run_model(onnx.load(str(folder / "before.onnx")), feeds)
    after = run_model(onnx.load(str(folder / "after.onnx")), feeds)
    _, worst_abs, worst_rel = compare_outputs(before, after)
    assert (verdict.max_abs, verdict.max_rel) == (worst_abs, worst_rel)


def test_parallel_workers_give_the_verdicts_of_one_process(tmp_path):
    pack = [p for p in rewriter.bundled_packs() if p.name == "basic"][0]
    names = ["IdentityElimination", "ReluClipFusion", "DivMulFusion"]
    serial = verify(packs=[pack], rule=names, examples=15, out=tmp_path / "1", jobs=1)
    parallel = verify(packs=[pack], rule=names, examples=15, out=tmp_path / "2", jobs=2)
    assert [v.rule for v in parallel.verdicts] == names  # in the pack's order
    assert [(v.rule, v.verdict, v.draws, v.applied) for v in serial.verdicts] == [
        (v.rule, v.verdict, v.draws, v.applied) for v in parallel.verdicts
    ]


def test_a_rule_the_checker_refuses_fails_and_the_others_are_still_verified(tmp_path):
    text = (
        HEADER
        + """
rule DropsAxis { y = Softmax(x) {axis: a} => y = Softmax(x) }
rule Fine { y = Identity(x) => y = x }
"""
    )
    report = verify_text(text, tmp_path, examples=15)
    by_rule = {v.rule: v for v in report.verdicts}
    assert by_rule["DropsAxis"].verdict == "FAIL" and by_rule["DropsAxis"].draws == 0
    assert "rewriter check: mutants.rules:3:" in by_rule["DropsAxis"].message
    assert by_rule["Fine"].verdict == "ok"


def test_an_unverified_rule_names_the_constraint_that_rejected_the_draws(tmp_path):
    never = HEADER + "rule Never { y = Relu(x) where rank(x) == 99 => y = Neg(x) }"
    verdict = only_verdict(verify_text(never, tmp_path, examples=20))
    assert "where `rank(x) == 99`" in verdict.message and "example" in verdict.message


@pytest.mark.parametrize("jobs, isolated", [(2, False), (1, True)])
def test_a_rewrite_that_crashes_onnxruntime_fails_with_the_draw_that_crashed(tmp_path, jobs, isolated):
    """The nchwc pools divide by zero on an empty output: a rule that forgets so kills the
    worker running it; the rule fails with that draw as its counterexample, the others
    are still verified.  One job isolated (``rewriter verify -j 1``) runs in a worker too:
    the crash must not end the command with nothing said."""
    from rewriter.verify.campaign import CRASHED

    crashing = (
        "pack mutants level 3\n"
        "rule EmptyPool root p {\n"
        "    p = MaxPool(x) {kernel_shape: k}\n"
        "  where nchwc_block() != none and dtype(x) == float and rank(x) == 4 and static(x, p)\n"
        "    and shape(x)[1] % nchwc_block() == 0\n"
        "  example x: float[1, 16, 2, 2], k = [3, 3]\n"
        "  =>\n"
        "    p = com.microsoft.nchwc.ReorderOutput(com.microsoft.nchwc.MaxPool(\n"
        "        com.microsoft.nchwc.ReorderInput(x)) {...p}) {channels: shape(x)[1]}\n"
        "}\n"
        "rule Fine { y = Neg(Neg(x)) => y = x }\n"
    )
    from rewriter.onnx_facts.nchwc import nchwc_block_size

    if nchwc_block_size() is None:
        pytest.skip("no NCHWc layout on this machine")
    report = verify_text(crashing, tmp_path, examples=10, level=3, jobs=jobs, isolated=isolated)
    crashed, fine = report.verdicts
    assert crashed.verdict == "FAIL" and crashed.message == CRASHED
    assert (crashed.artifacts / "after.onnx").exists()
    report_text = (crashed.artifacts / "report.txt").read_text()
    # the values are filled in after the crash, from the files beside the report
    assert "\ninputs:\n  x (float32[" in report_text and "written when the report" not in report_text
    assert fine.verdict == "ok"


def test_a_draw_whose_original_crashes_onnxruntime_on_empty_inputs_is_verified_without_them(tmp_path):
    """onnxruntime 1.32's Einsum kills the process on an empty batch (the original, not the
    rewrite): the rule is verified again without the empty-input runs, which its verdict
    says, and the draw that crashed is kept; before, the rule stayed unverified."""
    from rewriter.verify.campaign import EMPTY_INPUTS_SKIPPED

    text = (
        HEADER
        + """
rule EinsumTransB root y {
    y = Einsum(a, b) {equation}
  where einsum_matmul(equation) == [0, 1] and rank(a) == 4 and rank(b) == 4 and shape(a)[3] == shape(b)[3]
    and shape(a)[:2] == shape(b)[:2]
  example a: [B, 3, 4, 5], b: [B, 3, 6, 5], equation = "bhlk,bhtk->bhlt"
  =>
    y = MatMul(a, Transpose(b) {perm: [0, 1, 3, 2]})
}
"""
    )
    verdict = only_verdict(verify_text(text, tmp_path, examples=10, isolated=True))
    assert verdict.verdict == "ok" and verdict.applied >= 5
    if verdict.message:  # (an onnxruntime without the crash compares the empty runs too)
        assert verdict.message.endswith(EMPTY_INPUTS_SKIPPED)
        assert (verdict.artifacts / "before.onnx").exists() and not (verdict.artifacts / "after.onnx").exists()


def test_strata_choose_where_the_examples_are_drawn(tmp_path):
    relu = HEADER + "rule R { y = Relu(Relu(x)) => y = Relu(x) }"
    verdict = only_verdict(verify_text(relu, tmp_path, examples=4, strata=["free"]))
    assert verdict.verdict == "ok" and verdict.applied == 4  # the free stratum's share is all of them
    with pytest.raises(RewriterError, match="no verify stratum named 'fast'"):
        verify_text(relu, tmp_path, strata=["fast"])
    with pytest.raises(RewriterError, match="not one string"):
        verify_text(relu, tmp_path, strata="free")


def test_a_rewrite_that_fails_on_an_empty_batch_is_caught(tmp_path):
    """Relu(Relu(x)) -> Relu(x) viewed as [0, -1]: equal on every non-empty input, but the
    rewritten model refuses an empty batch (a -1
    over no elements is ambiguous) where the original gives an empty result: with dynamic
    axes the campaign runs each draw once more with every symbolic dim 0."""
    text = HEADER + (
        "rule ReluRows root y {\n  y = Relu(Relu(x))\n  where rank(x) == 2\n"
        "  example x: [B, 4]\n  =>\n  y = Reshape(Relu(x), array([0, -1], int64))\n}"
    )
    verdict = only_verdict(verify_text(text, tmp_path, examples=20))
    assert verdict.verdict == "FAIL" and "empty" in verdict.message, verdict.message


def test_a_rewrite_that_crashes_where_the_original_fails_on_an_empty_batch_is_caught(tmp_path):
    """The original refuses an empty batch (its [0, 0, 0, -1] view over no elements), so a
    rewrite may fail there too, but not kill the process: a server would die where it
    reported an error.  Dropping the view (the same tensor whenever it has elements) hands
    the empty batch to onnxruntime 1.32's Einsum, which divides by zero; the soft-capped
    GroupQueryAttention on a dynamic batch would do the like without its guard."""
    from rewriter.verify.campaign import CRASHED_EMPTY

    text = HEADER + (
        "rule EinsumOfAView root y {\n"
        "    y = Einsum(Reshape(a, s), b) {equation}\n"
        '  where rank(a) == 4 and rank(b) == 4 and dims(s) == [0, 0, 0, -1] and equation == "bhlk,bhtk->bhlt"\n'
        "    and shape(a)[:2] == shape(b)[:2] and shape(a)[3] == shape(b)[3]\n"
        '  example a: [B, 3, 4, 5], b: [B, 3, 6, 5], s = [0, 0, 0, -1], equation = "bhlk,bhtk->bhlt"\n'
        "  =>\n"
        "    y = Einsum(a, b) {equation}\n"
        "}\n"
    )
    verdict = only_verdict(verify_text(text, tmp_path, examples=20, isolated=True))
    assert verdict.verdict == "FAIL" and verdict.message == CRASHED_EMPTY, verdict.message
    assert (verdict.artifacts / "after.onnx").exists()


def test_a_rewrite_that_crashes_where_the_original_refuses_a_draw_is_caught(tmp_path):
    """A draw the original refuses with an error is no example to compare, but the
    rewritten model must not kill the process on it either.  A 3x3 pool of a 2x2 image is
    empty, and the original's Reshape to a runtime shape of two dims (each a 0 that copies
    a non-zero dim, or 1 to 3) refuses it on every draw; the rewrite hands the pool to the
    nchwc kernel, which divides by zero on an empty output.  Before, every draw was refused
    and the rule was only 'unverified'."""
    from rewriter.onnx_facts.nchwc import nchwc_block_size
    from rewriter.verify.campaign import CRASHED_REFUSED

    if nchwc_block_size() is None:
        pytest.skip("no NCHWc layout on this machine")
    text = (
        "pack mutants level 3\n"
        "rule PoolThenView root y {\n"
        "    y = Reshape(MaxPool(x) {kernel_shape: k}, s)\n"
        "  where nchwc_block() != none and dtype(x) == float and rank(x) == 4 and static(x)\n"
        "    and shape(x)[1] % nchwc_block() == 0 and shape(s) == [2]\n"
        "  example x: float[1, 16, 2, 2], s: int64[2], k = [3, 3]\n"
        "  =>\n"
        "    y = Reshape(com.microsoft.nchwc.ReorderOutput(com.microsoft.nchwc.MaxPool(\n"
        "        com.microsoft.nchwc.ReorderInput(x)) {kernel_shape: k}) {channels: shape(x)[1]}, s)\n"
        "}\n"
    )
    verdict = only_verdict(verify_text(text, tmp_path, examples=10, level=3, isolated=True))
    assert verdict.verdict == "FAIL" and verdict.message == CRASHED_REFUSED, verdict.message
    assert (verdict.artifacts / "after.onnx").exists()


def test_dynamic_axes_keep_the_sizes_an_example_gives_as_numbers(tmp_path):
    """Exporters declare batch and sequence symbolic and the head size a number.  A rule
    that needs the width known (the rotary fusions need the head size) applies only to
    draws declared so: with dynamic axes an example's symbols are declared symbolic and its
    numbers known, or the empty-batch run would never meet such a rule (the per-batch
    rotary's [B, -1] view of its positions passed every campaign that way)."""
    text = HEADER + (
        "rule ReluRowsKnownWidth root y {\n  y = Relu(Relu(x))\n  where rank(x) == 2 and int(shape(x)[1] ?? 0) > 1\n"
        "  example x: [B, 4]\n  =>\n  y = Reshape(Relu(x), array([0, -1], int64))\n}"
    )
    verdict = only_verdict(verify_text(text, tmp_path, examples=20, strata=["dynamic axes"]))
    assert verdict.verdict == "FAIL" and "empty" in verdict.message, verdict.message


def test_a_rewrite_that_changes_a_run_time_mask_of_minus_infinity_is_caught(tmp_path):
    """A mask that arrives at run time (a graph input added to the scores a Softmax reads)
    holds -inf, NaN and extreme values now and then, as a constant mask does: clamping it
    to float32's lowest value is equal on every finite mask, but turns a fully masked row
    from NaN into a uniform one (the Granite SWA sink fusion's first version did the like)."""
    text = HEADER + (
        "rule ClampedMask root y {\n  y = Softmax(Add(MatMul(a, b), mask)) {axis: -1}\n"
        "  where rank(a) == 2\n  example a: [3, 4], b: [4, 5], mask: [3, 5]\n  =>\n"
        "  y = Softmax(Sub(MatMul(a, b), Neg(Max(mask, -3.4028234663852886e38)))) {axis: -1}\n}"
    )
    verdict = only_verdict(verify_text(text, tmp_path, examples=30))
    assert verdict.verdict == "FAIL" and "NaN" in verdict.message, verdict.message


def test_empty_inputs_zero_every_symbolic_dim_then_each_alone():
    """An empty batch of some tokens is not an empty batch of none: onnxruntime kernels
    check one against the other (RotaryEmbedding's cache rows against the tokens)."""
    from rewriter.verify.compare import empty_feeds

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", 4]),
            helper.make_tensor_value_info("p", TensorProto.INT64, ["B", "S"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S", 4])],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    shapes = {"x": [2, 3, 4], "p": [2, 3]}
    assert [{k: v.shape for k, v in f.items()} for f in empty_feeds(m, shapes)] == [
        {"x": (0, 0, 4), "p": (0, 0)},
        {"x": (0, 3, 4), "p": (0, 3)},
        {"x": (2, 0, 4), "p": (2, 0)},
    ]
    assert len(empty_feeds(m)) == 1  # without the draw's sizes: every dim 0 only
    static = helper.make_graph(graph.node, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])], [])
    assert empty_feeds(helper.make_model(static)) == []


def test_empty_inputs_keep_a_hidden_size_named_symbolically():
    """A dim named only as the last axis of an input of rank 3 or more (a hidden or head
    size) keeps its size: onnxruntime's MultiHeadAttention kills the process on a head size
    of 0, the original model as well as the rewrite.  A name also found elsewhere (a
    sequence that is a mask's last axis) is emptied."""
    from rewriter.verify.compare import empty_feeds

    inputs = [
        helper.make_tensor_value_info("q", TensorProto.FLOAT, ["B", "S", "H"]),
        helper.make_tensor_value_info("mask", TensorProto.INT64, ["B", "T"]),
        helper.make_tensor_value_info("k", TensorProto.FLOAT, ["B", "T", "H"]),
    ]
    graph = helper.make_graph([helper.make_node("Identity", ["q"], ["y"])], "g", inputs, [])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    shapes = {"q": [2, 3, 8], "mask": [2, 5], "k": [2, 5, 8]}
    assert [{k: v.shape for k, v in f.items()} for f in empty_feeds(m, shapes)] == [
        {"q": (0, 0, 8), "mask": (0, 0), "k": (0, 0, 8)},
        {"q": (0, 3, 8), "mask": (0, 5), "k": (0, 5, 8)},
        {"q": (2, 0, 8), "mask": (2, 5), "k": (2, 5, 8)},
        {"q": (2, 3, 8), "mask": (2, 0), "k": (2, 0, 8)},
    ]
    assert [f["q"].shape for f in empty_feeds(m)] == [(0, 0, 1)]  # without the draw's sizes: 1
