"""Reuse in the rule language: named constraints, pattern fragments, rule families.  They
expand into plain rules, so matching and rewriting behave exactly as if written out; errors
point at the text and name the instance."""

from __future__ import annotations

import re

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


def test_a_fragment_of_lets_alone_computes_a_value_under_the_rules_names():
    text = (
        HEADER
        + """
fragment Reciprocal(w, r) { let r = 1.0 / w }
rule DivByConstant root y {
    y = Div(x, w)
  where const(w)
  use Reciprocal(w, inverse)
  => y = Mul(x, inverse)
}
"""
    )
    rule = rewriter.load_pack_text(text).rules[0]
    assert [let.name for let in rule.lets] == ["inverse"]
    m = model(
        [helper.make_node("Div", ["x", "w"], ["y"])],
        [tensor("x", shape=[2, 3])],
        [tensor("y", shape=[2, 3])],
        [init("w", np.array([1.0, 2.0, 3.0], np.float32))],
    )
    after = optimize_with(m, text).model
    assert ops(after) == {"Mul": 1}
    assert_same_outputs(m, after)
    with pytest.raises(RuleError, match="has no equation or let"):
        rewriter.load_pack_text(HEADER + "fragment Empty(x) { where rank(x) == 2 }\n")


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


def test_the_reuse_examples_in_the_docs_load():
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
    block = text[text.index("**What an instance may give.**") :].split("```")[1]
    names = [r.name for r in rewriter.load_pack_text("pack doc level 2\n" + block).rules]
    assert names == [
        "MatMulScaledInputAFusion",
        "MatMulScaledInputBFusion",
        "GemmTransposeAFusion",
        "GemmTransposeBFusion",
        "UnsqueezeConstant",
        "UnsqueezeConstantAttribute",
    ]


def test_the_shipped_families_expand_to_their_instances():
    rules = {r.name: r for p in rewriter.bundled_packs() for r in p.rules}
    assert rules["DivOneElimination"].family == "NeutralElementElimination(Div, 1)"
    assert rules["GemmTransposeBFusion"].family == "GemmTransposeForms(b, a, t, transB)"
    half_inside = [a.op for e in rules["GeluErfHalfInside"].equations for a in e.alternatives]
    assert half_inside == ["Div", "Mul", "Erf", "Add", "Mul", "Mul"]
    no_mask = rules["MultiHeadAttentionNoMaskFusion"]
    assert no_mask.replacement[0].value.args[3:] == () and "mask" not in str(no_mask.examples)
    ln = rules["SkipLayerNormDecomposed"]
    assert [e.out_names for e in ln.equations][0] == ("x",) and ln.root == "m"


# ---------------------------------------------------------------- what an instance may give


def _canonical(rule) -> str:
    """A rule as text without positions, its temporaries numbered by first appearance, its
    family and wheres' conjuncts as a multiset: two spellings of one rule compare equal."""
    import dataclasses
    import re

    from rewriter.dsl.expand import transform
    from rewriter.errors import Position

    unplaced = lambda obj: transform(obj, lambda o: Position(0, 0) if isinstance(o, Position) else None)
    conjuncts = sorted(repr(unplaced(c)) for w in rule.wheres for c in conjuncts_of(w.expr))
    text = repr(unplaced(dataclasses.replace(rule, family="", wheres=tuple(conjuncts))))
    temps: dict[str, str] = {}
    return re.sub(r"\$\d+", lambda m: temps.setdefault(m.group(0), f"$T{len(temps)}"), text)


def _same_rules(family_text: str, written_out: str) -> None:
    mine = rewriter.load_pack_text(HEADER + family_text).rules
    theirs = rewriter.load_pack_text(HEADER + written_out).rules
    assert [r.name for r in mine] == [r.name for r in theirs]
    assert [_canonical(r) for r in mine] == [_canonical(r) for r in theirs]


def test_an_instance_gives_operand_order_and_nested_pattern_inputs():
    _same_rules(
        """
rule Scaled(p, q) root m for A(Mul(a, c), b), B(a, Mul(b, Add(c, 1.0 as one))) {
    m = MatMul(p, q)
  where const(c) and rank(one ?? c) >= 0
  => m = MatMul(a, b)
}
""".replace("one ?? c", "c"),
        """
rule A root m { m = MatMul(Mul(a, c), b) where const(c) and rank(c) >= 0 => m = MatMul(a, b) }
rule B root m { m = MatMul(a, Mul(b, Add(c, 1.0 as one))) where const(c) and rank(c) >= 0 => m = MatMul(a, b) }
""",
    )


