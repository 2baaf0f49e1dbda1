"""Plain, immutable rule objects: what a parsed .rules file is.

The parser builds these; the checker, the matcher and the rewriter only read them.  Every
object that can be wrong in a user's file carries its ``Position`` so errors point at it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import Position

# Expressions are part of the rule objects; they are defined one floor down, where the
# evaluator reads them, and re-exported here so that ``A.Call`` and ``A.Rule`` sit together.
from ..expr.syntax import (
    AttrRef,
    AttrSet,
    AttrSpread,
    Binary,
    BoolOp,
    Call,
    Compare,
    Const,
    Expr,
    Index,
    ListExpr,
    Name,
    Num,
    Slice,
    Str,
    Unary,
    conjuncts,
    is_op_name,
    names_read,
    operands,
    split_op_name,
)

__all__ = [
    "AnyArg",
    "AttrPattern",
    "AttrRef",
    "AttrSet",
    "AttrSpread",
    "Binary",
    "BoolOp",
    "Call",
    "Compare",
    "Const",
    "Constraint",
    "Equation",
    "Example",
    "ExampleSet",
    "Expr",
    "Fragment",
    "Index",
    "Instance",
    "Let",
    "ListExpr",
    "Literal",
    "LiteralArg",
    "Name",
    "NodeParam",
    "Num",
    "OpPattern",
    "Out",
    "Pack",
    "ParamArg",
    "PatternAlternatives",
    "PatternArg",
    "PatternInput",
    "ReplacementEquation",
    "RestArg",
    "Rule",
    "Slice",
    "Str",
    "Unary",
    "Use",
    "VarArg",
    "Where",
    "conjuncts",
    "is_op_name",
    "names_read",
    "operands",
    "split_op_name",
    "spread_names",
]


def spread_names(rule: Rule) -> set[str]:
    """The pattern values whose producing node's attributes a replacement copies (``{...c}``)."""
    found: set[str] = set()
    stack = [eq.value for eq in rule.replacement]
    while stack:
        expr = stack.pop()
        if isinstance(expr, Call):
            found.update(a.var for a in expr.attrs or () if isinstance(a, AttrSpread))
            stack.extend(expr.args)
    return found


# --------------------------------------------------------------------------------- pattern


@dataclass(frozen=True)
class Literal:
    """A constant the pattern requires: exact (``0.5``) or within tolerance (``~1.414``)."""

    value: float | int | bool
    approx: bool
    pos: Position


@dataclass(frozen=True)
class VarArg:
    """An input bound to a name; ``optional`` (``B?``) lets the slot be absent."""

    name: str
    optional: bool
    pos: Position


@dataclass(frozen=True)
class AnyArg:
    """``_``: any value, not bound."""

    pos: Position


@dataclass(frozen=True)
class RestArg:
    """``*xs``: every remaining input, bound as a list (variadic ops)."""

    name: str
    pos: Position


@dataclass(frozen=True)
class LiteralArg:
    """A literal input, optionally bound to a name (``0 as zero``) for constraints."""

    literal: Literal
    bind: str | None
    pos: Position


@dataclass(frozen=True)
class ParamArg:
    """``k as c`` in a parameterized rule: the literal parameter ``k`` (a number each
    instance gives), bound to ``c``.  Instantiation turns it into a ``LiteralArg``."""

    param: str
    bind: str
    pos: Position


PatternArg = VarArg | AnyArg | RestArg | LiteralArg


@dataclass(frozen=True)
class PatternInput:
    """An instance's argument only a pattern input slot takes: ``_``, ``b?``, ``0.5 as
    half``, ``~1.41421356`` (anywhere else the parser refuses it).  Written inside the
    expressions an instance gives (``Mul(x, 0.5 as half)``), it is one of their arguments."""

    arg: VarArg | AnyArg | LiteralArg
    pos: Position


@dataclass(frozen=True)
class PatternAlternatives:
    """``Relu(c) | Sigmoid(c)``: an instance's argument for a parameter standing for a whole
    pattern node, which then has these alternatives."""

    options: tuple[Expr, ...]
    pos: Position


@dataclass(frozen=True)
class NodeParam:
    """``y = P`` in a parameterized rule: the parameter ``P`` stands for a whole pattern node,
    each instance gives an op call (``Unsqueeze(x) {axes}``)."""

    param: str
    pos: Position


@dataclass(frozen=True)
class AttrPattern:
    """``{name}`` captures attribute ``name``; ``{name: expr}`` unifies it with ``expr``;
    ``{name: ~0.01}`` requires a float within the literals' tolerance (``value`` is an
    approximate ``Literal``, as a pattern input's ``~0.01`` is); ``{name: _}`` accepts any
    value (``value`` is None): the author says it does not matter.

    Unification: if ``expr`` is a name not yet bound it captures the attribute under that
    name; a bound name or any other expression must equal the attribute's value.  Absent
    attributes take the op schema's default.  An attribute a pattern does not mention must
    be at its default for a node the rewrite deletes (an engine guarantee).
    """

    name: str
    value: Expr | Literal | None
    pos: Position

    @property
    def any_value(self) -> bool:
        return self.value is None

    @property
    def expr(self) -> Expr | None:
        """The expression the attribute unifies with (None for ``_`` and ``~``)."""
        return None if self.value is None or isinstance(self.value, Literal) else self.value


