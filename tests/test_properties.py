"""Property-based tests of the engine itself (hypothesis)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import assert_fixpoint, assert_same_outputs, init, model, tensor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.lark import from_lark
from lark import Lark
from onnx import TensorProto, helper

import rewriter
from rewriter import RuleError
from rewriter.dsl import check_pack, parse_pack
from rewriter.resources import grammar_text

F = TensorProto.FLOAT
SHAPE = [2, 3, 4]


# ------------------------------------------------------------------ rules files


def _spaced_grammar_strategy() -> st.SearchStrategy[str]:
    """Strings from our own grammar, with whitespace between tokens so they lex as drawn."""
    grammar = Lark(grammar_text(), parser="lalr")
    explicit = {}
    for terminal in grammar.terminals:
        pattern = terminal.pattern
        if pattern.type == "str":
            explicit[terminal.name] = st.just(f" {pattern.value} ")
        else:
            explicit[terminal.name] = st.from_regex(pattern.to_regexp(), fullmatch=True).map(lambda s: f" {s} ")
    return from_lark(grammar, explicit=explicit)


def _parses_or_refuses(text: str) -> None:
    try:
        pack = parse_pack(text, "fuzz.rules")
    except RuleError:
        return  # e.g. a drawn name that is a keyword
    for error in check_pack(pack):
        assert isinstance(error, RuleError) and error.line >= 0


# (hypothesis's generation from the grammar is most of the time: 80 texts here, 1000 slow)
@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(_spaced_grammar_strategy())
def test_any_grammatical_text_either_checks_or_gives_a_rule_error(text):
    _parses_or_refuses(text)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(_spaced_grammar_strategy())
def test_many_grammatical_texts_either_check_or_give_a_rule_error(text):
    _parses_or_refuses(text)


VALID = """pack p level 1
rule R root c {
    c = Conv(x, W, B?) {group}
    y = Add(c, b)
  where const(W, b) and per_channel(b, rank(W), shape(W)[0])
  =>
    y = Conv(x, W, (B ?? 0) + channel(b, rank(W), shape(W)[0])) {...c}
}
"""


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(VALID) - 1), st.integers(0, 8), st.text(max_size=3))
def test_any_corrupted_rules_file_gives_a_rule_error_with_a_position(start, length, insert):
    text = VALID[:start] + insert + VALID[start + length :]
    try:
        rewriter.load_pack_text(text, "c.rules")
    except RuleError as error:
        assert error.file == "c.rules"
        assert 0 <= error.line <= text.count("\n") + 2
        assert error.render().startswith(f"c.rules:{error.line}:{error.column}: ")


# --------------------------------------------------------------- random graphs


class _Builder:
    """Chains motifs on a running float value; some motifs are the basic pack's patterns,
    some are near misses, some fan out or expose intermediates as graph outputs."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.outputs: list[str] = []
        self.current = "x"
        self.count = 0

    def fresh(self, base: str) -> str:
        self.count += 1
        return f"{base}{self.count}"

    def const(self, value: np.ndarray) -> str:
        name = self.fresh("c")
        self.inits.append(init(name, value))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs) -> str:
        out = self.fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=self.fresh("n"), **attrs))
        self.current = out
        return out


