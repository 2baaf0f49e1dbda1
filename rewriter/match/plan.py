"""Compile a rule into a match plan: the order in which pattern nodes are reached from the root.

Each step names how its graph node is found: the root step is given the candidate node; an
"output" step takes the producer of a value already bound (one candidate, cheap); an "input"
step enumerates the consumers of a bound value (several candidates).  Producer steps are
preferred, then consumers of a matched node's output, and only then other readers of a
matched node's input (an input may be a constant shared across the whole graph).  Each
``where`` and ``let`` is attached to the first step after which every name it reads is
bound, so a failing constraint prunes the search as early as possible; a ``where`` that
reads only the root's own inputs, outputs and attributes runs even before the search, with
the root checks (``CompiledRule.root_wheres``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Final, Literal, NamedTuple

from ..dsl import ast as A
from ..dsl.unparse import show
from ..expr.dtypes import DTYPES
from ..expr.evaluate import NOT_LITERAL, Compiled, compile_expr, literal_value
from ..expr.functions import CONSTANTS
from ..expr.syntax import names_read
from ..onnx_facts.schemas import is_commutative, normalize_domain

OpKey = tuple[str, str]  # (domain, op) of a node

# how a pattern input is matched (see AltPlan.inputs): the tag of each input plan
VAR: Final = "var"
ANY: Final = "any"
LITERAL: Final = "literal"
REST: Final = "rest"


class VarInput(NamedTuple):
    """``x`` (``x?``: ``optional``, the slot may be absent): binds the input to ``name``."""

    kind: Literal["var"]
    name: str
    optional: bool


class AnyInput(NamedTuple):
    """``_``: any value, not bound (the slot must be present)."""

    kind: Literal["any"]


class LiteralInput(NamedTuple):
    """A one-element constant equal to ``literal``; ``0 as zero`` binds it to ``bind``."""

    kind: Literal["literal"]
    literal: A.Literal
    bind: str | None


class RestInput(NamedTuple):
    """``*xs``: every remaining input, bound to ``name`` as a list."""

    kind: Literal["rest"]
    name: str


InputPlan = VarInput | AnyInput | LiteralInput | RestInput


def _input_plan(arg: A.PatternArg) -> InputPlan:
    if isinstance(arg, A.VarArg):
        return VarInput(VAR, arg.name, arg.optional)
    if isinstance(arg, A.AnyArg):
        return AnyInput(ANY)
    if isinstance(arg, A.LiteralArg):
        return LiteralInput(LITERAL, arg.literal, arg.bind)
    if isinstance(arg, A.RestArg):
        return RestInput(REST, arg.name)
    raise TypeError(f"not a pattern input: {arg!r}")


# how an attribute pattern is matched (see AltPlan.attrs): a name captures the attribute
# unless it is bound already (a constant's name, float say, only when captured elsewhere);
# a literal is compared as it is, `~0.01` within tolerance (as a literal input); any other
# expression is evaluated (`_`, any value, is not matched at all)
CAPTURE, CONSTANT_NAME, FIXED, COMPUTED, APPROX = 0, 1, 2, 3, 4


class AttrPlan(NamedTuple):
    """How one attribute pattern is matched."""

    name: str  # the attribute
    how: int  # CAPTURE, CONSTANT_NAME, FIXED, COMPUTED or APPROX
    bind: str | None  # the name it binds (a name pattern), else None
    fixed: object  # the literal value (FIXED), the approximate Literal (APPROX), else None
    compiled: Compiled  # the pattern's expression (APPROX: its literal's value)


def _attr_plan(name: str, expr: A.Expr | A.Literal) -> AttrPlan:
    if isinstance(expr, A.Literal):
        approximate = expr.value
        return AttrPlan(name, APPROX, None, expr, lambda env: approximate)
    compiled = compile_expr(expr)
    if isinstance(expr, A.Name):
        constant = expr.id in DTYPES or expr.id in CONSTANTS
        return AttrPlan(name, CONSTANT_NAME if constant else CAPTURE, expr.id, None, compiled)
    value = literal_value(expr)
    if value is not NOT_LITERAL:
        return AttrPlan(name, FIXED, None, value, compiled)
    return AttrPlan(name, COMPUTED, None, None, compiled)


@dataclass(frozen=True)
class AltPlan:
    """One alternative of a pattern node, read once for the matcher: its inputs' kinds
    (no isinstance tests per candidate node), how each attribute pattern is matched, and
    whether operand orders are tried."""

    alt: A.OpPattern
    inputs: tuple[InputPlan, ...]  # per pattern input
    fixed: int  # inputs before a *rest
    has_rest: bool
    reorderable: bool  # a commutative op without *rest
    attrs: tuple[AttrPlan, ...]  # per attribute pattern but `_`
    # the attributes the pattern says something about (captured, required or `_`): a
    # deleted node's other attributes must be at their defaults (rewrite/accounting.py)
    mentioned: frozenset[str] = frozenset()

    @staticmethod
    def of(alt: A.OpPattern) -> AltPlan:
        has_rest = bool(alt.args) and isinstance(alt.args[-1], A.RestArg)
        attrs = tuple(_attr_plan(pattern.name, pattern.value) for pattern in alt.attrs if pattern.value is not None)
        return AltPlan(
            alt,
            tuple(_input_plan(a) for a in alt.args),
            len(alt.args) - (1 if has_rest else 0),
            has_rest,
            is_commutative(alt.domain, alt.op) and not any(isinstance(a, A.RestArg) for a in alt.args),
            attrs,
            frozenset(pattern.name for pattern in alt.attrs),
        )


Via = Literal["root", "output", "input"]


class Reach(NamedTuple):
    """How the search reaches a pattern node: the root is given; "output": the producer of
    the bound value ``link``; "input": a reader of it.  ``link`` is None for the root alone."""

    equation: int  # index into rule.equations
    via: Via
    link: str | None


class Check(NamedTuple):
    """A let or a where of a step, compiled."""

    let: str | None  # the let's name; None for a where
    compiled: Compiled
    label: str  # what a reason calls it
    expr: A.Expr  # what it computes (a failure names it, so ``explain`` can show its values)


class OutPlan(NamedTuple):
    """A named output of a pattern node."""

    slot: int
    name: str
    optional: bool  # `y?`: absent is allowed (bound to None)


@dataclass(frozen=True)
class Step:
    equation: int  # index into rule.equations
    via: Via
    link: str | None  # the bound variable the node is reached through (None: the root step)
    lets: tuple[int, ...]  # rule.lets to evaluate after this step
    wheres: tuple[int, ...]  # rule.wheres to check after this step
    # the same, compiled, in the order they run
    checks: tuple[Check, ...] = ()
    # the equation's named outputs and its alternatives by the (domain, op) a node must
    # have for them
    outs: tuple[OutPlan, ...] = ()
    alternatives: dict[OpKey, tuple[AltPlan, ...]] = dataclasses.field(default_factory=dict)


class NeighborCheck(NamedTuple):
    """Some input of the root is produced by one of ``ops`` ("producer", ``slot`` -1), or
    some consumer of the root's ``slot``-th output is one of ``ops`` ("consumer")."""

    kind: Literal["producer", "consumer"]
    slot: int
    ops: frozenset[OpKey]


