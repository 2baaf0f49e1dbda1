"""Each rule keeps the comment written immediately above it (``Rule.doc``): through family
expansion and the pack cache, and ``rewriter rules`` shows it."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rewriter.dsl import forget_loaded, load_pack, pack_cache, serial
from rewriter.dsl.parse import parse_pack
from rewriter.resources import bundled_pack_paths

PACK = """pack mine level 1

# ------------------------------------------------------------------ eliminations
# Identity(x) is x.
#   (indented: kept as written)
rule IdentityElimination { y = Identity(x) => y = x }

# the blank line below parts this comment from the rule

rule Undocumented { y = Neg(Neg(x)) => y = x }
# Relu of Relu is Relu.
rule ReluRelu root y {
    # a comment inside the rule is not its documentation
    a = Relu(x)
    y = Relu(a)
  =>
    y = Relu(x)
}

# Abs or Neg applied twice.
rule Twice(Op) root y for AbsAbs(Abs), NegNegNeg(Neg) { a = Op(x)  y = Op(a) => y = Op(x) }
"""


def docs(text: str) -> dict[str, str]:
    return {rule.name: rule.doc for rule in parse_pack(text, "mine.rules").rules}


def test_the_comment_right_above_a_rule_is_its_doc():
    found = docs(PACK)
    assert found["IdentityElimination"] == "Identity(x) is x.\n  (indented: kept as written)"  # no ruler
    assert found["Undocumented"] == ""  # a blank line between
    assert found["ReluRelu"] == "Relu of Relu is Relu."  # not the comment inside
    assert found["AbsAbs"] == found["NegNegNeg"] == "Abs or Neg applied twice."  # a family's instances share it


HELPERS_BETWEEN = """pack helpers level 1
# Neg(Neg(x)) -> x, when x is a float tensor.
constraint floaty(x) = is_float(x)

# Whether a value has one reader (a helper's own comment: no rewrite in it).
constraint once(a) = single_use(a)
  and true

rule NegNeg root b {
    a = Neg(x)
    b = Neg(a)
  where floaty(x) and once(a)
  =>
    b = x
}

# A comment far away, above a blank line and a rule of its own -> not NegNegNeg's.
rule Lone root b {
    b = Neg(Neg(Neg(x)))
  =>
    b = Neg(x)
}

rule Bare root b {
    b = Abs(Abs(x))
  =>
    b = Abs(x)
}
"""


def test_a_comment_above_the_rules_helpers_is_its_doc():
    # authors write the rule's comment, then the constraints it uses, then the rule
    docs = {r.name: r.doc for r in parse_pack(HELPERS_BETWEEN, "helpers.rules").rules}
    assert docs["NegNeg"] == "Neg(Neg(x)) -> x, when x is a float tensor."
    assert docs["Bare"] == ""  # the rule before it ends the search: no helper between


def test_line_ends_and_text_before_the_keyword():
    assert docs(PACK.replace("\n", "\r\n"))["ReluRelu"] == "Relu of Relu is Relu."
    squeezed = "pack p level 1\n# about B\nrule A { y = Identity(x) => y = x } rule B { y = Neg(Neg(x)) => y = x }\n"
    assert docs(squeezed) == {"A": "about B", "B": ""}  # B's keyword is not first on its line


def test_the_cache_keeps_docs_and_misses_when_a_comment_changes(cache_dir, tmp_path):
    path = tmp_path / "mine.rules"
    path.write_text(PACK)
    first = load_pack(path)
    forget_loaded()
    pack_cache.counts.clear()
    again = load_pack(path)
    assert pack_cache.counts["hit"] == 1 and again == first
    assert {r.name: r.doc for r in again.rules} == docs(PACK)
    edited = PACK.replace("# Relu of Relu is Relu.", "# Relu twice is Relu once.")
    path.write_text(edited)
    forget_loaded()
    pack_cache.counts.clear()
    changed = load_pack(path)
    assert pack_cache.counts["miss"] == 1 and pack_cache.counts["hit"] == 0
    assert next(r for r in changed.rules if r.name == "ReluRelu").doc == "Relu twice is Relu once."


def test_an_entry_written_before_rules_had_docs_is_not_read():
    pack = parse_pack(PACK, "mine.rules")
    data = serial.encode(pack)
    assert serial.decode(data, "mine.rules") == pack
    rules = data[[f.name for f in dataclasses.fields(pack)].index("rules") + 1]
    for rule in rules:
        rule.pop()  # as the previous format wrote a Rule: without its doc
    with pytest.raises(serial.NotAPack):
        serial.decode(data, "mine.rules")
    assert '"format": "pack-3"' in pack_cache.cache_key(PACK, "mine.rules")


# ------------------------------------------------------------------------ the command line


def rewriter_cli(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rewriter", *map(str, args)], capture_output=True, text=True, timeout=120
    )


def comment_above(path: Path, rule: str) -> list[str]:
    """The ``#`` lines above ``rule NAME`` in a pack file, read here without the parser."""
    lines = path.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith(f"rule {rule}"))
    block = []
    while lines[index - 1].startswith("#"):
        index -= 1
        block.insert(0, lines[index][1:].strip())
    return block


def test_rules_shows_a_bundled_rules_comment():
    extended = next(p for p in bundled_pack_paths() if p.name == "extended.rules")
    expected = comment_above(extended, "EmbedLayerNormFusion")
    assert len(expected) >= 2
    proc = rewriter_cli("rules", "--rule", "EmbedLayerNormFusion")
    assert proc.returncode == 0, proc.stderr
    shown = [line.strip() for line in proc.stdout.splitlines()]
    assert any(line.startswith("EmbedLayerNormFusion  level 2") for line in shown)
    start = shown.index(expected[0])
    assert shown[start : start + len(expected)] == expected
    assert "IdentityElimination" not in proc.stdout  # only the rule asked for


def test_rules_lists_user_packs_and_writes_json(tmp_path):
    rules = tmp_path / "mine.rules"
    rules.write_text(PACK)
    out = tmp_path / "rules.json"
    proc = rewriter_cli("rules", "--no-bundled", "--rules", rules, "--json", out)
    assert proc.returncode == 0, proc.stderr
    assert "Relu of Relu is Relu." in proc.stdout and "(no comment above this rule)" in proc.stdout
    assert "(as AbsAbs above: an instance of Twice)" in proc.stdout
    data = json.loads(out.read_text())
    assert [r["rule"] for r in data["rules"]] == [
        "IdentityElimination",
        "Undocumented",
        "ReluRelu",
        "AbsAbs",
        "NegNegNeg",
    ]
    relu = data["rules"][2]
    assert relu == {
        "rule": "ReluRelu",
        "level": 1,
        "pack": "mine",
        "file": str(rules),
        "line": 12,
        "family": "",
        "providers": [],
        "doc": "Relu of Relu is Relu.",
    }
    assert data["rules"][3]["family"] == "Twice(Abs)"


def test_rules_json_never_overwrites_a_rules_file(tmp_path):
    rules = tmp_path / "mine.rules"
    rules.write_text(PACK)
    proc = rewriter_cli("rules", "--rules", rules, "--json", rules)
    assert proc.returncode == 2 and "is an input of this run" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    assert rules.read_text() == PACK
    unknown = rewriter_cli("rules", "--rule", "NoSuchRule")
    assert unknown.returncode == 2 and "no rule 'NoSuchRule'" in unknown.stderr
