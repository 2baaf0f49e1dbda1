"""The rule language: what parses into what, and errors with file:line:col."""

from __future__ import annotations

import dataclasses

import pytest

from rewriter import RuleError, load_pack_text
from rewriter.dsl import ast as A
from rewriter.dsl.check import check_pack
from rewriter.dsl.parse import parse_pack

HEADER = "pack test level 1\n"


def parse_error(text: str) -> RuleError:
    with pytest.raises(RuleError) as info:
        load_pack_text(text, "my.rules")
    return info.value


def test_pack_header_level_providers_domains_and_builtins():
    pack = load_pack_text("pack ext level 2 providers CPU, CUDA\ndomain com.example\nbuiltin constant_folding\n")
    assert (pack.name, pack.level) == ("ext", 2)
    assert pack.providers == ("CPUExecutionProvider", "CUDAExecutionProvider")
    assert pack.domains == ("com.example",) and pack.builtins == ("constant_folding",)


def test_root_defaults_to_the_last_equation():
    pack = load_pack_text(HEADER + "rule R { a = Relu(x)  y = Neg(a) => y = x }")
    assert pack.rules[0].root == "y"


def test_nested_calls_flatten_into_fresh_equations():
    rule = load_pack_text(HEADER + "rule R { y = Mul(x, Add(Erf(x), 1.0)) => y = x }").rules[0]
    assert [eq.alternatives[0].op for eq in rule.equations] == ["Erf", "Add", "Mul"]
    erf, add, mul = rule.equations
    assert add.alternatives[0].args[0].name == erf.out_names[0]
    assert mul.alternatives[0].args[1].name == add.out_names[0]


def test_literals_optional_inputs_alternatives_and_attributes():
    rule = load_pack_text(
        HEADER
        + """
        rule R root d {
            d = Div(x, ~1.41421356) | Mul(x, ~0.70710678)
            y = Gemm(d, W, C?) {alpha, transB: 1, beta: b}
          where const(W) and b == 1.0
          =>
            y = Gemm(x, W, C) {...y}
        }"""
    ).rules[0]
    div, mul = rule.equations[0].alternatives
    assert div.args[1].literal == A.Literal(1.41421356, True, div.args[1].literal.pos)
    assert mul.op == "Mul"
    gemm = rule.equations[1].alternatives[0]
    assert gemm.args[2] == A.VarArg("C", True, gemm.args[2].pos)
    assert [a.name for a in gemm.attrs] == ["alpha", "transB", "beta"]