def test_a_parameter_may_name_an_attribute():
    _same_rules(
        """
rule GemmT(u, p, q, trans) root g for TA(a, t, b, transA), TB(b, a, t, transB) {
    t = Transpose(u) {perm}
    g = Gemm(p, q, c?) {trans}
  where (perm ?? [1, 0]) == [1, 0]
  => g = Gemm(a, b, c) {...g, trans: 1 - trans}
}
""",
        """
rule TA root g {
    t = Transpose(a) {perm}
    g = Gemm(t, b, c?) {transA}
  where (perm ?? [1, 0]) == [1, 0]
  => g = Gemm(a, b, c) {...g, transA: 1 - transA}
}
rule TB root g {
    t = Transpose(b) {perm}
    g = Gemm(a, t, c?) {transB}
  where (perm ?? [1, 0]) == [1, 0]
  => g = Gemm(a, b, c) {...g, transB: 1 - transB}
}
""",
    )


def test_a_parameter_may_stand_for_a_whole_node_or_its_alternatives():
    _same_rules(
        """
rule Forms(U, ok) for WithInput(Unsqueeze(x, axes), const(x, axes)),
                      WithAttribute(Unsqueeze(x) {axes}, const(x) and opset() < 13) {
    y = U
  where ok
  example for WithAttribute: opset 11, axes = [0]
  => y = unsqueeze(x, axes)
}
rule Act(A) for Acts(Relu(x) | Sigmoid(x)) { y = A => y = Neg(x) }
""",
        """
rule WithInput { y = Unsqueeze(x, axes) where const(x, axes) => y = unsqueeze(x, axes) }
rule WithAttribute {
    y = Unsqueeze(x) {axes}
  where const(x) and opset() < 13
  example opset 11, axes = [0]
  => y = unsqueeze(x, axes)
}
rule Acts { y = Relu(x) | Sigmoid(x) => y = Neg(x) }
""",
    )


def test_what_an_instance_does_not_have_it_gives_as_underscore_or_none():
    # `_`: no such output, let or attribute; `none`: no such input, no hints for it;
    # `true`: the conjunct drops out
    _same_rules(
        """
rule Norm(total, eps2, mask, k, ok) root s
  for Plain(_, _, none, _, true), Shared(s, eps, b, k, not single_use(s)) {
    s = Add(a, b)
    y = LayerNormalization(s, g) {epsilon: eps}
  let k = eps * 2.0
  where rank(a) == 3 and ok and eps > 0
  example a: [B, S, H], g: [H], mask: [B, S, H]
  =>
    y, _, _, total = com.microsoft.SkipLayerNormalization(a, b, g, none, mask) {epsilon: eps2}
}
""",
        """
rule Plain root s {
    s = Add(a, b)
    y = LayerNormalization(s, g) {epsilon: eps}
  where rank(a) == 3 and eps > 0
  example a: [B, S, H], g: [H]
  => y = com.microsoft.SkipLayerNormalization(a, b, g)
}
rule Shared root s {
    s = Add(a, b)
    y = LayerNormalization(s, g) {epsilon: eps}
  let k = eps * 2.0
  where rank(a) == 3 and not single_use(s) and eps > 0
  example a: [B, S, H], g: [H], b: [B, S, H]
  => y, _, _, s = com.microsoft.SkipLayerNormalization(a, b, g, none, b) {epsilon: eps}
}
""",
    )


GEMM_T = (
    HEADER
    + """
# Gemm(Transpose(a), b) and Gemm(a, Transpose(b)): the flag flipped
rule GemmT(u, p, q, trans) root g for TA(a, t, b, transA), TB(b, a, t, transB) {
    t = Transpose(u) {perm}
    g = Gemm(p, q, c?) {trans}
  where (perm ?? [1, 0]) == [1, 0]
  => g = Gemm(a, b, c) {...g, trans: 1 - trans}
}
"""
)


@pytest.mark.parametrize("which", ["a", "b"])
def test_an_attribute_parameter_matches_and_rewrites_its_own_attribute(which):
    nodes = [helper.make_node("Transpose", [which, "t"], ["tt"], perm=[1, 0])]
    nodes[0].input[:] = [which]
    inputs = ["tt", "b"] if which == "a" else ["a", "tt"]
    nodes.append(helper.make_node("Gemm", inputs, ["y"]))
    shapes = {"a": [3, 2] if which == "a" else [2, 3], "b": [4, 3] if which == "b" else [3, 4]}
    before = model(nodes, [tensor(n, shape=shapes[n]) for n in "ab"], [tensor("y", shape=[2, 4])])
    after = optimize_with(before, GEMM_T).model
    assert ops(after) == {"Gemm": 1}
    (gemm,) = after.graph.node
    assert {a.name: a.i for a in gemm.attribute} == {f"trans{which.upper()}": 1}
    assert_same_outputs(before, after)


