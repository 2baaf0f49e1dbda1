"""The matrix product ``a @ b`` in rule expressions: Python's precedence, numpy's matmul,
the checker's errors on what the text shows to be wrong, the budget, the pack cache, and
``verify`` telling a sound fold of a MatMul chain from one with the factors swapped."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import assert_same_outputs, init, model, optimize_with, tensor
from onnx import helper

from rewriter import RuleError, check_pack
from rewriter.dsl import ast as A
from rewriter.dsl import parse_pack, serial
from rewriter.dsl.unparse import show
from rewriter.expr.evaluate import evaluate
from rewriter.expr.values import EvalFailure
from rewriter.verify import verify

FIXTURE = Path(__file__).parent / "fixtures" / "matmul_chain.rules"


def let_expr(text: str) -> A.Expr:
    pack = parse_pack(f"pack p level 1\nrule R {{ y = Relu(x)\n  let k = {text}\n  => y = x }}\n", "t.rules")
    return pack.rules[0].lets[0].expr


def tree(e: A.Expr) -> object:
    """The expression's structure, without positions."""
    if isinstance(e, A.Binary):
        return (e.op, tree(e.left), tree(e.right))
    if isinstance(e, A.Unary):
        return (e.op, tree(e.operand))
    if isinstance(e, A.Name):
        return e.id
    if isinstance(e, A.Num):
        return e.value
    return show(e)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a @ b @ c", ("@", ("@", "a", "b"), "c")),  # left-associative
        ("a * b @ c", ("@", ("*", "a", "b"), "c")),  # one level with * / // %
        ("a @ b * c", ("*", ("@", "a", "b"), "c")),
        ("a @ b / c // d % e", ("%", ("//", ("/", ("@", "a", "b"), "c"), "d"), "e")),
        ("a + b @ c", ("+", "a", ("@", "b", "c"))),  # tighter than + -
        ("a - b @ c - d", ("-", ("-", "a", ("@", "b", "c")), "d")),
        ("-a @ b", ("@", ("-", "a"), "b")),  # looser than unary minus and **
        ("a @ b ** 2", ("@", "a", ("**", "b", 2))),
        ("a @ (b @ c)", ("@", "a", ("@", "b", "c"))),
    ],
)
def test_at_has_pythons_precedence_and_shows_back_the_same(text, expected):
    parsed = let_expr(text)
    assert tree(parsed) == expected
    assert tree(let_expr(show(parsed))) == expected
    assert show(parsed) == text


class Arrays:
    """An ``Env`` whose names are arrays (what a constant materializes to)."""

    graph = None

    def __init__(self, **values) -> None:
        self.values = values

    def lookup(self, name: str) -> object:
        return self.values[name]

    def node_attribute(self, var: str, attr: str) -> object:
        raise KeyError(var)


SHAPES = [
    ((3,), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3,)),
    ((2, 3), (3, 4)),
    ((5, 2, 3), (3, 4)),
    ((2, 3), (5, 3, 4)),
    ((5, 1, 2, 3), (4, 3, 2)),
    ((3,), (5, 3, 4)),
]


@pytest.mark.parametrize("left, right", SHAPES)
def test_at_computes_numpys_matmul(left, right):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(left).astype(np.float32), rng.standard_normal(right).astype(np.float32)
    got = evaluate(let_expr("a @ b"), Arrays(a=a, b=b))
    expected = np.matmul(a, b)
    assert np.shape(got) == expected.shape and np.asarray(got).dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_lists_multiply_as_tensors():
    assert evaluate(let_expr("[[1, 2], [3, 4]] @ [5, 6]"), Arrays()).tolist() == [17, 39]
    assert evaluate(let_expr("transpose(a) @ [1.0, 1.0]"), Arrays(a=np.eye(2, dtype=np.float32))).tolist() == [1, 1]


@pytest.mark.parametrize(
    "text, values, reason",
    [
        ("a @ b", dict(a=np.float32(2), b=np.ones(3, np.float32)), "left operand of '@' is a number"),
        ("a @ b", dict(a=np.ones(3), b=np.array(2.0)), "right operand of '@' has rank 0"),
        ("a @ b", dict(a=np.ones((2, 3)), b=np.ones((2, 3))), "inner dimensions differ: 3"),
        ("a @ b", dict(a=np.ones((2, 2, 3)), b=np.ones((3, 3, 4))), "batch dimensions 2 and 3 do not broadcast"),
        ("a @ b", dict(a=np.array(["x", "y"]), b=np.ones(2)), "holds <U1 values, not numbers"),
        ("a @ b", dict(a=[10**30, 1], b=[1, 1]), "holds object values, not numbers"),
        ("a @ b", dict(a="ab", b=np.ones(2)), "left operand of '@' is a string"),
    ],
)
def test_operands_numpy_refuses_refuse_the_match_with_a_reason(text, values, reason):
    with pytest.raises(EvalFailure, match=reason):
        evaluate(let_expr(text), Arrays(**values))


def check_errors(lets: str) -> list[str]:
    text = "pack p level 1\nrule R { y = Add(x, w)\n" + lets + "  => y = Sub(x, w) }\n"
    return [str(e) for e in check_pack(parse_pack(text, "t.rules"))]