@dataclass(frozen=True)
class OpPattern:
    """One alternative of a pattern node: ``Domain.Op(args) {attrs}``."""

    domain: str
    op: str
    args: tuple[PatternArg, ...]
    attrs: tuple[AttrPattern, ...]
    pos: Position


@dataclass(frozen=True)
class Out:
    """An output position on an equation's left: a name, ``name?`` or ``_``."""

    name: str | None
    optional: bool
    pos: Position


@dataclass(frozen=True)
class Equation:
    """``outs = Alt1(...) | Alt2(...)``: one pattern node and its alternatives (a family's
    template may have a ``NodeParam`` among them; its instances never do)."""

    outs: tuple[Out, ...]
    alternatives: tuple[OpPattern, ...]
    pos: Position
    keep: bool = False  # context: matched, never deleted by the rewrite

    @property
    def out_names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.outs if o.name is not None)


@dataclass(frozen=True)
class Where:
    expr: Expr
    pos: Position


@dataclass(frozen=True)
class Let:
    name: str
    expr: Expr
    pos: Position


@dataclass(frozen=True)
class Example:
    """A generator hint: ``x: float[N, 3]`` (shape), ``s = [0]`` (value) or ``opset 9``."""

    name: str | None  # the tensor variable (None for opset)
    dtype: str | None = None
    dims: tuple[int | str, ...] | None = None
    value: Expr | None = None
    opset: int | None = None
    pos: Position = Position(0, 0)


@dataclass(frozen=True)
class ExampleSet:
    """One ``example`` clause: hints that belong together (the generator draws one set)."""

    items: tuple[Example, ...]
    pos: Position
    instances: tuple[str, ...] = ()  # `example for A, B: ...` in a family: only for these

    @property
    def opset(self) -> int | None:
        return next((i.opset for i in self.items if i.opset is not None), None)


# ------------------------------------------------------------------------------- the rule


@dataclass(frozen=True)
class ReplacementEquation:
    """``outs = expr`` after ``=>``: a node (op call), an alias (a name) or a computed tensor."""

    outs: tuple[Out, ...]
    value: Expr
    pos: Position


# ------------------------------------------------------------------------------ reuse
# Named constraints, pattern fragments and rule families are expanded by the parser
# (dsl/expand.py): the rest of the engine only ever sees plain rules.


@dataclass(frozen=True)
class Constraint:
    """``constraint name(a, b) = expr``: an expression a rule calls like a function; the
    call is replaced by the body with the parameters bound to the arguments."""

    name: str
    params: tuple[str, ...]
    expr: Expr
    pos: Position


@dataclass(frozen=True)
class Use:
    """``use Frag(x, y)`` in a rule's body: the fragment's equations, wheres and lets, its
    parameters renamed to these names."""

    name: str
    args: tuple[str, ...]
    pos: Position


@dataclass(frozen=True)
class Fragment:
    """``fragment name(params) { equations, wheres, lets }``: part of a pattern rules use."""

    name: str
    params: tuple[str, ...]
    body: tuple[Equation | Where | Let | Use, ...]
    pos: Position


@dataclass(frozen=True)
class Instance:
    """``Name(args)`` after a parameterized rule's ``for``: one rule of the family."""

    name: str
    args: tuple[Expr, ...]  # Name (an op or a value name), Num, Str, Const or ListExpr
    pos: Position


@dataclass(frozen=True)
class Rule:
    name: str
    root: str
    equations: tuple[Equation, ...]
    wheres: tuple[Where, ...]
    lets: tuple[Let, ...]
    replacement: tuple[ReplacementEquation, ...]
    tolerance: float | None
    pos: Position
    file: str
    providers: tuple[str, ...] = ()  # execution providers it may run on (empty: the pack's)
    examples: tuple[ExampleSet, ...] = ()  # generator hints for `rewriter verify`
    # integer outputs may differ by this much in `verify` (a quantized kernel rounds its
    # exact integer sum once where the float graph rounds every product: one step either way)
    integer_tolerance: int = 0
    # the rewrite trades nodes for speed (it makes the graph larger): it runs only in a run
    # whose layout level may grow the graph (RunOptions.layout_may_grow); see pipeline.py
    grows: bool = False
    family: str = ""  # "Template(args)" when the rule is an instance of a parameterized rule
    doc: str = ""  # the comment block above it in its file (dsl/docs.py); a family's instances share it

    @property
    def benefit(self) -> int:
        """How many ops the pattern matches: bigger patterns are tried first (as in PDLL)."""
        return len(self.equations)

    def producer_of(self, name: str) -> Equation | None:
        for eq in self.equations:
            if name in eq.out_names:
                return eq
        return None


@dataclass(frozen=True)
class Pack:
    """A rules file: a level, the providers its rules run on, custom domains, rules."""

    name: str
    level: int
    providers: tuple[str, ...]
    domains: tuple[str, ...]
    builtins: tuple[str, ...]
    rules: tuple[Rule, ...]
    file: str
    pos: Position = field(default=Position(1, 1))