@pytest.mark.parametrize(
    "text, message, line",
    [
        (  # an op parameter given a value name
            HEADER + "rule R(Op) for A(relu) {\n y = Op(x) => y = x }",
            "'Op' stands for an op here: give it an op name, not the name 'relu' (in A = R(relu))",
            3,
        ),
        (  # an attribute named by a number
            HEADER + "rule R(ax) for A(1) {\n y = Softmax(x) {ax} => y = x }",
            "'ax' stands for an attribute here: give it a name, not '1'",
            3,
        ),
        (  # a pattern input read as a value
            HEADER + "rule R(k) for A(0.5 as h) {\n y = Relu(x)\n where k == 1 => y = x }",
            "'k' is given the pattern input '0.5 as h', read here as a value (only a pattern's input takes one)",
            4,
        ),
        (  # `_` read as a value
            HEADER + "rule R(k) for A(_) {\n y = Relu(x) where k => y = x }",
            "'k' is given the pattern input '_', read here as a value",
            3,
        ),
        (  # an op call read as a value outside a replacement
            HEADER + "rule R(p) for A(Neg(x)) {\n y = Relu(x)\n where rank(p) == 0 => y = x }",
            "'p' is given the op call 'Neg(x)', read here as a value",
            4,
        ),
        (  # a dotted name is an op, read where a value is
            HEADER + "rule R {\n y = Relu(x)\n where a.b.c == 0 => y = x }",
            "'a.b.c' is not an attribute reference (use var.attribute)",
            4,
        ),
        (  # a pattern input outside an instance
            HEADER + "rule R {\n y = Relu(x)\n where rank(0.5 as h) == 0 => y = x }",
            "'0.5 as h' is a pattern input: only a family instance's argument may be one",
            4,
        ),
        (  # a node parameter given a value
            HEADER + "rule R(P) for A(1.5) {\n y = P => y = x }",
            "'P' stands for a pattern node here: give it an op call (or alternatives), not '1.5'",
            3,
        ),
        (  # a node parameter in a plain rule
            HEADER + "rule R {\n y = x => y = x }",
            "'x' is no op call (only a family's parameter may stand for a pattern node)",
            3,
        ),
        (  # a nested call in an equation with alternatives
            HEADER + "rule R(p) for A(Neg(x)) {\n y = Add(p, z) | Sub(p, z) => y = x }",
            "an alternative cannot nest op calls",
            2,
        ),
        (  # a function where a pattern input goes
            HEADER + "rule R(p) for A(rank(x)) {\n y = Add(p, z) => y = x }",
            "'p' is given 'rank(x)', read here as a pattern input",
            3,
        ),
        (
            HEADER + "rule R(k) for A(1), B(2) {\n y = Add(x, k)\n example for C: x: [2] => y = x }",
            "example for 'C', which is not an instance of this rule (in A = R(1))",
            4,
        ),
        (
            HEADER + "rule R {\n y = Relu(x)\n example for C: x: [2] => y = x }",
            "`example for` names instances: only a rule with parameters has them",
            4,
        ),
    ],
)
def test_a_misused_parameter_is_an_error_at_its_place(text, message, line):
    with pytest.raises(RuleError) as err:
        rewriter.load_pack_text(text, "mine.rules")
    assert message in err.value.message and err.value.line == line and err.value.file == "mine.rules"
    assert str(err.value).startswith(f"mine.rules:{line}:") and "\n" not in str(err.value)


def test_an_instance_that_makes_a_bad_rule_is_a_check_error_naming_it():
    text = HEADER + "rule R(p) for A(Neg(x)), B(Nope(x)) {\n y = Relu(p) => y = x }"
    with pytest.raises(RuleError) as err:
        rewriter.load_pack_text(text, "mine.rules")
    assert "unknown op 'Nope'" in err.value.message and "(in B = R(Nope(x)))" in err.value.message
    assert (err.value.line, err.value.column) == (2, 28)  # the call, in the instance's argument


# Found by an adversarial pass: texts the expansion accepted with another meaning than they
# read, or expanded for minutes.  Each is now one located error.
def _chain(kind: str, levels: int) -> str:
    if kind == "constraint":
        lines = ["constraint c0(a) = a > 0"] + [
            f"constraint c{i}(a) = c{i - 1}(a) and c{i - 1}(a)" for i in range(1, levels)
        ]
    else:
        lines = ["fragment F0(x, y) { y = Relu(x) }"] + [
            f"fragment F{i}(x, y) {{ use F{i - 1}(x, y) use F{i - 1}(x, y) }}" for i in range(1, levels)
        ]
    return "pack p level 1\n" + "\n".join(lines) + "\n"