@pytest.mark.parametrize(
    "let, error",
    [
        (
            "[[1, 2]] @ [[1, 2]]",
            "t.rules:3:11: '[[1, 2]] @ [[1, 2]]': inner dimensions differ: 2 (last dim of the left operand, "
            "shape [1, 2]) and 1 (second-to-last dim of the right operand, shape [1, 2])",
        ),
        (
            "zeros([2, 3]) @ ones([2, 3], float)",
            "t.rules:3:11: 'zeros([2, 3]) @ ones([2, 3], float)': inner dimensions differ: 3",
        ),
        ("reshape(w, [2, 2]) @ [1, 2, 3]", "t.rules:3:11: 'reshape(w, [2, 2]) @ [1, 2, 3]': inner dimensions differ"),
        ("w @ 2", "t.rules:3:15: 'w @ 2': the right operand of '@' is a number (rank 0): a matrix product needs"),
        ("rank(x) @ w", "t.rules:3:11: 'rank(x) @ w': the left operand of '@' is a number (rank 0)"),
        ("w @ (x @ pi)", "t.rules:3:20: 'x @ pi': the right operand of '@' is a number (rank 0)"),
        ('w @ "ab"', "t.rules:3:15: 'w @ \"ab\"': the right operand of '@' is a string: a matrix product multiplies"),
        ("[1.0, 2.0] @ [3.0, 4.0] @ w", "t.rules:3:11: '[1.0, 2.0] @ [3.0, 4.0] @ w': the left operand of '@' is a "),
        (
            "zeros([2, 4, 3]) @ zeros([3, 3, 5])",
            "t.rules:3:11: 'zeros([2, 4, 3]) @ zeros([3, 3, 5])': batch dimensions 2 and 3 do not broadcast",
        ),
    ],
)
def test_the_checker_reports_what_the_text_shows_is_wrong(let, error):
    (found,) = check_errors(f"  let k = {let}\n")
    assert found.startswith(error), found


def test_a_let_carries_its_shape_to_a_later_product():
    lets = "  let a = zeros([2, 3])\n  let b = transpose(a)\n  where sum(a @ a) > 0\n  let c = b @ a\n"
    (found,) = check_errors(lets)
    assert found.startswith("t.rules:5:13: 'a @ a': inner dimensions differ: 3"), found


@pytest.mark.parametrize(
    "let",
    [
        "w @ w",
        "value(w) @ transpose(value(w))",
        "shape(x) @ w",
        "[[1, 2]] @ transpose([[1, 2]])",
        "zeros(shape(w)) @ w",
    ],
)
def test_the_checker_leaves_what_only_the_model_decides(let):
    assert check_errors(f"  let k = {let}\n") == []


def test_a_pack_with_at_reads_back_from_the_cache_form():
    pack = parse_pack(FIXTURE.read_text(), str(FIXTURE))
    assert serial.decode(serial.encode(pack), str(FIXTURE)) == pack


def chain_model(k: int = 4, r: int = 5, n: int = 6):
    rng = np.random.default_rng(1)
    return model(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("MatMul", ["h", "w2"], ["y"])],
        [tensor("x", shape=[3, k])],
        [tensor("y", shape=[3, n])],
        [
            init("w1", rng.standard_normal((k, r)).astype(np.float32)),
            init("w2", rng.standard_normal((r, n)).astype(np.float32)),
        ],
    )


def test_the_fixture_folds_a_constant_matmul_chain_into_one_matmul():
    before = chain_model()
    result = optimize_with(before, FIXTURE.read_text())
    assert result.report.applied("MatMulConstantChain") == 1
    assert [n.op_type for n in result.model.graph.node] == ["MatMul"]
    (weight,) = result.model.graph.initializer
    assert list(weight.dims) == [4, 6]
    assert_same_outputs(before, result.model, atol=1e-4)


def test_a_product_past_its_budget_stops_the_run_with_one_line():
    slow = "sum(zeros([1200, 1200], int64) @ ones([1200, 1200], int64))"  # 1.7 billion multiply-adds
    pack = FIXTURE.read_text().replace("W1 @ W2", f"W1 @ W2 + {slow}")
    with pytest.raises(RuleError, match="budget") as caught:
        optimize_with(chain_model(), pack)
    message = str(caught.value)
    assert "\n" not in message and "multiply-adds of int64 is more work than one operation may do" in message


def test_verify_passes_the_fold_and_fails_it_with_the_factors_swapped(tmp_path):
    report = verify([FIXTURE], examples=30, seed=1, out=tmp_path / "ok", jobs=1)
    assert [(v.rule, v.verdict) for v in report.verdicts] == [("MatMulConstantChain", "ok")]
    mutant = tmp_path / "swapped.rules"
    mutant.write_text(FIXTURE.read_text().replace("W1 @ W2", "W2 @ W1"))
    report = verify([mutant], examples=30, seed=1, out=tmp_path / "swapped", jobs=1, shrink_attempts=1)
    assert [(v.rule, v.verdict) for v in report.verdicts] == [("MatMulConstantChain", "FAIL")], report.verdicts
