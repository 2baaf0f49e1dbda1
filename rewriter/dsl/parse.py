"""Text -> rule objects.  Lark parses (LALR, with positions); a Transformer builds the AST.

Nested op calls in a pattern (``Mul(x, Add(e, 1.0))``) are flattened here into equations
over fresh names (``$1``), so the rest of the engine only ever sees flat equations.
"""

from __future__ import annotations

import dataclasses
import itertools
from functools import lru_cache
from pathlib import Path

from lark import Lark, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from ..errors import Position, RewriterError, RuleError
from ..onnx_facts.providers import provider_name
from ..onnx_facts.schemas import latest_opset
from ..resources import grammar_text
from ..text_files import TextFileError, read_text
from . import ast as A
from .docs import Comments
from .expand import (
    MAX_PACK_TERMS,
    Constraints,
    Fragments,
    approx_literal,
    check_family_params,
    expanded_size,
    fresh_counter,
    instantiate,
    transform,
)
from .unparse import show

_TOKEN_NAMES = {
    "NAME": "a name",
    "DOTTED": "a dotted name",
    "INT": "an integer",
    "FLOAT": "a number",
    "STRING": "a string",
    "LPAR": "'('",
    "RPAR": "')'",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
    "LSQB": "'['",
    "RSQB": "']'",
    "COMMA": "','",
    "EQUAL": "'='",
    "COLON": "':'",
    "QMARK": "'?'",
    "VBAR": "'|'",
    "STAR": "'*'",
    "AT": "'@'",
    "TILDE": "'~'",
    "MINUS": "'-'",
    "PLUS": "'+'",
    "SLASH": "'/'",
    "MORETHAN": "'>'",
    "LESSTHAN": "'<'",
    "$END": "end of file",
}


@lru_cache(maxsize=1)
def _parser() -> Lark:
    # cache=True keeps the LALR tables in the temp dir, keyed by a hash of the grammar
    return Lark(grammar_text(), parser="lalr", propagate_positions=True, maybe_placeholders=True, cache=True)