ACCEPTED_WITH_ANOTHER_MEANING = [
    (  # a typo: the template reads K, so each instance's 0 / 1 was ignored
        "rule N(Op, k) root y for AddZero(Add, 0), MulOne(Mul, 1) {\n"
        " y = Op(x, K)\n where rank(K) <= rank(x)\n => y = x }",
        "parameter 'k' is never used",
    ),
    (  # the parameter replaced the constant e inside the constraint: isclose(k, k)
        "constraint near_e(c) = isclose(c, e)\n"
        "rule R(e) root y for A(k) {\n y = Mul(x, e)\n where near_e(e)\n => y = x }",
        "parameter 'e' is named like a constant",
    ),
    (  # B(Gelu(z)) became a call of the constraint: the pattern lost its Gelu node
        "constraint Gelu(a) = a\nrule R(p) root y for A(Relu(z)), B(Gelu(z)) {\n y = Add(x, p)\n => y = Neg(x) }",
        "constraint 'Gelu' is named like an op",
    ),
    (  # {alpha: e}: the checker read a capture, the matcher compared with 2.718...
        "rule R(al) root y for A(e), B(a) {\n y = LeakyRelu(x) {alpha: al}\n where al > 0\n => y = Neg(x) }",
        "'e' names a constant, so this would compare, not capture",
    ),
    (  # `_` for an output the rule reads: Add's input matched anything
        "rule R(t) root z for WithIndices(i), NoIndices(_) {\n y, t = TopK(x, k)\n z = Add(y, t)\n => z = Neg(y) }",
        "'t' is given `_`, which leaves out an output the rule also reads",
    ),
    (  # the last alpha silently won
        "rule R(t) root y for A(alpha) {\n y = LeakyRelu(x) {alpha: _}\n => y = Elu(x) {t: 1.0, alpha: 2.0} }",
        "attribute 'alpha' of Elu is given twice",
    ),
    (  # an op's place given a function: y = const(x)
        "rule R(Fused) root y for A(const) {\n y = Relu(x)\n => y = Fused(x) }",
        "'Fused' stands for an op here: give it an op name",
    ),
    (  # a fragment's own name renamed by the family: x = Relu(x), a cycle
        "fragment F(a, b) { t = Relu(a)  b = Neg(t) }\n"
        "rule R(t) root y for A(z) {\n use F(x, y)\n where rank(t) > 0\n => y = Neg(x) }",
        "parameter 't' is also a name inside fragment 'F'",
    ),
    (_chain("constraint", 20).removeprefix("pack p level 1\n"), "expands to more than 5000 terms"),
    (_chain("fragment", 22).removeprefix("pack p level 1\n"), "expands to more than 5000 terms"),
    (
        "constraint c0(a) = [a]\n"
        + "\n".join(f"constraint c{i}(a) = c{i - 1}(c{i - 1}(a))" for i in range(1, 10))
        + "\nrule R root y { y = Relu(x) where len(c9(x)) > 0 => y = x }",
        "levels of nesting",
    ),
    (  # instances times template: 1000 x 150 terms
        "rule R(k) root y for "
        + ", ".join(f"I{i}({i})" for i in range(1000))
        + " {\n y = Add(x, k)\n where "
        + " and ".join(f"rank(x) != {j}" for j in range(1, 60))
        + "\n => y = x }",
        "the pack expands to more than 100000 terms",
    ),
]


@pytest.mark.parametrize("text, message", ACCEPTED_WITH_ANOTHER_MEANING)
def test_what_would_mean_something_else_or_explode_is_a_located_error(text, message, tmp_path):
    path = tmp_path / "hostile.rules"
    path.write_text("pack p level 1\n" + text + "\n")
    with pytest.raises(RuleError, match=re.escape(message)) as caught:
        rewriter.load_pack_text(path.read_text(), str(path))
    assert caught.value.line > 0 and caught.value.file == str(path)


def test_a_mistake_in_a_family_is_reported_once_with_how_many_instances_it_fails():
    text = (
        "pack p level 1\n"
        "rule R(k) root y for " + ", ".join(f"I{i}({i})" for i in range(500)) + " {\n"
        "    y = Add(x, k)\n  where rank(x) >= 1 and nosuchfn(x)\n  => y = x\n}\n"
    )
    errors = rewriter.check_pack(rewriter.dsl.parse_pack(text, "fam.rules"))
    assert len(errors) == 1
    assert errors[0].message == "unknown function 'nosuchfn' (in I0 = R(0); and 499 more instances)"
    assert (errors[0].line, errors[0].column) == (4, 26)
