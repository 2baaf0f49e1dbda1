"""``~`` in attribute patterns (``LeakyRelu(x) {alpha: ~0.01}``): the tolerance of a literal
input (float16's for a node computing in float16, also after the CPU widened it), a check
error for an attribute that is no float, families that give it, explain and verify."""

from __future__ import annotations

import pytest
from helpers import model, optimize_with, tensor
from onnx import TensorProto, helper

import rewriter
from rewriter import RuleError, check_pack
from rewriter.dsl import ast as A
from rewriter.dsl import parse_pack, serial
from rewriter.dsl.unparse import show_equation
from rewriter.verify import verify

F, H = TensorProto.FLOAT, TensorProto.FLOAT16
RULE = "rule R {{ y = LeakyRelu(x) {{alpha: ~0.01}} => y = Relu(x) }}\n"


def leaky(alpha: float, half: bool = False, domain: str = ""):
    """x -> LeakyRelu -> Sqrt -> y, in float16 between Casts when ``half``."""
    if half:
        nodes = [
            helper.make_node("Cast", ["x"], ["xh"], to=H),
            helper.make_node("LeakyRelu", ["xh"], ["l"], alpha=alpha),
            helper.make_node("Sqrt", ["l"], ["s"]),
            helper.make_node("Cast", ["s"], ["y"], to=F),
        ]
    else:
        nodes = [
            helper.make_node("LeakyRelu", ["x"], ["l"], alpha=alpha, domain=domain),
            helper.make_node("Sqrt", ["l"], ["y"]),
        ]
    return model(nodes, [tensor("x", F, [2, 3])], [tensor("y", F, [2, 3])], domains=[domain] if domain else ())


def applied(m, level: int = 1, rule: str = RULE) -> int:
    pack = f"pack p level {level} providers CPU\n" + rule.format()
    return optimize_with(m, pack, level="basic" if level == 1 else "extended").report.applied("R")


@pytest.mark.parametrize(
    "alpha, half, level, expected",
    [
        (0.01, False, 1, 1),
        (0.01 * (1 + 5e-5), False, 1, 1),  # within 1e-4
        (0.01 * (1 - 5e-5), False, 1, 1),
        (0.01 * (1 + 1e-3), False, 1, 0),  # outside float32's tolerance
        (0.0101, False, 1, 0),
        (0.01 * (1 + 1e-3), True, 1, 1),  # a float16 node: float16's 2e-3
        (0.0101, True, 1, 0),
        (0.01 * (1 + 1e-3), False, 2, 0),
        (0.01 * (1 + 1e-3), True, 2, 1),  # widened to float32 by the CPU: still float16's tolerance
        (0.0101, True, 2, 0),
    ],
)
def test_an_approximate_attribute_matches_within_the_tolerance_of_a_literal(alpha, half, level, expected):
    assert applied(leaky(alpha, half), level) == expected


def test_an_exact_attribute_still_needs_the_value():
    assert applied(leaky(0.01 * (1 + 5e-5)), rule="rule R {{ y = LeakyRelu(x) {{alpha: 0.01}} => y = Relu(x) }}\n") == 0


def test_an_op_without_a_schema_matches_floats_only():
    def custom(value) -> int:
        nodes = [
            helper.make_node("Relu", ["x"], ["a"]),
            helper.make_node("Scale", ["a"], ["b"], domain="com.example", factor=value),
            helper.make_node("Sqrt", ["b"], ["y"]),
        ]
        m = model(nodes, [tensor("x", F, [2])], [tensor("y", F, [2])], domains=["com.example"])
        pack = "pack p level 1\ndomain com.example\nrule R { y = com.example.Scale(x) {factor: ~2.0} => y = x }\n"
        return optimize_with(m, pack).report.applied("R")

    assert custom(2.0) == 1
    assert custom(2) == 0  # an int attribute is no float within tolerance


