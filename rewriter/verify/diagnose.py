"""Why the engine did not rewrite a drawn instance: the first thing that failed.

A rule that never applies proves nothing, and the verifier says why: for each draw the
engine left alone, the matcher's deepest failure (an op that differed, an attribute, the
``where`` that did not hold) or the guarantee that refused the match.  Counted over a
campaign, the commonest reasons name the constraint the generator does not meet, and the
pattern inputs an ``example`` hint should shape.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
from onnx import ModelProto

from ..dsl import ast as A
from ..dsl.unparse import show
from ..explanation.diagnose import try_root
from ..graph.model import ModelState
from ..match.matcher import Matcher
from ..rewrite.apply import Rewriter
from ..rewrite.fixpoint import compiled

_WHERE_LINE = re.compile(r"^where `.*` \(line (\d+)\)")


class Why(str):
    """A reason; ``rule_fault`` when it is the rule's (the engine refused a replacement
    that would change a value's type or shape: see rewrite/replacement_types.py)."""

    rule_fault: bool = False


def why_not_applied(model: ModelProto, rule: A.Rule) -> Why:
    """The reason the rule does not rewrite ``model`` (its deepest failure over all roots)."""
    with np.errstate(all="ignore"):  # as the level runner evaluates expressions
        return _why_not_applied(model, rule)


def _why_not_applied(model: ModelProto, rule: A.Rule) -> Why:
    try:
        state = ModelState(model)
    except Exception as err:  # the instance itself is odd: say so rather than fail
        return Why(f"the instance did not load: {err}")
    plan = compiled(rule)
    matcher = Matcher(state.view, record_failures=True)
    rewriter = Rewriter(state)
    deepest = None
    for key in plan.root_ops:
        for node_id in state.view.nodes_by_op(*key):
            outcome = try_root(matcher, rewriter, plan, node_id)
            if outcome.applies:
                return Why("matched; refused by placement or the provider's kernels")
            refusal = outcome.refusal
            if refusal is not None:
                why = Why(f"the engine refused the match: {str(refusal) or type(refusal).__name__}")
                why.rule_fault = bool(getattr(refusal, "rule_fault", False))
                return why
            failure = outcome.failure
            if failure is not None and (deepest is None or failure.depth > deepest.depth):
                deepest = failure
    if deepest is None:
        return Why("no node of the root's op in the instance")
    return Why(deepest.reason)


def reason_key(reason: str) -> str:
    """A reason without the values it quotes (a where's own text stays), so draws failing
    the same check count together."""
    head, tail = "", reason
    if reason.startswith("where `") and "` (line" in reason:
        cut = reason.index("` (line")
        head, tail = reason[:cut], reason[cut:]
    tail = re.sub(r"'[^']*'", "'...'", tail)
    return head + re.sub(r"(?<=\w)=(?!=)[^\s,]+", "=...", tail)


def summarize(reasons: Counter, rule: A.Rule) -> str:
    """The commonest reasons (a failing ``where`` is quoted in its reason) and the hint
    that would help."""
    if not reasons:
        return ""
    total = sum(reasons.values())
    parts = []
    for reason, count in reasons.most_common(2):
        parts.append(f"{reason} ({count} of {total} draws)")
    hint = _hint(reasons.most_common(1)[0][0], rule)
    return "; ".join(parts) + (f"; {hint}" if hint else "")


def _hint(reason: str, rule: A.Rule) -> str:
    """Which ``example`` would help: the free inputs the failing ``where`` reads."""
    line = _WHERE_LINE.search(reason)
    if not line:
        return ""
    text = reason[len("where `") : reason.rindex("` (line")]
    conjuncts = [
        c for w in rule.wheres if w.pos.line == int(line.group(1)) for c in A.conjuncts(w.expr) if show(c) == text
    ]
    if not conjuncts:
        return ""
    produced = {name for eq in rule.equations for name in eq.out_names}
    bound = {
        arg.name for eq in rule.equations for alt in eq.alternatives for arg in alt.args if isinstance(arg, A.VarArg)
    }
    names = sorted(A.names_read(conjuncts[0]) & (bound - produced))
    if not names:
        return "an `example` clause with values that satisfy it would help"
    return (
        f"an `example` clause giving {', '.join(names)} shapes or values that satisfy it "
        f"would help (e.g. `example {names[0]}: [N, C]`)"
    )
