"""Mutant rules, each a shipped rule with the kind of bug a careless author writes (a wrong
constant, swapped operands, a dropped `where` conjunct, a wrong attribute passthrough, a
wrong computed initializer, a wrong axis or perm, a wrong dtype): `rewriter verify FILE
--examples 30 --seed 1` must fail every one.  Each file's comment says what is wrong and
which instance shows it.  The default run takes one or two of each kind, `-m slow` all."""

from __future__ import annotations

from pathlib import Path

import pytest

from rewriter.verify import verify

MUTANTS = sorted((Path(__file__).parent / "mutants").glob("*.rules"))

# quick to catch, and together every kind of bug
QUICK = {
    "basic_02_dropout_elim_training_mode",  # dropped conjunct
    "basic_05_conv_add_drops_conv_bias",  # wrong computed initializer
    "basic_07_sub_zero_swapped",  # swapped operands
    "extended_05_matmul_div_as_scale",  # wrong op
    "extended_06_fused_matmul_scaled_input_drops_alpha",  # attribute passthrough
    "extended_09_conv_clip_default_min_zero",  # wrong constant
    "extended_03_bias_gelu_bias_other_axis",  # wrong axis
    "layout_01_nchwc_conv_from_nchw_wrong_perm",  # wrong perm (layout)
    "extended_29_matmul_transpose_a_beside_vector",  # dropped conjunct: a 1-D operand
}


def _param(path: Path):
    return pytest.param(path, id=path.stem, marks=() if path.stem in QUICK else pytest.mark.slow)


def test_the_quick_mutants_exist():
    assert QUICK <= {p.stem for p in MUTANTS}


@pytest.mark.parametrize("path", [_param(p) for p in MUTANTS])
def test_verify_catches_the_mutant(path, tmp_path):
    # shrinking is not what is tested here: one attempt, then the first failure is kept
    report = verify([path], examples=30, seed=1, out=tmp_path, jobs=1, shrink_attempts=1)
    verdicts = [(v.rule, v.verdict, v.message) for v in report.verdicts]
    assert any(v.verdict == "FAIL" for v in report.verdicts), verdicts