class _ToAst(Transformer):
    """Builds AST objects bottom-up.  Tokens keep their line/column for positions."""

    def __init__(self, file: str, text: str = "") -> None:
        super().__init__()
        self.file = file
        self.comments = Comments(text)  # each rule's documentation (dsl/docs.py)
        self._fresh = itertools.count(1)
        self._pending: list[A.Equation] = []  # equations produced by nested calls
        # reuse, defined before use (the transformer visits the file top-down)
        self.constraints = Constraints()
        self.fragments = Fragments(fresh_counter())
        self.pack_terms = 0  # terms of the rules expanded so far (expand.MAX_PACK_TERMS)

    def _pos(self, meta_or_token) -> Position:
        return Position(getattr(meta_or_token, "line", 0) or 0, getattr(meta_or_token, "column", 0) or 0, self.file)

    # ---- numbers and literals
    def _int(self, tok) -> int:
        """An integer token's value (a literal of hundreds of digits is an error: Python
        refuses to convert more than 4,300 anyway)."""
        if len(tok) > MAX_INT_DIGITS:
            raise RuleError(
                f"integer literal of {len(tok)} digits (at most {MAX_INT_DIGITS})", self.file, tok.line, tok.column
            )
        return int(tok)

    def int_(self, children):
        (tok,) = children
        return A.Num(self._int(tok), self._pos(tok))

    def float_(self, children):
        (tok,) = children
        return A.Num(float(tok), self._pos(tok))

    @v_args(meta=True)
    def inf(self, meta, children):
        return A.Num(float("inf"), self._pos(meta))

    @v_args(meta=True)
    def negative_number(self, meta, children):
        return A.Num(-children[0].value, self._pos(meta))

    @v_args(meta=True)
    def lit_exact(self, meta, children):
        return A.Literal(children[0].value, False, self._pos(meta))

    @v_args(meta=True)
    def lit_approx(self, meta, children):
        return A.Literal(children[0].value, True, self._pos(meta))

    @v_args(meta=True)
    def lit_true(self, meta, children):
        return A.Literal(True, False, self._pos(meta))

    @v_args(meta=True)
    def lit_false(self, meta, children):
        return A.Literal(False, False, self._pos(meta))

    # ---- expressions
    def string(self, children):
        (tok,) = children
        return A.Str(str(tok)[1:-1], self._pos(tok))

    def name(self, children):
        (tok,) = children
        return A.Name(str(tok), self._pos(tok))

    def dotted(self, children):
        (tok,) = children
        var, _, attr = str(tok).partition(".")
        if "." in attr:  # an op name (an instance's argument); `_plain` refuses it anywhere else
            return A.Name(str(tok), self._pos(tok))
        return A.AttrRef(var, attr, self._pos(tok))

    def _plain(self, obj):
        """``obj`` (a rule's expression) with no pattern input and no dotted op name in it:
        only a family instance's arguments may hold those."""

        def visit(node):
            if approx_literal(node) is not None:
                raise RuleError(
                    f"'{show(node)}' matches within a tolerance: only a pattern's input or attribute may be one "
                    f"(a replacement or an expression needs a value)",
                    self.file,
                    node.pos.line,
                    node.pos.column,
                )
            if isinstance(node, (A.PatternInput, A.PatternAlternatives)):
                raise RuleError(
                    f"'{show(node)}' is a pattern input: only a family instance's argument may be one",
                    self.file,
                    node.pos.line,
                    node.pos.column,
                )
            if isinstance(node, A.Name) and "." in node.id:
                raise RuleError(
                    f"'{node.id}' is not an attribute reference (use var.attribute)",
                    self.file,
                    node.pos.line,
                    node.pos.column,
                )
            return None

        transform(obj, visit)
        return obj

    @v_args(meta=True)
    def none(self, meta, children):
        return A.Const(None, self._pos(meta))

    @v_args(meta=True)
    def true(self, meta, children):
        return A.Const(True, self._pos(meta))

    @v_args(meta=True)
    def false(self, meta, children):
        return A.Const(False, self._pos(meta))

    @v_args(meta=True)
    def list_(self, meta, children):
        return A.ListExpr(tuple(c for c in children if c is not None), self._pos(meta))

    @v_args(meta=True)
    def neg(self, meta, children):
        (operand,) = children
        if isinstance(operand, A.Num):
            return A.Num(-operand.value, self._pos(meta))
        return A.Unary("-", operand, self._pos(meta))

    @v_args(meta=True)
    def not_(self, meta, children):
        return A.Unary("not", children[0], self._pos(meta))

    @v_args(meta=True)
    def or_expr(self, meta, children):
        return A.BoolOp("or", tuple(children), self._pos(meta))

    @v_args(meta=True)
    def and_expr(self, meta, children):
        return A.BoolOp("and", tuple(children), self._pos(meta))

    def comp_op(self, children):
        return " ".join(str(c) for c in children)

    def add_op(self, children):
        return str(children[0])

    def mul_op(self, children):
        return str(children[0])

    @v_args(meta=True)
    def comparison(self, meta, children):
        return A.Compare(tuple(children[1::2]), tuple(children[0::2]), self._pos(meta))

    def _fold_left(self, meta, children):
        result = children[0]
        for op, right in zip(children[1::2], children[2::2]):
            result = A.Binary(op, result, right, self._pos(meta))
        return result

    @v_args(meta=True)
    def sum(self, meta, children):
        return self._fold_left(meta, children)

    @v_args(meta=True)
    def product(self, meta, children):
        return self._fold_left(meta, children)

    @v_args(meta=True)
    def coalesce(self, meta, children):
        result = children[0]
        for right in children[1:]:
            result = A.Binary("??", result, right, self._pos(meta))
        return result

    @v_args(meta=True)
    def power(self, meta, children):
        return A.Binary("**", children[0], children[1], self._pos(meta))

    @v_args(meta=True)
    def index(self, meta, children):
        return A.Index(children[0], children[1], self._pos(meta))

    @v_args(meta=True)
    def slice(self, meta, children):
        return A.Slice(children[0], children[1], self._pos(meta))

    @v_args(meta=True)
    def call(self, meta, children):
        func, *rest = children
        attrs = None
        if rest and isinstance(rest[-1], tuple) and rest[-1][:1] == ("attrs",):
            attrs = rest.pop()[1]
        args = tuple(a for a in rest if a is not None)
        return A.Call(str(func), args, attrs, self._pos(meta))

    def rattrs(self, children):
        return ("attrs", tuple(c for c in children if c is not None))

    @v_args(meta=True)
    def rattr_spread(self, meta, children):
        return A.AttrSpread(str(children[0]), self._pos(meta))

    @v_args(meta=True)
    def rattr_set(self, meta, children):
        return A.AttrSet(str(children[0]), children[1], self._pos(meta))

    @v_args(meta=True)
    def rattr_any(self, meta, children):
        return A.AttrSet(str(children[0]), A.PatternInput(A.AnyArg(self._pos(meta)), self._pos(meta)), self._pos(meta))

    @v_args(meta=True)
    def rattr_approx(self, meta, children):
        literal = children[1]
        return A.AttrSet(
            str(children[0]), A.PatternInput(A.LiteralArg(literal, None, literal.pos), literal.pos), self._pos(meta)
        )

    # ---- pattern inputs an instance's argument may hold (`_plain` refuses them elsewhere)
    @v_args(meta=True)
    def pin_any(self, meta, children):
        return A.PatternInput(A.AnyArg(self._pos(meta)), self._pos(meta))

    @v_args(meta=True)
    def pin_optional(self, meta, children):
        return A.PatternInput(A.VarArg(str(children[0]), True, self._pos(meta)), self._pos(meta))

    @v_args(meta=True)
    def pin_literal_as(self, meta, children):
        return A.PatternInput(A.LiteralArg(children[0], str(children[1]), self._pos(meta)), self._pos(meta))

    @v_args(meta=True)
    def pin_alternatives(self, meta, children):
        return A.PatternAlternatives(tuple(children), self._pos(meta))

    @v_args(meta=True)
    def pin_approx(self, meta, children):
        pos = self._pos(meta)
        return A.PatternInput(A.LiteralArg(A.Literal(children[0].value, True, pos), None, pos), pos)

    @v_args(meta=True)
    def rattr_shorthand(self, meta, children):
        name = str(children[0])
        return A.AttrSet(name, A.Name(name, self._pos(meta)), self._pos(meta))

    # ---- pattern
    @v_args(meta=True)
    def arg_var(self, meta, children):
        return A.VarArg(str(children[0]), False, self._pos(meta))

    @v_args(meta=True)
    def arg_optional(self, meta, children):
        return A.VarArg(str(children[0]), True, self._pos(meta))

    @v_args(meta=True)
    def arg_any(self, meta, children):
        return A.AnyArg(self._pos(meta))

    @v_args(meta=True)
    def arg_rest(self, meta, children):
        return A.RestArg(str(children[0]), self._pos(meta))

    @v_args(meta=True)
    def arg_literal(self, meta, children):
        return A.LiteralArg(children[0], None, self._pos(meta))

    @v_args(meta=True)
    def arg_literal_as(self, meta, children):
        return A.LiteralArg(children[0], str(children[1]), self._pos(meta))

    @v_args(meta=True)
    def arg_param_as(self, meta, children):
        return A.ParamArg(str(children[0]), str(children[1]), self._pos(meta))

    @v_args(meta=True)
    def arg_nested(self, meta, children):
        (op_pattern,) = children
        temp = f"${next(self._fresh)}"
        self._pending.append(A.Equation((A.Out(temp, False, op_pattern.pos),), (op_pattern,), op_pattern.pos))
        return A.VarArg(temp, False, self._pos(meta))

    @v_args(meta=True)
    def pattr_capture(self, meta, children):
        name = str(children[0])
        return A.AttrPattern(name, A.Name(name, self._pos(meta)), self._pos(meta))

    @v_args(meta=True)
    def pattr_any(self, meta, children):
        return A.AttrPattern(str(children[0]), None, self._pos(meta))

    @v_args(meta=True)
    def approx(self, meta, children):
        return A.Literal(children[0].value, True, self._pos(meta))

    @v_args(meta=True)
    def pattr_approx(self, meta, children):
        return A.AttrPattern(str(children[0]), children[1], self._pos(meta))

    @v_args(meta=True)
    def pattr_unify(self, meta, children):
        return A.AttrPattern(str(children[0]), self._plain(children[1]), self._pos(meta))

    def pattrs(self, children):
        return tuple(c for c in children if c is not None)

    @v_args(meta=True)
    def pcall(self, meta, children):
        opname, *rest = children
        attrs: tuple = ()
        if rest and isinstance(rest[-1], tuple):
            attrs = rest.pop()
        domain, op = A.split_op_name(str(opname))
        return A.OpPattern(domain, op, tuple(a for a in rest if a is not None), attrs, self._pos(meta))

    def alternatives(self, children):
        return tuple(children)

    def node_param(self, children):
        (tok,) = children
        return A.NodeParam(str(tok), self._pos(tok))

    @v_args(meta=True)
    def out_name(self, meta, children):
        return A.Out(str(children[0]), False, self._pos(meta))

    @v_args(meta=True)
    def out_optional(self, meta, children):
        return A.Out(str(children[0]), True, self._pos(meta))

    @v_args(meta=True)
    def out_ignored(self, meta, children):
        return A.Out(None, False, self._pos(meta))

    def outs(self, children):
        return tuple(children)

    @v_args(meta=True)
    def equation(self, meta, children):
        keep, outs, alternatives = children
        nested, self._pending = self._pending, []
        if nested and len(alternatives) > 1:
            # a nested call would be an equation of its own that every alternative needs
            raise RuleError(
                "an alternative cannot nest op calls; name the inner node in an equation of its own",
                self.file,
                meta.line,
                meta.column,
            )
        if keep is not None:  # nested calls of a kept equation are context too
            nested = [dataclasses.replace(eq, keep=True) for eq in nested]
        return [*nested, A.Equation(outs, alternatives, self._pos(meta), keep=keep is not None)]

    @v_args(meta=True)
    def where(self, meta, children):
        return [A.Where(self._plain(children[0]), self._pos(meta))]

    @v_args(meta=True)
    def let(self, meta, children):
        return [A.Let(str(children[0]), self._plain(children[1]), self._pos(meta))]

    def dim_int(self, children):
        return self._int(children[0])

    def dim_name(self, children):
        return str(children[0])

    @v_args(meta=True)
    def example_shape(self, meta, children):
        name, dtype, *dims = children
        dims = tuple(d for d in dims if d is not None)
        known = [d for d in dims if isinstance(d, int)]
        elements = 1
        for d in known:
            elements *= d
        if len(dims) > MAX_EXAMPLE_RANK or any(d > MAX_EXAMPLE_DIM for d in known) or elements > MAX_EXAMPLE_ELEMENTS:
            raise RuleError(
                f"example shape {list(dims)} is too large for an instance (at most "
                f"{MAX_EXAMPLE_RANK} dims of at most {MAX_EXAMPLE_DIM}, "
                f"{MAX_EXAMPLE_ELEMENTS} elements)",
                self.file,
                meta.line,
                meta.column,
            )
        return A.Example(str(name), None if dtype is None else str(dtype), dims, pos=self._pos(meta))

    @v_args(meta=True)
    def example_value(self, meta, children):
        return A.Example(str(children[0]), value=self._plain(children[1]), pos=self._pos(meta))

    @v_args(meta=True)
    def example_opset(self, meta, children):
        opset = self._int(children[0])
        if not 1 <= opset <= latest_opset(""):
            raise RuleError(
                f"example opset {opset} is not one onnx knows (1 to {latest_opset('')})",
                self.file,
                meta.line,
                meta.column,
            )
        return A.Example(None, opset=opset, pos=self._pos(meta))

    def example_for(self, children):
        return ("for", self._names(children))

    @v_args(meta=True)
    def example(self, meta, children):
        only, *items = children
        return [A.ExampleSet(tuple(items), self._pos(meta), only[1] if only else ())]

    def body(self, children):
        return [item for group in children for item in group]

    fragment_body = body

    @v_args(meta=True)
    def use(self, meta, children):
        name, *args = children
        return [A.Use(str(name), tuple(str(a) for a in args if a is not None), self._pos(meta))]

    def _names(self, tokens) -> tuple[str, ...]:
        return tuple(str(t) for t in tokens if t is not None)

    @v_args(meta=True)
    def constraint_decl(self, meta, children):
        name, *params, expr = children
        constraint = A.Constraint(str(name), self._names(params), self._plain(expr), self._pos(name))
        self.constraints.define(constraint, builtin=())
        return ("constraint", str(name))

    @v_args(meta=True)
    def fragment_decl(self, meta, children):
        name, *params, body = children
        body = [self.constraints.inline(item) for item in body]
        self.fragments.define(A.Fragment(str(name), self._names(params), tuple(body), self._pos(name)))
        return ("fragment", str(name))

    def params(self, children):
        return ("params", self._names(children))

    @v_args(meta=True)
    def instance(self, meta, children):
        name, *args = children
        return A.Instance(str(name), tuple(self.constraints.inline(a) for a in args), self._pos(name))

    def instances(self, children):
        return ("instances", tuple(children))

    @v_args(meta=True)
    def requation(self, meta, children):
        return A.ReplacementEquation(children[0], self._plain(children[1]), self._pos(meta))

    def replacement(self, children):
        return tuple(children)

    def root(self, children):
        return ("root", str(children[0]), self._pos(children[0]))

    def tolerance(self, children):
        return ("tolerance", float(children[0].value))

    def integer_tolerance(self, children):
        return ("integer_tolerance", int(children[0].value))

    def grows(self, children):
        return ("grows", True)

    @v_args(meta=True)
    def rule(self, meta, children):
        name_tok, *options, body, replacement = children
        root = None
        tolerance = None
        integer_tolerance = 0
        grows = False
        providers: tuple[str, ...] = ()
        params: tuple[str, ...] | None = None
        instances: tuple[A.Instance, ...] = ()
        for option in options:
            if option is None:
                continue
            if option[0] == "root":
                root = option[1]
            elif option[0] == "tolerance":
                tolerance = option[1]
            elif option[0] == "integer_tolerance":
                integer_tolerance = option[1]
            elif option[0] == "grows":
                grows = True
            elif option[0] == "providers":
                providers = option[1]
            elif option[0] == "params":
                params = option[1]
            elif option[0] == "instances":
                instances = option[1]
        if (params is None) != (not instances):
            raise RuleError(
                f"rule {name_tok} has parameters but no `for` instances"
                if params is not None
                else f"rule {name_tok} has `for` instances but no parameters",
                self.file,
                name_tok.line,
                name_tok.column,
            )
        if params is not None:
            defined = self.fragments.defined
            used = [defined[u.name] for u in body if isinstance(u, A.Use) and u.name in defined]
            check_family_params(params, (body, replacement, root), used, self.constraints.defined, self._pos(name_tok))
        body = self.fragments.expand(body)
        body = [self.constraints.inline(item) for item in body]
        replacement = self.constraints.inline(replacement)
        rule_pos = self._pos(name_tok)
        terms = expanded_size((body, replacement), f"rule {name_tok}", rule_pos) * max(1, len(instances))
        self.pack_terms += terms
        if self.pack_terms > MAX_PACK_TERMS:
            raise RuleError(
                f"the pack expands to more than {MAX_PACK_TERMS} terms by rule {name_tok}"
                + (f" ({len(instances)} instances)" if instances else ""),
                self.file,
                name_tok.line,
                name_tok.column,
            )
        equations = tuple(i for i in body if isinstance(i, A.Equation))
        if root is None:
            if not equations or not equations[-1].out_names:
                raise RuleError(f"rule {name_tok} needs a root (root NAME)", self.file, name_tok.line, name_tok.column)
            root = equations[-1].out_names[0]
        rule = A.Rule(
            name=str(name_tok),
            root=root,
            equations=equations,
            wheres=tuple(i for i in body if isinstance(i, A.Where)),
            lets=tuple(i for i in body if isinstance(i, A.Let)),
            examples=tuple(i for i in body if isinstance(i, A.ExampleSet)),
            replacement=replacement,
            tolerance=tolerance,
            integer_tolerance=integer_tolerance,
            grows=grows,
            pos=self._pos(name_tok),
            file=self.file,
            providers=providers,
            doc=self.comments.above(meta.line, meta.column),
        )
        if params is None:
            self._no_template_parts(rule)
            return rule
        if len(set(params)) != len(params):
            raise RuleError(f"rule {name_tok} names a parameter twice", self.file, name_tok.line, name_tok.column)
        names = [i.name for i in instances]
        return [instantiate(rule, params, instance, self._fresh, names) for instance in instances]

    def _no_template_parts(self, rule: A.Rule) -> None:
        """A rule without parameters has no literal parameter, node parameter or hints for
        instances."""

        def refuse(message: str, pos: Position):
            raise RuleError(message, self.file, pos.line, pos.column)

        for eq in rule.equations:
            for alt in eq.alternatives:
                if isinstance(alt, A.NodeParam):
                    refuse(
                        f"'{alt.param}' is no op call (only a family's parameter may stand for a pattern node)", alt.pos
                    )
                for arg in alt.args:
                    if isinstance(arg, A.ParamArg):
                        refuse(
                            f"'{arg.param} as {arg.bind}': '{arg.param}' is not a literal "
                            f"(only a rule's parameter may be)",
                            arg.pos,
                        )
        for group in rule.examples:
            if group.instances:
                refuse("`example for` names instances: only a rule with parameters has them", group.pos)

    # ---- pack
    @v_args(meta=True)
    def providers(self, meta, children):
        try:
            return ("providers", tuple(provider_name(str(c)) for c in children))
        except RewriterError as err:
            raise RuleError(str(err), self.file, meta.line, meta.column) from None

    def header(self, children):
        name, level, providers = children
        return ("header", str(name), self._int(level), providers[1] if providers else (), self._pos(name))

    def domain_decl(self, children):
        return ("domain", str(children[0]))

    def builtin_decl(self, children):
        return ("builtin", str(children[0]), self._pos(children[0]))

    def start(self, children):
        header, *items = children
        _, name, level, providers, pos = header
        return A.Pack(
            name=name,
            level=level,
            providers=providers,
            domains=tuple(i[1] for i in items if isinstance(i, tuple) and i[0] == "domain"),
            builtins=tuple(i[1] for i in items if isinstance(i, tuple) and i[0] == "builtin"),
            rules=tuple(r for i in items for r in (i if isinstance(i, list) else [i]) if isinstance(r, A.Rule)),
            file=self.file,
            pos=pos,
        )


