"""``rewriter.register_predicate``: the example of docs/rules.md ("Predicates from Python")
run as written there, what the pack cache does with a registered predicate, a predicate's
error refusing the match, built-ins staying built-in, and verify keeping registered
predicates in its own process."""

from __future__ import annotations

import re
from pathlib import Path

import onnx
import pytest
from helpers import model, tensor
from onnx import TensorProto, helper

import rewriter
from rewriter.dsl import forget_loaded, load_pack, pack_cache
from rewriter.errors import ArgumentError, RuleError
from rewriter.expr import functions

DOCS = Path(__file__).resolve().parent.parent / "docs" / "rules.md"


def documented_example() -> tuple[str, str]:
    """(the Python, the rules file) of the section "Predicates from Python"."""
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("## Predicates from Python") :]
    section = section[: section.index("\n## ", 1)]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    (rules,) = re.findall(r"```\n(pack .*?)```", section, re.S)
    return code, rules


@pytest.fixture
def registry():
    """The function registry as it was, afterwards (a registered predicate would change the
    cache keys and the verify of every later test)."""
    saved = dict(functions.FUNCTIONS)
    yield functions.FUNCTIONS
    functions.FUNCTIONS.clear()
    functions.FUNCTIONS.update(saved)


def negations() -> onnx.ModelProto:
    """Two double negations, one in the decoder, one in the encoder (names as exporters
    write them)."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="/input/Relu"),
        helper.make_node("Neg", ["r"], ["e1"], name="/encoder/Neg"),
        helper.make_node("Neg", ["e1"], ["e2"], name="/encoder/Neg_1"),
        helper.make_node("Neg", ["e2"], ["d1"], name="/decoder/Neg"),
        helper.make_node("Neg", ["d1"], ["d2"], name="/decoder/Neg_1"),
        helper.make_node("Sqrt", ["d2"], ["y"], name="/output/Sqrt"),
    ]
    return model(nodes, [tensor("x", TensorProto.FLOAT, [2, 3])], [tensor("y", TensorProto.FLOAT, [2, 3])])


def test_the_documented_example_runs_as_written(registry, tmp_path, monkeypatch):
    code, rules = documented_example()
    monkeypatch.chdir(tmp_path)
    onnx.save(negations(), str(tmp_path / "model.onnx"))
    (tmp_path / "decoder.rules").write_text(rules)
    namespace: dict = {}
    exec(compile(code, str(DOCS), "exec"), namespace)
    result = namespace["result"]
    assert result.report.applied("DecoderDoubleNegation") == 1
    names = [n.name for n in result.model.graph.node]
    assert "/encoder/Neg" in names and "/encoder/Neg_1" in names  # outside the module: kept
    assert "/decoder/Neg" not in names and "/decoder/Neg_1" not in names
    assert functions.FUNCTIONS["in_module"].signature == "in_module(x, module)"


def test_a_pack_calling_it_is_cached_only_where_it_is_registered(registry, tmp_path, monkeypatch):
    monkeypatch.setenv("REWRITER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("REWRITER_CACHE", raising=False)
    code, rules = documented_example()
    path = tmp_path / "decoder.rules"
    path.write_text(rules)
    rewriter.register_predicate("in_module", lambda graph, x, module: True, min_args=2, max_args=2)
    forget_loaded()
    pack_cache.counts.clear()
    load_pack(path)
    assert pack_cache.counts["stored"] == 1
    del functions.FUNCTIONS["in_module"]
    forget_loaded()
    with pytest.raises(RuleError, match="unknown function 'in_module'"):
        load_pack(path)  # another key: the entry is not read, and the check fails
    forget_loaded()


def test_a_predicate_that_raises_refuses_the_match_with_its_message(registry):
    def broken(graph, x):
        raise RuntimeError("no such module")

    rewriter.register_predicate("broken", broken, min_args=1, max_args=1)
    pack = rewriter.load_pack_text(
        "pack p level 1\nrule R root b { a = Neg(x)\n b = Neg(a)\n where broken(b)\n => b = x }\n", "p.rules"
    )
    result = rewriter.optimize(negations(), rules=[pack], bundled=False)
    assert result.report.applied("R") == 0
    attempts = rewriter.explain(negations(), rules=[pack], bundled=False, rule="R").attempts
    assert any("broken() raised RuntimeError: no such module" in a.cause.message for a in attempts)


def test_a_built_in_function_cannot_be_replaced(registry):
    with pytest.raises(ArgumentError, match="'const' is a built-in function"):
        rewriter.register_predicate("const", lambda graph, x: True)
    rewriter.register_predicate("mine", lambda graph, x: True, 1, 1)
    rewriter.register_predicate("mine", lambda graph, x: False, 1, 1)  # a registered one can
    assert functions.registered_predicates() == ["mine"]


def test_verify_keeps_registered_predicates_in_its_process(registry, tmp_path):
    rewriter.register_predicate("anything", lambda graph, x: True, 1, 1)
    path = tmp_path / "p.rules"
    path.write_text("pack p level 1\nrule R root b { a = Neg(x)\n b = Neg(a)\n where anything(a)\n => b = x }\n")
    report = rewriter.verify([path], examples=10, seed=1, out=tmp_path / "out", jobs=2)
    assert [(v.rule, v.verdict) for v in report.verdicts] == [("R", "ok")], report.verdicts


def test_a_packs_own_constraint_wins_over_a_predicate_of_its_name(registry, tmp_path, monkeypatch):
    monkeypatch.setenv("REWRITER_CACHE_DIR", str(tmp_path / "cache"))
    rewriter.register_predicate("inside", lambda graph, *args: False)  # the basic pack's constraint too
    forget_loaded()
    try:
        result = rewriter.optimize(negations(), level="basic")  # the bundled packs still load
    finally:
        forget_loaded()
    assert result.report.nodes_after <= result.report.nodes_before
