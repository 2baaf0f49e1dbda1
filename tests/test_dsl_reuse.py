"""Reuse in the rule language: named constraints, pattern fragments, rule families.  They
expand into plain rules, so matching and rewriting behave exactly as if written out; errors
point at the text and name the instance."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_same_outputs, init, model, ops, optimize_with, tensor
from onnx import helper

import rewriter
from rewriter.dsl.ast import conjuncts as conjuncts_of
from rewriter.dsl.unparse import show
from rewriter.errors import RuleError

HEADER = "pack reuse level 1\n"

FAMILY = (
    HEADER
    + """
# x + 0, x * 1 -> x
rule NeutralElement(Op, k) root y for AddZero(Add, 0.0), MulOne(Mul, 1.0) {
    y = Op(x, k)
  where rank(x) >= 1
  example x: [N]
  => y = x
}
"""
)


def _binary(op: str, value: float):
    return model(
        [helper.make_node(op, ["x", "k"], ["t"]), helper.make_node("Relu", ["t"], ["y"])],
        [tensor("x", shape=[2, 3])],
        [tensor("y", shape=[2, 3])],
        [init("k", np.array(value, np.float32))],
    )


def test_a_family_is_one_rule_per_instance_named_by_the_instance():
    pack = rewriter.load_pack_text(FAMILY)
    assert [(r.name, r.family) for r in pack.rules] == [
        ("AddZero", "NeutralElement(Add, 0.0)"),
        ("MulOne", "NeutralElement(Mul, 1.0)"),
    ]
    assert [r.equations[0].alternatives[0].op for r in pack.rules] == ["Add", "Mul"]


@pytest.mark.parametrize(
    "op, value, fused",
    [("Add", 0.0, True), ("Mul", 1.0, True), ("Add", 1.0, False), ("Mul", 0.0, False), ("Sub", 0.0, False)],
)
def test_each_instance_matches_its_own_op_and_constant(op, value, fused):
    before = _binary(op, value)
    after = optimize_with(before, FAMILY).model
    assert (op not in ops(after)) == fused
    assert_same_outputs(before, after)


def test_a_named_constraint_reads_like_a_function_and_matches_as_if_written_out():
    text = (
        HEADER
        + """
constraint last_axis(b, x) = rank(b) == 1 and shape(b)[0] == shape(x)[-1]
rule BiasRelu root y {
    y = Relu(Add(x, b))
  where const(b) and last_axis(b, x)
  => y = Relu(Add(x, b))
}
"""
    )
    written_out = text.replace("and last_axis(b, x)", "and rank(b) == 1 and shape(b)[0] == shape(x)[-1]")
    mine, theirs = rewriter.load_pack_text(text).rules[0], rewriter.load_pack_text(written_out).rules[0]
    conjuncts = lambda rule: [show(c) for c in conjuncts_of(rule.wheres[0].expr)]
    assert conjuncts(mine) == conjuncts(theirs)


def test_a_fragment_puts_its_equations_in_the_rule_under_the_rules_names():
    text = (
        HEADER
        + """
fragment Squared(x, p) { p = Pow(x, 2.0) | Mul(x, x) }
rule MeanSquare root v {
    use Squared(a, sq)
    v = ReduceMean(sq) {axes: ax, keepdims: 1}
  where list(ax) == [-1] and op(sq) == "Pow"
  => v = ReduceMean(Mul(a, a)) {axes: ax, keepdims: 1}
}
"""
    )
    rule = rewriter.load_pack_text(text).rules[0]
    assert [e.out_names for e in rule.equations] == [("sq",), ("v",)]
    assert [a.op for a in rule.equations[0].alternatives] == ["Pow", "Mul"]
    m = model(
        [
            helper.make_node("Pow", ["x", "two"], ["s"]),
            helper.make_node("ReduceMean", ["s"], ["y"], axes=[-1], keepdims=1),
        ],
        [tensor("x", shape=[2, 3])],
        [tensor("y", shape=[2, 1])],
        [init("two", np.array(2.0, np.float32))],
    )
    after = optimize_with(m, text).model
    assert ops(after) == {"Mul": 1, "ReduceMean": 1}
    assert_same_outputs(m, after)


def test_a_fragment_with_nested_calls_can_be_used_twice():
    text = (
        HEADER
        + """