class ConstantCheck(NamedTuple):
    """Some input of the root is a one-element constant equal to one of ``literals``."""

    kind: Literal["constant"]
    slot: int  # -1: any input
    literals: tuple[A.Literal, ...]


RootCheck = NeighborCheck | ConstantCheck


class RootSlot(NamedTuple):
    """A name the root equation binds, read off the root's ``slot``-th input or output."""

    kind: Literal["input", "output"]
    slot: int


class RootAttr(NamedTuple):
    """A name the root equation binds, read off the root's attribute ``name``."""

    kind: Literal["attr"]
    name: str


RootPlace = RootSlot | RootAttr


class RootWhere(NamedTuple):
    """A where on the root alone, compiled."""

    compiled: Compiled
    label: str  # what a reason calls it
    expr: A.Expr  # the where itself (see Check.expr)


class RevisitMove(NamedTuple):
    """One move of a revisit walk and the op keys of the node it reaches."""

    move: str  # "up", "down" or "sibling"
    ops: frozenset[OpKey]


class RevisitWalk(NamedTuple):
    """From a pattern node back to the root: the op keys the starting node must have, then
    each move (see ``_revisit_paths``)."""

    start: frozenset[OpKey]
    moves: tuple[RevisitMove, ...]


@dataclass(frozen=True)
class CompiledRule:
    rule: A.Rule
    steps: tuple[Step, ...]
    root_ops: tuple[OpKey, ...]
    tensor_vars: frozenset[str]
    produced_by: dict[str, int]  # tensor var -> equation index producing it
    replaced: frozenset[str]  # pattern values the replacement redefines
    revisit_paths: tuple[RevisitWalk, ...]  # per pattern node: the walk back to the root, see below
    root_checks: tuple[RootCheck, ...]  # cheap necessary conditions, see below
    # wheres that read only the root's own inputs, outputs and attributes, checked with
    # the root checks (not again in the search): where each name is read on the root, and
    # the wheres
    root_names: dict[str, RootPlace] = dataclasses.field(default_factory=dict)
    root_wheres: tuple[RootWhere, ...] = ()
    # equations whose node's attributes the replacement copies (`{...c}`): all accounted for
    spread: frozenset[int] = frozenset()
    # names the replacement's own expressions read: a redefined pattern output that matched
    # as absent (`sum?`) but is read there is built under a fresh name, not left absent
    replacement_reads: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        return self.rule.name