def _motif(builder: _Builder, kind: str, value: float, const_shape: list[int], expose: bool, fan_out: bool) -> None:
    x = builder.current
    c = lambda v: builder.const(np.full(const_shape, v, np.float32))
    if kind == "identity":
        builder.op("Identity", [x])
    elif kind in ("Add", "Sub", "Mul", "Div"):
        builder.op(kind, [x, c(value)] if kind in ("Sub", "Div") or value > 0.5 else [c(value), x])
    elif kind == "relu_clip":
        r = builder.op("Relu", [x])
        builder.op("Clip", [r, builder.const(np.float32(value - 1.0)), builder.const(np.float32(value + 2.0))])
    elif kind == "dropout":
        builder.op("Dropout", [x, builder.const(np.float32(0.25))])
    elif kind == "cast_same":
        builder.op("Cast", [x], to=F)
    elif kind == "cast_round_trip":
        d = builder.op("Cast", [x], to=TensorProto.DOUBLE)
        builder.op("Cast", [d], to=F)
    elif kind == "expand":
        builder.op("Expand", [x, builder.const(np.array([1] * len(const_shape), np.int64))])
    elif kind == "div_mul":  # x * (1 / (|x| + 1)): well-conditioned, so bit-level
        #                          differences of a / x vs (1 / x) * a cannot blow up later
        d = builder.op("Div", [c(1.0), builder.op("Add", [builder.op("Abs", [x]), c(1.0)])])
        builder.op("Mul", [x, d])
    elif kind == "gelu":
        d = builder.op("Div", [x, builder.const(np.float32(1.4142135))])
        e = builder.op("Erf", [d])
        a = builder.op("Add", [e, builder.const(np.float32(1.0))])
        m = builder.op("Mul", [x, a])
        builder.op("Mul", [m, builder.const(np.float32(0.5))])
    elif kind == "matmul_scale":
        w = builder.const(np.eye(SHAPE[-1], dtype=np.float32) * value + 0.1)
        m = builder.op("MatMul", [x, w])
        builder.op("Div", [m, builder.const(np.float32(2.0))])
    elif kind == "not_where":
        cond = builder.op("Greater", [x, c(value)])
        n = builder.op("Not", [cond])
        builder.op("Where", [n, x, c(value)])
    else:
        builder.op("Neg", [x])
    produced = builder.current
    if expose and produced != x:
        builder.outputs.append(produced)
    if fan_out and produced != x:
        builder.op("Add", [produced, x])


MOTIFS = [
    "identity",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "relu_clip",
    "dropout",
    "cast_same",
    "cast_round_trip",
    "expand",
    "div_mul",
    "not_where",
    "neg",
    "gelu",
    "matmul_scale",
]

motif_strategy = st.tuples(
    st.sampled_from(MOTIFS),
    st.sampled_from([0.0, 1.0, 2.0]),
    st.sampled_from([[], [1], [1, 1, 1], [1, 1, 1, 1]]),
    st.booleans(),
    st.booleans(),
)


@pytest.mark.parametrize("level", ["basic", "extended"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(motif_strategy, min_size=1, max_size=8))
def test_every_level_keeps_random_graphs_valid_and_equal(level, motifs):
    builder = _Builder()
    for motif in motifs:
        _motif(builder, *motif)
    outputs = list(dict.fromkeys([*builder.outputs, builder.current]))
    if outputs == ["x"]:
        return
    before = model(builder.nodes, [tensor("x", F, SHAPE)], [tensor(o, F, None) for o in outputs], builder.inits)
    before = onnx.shape_inference.infer_shapes(before)
    for out in before.graph.output:  # give outputs their inferred types (the checker wants them)
        for vi in before.graph.value_info:
            if vi.name == out.name:
                out.CopyFrom(vi)
    result = rewriter.optimize(before, level=level, providers="CPU")
    assert result.report.nodes_after <= result.report.nodes_before
    assert_same_outputs(before, result.model, atol=1e-4, seeds=(0,))
    assert_fixpoint(result.model, level)


def test_random_graph_motifs_exercise_the_basic_pack():
    """The generator above must keep reaching the rules, or the property proves little."""
    builder = _Builder()
    for kind in MOTIFS:
        _motif(builder, kind, 1.0, [1], False, False)
    before = model(builder.nodes, [tensor("x", F, SHAPE)], [tensor(builder.current, F, SHAPE)], builder.inits)
    result = rewriter.optimize(before, level="extended", providers="CPU")
    applied = {r.rule for r in result.report.rules if r.applied}
    assert applied >= {
        "IdentityElimination",
        "DropoutElimination",
        "ExpandElimination",
        "CastElimination",
        "MulOneElimination",
        "DivOneElimination",
        "ReluClipFusion",
        "NotWhereFusion",
        "DivMulFusion",
        "GeluErf",
        "MatMulDivFusion",
    }
    assert_same_outputs(before, result.model)
