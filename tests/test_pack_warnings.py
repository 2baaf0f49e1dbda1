"""A pack the run would skip, or a level-0/1 pack making provider-specific ops, is reported."""

from __future__ import annotations

from helpers import model, tensor
from onnx import TensorProto, helper

import rewriter

F = TensorProto.FLOAT
NEG = model([helper.make_node("Neg", ["x"], ["y"])], [tensor("x", F, [2])], [tensor("y", F, [2])])


def test_a_pack_above_the_level_is_named_not_silently_skipped(tmp_path):
    pack = tmp_path / "mine.rules"
    pack.write_text("pack mine level 2\nrule NegNeg { y = Neg(Neg(x)) => y = x }\n")
    report = rewriter.optimize(NEG, level="basic", rules=[pack]).report
    assert any("'mine'" in w and "above the run's level 1" in w and "--level 2" in w for w in report.warnings)
    assert rewriter.optimize(NEG, level="extended", rules=[pack]).report.warnings == []


def test_a_basic_pack_making_contrib_ops_is_warned(tmp_path):
    pack = tmp_path / "early.rules"
    pack.write_text("pack early level 1\nrule Early { y = Neg(x) => y = com.microsoft.Gelu(x) }\n")
    report = rewriter.optimize(NEG, level="basic", rules=[pack]).report
    assert any("com.microsoft.Gelu" in w and "before partitioning" in w for w in report.warnings)