def _equation_names(eq: A.Equation) -> tuple[set[str], set[str]]:
    """(tensor names read as inputs, all names the equation binds)."""
    inputs: set[str] = set()
    binds: set[str] = set(eq.out_names)
    for alt in eq.alternatives:
        for arg in alt.args:
            if isinstance(arg, (A.VarArg, A.RestArg)):
                inputs.add(arg.name)
                binds.add(arg.name)
            elif isinstance(arg, A.LiteralArg) and arg.bind:
                inputs.add(arg.bind)
                binds.add(arg.bind)
        for attr in alt.attrs:
            if isinstance(attr.value, A.Name):
                binds.add(attr.value.id)
    return inputs, binds


def compile_rule(rule: A.Rule) -> CompiledRule:
    # `where a and b` is checked as `where a` + `where b`, each as soon as its names are
    # bound: a cheap test on the root rejects before the rest of the pattern is searched
    # (a conjunction fails when any part fails or cannot be evaluated, so this is the same)
    rule = dataclasses.replace(rule, wheres=tuple(A.Where(c, w.pos) for w in rule.wheres for c in A.conjuncts(w.expr)))
    equations = rule.equations
    produced_by = {name: i for i, eq in enumerate(equations) for name in eq.out_names}
    root_index = produced_by[rule.root]
    reads = [_equation_names(eq)[0] for eq in equations]
    binds = [_equation_names(eq)[1] for eq in equations]

    order: list[Reach] = [Reach(root_index, "root", None)]
    bound: set[str] = set(binds[root_index])
    outputs: set[str] = set(equations[root_index].out_names)  # of matched nodes
    remaining = set(range(len(equations))) - {root_index}
    while remaining:
        chosen: Reach | None = None
        for i in sorted(remaining):  # producer of a bound value: one candidate
            link = next((o for o in equations[i].out_names if o in bound), None)
            if link is not None:
                chosen = Reach(i, "output", link)
                break
        if chosen is None:  # consumer of a matched node's output, else of a bound input
            nearest = min(
                ((0 if v in outputs else 1, i, v) for i in remaining for v in reads[i] if v in bound), default=None
            )
            if nearest is not None:
                chosen = Reach(nearest[1], "input", nearest[2])
        if chosen is None:  # disconnected; the checker reports it, refuse to plan
            raise ValueError(f"rule {rule.name}: pattern is not connected")
        order.append(chosen)
        remaining.discard(chosen[0])
        bound |= binds[chosen[0]]
        outputs.update(equations[chosen[0]].out_names)

    # attach lets/wheres to the earliest step where all their names are bound
    bindable = set().union(*binds)
    bound_after: list[set[str]] = []
    acc: set[str] = set()
    for eq_index, _, _ in order:
        acc = acc | binds[eq_index]
        bound_after.append(set(acc))
    let_step: dict[str, int] = {}
    lets_at: dict[int, list[int]] = {}
    for li, let in enumerate(rule.lets):
        step = _step_for(A.names_read(let.expr), bound_after, bindable, let_step)
        let_step[let.name] = step
        lets_at.setdefault(step, []).append(li)
    wheres_at: dict[int, list[int]] = {}
    for wi, where in enumerate(rule.wheres):
        step = _step_for(A.names_read(where.expr), bound_after, bindable, let_step)
        wheres_at.setdefault(step, []).append(wi)

    # wheres on the root alone run with the root checks, before any search (a Transpose
    # whose perm is not the identity, a 3-D MatMul for a 2-D rule: most roots fail there)
    root_names = _root_names(equations[root_index])
    constant_names = (DTYPES.keys() | CONSTANTS.keys()) - bindable
    hoisted = [
        wi
        for wi in wheres_at.get(0, ())
        if root_names is not None and A.names_read(rule.wheres[wi].expr) <= root_names.keys() | constant_names
    ]
    if hoisted:
        wheres_at[0] = [wi for wi in wheres_at[0] if wi not in hoisted]

    def checks(k: int) -> tuple[Check, ...]:
        # the wheres that need none of this step's lets run first (a let may trace a shape;
        # `where not const(s)` rejects at once), then the others; each let runs just before
        # the first check that needs it, the rest at the end.  Every check must hold for a
        # match, so the order changes no result, only how soon a failing one is reached.
        local = {rule.lets[li].name: li for li in lets_at.get(k, ())}
        ordered: list[Check] = []
        done: set[int] = set()

        def let_needed(li: int) -> None:
            if li in done:
                return
            done.add(li)
            let = rule.lets[li]
            for name in sorted(A.names_read(let.expr) & local.keys(), key=local.__getitem__):
                if local[name] < li:  # an earlier let it reads
                    let_needed(local[name])
            ordered.append(Check(let.name, compile_expr(let.expr), f"let {let.name} (line {let.pos.line})", let.expr))

        wheres = wheres_at.get(k, ())
        needs = {wi: A.names_read(rule.wheres[wi].expr) & local.keys() for wi in wheres}
        for wi in sorted(wheres, key=lambda wi: (bool(needs[wi]), wi)):
            for name in sorted(needs[wi], key=local.__getitem__):
                let_needed(local[name])
            where = rule.wheres[wi]
            ordered.append(Check(None, compile_expr(where.expr), _where_label(where), where.expr))
        for li in lets_at.get(k, ()):
            let_needed(li)
        return tuple(ordered)

    def alternatives(eq: A.Equation) -> dict[OpKey, tuple[AltPlan, ...]]:
        by_key: dict[OpKey, list[AltPlan]] = {}
        for alt in eq.alternatives:
            by_key.setdefault((alt.domain, alt.op), []).append(AltPlan.of(alt))
        return {key: tuple(plans) for key, plans in by_key.items()}

    steps = tuple(
        Step(
            eq,
            via,
            link,
            tuple(lets_at.get(k, ())),
            tuple(wheres_at.get(k, ())),
            checks(k),
            tuple(OutPlan(slot, o.name, o.optional) for slot, o in enumerate(equations[eq].outs) if o.name is not None),
            alternatives(equations[eq]),
        )
        for k, (eq, via, link) in enumerate(order)
    )
    root_ops = tuple(dict.fromkeys((normalize_domain(a.domain), a.op) for a in equations[root_index].alternatives))
    tensor_vars = frozenset(name for i in range(len(equations)) for name in reads[i]) | frozenset(produced_by)
    replaced = frozenset(
        o.name for eq in rule.replacement for o in eq.outs if o.name is not None and o.name in produced_by
    )
    return CompiledRule(
        rule,
        steps,
        root_ops,
        tensor_vars,
        produced_by,
        replaced,
        _revisit_paths(order, equations, binds),
        _root_checks(order, equations, root_index),
        root_names or {},
        tuple(
            RootWhere(compile_expr(rule.wheres[wi].expr), _where_label(rule.wheres[wi]), rule.wheres[wi].expr)
            for wi in hoisted
        ),
        frozenset(produced_by[v] for v in A.spread_names(rule) if v in produced_by),
        frozenset(name for eq in rule.replacement for name in names_read(eq.value)),
    )


