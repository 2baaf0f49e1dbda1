"""What every pack the parser makes has, and the engine relies on without looking again.

The parser builds rule objects only from the grammar, and the checker refuses a pack whose
root is not an output of its pattern; so the matcher indexes a rule's equations by its root,
the evaluator looks an operator up in its tables, the rewriter unpacks a replacement's
first output — none of them check, since a parsed pack cannot be otherwise.

A pack read back from the pack cache did not come from the parser: ``serial`` builds it
from JSON, with the right classes and field types, but the JSON may have been damaged into
another valid document or written by hand.  ``problems`` names what such a pack breaks of
the above, cheaply (no op schemas: a walk over the objects, a few milliseconds for the
bundled packs), so that ``serial.decode`` refuses it and the pack is parsed instead: a bad
cache entry costs time, never a crash.  It is not the checker: what the checker refuses
but the engine handles (an unknown op, a name never bound, a `where` that cannot be
evaluated: the match is refused) needs no second look here.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..expr.functions import FUNCTIONS
from . import ast as A

# The grammar's operators (dsl/parse.py makes exactly these), and the levels and built-in
# passes a pack may name (the checker's vocabulary, repeated where the cache can use it
# without importing the checker).
UNARY_OPS = frozenset({"-", "not"})
BINARY_OPS = frozenset({"+", "-", "*", "/", "//", "%", "**", "@", "??"})
COMPARE_OPS = frozenset({"==", "!=", "<", "<=", ">", ">=", "in", "not in"})
BOOL_OPS = frozenset({"and", "or"})
BUILTIN_PASSES = ("constant_folding", "common_subexpression_elimination")
LEVELS = range(5)  # required, basic, extended, layout, reserved


def problems(pack: A.Pack) -> Iterator[str]:
    """What ``pack`` has that no parsed pack has (nothing for a pack the parser made)."""
    if pack.level not in LEVELS:
        yield f"level {pack.level}"
    for builtin in pack.builtins:
        if builtin not in BUILTIN_PASSES:
            yield f"unknown builtin {builtin!r}"
    names: set[str] = set()
    for rule in pack.rules:
        if rule.name in names or not rule.name:
            yield f"rule name {rule.name!r} empty or given twice"
        names.add(rule.name)
        for problem in _rule_problems(rule):
            yield f"rule {rule.name!r}: {problem}"


def _rule_problems(rule: A.Rule) -> Iterator[str]:
    if not rule.equations:
        yield "no pattern"
    produced: set[str] = set()
    kept: set[str] = set()
    for eq in rule.equations:
        if not eq.outs or not eq.alternatives:
            yield "an equation without outputs or ops"
        for name in eq.out_names:
            if name in produced:
                yield f"'{name}' produced twice"
            produced.add(name)
            if eq.keep:
                kept.add(name)
        for alt in eq.alternatives:
            if not alt.op:
                yield "an op without a name"
            if any(isinstance(arg, A.RestArg) for arg in alt.args[:-1]):
                yield "*rest before the last input"
            for attr in alt.attrs:
                if attr.value is not None and not isinstance(attr.value, A.Literal):  # (`~0.01`: a number)
                    yield from _expr_problems(attr.value, ops=False)
    if rule.root not in produced or rule.root in kept:
        yield f"root {rule.root!r} is not an output of a (deletable) pattern node"
    if not _connected(rule.equations):
        yield "the pattern is not connected"
    for clause in rule.wheres:
        yield from _expr_problems(clause.expr, ops=False)
    for let in rule.lets:
        yield from _expr_problems(let.expr, ops=False)
    for group in rule.examples:
        for item in group.items:
            if item.value is not None:
                yield from _expr_problems(item.value, ops=False)
    made_names: set[str] = set()
    for made in rule.replacement:
        if not made.outs:
            yield "a replacement without outputs"
        for out in made.outs:
            if not out.name:
                continue
            if out.name in made_names:  # (the checker refuses it: two producers)
                yield f"'{out.name}' made twice by the replacement"
            made_names.add(out.name)
        if len(made.outs) > 1 and not (isinstance(made.value, A.Call) and made.value.is_op):
            yield "several outputs of something other than an op"
        yield from _expr_problems(made.value, ops=True)


def _connected(equations: tuple[A.Equation, ...]) -> bool:
    """Whether every pattern node shares a value (an output, an input) with another, by
    way of others: the matcher plans its search from the root along shared values."""
    owner: dict[str, int] = {}  # a value -> the first equation that names it
    parent = list(range(len(equations)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for index, eq in enumerate(equations):
        names = set(eq.out_names)
        for alt in eq.alternatives:
            for arg in alt.args:
                name = getattr(arg, "name", None) or getattr(arg, "bind", None)
                if name:
                    names.add(name)
        for name in names:
            parent[find(owner.setdefault(name, index))] = find(index)
    return len({find(i) for i in range(len(equations))}) <= 1


def _expr_problems(expr: A.Expr, ops: bool) -> Iterator[str]:
    """Operators of the grammar, with their operand counts; a slice only as what an index
    reads (``s[1:]``); functions that exist, called with as many arguments as they take; op
    calls only where a replacement makes nodes (an op call's inputs may be op calls, its
    attributes only expressions)."""
    stack: list[tuple[A.Expr, bool, bool]] = [(expr, ops, False)]  # (expression, op calls ok, a slice ok)
    while stack:
        e, ops_here, slice_here = stack.pop()
        if isinstance(e, A.Unary) and e.op not in UNARY_OPS:
            yield f"unary operator {e.op!r}"
        elif isinstance(e, A.Binary) and e.op not in BINARY_OPS:
            yield f"operator {e.op!r}"
        elif isinstance(e, A.Compare) and (
            not e.ops or len(e.operands) != len(e.ops) + 1 or not set(e.ops) <= COMPARE_OPS
        ):
            yield f"comparison {e.ops!r} of {len(e.operands)} operands"
        elif isinstance(e, A.BoolOp) and (e.op not in BOOL_OPS or len(e.values) < 2):
            yield f"{e.op!r} of {len(e.values)} values"
        elif isinstance(e, A.Slice) and not slice_here:
            yield "a slice outside an index"
        elif isinstance(e, A.Index):
            stack.append((e.obj, False, False))
            stack.append((e.index, False, True))
            continue
        elif isinstance(e, A.Call):
            if e.is_op:
                if not ops_here:
                    yield f"op {e.func} outside a replacement"
                for attr in e.attrs or ():
                    if isinstance(attr, A.AttrSet):
                        stack.append((attr.value, False, False))
                stack.extend((arg, True, False) for arg in e.args)
                continue
            function = FUNCTIONS.get(e.func)
            if function is None:
                yield f"unknown function {e.func!r}"
            elif len(e.args) < function.min_args or (function.max_args is not None and len(e.args) > function.max_args):
                yield f"{e.func}() given {len(e.args)} arguments"
            if e.attrs is not None:
                yield f"{e.func}() given attributes"
            stack.extend((arg, False, False) for arg in e.args)
            continue
        stack.extend((child, False, False) for child in A.operands(e))
