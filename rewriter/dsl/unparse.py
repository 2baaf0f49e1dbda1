"""Rule expressions back as text, for messages: the ``where`` that did not hold is quoted as
the author wrote it (up to spacing and parentheses), not as a line number."""

from __future__ import annotations

from . import ast as A

# binding strength, loosest first (as in grammar/rules.lark)
_PRECEDENCE = {
    "or": 1,
    "and": 2,
    "not": 3,
    "compare": 4,
    "??": 5,
    "+": 6,
    "-": 6,
    "*": 7,
    "/": 7,
    "//": 7,
    "%": 7,
    "@": 7,
    "neg": 8,
    "**": 9,
}


def show(expr: A.Expr) -> str:
    """``expr`` as rule text."""
    return _show(expr, 0)


def _wrap(text: str, own: int, outer: int) -> str:
    return f"({text})" if own < outer else text


def _show(e: A.Expr, outer: int) -> str:
    if isinstance(e, A.Num):
        return repr(e.value) if isinstance(e.value, float) else str(e.value)
    if isinstance(e, A.Str):
        return f'"{e.value}"'
    if isinstance(e, A.Const):
        if e.value is None or isinstance(e.value, bool):
            return {None: "none", True: "true", False: "false"}[e.value]
        return str(e.value)
    if isinstance(e, A.Name):
        return e.id
    if isinstance(e, A.AttrRef):
        return f"{e.var}.{e.attr}"
    if isinstance(e, A.ListExpr):
        return "[" + ", ".join(_show(i, 0) for i in e.items) + "]"
    if isinstance(e, A.Unary):
        if e.op == "not":
            return _wrap(f"not {_show(e.operand, 3)}", 3, outer)
        return _wrap(f"-{_show(e.operand, 8)}", 8, outer)
    if isinstance(e, A.Binary):
        own = _PRECEDENCE.get(e.op, 6)
        right = own if e.op == "**" else own + 1  # ** groups to the right, the rest to the left
        return _wrap(f"{_show(e.left, own + (e.op == '**'))} {e.op} {_show(e.right, right)}", own, outer)
    if isinstance(e, A.Compare):
        parts = [_show(e.operands[0], 5)]
        for op, operand in zip(e.ops, e.operands[1:]):
            parts += [op, _show(operand, 5)]
        return _wrap(" ".join(parts), 4, outer)
    if isinstance(e, A.BoolOp):
        own = _PRECEDENCE[e.op]
        return _wrap(f" {e.op} ".join(_show(v, own + 1) for v in e.values), own, outer)
    if isinstance(e, A.Index):
        return f"{_show(e.obj, 10)}[{_show(e.index, 0)}]"
    if isinstance(e, A.Slice):
        return f"{'' if e.lower is None else _show(e.lower, 0)}:{'' if e.upper is None else _show(e.upper, 0)}"
    if isinstance(e, A.PatternAlternatives):  # an instance's alternatives for a node
        return " | ".join(_show(o, 0) for o in e.options)
    if isinstance(e, A.PatternInput):  # an instance's pattern input
        arg = e.arg
        if isinstance(arg, A.VarArg):
            return f"{arg.name}?"
        if isinstance(arg, A.LiteralArg):
            return _show_literal_arg(arg)
        return "_"
    if isinstance(e, A.Call):
        text = f"{e.func}(" + ", ".join(_show(a, 0) for a in e.args) + ")"
        if e.attrs:
            items = [
                f"...{a.var}"
                if isinstance(a, A.AttrSpread)
                else a.name
                if isinstance(a.value, A.Name) and a.value.id == a.name
                else f"{a.name}: {_show(a.value, 0)}"
                for a in e.attrs
            ]
            text += " {" + ", ".join(items) + "}"
        return text
    return "?"


def show_equation(eq: A.Equation) -> str:
    """A pattern equation as rule text (``d = Div(x, ~1.41421356 as k) | Mul(...)``); a
    nested call the parser made its own equation keeps its temporary name (``$1``)."""
    outs = ", ".join("_" if o.name is None else o.name + ("?" if o.optional else "") for o in eq.outs)
    text = f"{outs} = " + " | ".join(_show_pattern(alt) for alt in eq.alternatives)
    return f"keep {text}" if eq.keep else text


def _show_pattern(alt: A.OpPattern) -> str:
    op = f"{alt.domain}.{alt.op}" if alt.domain else alt.op
    text = f"{op}(" + ", ".join(_show_arg(a) for a in alt.args) + ")"
    if alt.attrs:
        items = [
            f"{a.name}: _"
            if a.value is None
            else f"{a.name}: {show_literal(a.value)}"
            if isinstance(a.value, A.Literal)
            else a.name
            if isinstance(a.value, A.Name) and a.value.id == a.name
            else f"{a.name}: {_show(a.value, 0)}"
            for a in alt.attrs
        ]
        text += " {" + ", ".join(items) + "}"
    return text


def _show_arg(arg: A.PatternArg) -> str:
    if isinstance(arg, A.VarArg):
        return arg.name + ("?" if arg.optional else "")
    if isinstance(arg, A.RestArg):
        return f"*{arg.name}"
    if isinstance(arg, A.LiteralArg):
        return _show_literal_arg(arg)
    return "_"


def _show_literal_arg(arg: A.LiteralArg) -> str:
    """``~1.41421356 as k``."""
    text = show_literal(arg.literal)
    return f"{text} as {arg.bind}" if arg.bind else text


def show_literal(literal: A.Literal) -> str:
    """``0.5``, ``~1.41421356``, ``true``."""
    if isinstance(literal.value, bool):
        return "true" if literal.value else "false"
    return ("~" if literal.approx else "") + _show(A.Num(literal.value, literal.pos), 0)