def _where_label(where: A.Where) -> str:
    """How a failing conjunct is named in a reason: its text and its clause's line."""
    return f"where `{show(where.expr)}` (line {where.pos.line})"


def _root_names(root: A.Equation) -> dict[str, RootPlace] | None:
    """Where each name the root equation binds is read on the root node itself: ("input",
    slot), ("output", slot) or ("attr", attribute name).  None when that is not fixed: more
    than one alternative, operand orders tried, a *rest, or a name bound twice (then the
    matcher's unification decides)."""
    if len(root.alternatives) != 1:
        return None
    alt = root.alternatives[0]
    if AltPlan.of(alt).reorderable or any(isinstance(a, A.RestArg) for a in alt.args):
        return None
    places: list[tuple[str, RootPlace]] = []
    for slot, arg in enumerate(alt.args):
        name = arg.name if isinstance(arg, A.VarArg) else arg.bind if isinstance(arg, A.LiteralArg) else None
        if name is not None:
            places.append((name, RootSlot("input", slot)))
    places += [(out.name, RootSlot("output", slot)) for slot, out in enumerate(root.outs) if out.name is not None]
    places += [
        (attr.value.id, RootAttr("attr", attr.name))
        for attr in alt.attrs
        if isinstance(attr.value, A.Name) and attr.value.id not in DTYPES and attr.value.id not in CONSTANTS
    ]
    names = dict(places)
    return names if len(names) == len(places) else None