SNIPPET_WIDTH = 100  # characters of the source line shown around an error's column


def snippet(text: str, line: int, column: int) -> str:
    """The line of ``text`` an error is on, with a caret under its column (a long line is
    shown around the column only)."""
    lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return ""
    source, caret = lines[line - 1], max(column, 1) - 1
    if len(source) > SNIPPET_WIDTH:
        start = max(0, min(caret - SNIPPET_WIDTH // 2, len(source) - SNIPPET_WIDTH))
        source, caret = source[start : start + SNIPPET_WIDTH], caret - start
    return f"    {source}\n    {' ' * caret}^"


def _describe_expected(expected: set[str]) -> str:
    names = sorted(
        {_TOKEN_NAMES.get(t, f"'{t.lower()}'" if t.isupper() else repr(t)) for t in expected if not t.startswith("__")}
    )
    if not names:
        return ""
    if len(names) > 8:
        names = names[:8] + ["..."]
    return "; expected " + ", ".join(names)


def _syntax_error(err: UnexpectedInput, text: str, file: str) -> RuleError:
    line, column = err.line, err.column
    if isinstance(err, UnexpectedCharacters):
        where = err.pos_in_stream
        message = "unexpected character" + (f" {text[where]!r}" if where is not None else "")
    elif isinstance(err, UnexpectedEOF):
        message = "unexpected end of file" + _describe_expected(set(err.expected))
        lines = text.splitlines() or [""]
        line, column = len(lines), len(lines[-1]) + 1
    elif isinstance(err, UnexpectedToken):
        token = err.token
        shown = "end of file" if token.type == "$END" else repr(str(token))
        message = f"unexpected {shown}" + _describe_expected(set(err.expected))
        if token.type == "$END":
            lines = text.splitlines() or [""]
            line, column = len(lines), len(lines[-1]) + 1
    else:  # pragma: no cover - Lark has no other kinds today
        message = str(err).splitlines()[0]
    return RuleError(message, file, line, column, snippet(text, line, column))


MAX_NESTING = 100  # levels of nested expressions and patterns (the bundled rules use ~10)
# `example` shapes make verify's instances: small tensors, like the bundled rules' hints
MAX_EXAMPLE_RANK, MAX_EXAMPLE_DIM, MAX_EXAMPLE_ELEMENTS = 8, 4096, 1 << 20
MAX_INT_DIGITS = 308  # an integer literal past about 1024 bits is no dim or attribute
# rules that become a left-leaning chain of binary nodes, one level per operand
_CHAINS = {"sum": 2, "product": 2, "coalesce": 1}


def _check_nesting(tree: Tree, file: str) -> None:
    """Refuse nesting deeper than ``MAX_NESTING`` (5,000 ``[`` or 10,000 ``-`` ran
    Python's stack out while the tree was turned into rules), looking at the parse tree
    without recursion.  A chain ``a + b + ...`` counts as deep as its operands are many:
    it becomes nested binary nodes."""
    stack: list[tuple[Tree, int, Tree]] = [(tree, 1, tree)]
    while stack:
        node, depth, parent = stack.pop()
        if depth > MAX_NESTING:
            meta = node.meta if not node.meta.empty else parent.meta
            raise RuleError(
                f"nested more than {MAX_NESTING} levels deep",
                file,
                getattr(meta, "line", 0),
                getattr(meta, "column", 0),
            )
        children = [c for c in node.children if isinstance(c, Tree)]
        step = _CHAINS.get(node.data)
        count = len(children)
        for index, child in enumerate(children):
            extra = max(count - index - 1, 1) if step else 1
            stack.append((child, depth + extra, node))


def parse_pack(text: str, file: str = "<rules>") -> A.Pack:
    """Parse a pack's text into a ``Pack``; raises ``RuleError`` with file:line:col."""
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as err:
        raise _syntax_error(err, text, file) from None
    try:
        _check_nesting(tree, file)
    except RuleError as err:
        err.snippet = snippet(text, err.line, err.column)
        raise
    try:
        pack = _ToAst(file, text).transform(tree)
    except VisitError as err:
        inner = err.orig_exc
        if isinstance(inner, RuleError):
            inner.snippet = inner.snippet or snippet(text, inner.line, inner.column)
            raise inner from None
        if isinstance(inner, (RecursionError, MemoryError)):  # past what the bounds foresaw
            meta = getattr(err.obj, "meta", None)
            line, column = getattr(meta, "line", 1), getattr(meta, "column", 1)
            raise RuleError(
                "too deeply nested or too large to expand", file, line, column, snippet(text, line, column)
            ) from None
        raise
    return pack


def parse_pack_file(path: str | Path) -> A.Pack:
    """Read and parse a pack file; unreadable files are ``RuleError`` too."""
    path = Path(path)
    try:
        text = read_text(path)
    except TextFileError as err:
        raise RuleError(f"cannot read rules file: {err}", str(path), 0, 0) from None
    return parse_pack(text, str(path))