fragment Gate(x, g) { g = Mul(x, Sigmoid(x)) }
rule TwoGates root y {
    use Gate(a, u)
    use Gate(b, v)
    y = Add(u, v)
  => y = Add(Mul(a, Sigmoid(a)), Mul(b, Sigmoid(b)))
}
"""
    )
    rule = rewriter.load_pack_text(text).rules[0]
    temps = [n for e in rule.equations for n in e.out_names if n.startswith("$")]
    assert len(temps) == 2 and len(set(temps)) == 2


@pytest.mark.parametrize(
    "text, message, line",
    [
        (
            HEADER + "constraint c(a) = rank(b) == 1\nrule R { y = Relu(x) where c(x) => y = x }",
            "constraint 'c' reads 'b', which is not one of its parameters",
            2,
        ),
        (
            HEADER + "constraint c(a) = rank(a) == 1\nrule R { y = Relu(x) where c(x, x) => y = x }",
            "constraint 'c' takes 1 argument, got 2",
            3,
        ),
        (HEADER + "constraint rank(a) = a\n", "'rank' is defined already (a built-in function)", 2),
        (HEADER + "rule R { use F(x, y) => y = x }", "unknown fragment 'F'", 2),
        (
            HEADER + "fragment F(x, y) { y = Relu(x) t = Neg(x) }\nrule R { t = Abs(x) use F(x, y) => y = x }",
            "fragment 'F' defines 't', which this rule defines too",
            3,
        ),
        (
            HEADER + "fragment F(x, y) { y = Relu(x) }\nrule R { use F(x) => y = x }",
            "fragment 'F' takes 2 names, got 1",
            3,
        ),
        (HEADER + "rule R(Op) { y = Op(x) => y = x }", "has parameters but no `for` instances", 2),
        (
            HEADER + "rule R(Op, k) for A(Add) { y = Op(x, k) => y = x }",
            "rule 'R' takes 2 parameters, instance 'A' gives 1",
            2,
        ),
        (
            HEADER + "rule R(Op, k) for A(Add, 0.5) { y = Op(x, k?) => y = x }",
            "optional input 'k?' is given a constant",
            2,
        ),
    ],
)
def test_reuse_mistakes_are_errors_at_their_position(text, message, line):
    with pytest.raises(RuleError) as err:
        rewriter.load_pack_text(text, "mine.rules")
    assert message in err.value.message and err.value.line == line and err.value.file == "mine.rules"


def test_a_check_error_in_a_family_names_the_instance():
    text = HEADER + "rule R(Op) for A(Relu), B(Nope) { y = Op(x) => y = x }"
    with pytest.raises(RuleError) as err:
        rewriter.load_pack_text(text, "mine.rules")
    assert "unknown op 'Nope'" in err.value.message and "(in B = R(Nope))" in err.value.message


def test_the_reuse_example_in_the_docs_loads():
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "rules.md").read_text()
    block = text[text.index("## Reuse") :].split("```")[1]
    names = [r.name for r in rewriter.load_pack_text("pack doc level 2\n" + block).rules]
    assert names == [
        "RMSNormDecomposed",
        "AddZeroElimination",
        "SubZeroElimination",
        "MulOneElimination",
        "DivOneElimination",
    ]


def test_the_shipped_families_expand_to_their_instances():
    rules = {r.name: r for p in rewriter.bundled_packs() for r in p.rules}
    assert rules["DivOneElimination"].family == "NeutralElementElimination(Div, 1)"
    ln = rules["SkipLayerNormDecomposed"]
    assert [e.out_names for e in ln.equations][0] == ("x",) and ln.root == "m"