def _root_checks(order: list[Reach], equations: tuple[A.Equation, ...], root: int) -> tuple[RootCheck, ...]:
    """Necessary conditions on the root's neighbours, checked before any search starts.

    For each pattern node linked directly to the root: ("producer", -1, ops) — some input
    of the root is produced by one of ``ops`` — or ("consumer", k, ops) — some consumer of
    the root's k-th output is one of ``ops``; and ("constant", -1, literals) when the root
    has a literal input (some input must be a one-element constant equal to one of the
    root's literals).  Most candidate roots fail one of these
    (an Add whose consumer is no LayerNormalization), at the cost of a dictionary lookup."""
    root_eq = equations[root]
    root_inputs = {
        arg.name for alt in root_eq.alternatives for arg in alt.args if isinstance(arg, A.VarArg) and not arg.optional
    }
    checks: list[RootCheck] = []
    if all(any(isinstance(g, A.LiteralArg) for g in alt.args) for alt in root_eq.alternatives):
        literals = tuple(g.literal for alt in root_eq.alternatives for g in alt.args if isinstance(g, A.LiteralArg))
        checks.append(ConstantCheck("constant", -1, literals))
    for eq_index, via, link in order[1:]:
        ops = frozenset((normalize_domain(a.domain), a.op) for a in equations[eq_index].alternatives)
        if (
            via == "output"
            and link in root_inputs
            and all(any(isinstance(g, A.VarArg) and g.name == link for g in alt.args) for alt in root_eq.alternatives)
        ):
            checks.append(NeighborCheck("producer", -1, ops))
        elif via == "input" and link in root_eq.out_names:
            checks.append(NeighborCheck("consumer", root_eq.out_names.index(link), ops))
    return tuple(checks)


_INVERSE = {"up": "down", "down": "up", "sibling": "sibling"}


def _revisit_paths(
    order: list[Reach], equations: tuple[A.Equation, ...], binds: list[set[str]]
) -> tuple[RevisitWalk, ...]:
    """For each pattern node, the walk that leads from it back to the root.

    The plan reaches every pattern node from the root by moves between graph nodes: "up"
    (to the producer of an input), "down" (to a consumer of an output) or "sibling" (to
    another consumer of an input).  Reversed and inverted, those moves lead from a changed
    node to exactly the roots whose match could contain it, which is all the fixpoint
    needs to revisit after a rewrite.  A walk (``RevisitWalk``) has the op keys the starting
    node must have, then each move and the op keys of the node it reaches."""
    binder: dict[str, tuple[int, bool]] = {}  # name -> (equation, bound as its output)
    chain: dict[int, tuple[tuple[str, int], ...]] = {}  # equation -> ((move, from eq), ...)
    for eq_index, via, link in order:
        if link is None:  # the root
            chain[eq_index] = ()
        else:
            source, as_output = binder[link]
            move = "up" if via == "output" else ("down" if as_output else "sibling")
            chain[eq_index] = chain[source] + ((move, source),)
        outs = set(equations[eq_index].out_names)
        for name in binds[eq_index]:
            binder.setdefault(name, (eq_index, name in outs))

    def ops(eq_index: int) -> frozenset[OpKey]:
        return frozenset((normalize_domain(a.domain), a.op) for a in equations[eq_index].alternatives)

    return tuple(
        RevisitWalk(ops(eq_index), tuple(RevisitMove(_INVERSE[move], ops(source)) for move, source in reversed(steps)))
        for eq_index, steps in chain.items()
    )


def _step_for(needs: set[str], bound_after: list[set[str]], bindable: set[str], let_step: dict[str, int]) -> int:
    """First step after which every pattern name in ``needs`` is bound (and its lets ran)."""
    plain = (needs & bindable) - set(let_step)
    first = next((k for k, bound in enumerate(bound_after) if plain <= bound), len(bound_after) - 1)
    return max([first, *(let_step[n] for n in needs if n in let_step)])