def test_rules_are_immutable():
    rule = load_pack_text(HEADER + "rule R { y = Identity(x) => y = x }").rules[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        rule.name = "other"  # type: ignore[misc]


def test_comments_and_whitespace_are_ignored():
    pack = load_pack_text(
        "# leading\npack p level 1  # trailing\n\nrule R {  # x\n  y = Identity(x)  # eliminate\n=>\n y = x }\n"
    )
    assert len(pack.rules) == 1


def test_custom_domain_ops_need_a_declaration():
    error = parse_error(HEADER + "rule R { y = com.example.Foo(x) => y = x }")
    assert "unknown domain 'com.example'" in error.message
    pack = load_pack_text(HEADER + "domain com.example\nrule R { y = com.example.Foo(x) => y = x }")
    assert pack.rules[0].equations[0].alternatives[0].domain == "com.example"


def test_contrib_ops_are_known_from_onnxruntime():
    load_pack_text(HEADER + 'rule R { y = Relu(x) => y = com.microsoft.FusedConv(x, x) {activation: "Relu"} }')


def test_syntax_error_has_file_line_and_column():
    error = parse_error(HEADER + "rule R {\n  y = Identity(x)\n  => y = \n}\n")
    assert (error.file, error.line, error.column) == ("my.rules", 5, 1)
    assert "unexpected '}'" in error.message
    assert "my.rules:5:1:" in error.render() and "^" in error.render()


def test_unexpected_character_is_reported_where_it_is():
    error = parse_error(HEADER + "rule R { y = Identity(x) $ => y = x }")
    assert (error.line, error.column) == (2, 26)


def test_unexpected_end_of_file():
    error = parse_error(HEADER + "rule R { y = Identity(x)")
    assert "end of file" in error.message and error.line == 2


@pytest.mark.parametrize(
    "body, message, line, column",
    [
        ("rule R {\n  y = Idenity(x)\n  => y = x }", "unknown op 'Idenity'; did you mean Identity?", 3, 7),
        ("rule R {\n  y = Identity(x)\n  => y = z }", "undefined name 'z'", 4, 10),
        ("rule R root q {\n  y = Identity(x)\n  => y = x }", "root 'q' is not the output", 2, 6),
        ("rule R {\n  y = Relu(x, x)\n  => y = x }", "Relu takes at most 1 inputs, got 2", 3, 7),
        ("rule R {\n  y = Relu(x) {alpah}\n  => y = x }", "Relu has no attribute 'alpah'", 3, 16),
        ("rule R {\n  y = Relu(x)\n  where foo(x)\n  => y = x }", "unknown function 'foo'", 4, 9),
        ("rule R {\n  y = Relu(x)\n  where rank(x, x) == 1\n  => y = x }", "rank() takes 1 arguments, got 2", 4, 9),
        ("rule R {\n  a = Relu(x)\n  y = Relu(z)\n  => y = x }", "not connected", 2, 6),
        ("rule R {\n  y = Relu(x)\n  => x = y }", "'x' is an input of the pattern", 4, 6),
        ("rule R {\n  y = Relu(x)\n  => y = Sqrt(x) {...x} }", "...x: 'x' is not the output", 4, 19),
        ("rule R {\n  y = Relu(x)\n  where Relu(x)\n  => y = x }", "op Relu() can only appear in a replacement", 4, 9),
        ("rule R {\n  y = Conv(x)\n  => y = x }", "Conv needs at least 2 inputs", 3, 7),
    ],
)
def test_static_errors_point_at_the_problem(body, message, line, column):
    error = parse_error(HEADER + body)
    assert message in error.message
    assert (error.line, error.column) == (line, column)


def test_duplicate_rule_names_are_an_error():
    error = parse_error(HEADER + "rule R { y = Relu(x) => y = x }\nrule R { y = Neg(x) => y = x }")
    assert "defined twice" in error.message and error.line == 3


def test_unknown_builtin_and_level_are_errors():
    assert "unknown builtin" in parse_error("pack p level 1\nbuiltin magic\n").message
    assert "level 9" in parse_error("pack p level 9\n").message


def test_check_reports_every_error_in_source_order():
    pack = parse_pack(HEADER + "rule A { y = Nope(x) => y = x }\nrule B { y = Relu(x) => y = q }", "f")
    errors = check_pack(pack)
    assert [(e.line, e.message.split(";")[0]) for e in errors] == [(2, "unknown op 'Nope'"), (3, "undefined name 'q'")]


def test_no_python_evaluation_is_reachable():
    error = parse_error(HEADER + 'rule R { y = Relu(x) where __import__("os") => y = x }')
    assert "unknown function '__import__'" in error.message


def test_op_arity_accepts_any_opset_version():
    # Slice takes attributes before opset 10 and inputs after: both forms check.
    load_pack_text(
        HEADER + "rule A { y = Slice(x) {starts, ends} where starts == ends => y = x }\n"
        "rule B { y = Slice(x, s, e) => y = x }"
    )


def test_an_optional_input_before_a_required_one_holds_its_position():
    # GroupQueryAttention's past_key and past_value (optional) come before seqlens_k and
    # total_sequence_length (required): the pattern names all seven positions
    load_pack_text(HEADER + "rule A { y = com.microsoft.GroupQueryAttention(q, k, v, pk?, pv?, lens, total) => y = q }")
    pattern = "y = com.microsoft.GroupQueryAttention(q, k, v, pk?, pv?, lens)"
    error = parse_error(HEADER + f"rule A {{\n  {pattern}\n  => y = q }}")
    assert "needs at least 7 inputs, got 6" in error.message


def test_keep_marks_context_nodes_and_their_nested_calls():
    pack = load_pack_text(
        "pack p level 1\nrule R root y {\n keep s = Shape(Abs(x))\n y = Gather(s, i)\n =>\n y = s\n}\n"
    )
    (rule,) = pack.rules
    assert [eq.keep for eq in rule.equations] == [True, True, False]


def test_a_kept_node_is_neither_the_root_nor_replaced():
    error = parse_error("pack p level 1\nrule R root s {\n keep s = Shape(x)\n y = Gather(s, i)\n =>\n s = x\n}\n")
    assert "kept" in str(error)


def test_kept_context_stays_for_its_other_readers():
    """Two Gathers read one Shape: folding the static one must not delete the Shape the
    dynamic one still reads (without `keep` the match would be refused)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    import rewriter

    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["a"], axis=0),
        helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
        helper.make_node("Add", ["a", "b"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [])],
        [numpy_helper.from_array(np.array(1, np.int64), "one"), numpy_helper.from_array(np.array(0, np.int64), "zero")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    result = rewriter.optimize(model, level="basic")
    assert result.report.applied("ShapeGatherFolding") == 1
    assert sorted(n.op_type for n in result.model.graph.node) == ["Add", "Gather", "Shape"]


def test_alternatives_cannot_nest_calls():
    error = parse_error("pack p level 1\nrule R {\n y = Div(x, r) | Mul(x, Reciprocal(r))\n =>\n y = x\n}\n")
    assert "alternative cannot nest" in str(error) and error.line == 3


@pytest.mark.parametrize(
    "value, ok",
    [
        ("shape(x)", True),
        ("concat([shape(x)[0:1], [2, 3], shape(x)[-1:]])", True),
        ("concat([shape(x)[0:1], shape(q)[0:1]])", False),  # q is not the pattern's
        ("concat([shape(x)[0:1], shape(s)[0:1]])", False),  # two tensors' shapes
        ("concat([shape(x)[0], [2]])", False),  # an index, not a slice
        ("concat([shape(x)[0:n], [2]])", False),  # bounds are numbers
        ("concat([[2, 3], [4]])", True),  # no shape: a constant
    ],
)
def test_an_example_target_reads_one_tensors_shape_whole_or_in_pieces(value, ok):
    text = HEADER + f"rule R {{ y = Reshape(x, s) example x: [N, 6, S], s = {value} => y = x }}"
    if ok:
        load_pack_text(text, "my.rules")
    else:
        assert "an example shape(...) takes one tensor of the pattern" in parse_error(text).message
