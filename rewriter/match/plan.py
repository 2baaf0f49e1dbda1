"""Compile a rule into a match plan: the order in which pattern nodes are reached from the root.

Each step names how its graph node is found: the root step is given the candidate node; an
"output" step takes the producer of a value already bound (one candidate, cheap); an "input"
step enumerates the consumers of a bound value (several candidates).  Producer steps are
preferred.  Each ``where`` and ``let`` is attached to the first step after which every name
it reads is bound, so a failing constraint prunes the search as early as possible.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..dsl import ast as A
from ..dsl.schemas import normalize_domain


@dataclass(frozen=True)
class Step:
    equation: int              # index into rule.equations
    via: str                   # "root" | "output" | "input"
    link: str | None           # the bound variable the node is reached through
    lets: tuple[int, ...]      # rule.lets to evaluate after this step
    wheres: tuple[int, ...]    # rule.wheres to check after this step


@dataclass(frozen=True)
class CompiledRule:
    rule: A.Rule
    steps: tuple[Step, ...]
    root_ops: tuple[tuple[str, str], ...]
    tensor_vars: frozenset[str]
    produced_by: dict              # tensor var -> equation index producing it
    radius: int                    # max pattern hops from the root (for local revisits)
    replaced: frozenset[str]       # pattern values the replacement redefines

    @property
    def name(self) -> str:
        return self.rule.name


def expr_names(expr: A.Expr) -> set[str]:
    """Names an expression reads (variables, captures, lets; attribute refs count their var)."""
    names: set[str] = set()

    def walk(e) -> None:
        if isinstance(e, A.Name):
            names.add(e.id)
        elif isinstance(e, A.AttrRef):
            names.add(e.var)
        elif isinstance(e, A.Call):
            for a in e.args:
                walk(a)
            for attr in e.attrs or ():
                if isinstance(attr, A.AttrSet):
                    walk(attr.value)
                else:
                    names.add(attr.var)
        else:
            for field in ("items", "operands", "values"):
                for child in getattr(e, field, ()) or ():
                    walk(child)
            for field in ("operand", "left", "right", "obj", "index", "lower", "upper"):
                child = getattr(e, field, None)
                if child is not None and not isinstance(child, (str, int, float)):
                    walk(child)

    walk(expr)
    return names


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
    equations = rule.equations
    produced_by = {name: i for i, eq in enumerate(equations) for name in eq.out_names}
    root_index = produced_by[rule.root]
    reads = [_equation_names(eq)[0] for eq in equations]
    binds = [_equation_names(eq)[1] for eq in equations]

    order: list[tuple[int, str, str | None]] = [(root_index, "root", None)]
    bound: set[str] = set(binds[root_index])
    remaining = set(range(len(equations))) - {root_index}
    while remaining:
        chosen = None
        for i in sorted(remaining):  # producer of a bound value: one candidate
            link = next((o for o in equations[i].out_names if o in bound), None)
            if link is not None:
                chosen = (i, "output", link)
                break
        if chosen is None:
            for i in sorted(remaining):  # consumer of a bound value
                link = next((v for v in sorted(reads[i]) if v in bound), None)
                if link is not None:
                    chosen = (i, "input", link)
                    break
        if chosen is None:  # disconnected; the checker reports it, refuse to plan
            raise ValueError(f"rule {rule.name}: pattern is not connected")
        order.append(chosen)
        remaining.discard(chosen[0])
        bound |= binds[chosen[0]]

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
        step = _step_for(expr_names(let.expr), bound_after, bindable, let_step)
        let_step[let.name] = step
        lets_at.setdefault(step, []).append(li)
    wheres_at: dict[int, list[int]] = {}
    for wi, where in enumerate(rule.wheres):
        step = _step_for(expr_names(where.expr), bound_after, bindable, let_step)
        wheres_at.setdefault(step, []).append(wi)

    steps = tuple(Step(eq, via, link, tuple(lets_at.get(k, ())), tuple(wheres_at.get(k, ())))
                  for k, (eq, via, link) in enumerate(order))
    root_ops = tuple(dict.fromkeys((normalize_domain(a.domain), a.op)
                                   for a in equations[root_index].alternatives))
    tensor_vars = frozenset(name for i in range(len(equations)) for name in reads[i]) | frozenset(produced_by)
    replaced = frozenset(o.name for eq in rule.replacement for o in eq.outs
                         if o.name is not None and o.name in produced_by)
    return CompiledRule(rule, steps, root_ops, tensor_vars, produced_by,
                        _radius(equations, root_index, reads), replaced)


def _step_for(needs: set[str], bound_after: list[set[str]], bindable: set[str],
              let_step: dict[str, int]) -> int:
    """First step after which every pattern name in ``needs`` is bound (and its lets ran)."""
    plain = (needs & bindable) - set(let_step)
    first = next((k for k, bound in enumerate(bound_after) if plain <= bound), len(bound_after) - 1)
    return max([first, *(let_step[n] for n in needs if n in let_step)])


def _radius(equations: tuple[A.Equation, ...], root: int, reads: list[set[str]]) -> int:
    adjacency: dict[int, set[int]] = {i: set() for i in range(len(equations))}
    for i, eq in enumerate(equations):
        for j in range(len(equations)):
            if i != j and set(eq.out_names) & reads[j]:
                adjacency[i].add(j)
                adjacency[j].add(i)
    distance = {root: 0}
    frontier = [root]
    while frontier:
        nxt = []
        for i in frontier:
            for j in adjacency[i]:
                if j not in distance:
                    distance[j] = distance[i] + 1
                    nxt.append(j)
        frontier = nxt
    return max(distance.values())