def test_it_shows_back_and_survives_the_cache_form():
    pack = parse_pack("pack p level 1\n" + RULE.format(), "t.rules")
    (equation,) = pack.rules[0].equations
    (attr,) = equation.alternatives[0].attrs
    assert attr.value == A.Literal(0.01, True, attr.value.pos) and attr.expr is None
    assert show_equation(equation) == "y = LeakyRelu(x) {alpha: ~0.01}"
    assert serial.decode(serial.encode(pack), "t.rules") == pack


@pytest.mark.parametrize(
    "rule, error",
    [
        (
            "rule R { y = Softmax(x) {axis: ~1} => y = x }",
            "t.rules:2:32: attribute 'axis' of Softmax is an int: ~ (within tolerance) compares a float only",
        ),
        (
            "rule R { y = Gelu(x) {approximate: ~1.0} => y = x }",
            "t.rules:2:36: attribute 'approximate' of Gelu is a string: ~",
        ),
        ("rule R { y = Transpose(x) {perm: ~1} => y = x }", "t.rules:2:34: attribute 'perm' of Transpose is a list"),
    ],
)
def test_an_attribute_that_is_no_float_is_a_check_error(rule, error):
    (found,) = [str(e) for e in check_pack(parse_pack("pack p level 1\n" + rule, "t.rules"))]
    assert found.startswith(error), found


@pytest.mark.parametrize(
    "rule, column",
    [
        ("rule R { y = Relu(x) => y = LeakyRelu(x) {alpha: ~0.01} }", 50),  # a replacement sets a value
        ("rule R { y = LeakyRelu(x) {alpha} where isclose(alpha, ~0.01) => y = Relu(x) }", 56),
    ],
)
def test_approximate_outside_a_pattern_is_an_error_where_it_is(rule, column):
    with pytest.raises(RuleError, match="matches within a tolerance: only a pattern's") as caught:
        parse_pack("pack p level 1\n" + rule, "t.rules")
    assert (caught.value.line, caught.value.column) == (2, column)


def test_a_family_gives_an_approximate_attribute():
    pack = rewriter.load_pack_text(
        "pack p level 1\n"
        "rule Leaky(a) for Tenth(~0.1), Exact(0.2) { y = LeakyRelu(x) {alpha: a} => y = Relu(x) }\n"
        "rule Node(P) for Hundredth(LeakyRelu(x) {alpha: ~0.01}) { y = P => y = Relu(x) }\n",
        "f.rules",
    )
    shown = {r.name: show_equation(r.equations[-1]) for r in pack.rules}
    assert shown == {
        "Tenth": "y = LeakyRelu(x) {alpha: ~0.1}",
        "Exact": "y = LeakyRelu(x) {alpha: 0.2}",
        "Hundredth": "y = LeakyRelu(x) {alpha: ~0.01}",
    }
    result = rewriter.optimize(leaky(0.1 * (1 + 5e-5)), rules=[pack], bundled=False)
    assert result.report.applied("Tenth") == 1


def test_explain_says_what_the_attribute_was_and_what_the_pattern_wanted():
    pack = rewriter.load_pack_text("pack p level 1\n" + RULE.format(), "t.rules")
    (attempt,) = rewriter.explain(leaky(0.2), rules=[pack], bundled=False, rule="R").attempts
    assert attempt.cause.kind == "attribute"
    assert "alpha=0.2" in attempt.cause.message and "~0.01 (within tolerance)" in attempt.cause.message


def test_verify_draws_within_the_tolerance_and_catches_the_wrong_value(tmp_path):
    sound = tmp_path / "sound.rules"
    sound.write_text("pack p level 1\nrule LeakyOne { y = LeakyRelu(x) {alpha: ~1.0} => y = x }\n")
    report = verify([sound], examples=20, seed=1, out=tmp_path / "a", jobs=1)
    assert [(v.rule, v.verdict) for v in report.verdicts] == [("LeakyOne", "ok")], report.verdicts
    wrong = tmp_path / "wrong.rules"
    wrong.write_text(sound.read_text().replace("~1.0", "~0.5"))
    report = verify([wrong], examples=20, seed=1, out=tmp_path / "b", jobs=1, shrink_attempts=1)
    assert [(v.rule, v.verdict) for v in report.verdicts] == [("LeakyOne", "FAIL")], report.verdicts
