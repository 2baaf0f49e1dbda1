"""Reuse in the rule language, expanded away by the parser (as PDLL expands its
constraints and patterns): the checker, the matcher, the rewriter and the verifier only
ever see plain rules.

* ``constraint name(a, b) = expr`` — a call ``name(x, y)`` anywhere in a rule becomes the
  body with ``a``, ``b`` bound to the argument expressions.  The body reads only its
  parameters (no hidden capture of a rule's names).
* ``fragment name(x, y) { equations, wheres, lets }`` — ``use name(p, q)`` in a rule's body
  puts them there, ``x``, ``y`` renamed ``p``, ``q``.  Other names the fragment defines keep
  their names (a rule can read them: ``root m``); one a rule defines too is an error.
* ``rule Template(Op, k) for A(Add, 0), B(Sub, 0) { ... }`` — one rule per instance, named
  by the instance, each parameter replaced by the instance's argument where the template
  writes it (``_Instance``): an op name where it calls an op; a name where it names a
  value, an output, a ``let`` or an attribute (``{trans}``); an expression where it reads a
  value; a pattern input where the pattern takes an input (a number is a literal the input
  must equal; ``Mul(x, 0.5 as half)`` a nested pattern, flattened as the parser flattens
  one); an op call (or alternatives) where a whole node is the parameter (``y = P``).
  ``_`` leaves out an output, a ``let`` or a replacement attribute; ``none`` a replacement
  input and the ``example`` items naming the parameter; ``example for A: ...`` hints only
  instance ``A``; a ``where`` conjunct given ``true`` drops out.  Misuse is an error at the
  parameter's place in the template, naming the instance.

Definitions come before their uses, so the file reads top-down.  Expansion is bounded,
so that a few hundred bytes cannot ask for an exponential amount of work: a definition's
expanded body has at most ``MAX_EXPANDED_TERMS`` terms and ``MAX_EXPANDED_DEPTH`` levels
(constraints calling constraints twice double at each level), and a pack's rules after
expansion at most ``MAX_PACK_TERMS`` terms in all (instances times template size).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Iterator

from ..errors import Position, RuleError
from ..expr.dtypes import DTYPES
from ..expr.functions import CONSTANTS, FUNCTIONS, is_builtin
from . import ast as A
from .unparse import show

MAX_EXPANDED_TERMS = 5_000  # terms of one expanded constraint, fragment or rule (the largest bundled rule: 375)
MAX_EXPANDED_DEPTH = 100  # levels of an expanded expression (as the parser's MAX_NESTING)
MAX_PACK_TERMS = 100_000  # terms of a whole pack after expansion (the bundled extended pack: about 4,000)

# fields of rule objects that hold a name of the rule's (renamed by a substitution)
_NAME_FIELDS: dict[type, tuple[str, ...]] = {
    A.Name: ("id",),
    A.AttrRef: ("var",),
    A.AttrSpread: ("var",),
    A.VarArg: ("name",),
    A.RestArg: ("name",),
    A.LiteralArg: ("bind",),
    A.ParamArg: ("bind",),
    A.NodeParam: ("param",),
    A.Out: ("name",),
    A.Let: ("name",),
    A.Example: ("name",),
    A.Use: (),
}


def _error(message: str, pos: Position) -> RuleError:
    return RuleError(message, pos.file, pos.line, pos.column)


# what rule objects hold besides rule objects and tuples: walks skip them (no visitor of
# ``transform`` replaces a bare string or number, and they are most of what a walk meets);
# read-only walks skip positions too (``transform``'s visitors may replace those)
_PLAIN = frozenset({str, int, float, bool, type(None)})
_UNREAD = _PLAIN | {Position}


def expanded_size(obj, what: str, pos: Position, limit: int = MAX_EXPANDED_TERMS) -> int:
    """How many terms (rule objects) ``obj`` holds; an error past ``limit`` terms or
    ``MAX_EXPANDED_DEPTH`` levels of nesting, found without recursion and without walking
    further than the limit."""
    count = 0
    stack: list[tuple[object, int]] = [(obj, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (tuple, list)):
            stack.extend((x, depth) for x in item)
            continue
        names = _field_names(type(item))
        if not names:
            continue
        count += 1
        if count > limit:
            raise _error(f"{what} expands to more than {limit} terms", pos)
        if depth > MAX_EXPANDED_DEPTH:
            raise _error(f"{what} expands to more than {MAX_EXPANDED_DEPTH} levels of nesting", pos)
        for name in names:
            value = getattr(item, name)
            if type(value) not in _UNREAD:
                stack.append((value, depth + 1))
    return count


def names_in(obj) -> list[str]:
    """Every name a rule text holds, once per place: values, outputs, ops, functions,
    attributes, parameters (not string literals, not file names)."""
    found: list[str] = []
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, (tuple, list)):
            stack.extend(item)
        elif not isinstance(item, A.Str):
            stack.extend(getattr(item, name) for name in _field_names(type(item)) if name not in ("file", "domain"))
    return found


RESERVED = frozenset({"true", "false", "none", "_"})  # words of the language, never a parameter


def check_family_params(
    params: tuple[str, ...],
    template: object,
    used_fragments: Iterable[A.Fragment],
    constraints: Iterable[str],
    pos: Position,
) -> None:
    """A family's parameters are substituted wherever their names appear in the expanded
    template; refuse what would make that mean something else than the text reads: a
    parameter the template never writes (a typo: the instance's argument would be dropped),
    one named like a constant, dtype, function, constraint or language word (it would
    replace that too), one that is a name inside a fragment the template uses (it would
    rename the fragment's own value or op)."""
    own = set(names_in(template))
    builtin = {name for name in FUNCTIONS if is_builtin(name)}  # (a registered predicate's name is free)
    taken = set(CONSTANTS) | set(DTYPES) | builtin | RESERVED | set(constraints)
    inside = [(f.name, set(names_in(f.body)) - set(f.params)) for f in used_fragments]
    for param in params:
        if param in taken:
            raise _error(f"parameter '{param}' is named like a constant, type, function or word of the language", pos)
        if param not in own:
            raise _error(
                f"parameter '{param}' is never used in the rule (its instances' arguments would be dropped)", pos
            )
        for fragment_name, names in inside:
            if param in names:
                raise _error(
                    f"parameter '{param}' is also a name inside fragment '{fragment_name}' (rename one: "
                    f"the instance's argument would replace the fragment's own '{param}')",
                    pos,
                )


def transform(obj, visit: Callable[[object], object | None]):
    """``obj`` rebuilt bottom-up where ``visit`` returns a replacement (None: keep, and
    look inside).  Rule objects are frozen dataclasses and tuples of them; ``visit`` sees
    those, not the plain values (``_PLAIN``) in their fields."""
    if type(obj) in _PLAIN:
        return obj
    replaced = visit(obj)
    if replaced is not None:
        return replaced
    return transform_inside(obj, visit)


def transform_inside(obj, visit: Callable[[object], object | None]):
    """``transform`` of ``obj``'s parts (not of ``obj`` itself)."""
    if isinstance(obj, tuple):
        changed = False
        items = []
        for item in obj:
            new = item if type(item) in _PLAIN else transform(item, visit)
            changed = changed or new is not item
            items.append(new)
        return tuple(items) if changed else obj
    names = _field_names(type(obj))
    if names:
        changes = {}
        for name in names:
            value = getattr(obj, name)
            if type(value) in _PLAIN:
                continue
            new = transform(value, visit)
            if new is not value:
                changes[name] = new
        return dataclasses.replace(obj, **changes) if changes else obj
    return obj


_FIELDS: dict[type, tuple[str, ...]] = {}


def _field_names(kind: type) -> tuple[str, ...]:
    """The fields of a rule object's class (none for anything else), looked up once."""
    names = _FIELDS.get(kind)
    if names is None:
        rule_object = dataclasses.is_dataclass(kind) and kind is not Position
        names = _FIELDS[kind] = tuple(f.name for f in dataclasses.fields(kind)) if rule_object else ()
    return names


def calls_any(obj, functions: dict) -> bool:
    """Whether ``obj`` holds a call of one of ``functions`` (read only: nothing rebuilt)."""
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, tuple):
            stack.extend(item)
        elif isinstance(item, A.Call) and item.func in functions:
            return True
        else:
            for name in _field_names(type(item)):
                value = getattr(item, name)
                if type(value) not in _UNREAD:
                    stack.append(value)
    return False


# ------------------------------------------------------------------------- substitution


class Substitution:
    """Names renamed and parameters bound to values (what a fragment's ``use`` and a
    constraint's call do; a family's instance is ``_Instance``)."""

    def __init__(
        self,
        names: dict[str, str] | None = None,
        values: dict[str, A.Expr] | None = None,
        reposition: bool = True,
    ) -> None:
        self.names = names or {}
        self.values = values or {}
        self.reposition = reposition  # a value takes the place (for errors) of the name it replaces

    def __call__(self, obj):
        return transform(obj, self._visit)

    def _visit(self, obj):
        if isinstance(obj, A.Name) and obj.id in self.values:
            value = self.values[obj.id]
            return dataclasses.replace(value, pos=obj.pos) if self.reposition else value
        fields = _NAME_FIELDS.get(type(obj))
        if fields:
            changes = {f: self.names[getattr(obj, f)] for f in fields if getattr(obj, f) in self.names}
            if changes:
                return transform_inside(dataclasses.replace(obj, **changes), self._visit)
        return None


# --------------------------------------------------------------------------- constraints


class Constraints:
    """The constraints defined so far in a file, and their inlining."""

    def __init__(self) -> None:
        self.defined: dict[str, A.Constraint] = {}

    def define(self, constraint: A.Constraint, builtin: Iterable[str]) -> None:

        # a predicate registered from Python is no reason: the pack's own definition wins in
        # the pack (its text was written without knowing what a program registers)
        if constraint.name in self.defined or is_builtin(constraint.name):
            raise _error(
                f"'{constraint.name}' is defined already"
                + (" (a built-in function)" if is_builtin(constraint.name) else ""),
                constraint.pos,
            )
        if len(set(constraint.params)) != len(constraint.params):
            raise _error(f"constraint '{constraint.name}' names a parameter twice", constraint.pos)
        if A.is_op_name(constraint.name):
            raise _error(
                f"constraint '{constraint.name}' is named like an op (a constraint is called like a function: "
                f"start it lower-case)",
                constraint.pos,
            )
        body = self.inline(constraint.expr)
        expanded_size(body, f"constraint '{constraint.name}'", constraint.pos)
        stray = A.names_read(body) - set(constraint.params) - set(DTYPES) - set(CONSTANTS) - set(builtin)
        if stray:
            raise _error(
                f"constraint '{constraint.name}' reads '{sorted(stray)[0]}', which is not one of its parameters",
                constraint.pos,
            )
        self.defined[constraint.name] = dataclasses.replace(constraint, expr=body)

    def inline(self, obj):
        """Every call of a defined constraint in ``obj`` replaced by its body (bodies were
        inlined when defined: no depth to bound)."""

        if not self.defined or not calls_any(obj, self.defined):
            return obj

        def visit(node):
            if isinstance(node, A.Call) and node.func in self.defined:
                constraint = self.defined[node.func]
                if len(node.args) != len(constraint.params) or node.attrs:
                    raise _error(
                        f"constraint '{node.func}' takes {len(constraint.params)} "
                        f"argument{'s' * (len(constraint.params) != 1)}, got {len(node.args)}",
                        node.pos,
                    )
                args = tuple(transform(a, visit) for a in node.args)
                return Substitution(values=dict(zip(constraint.params, args)), reposition=False)(constraint.expr)
            return None

        return transform(obj, visit)


# ----------------------------------------------------------------------------- fragments


def _defined_names(items: Iterable) -> set[str]:
    """Names a body defines: equation outputs and lets."""
    names: set[str] = set()
    for item in items:
        if isinstance(item, A.Equation):
            names.update(item.out_names)
        elif isinstance(item, A.Let):
            names.add(item.name)
    return names


class Fragments:
    """The fragments defined so far in a file, and ``use`` expansion."""

    def __init__(self, fresh: Iterable[int]) -> None:
        self.defined: dict[str, A.Fragment] = {}
        self.fresh = iter(fresh)

    def define(self, fragment: A.Fragment) -> None:
        if fragment.name in self.defined:
            raise _error(f"fragment '{fragment.name}' is defined twice", fragment.pos)
        if len(set(fragment.params)) != len(fragment.params):
            raise _error(f"fragment '{fragment.name}' names a parameter twice", fragment.pos)
        body = tuple(self.expand(fragment.body))
        expanded_size(body, f"fragment '{fragment.name}'", fragment.pos)
        if not any(isinstance(i, (A.Equation, A.Let)) for i in body):  # (lets alone: a value several rules compute)
            raise _error(f"fragment '{fragment.name}' has no equation or let", fragment.pos)
        self.defined[fragment.name] = dataclasses.replace(fragment, body=body)

    def expand(self, items: Iterable) -> list:
        """``items`` with every ``use`` replaced by the fragment's body; a name the body
        defines that the rest defines too is an error."""
        out: list = []
        own = _defined_names(i for i in items if not isinstance(i, A.Use))
        taken = set(own)
        for item in items:
            if not isinstance(item, A.Use):
                out.append(item)
                continue
            fragment = self.defined.get(item.name)
            if fragment is None:
                raise _error(
                    f"unknown fragment '{item.name}' (a fragment is defined before the rules that use it)", item.pos
                )
            if len(item.args) != len(fragment.params):
                raise _error(
                    f"fragment '{item.name}' takes {len(fragment.params)} names, got {len(item.args)}", item.pos
                )
            names = dict(zip(fragment.params, item.args))
            # temporaries of nested calls ($1) get fresh names: a fragment may be used twice
            temps = {n for n in _defined_names(fragment.body) if n.startswith("$")}
            names.update({t: f"${next(self.fresh)}" for t in temps})
            body = Substitution(names=names)(fragment.body)
            local = _defined_names(body) - set(item.args) - set(names.values())
            clash = sorted(local & taken)
            if clash:
                raise _error(
                    f"fragment '{item.name}' defines '{clash[0]}', which this rule defines "
                    f"too (pass it as a parameter, or rename it)",
                    item.pos,
                )
            taken |= local
            out.extend(body)
        return out


# ------------------------------------------------------------------------------ families


def describe_args(args: Iterable[A.Expr]) -> str:

    return ", ".join(a.id if isinstance(a, A.Name) else show(a) for a in args)


def _op_name(value: A.Expr) -> str | None:
    """The op an instance's argument names (``Relu``, ``com.microsoft.Gelu``), or None."""
    if isinstance(value, A.Name) and A.is_op_name(value.id):
        return value.id
    if isinstance(value, A.AttrRef):  # one dot: mydomain.Op
        return f"{value.var}.{value.attr}"
    return None


def _value_name(value: A.Expr) -> str | None:
    """The name (of a value, an attribute, a function) an instance's argument is, or None:
    any name but a dotted op name (`W` may be a value, read where the template reads one)."""
    if isinstance(value, A.Name) and "." not in value.id:
        return value.id
    return None


def _is_any(value: A.Expr) -> bool:
    return isinstance(value, A.PatternInput) and isinstance(value.arg, A.AnyArg)


def approx_literal(value: A.Expr) -> A.Literal | None:
    """The literal of an unbound ``~0.01`` an instance gives (None for anything else)."""
    if isinstance(value, A.PatternInput) and isinstance(value.arg, A.LiteralArg):
        if value.arg.literal.approx and value.arg.bind is None:
            return value.arg.literal
    return None


def _is_true(expr: A.Expr) -> bool:
    return isinstance(expr, A.Const) and expr.value is True


def _is_none(expr: A.Expr) -> bool:
    return isinstance(expr, A.Const) and expr.value is None


def _given(value: A.Expr) -> str:
    if isinstance(value, A.Name):
        return f"the op name '{value.id}'" if "." in value.id else f"the name '{value.id}'"
    return f"'{show(value)}'"


def _holds_pattern_input(value: A.Expr) -> bool:
    found = []
    kinds = (A.PatternInput, A.PatternAlternatives)
    transform(value, lambda node: found.append(node) if isinstance(node, kinds) else None)
    return bool(found)


def _holds_op_call(value: A.Expr) -> bool:
    found = []
    transform(value, lambda node: found.append(node) if isinstance(node, A.Call) and node.is_op else None)
    return bool(found)


def _without_true(expr: A.Expr) -> A.Expr:
    """``a and true`` is ``a``: a parameter given ``true`` drops out of a ``where``."""
    if isinstance(expr, A.BoolOp) and expr.op == "and":
        values = [v for v in (_without_true(v) for v in expr.values) if not _is_true(v)]
        if not values:
            return A.Const(True, expr.pos)
        return values[0] if len(values) == 1 else dataclasses.replace(expr, values=tuple(values))
    return expr


def _without_trailing_none(expr: A.Expr) -> A.Expr:
    """Op calls of a replacement without trailing ``none`` inputs (a parameter given ``none``
    leaves its input out; the engine drops trailing empty inputs anyway)."""

    def visit(node):
        if isinstance(node, A.Call) and node.is_op:
            args = [transform(a, visit) for a in node.args]
            while args and _is_none(args[-1]):
                args.pop()
            return dataclasses.replace(node, args=tuple(args))
        return None

    return transform(expr, visit)


class _Instance:
    """A family's template with one instance's arguments put in, each where the template
    reads its parameter: an op name where it calls an op, a name where it names a value,
    an output or an attribute, an expression where it reads a value, a pattern input (a
    name, a literal, ``_``, ``b?``, an op call whose nested calls become equations) where
    a pattern takes an input, an op call where a whole pattern node is the parameter."""

    def __init__(self, bindings: dict[str, A.Expr], fresh: Iterator[int]) -> None:
        self.bindings = bindings
        self.fresh = fresh
        self.nodes = False  # whether the expression being instantiated is a replacement's

    # ---- names
    def name(self, name: str, pos: Position, what: str) -> str:
        """``name``, or the name its parameter is given (``what`` it names, for errors)."""
        if name not in self.bindings:
            return name
        given = _value_name(self.bindings[name])
        if given is None:
            raise _error(f"'{name}' stands for {what} here: give it a name, not {_given(self.bindings[name])}", pos)
        return given

    def out(self, out: A.Out) -> A.Out:
        if out.name in self.bindings and _is_any(self.bindings[out.name]):
            return A.Out(None, False, out.pos)  # `_`: the instance leaves this output out
        return dataclasses.replace(out, name=self.name(out.name, out.pos, "an output")) if out.name else out

    # ---- expressions
    def expr(self, expr, nodes: bool = False):
        """``expr`` instantiated; ``nodes``: it is a replacement's, where an op call is a node."""
        self.nodes = nodes
        return transform(expr, self._visit_expr)

    def _visit_expr(self, obj):
        if isinstance(obj, A.Name) and obj.id in self.bindings:
            value = self.bindings[obj.id]
            if isinstance(value, A.Name) and "." in value.id:
                raise _error(f"'{obj.id}' is given the op name '{value.id}', read here as a value", obj.pos)
            if _holds_pattern_input(value):
                raise _error(
                    f"'{obj.id}' is given the pattern input '{show(value)}', read here as a value "
                    f"(only a pattern's input takes one)",
                    obj.pos,
                )
            if not self.nodes and _holds_op_call(value):
                raise _error(
                    f"'{obj.id}' is given the op call '{show(value)}', read here as a value (an op call is "
                    f"a pattern input, or a node of the replacement)",
                    obj.pos,
                )
            return dataclasses.replace(value, pos=obj.pos)
        if isinstance(obj, A.AttrRef) and (obj.var in self.bindings or obj.attr in self.bindings):
            return dataclasses.replace(
                obj, var=self.name(obj.var, obj.pos, "a value"), attr=self.name(obj.attr, obj.pos, "an attribute")
            )
        if isinstance(obj, A.AttrSpread) and obj.var in self.bindings:
            return dataclasses.replace(obj, var=self.name(obj.var, obj.pos, "a value"))
        if isinstance(obj, A.Call) and any(self._left_out(a) for a in obj.attrs or ()):
            attrs = tuple(a for a in obj.attrs if not self._left_out(a)) or None
            return self._visit_expr(dataclasses.replace(obj, attrs=attrs)) or transform_inside(
                dataclasses.replace(obj, attrs=attrs), self._visit_expr
            )
        if isinstance(obj, A.AttrSet) and obj.name in self.bindings:
            renamed = dataclasses.replace(obj, name=self.name(obj.name, obj.pos, "an attribute"))
            return transform_inside(renamed, self._visit_expr)
        if isinstance(obj, A.Call) and obj.func in self.bindings:
            value = self.bindings[obj.func]
            func = _op_name(value) if A.is_op_name(obj.func) else _value_name(value)
            if func is None or A.is_op_name(func) != A.is_op_name(obj.func):
                kind = "an op" if A.is_op_name(obj.func) else "a function"
                raise _error(f"'{obj.func}' stands for {kind} here: give it {kind} name, not {_given(value)}", obj.pos)
            return transform_inside(dataclasses.replace(obj, func=func), self._visit_expr)
        return None

    def _left_out(self, attr) -> bool:
        """``{name: p}`` in a replacement, ``p`` given ``_``: the instance sets no such attribute."""
        value = getattr(attr, "value", None)
        return isinstance(value, A.Name) and value.id in self.bindings and _is_any(self.bindings[value.id])

    # ---- the pattern
    def equation(self, eq: A.Equation) -> list[A.Equation]:
        """``eq`` instantiated, after the equations its pattern inputs' nested calls make."""
        nested: list[A.Equation] = []
        alternatives = []
        for alt in eq.alternatives:
            if isinstance(alt, A.NodeParam):
                value = self.bindings.get(alt.param)
                if value is None:
                    raise _error(f"'{alt.param}' is neither an op call nor a parameter of the rule", alt.pos)
                options = value.options if isinstance(value, A.PatternAlternatives) else (value,)
                for option in options:
                    if not (isinstance(option, A.Call) and option.is_op):
                        raise _error(
                            f"'{alt.param}' stands for a pattern node here: give it an op call "
                            f"(or alternatives), not {_given(option)}",
                            alt.pos,
                        )
                    alternatives.append(self.call_pattern(option, nested))
            else:
                alternatives.append(self.op_pattern(alt, nested))
        if nested and len(alternatives) > 1:
            raise _error(
                "an alternative cannot nest op calls; name the inner node in an equation of its own", nested[0].pos
            )
        if eq.keep:  # nested calls of a kept equation are context too
            nested = [dataclasses.replace(n, keep=True) for n in nested]
        outs = tuple(self.out(o) for o in eq.outs)
        return [*nested, dataclasses.replace(eq, outs=outs, alternatives=tuple(alternatives))]

    def op_pattern(self, alt: A.OpPattern, nested: list[A.Equation]) -> A.OpPattern:
        domain, op = alt.domain, alt.op
        if not domain and op in self.bindings:
            name = _op_name(self.bindings[op])
            if name is None:
                raise _error(
                    f"'{op}' stands for an op here: give it an op name, not {_given(self.bindings[op])}", alt.pos
                )
            domain, op = A.split_op_name(name)
        args = tuple(self.pattern_arg(a, nested) for a in alt.args)
        attrs = tuple(self.attr_pattern(a) for a in alt.attrs)
        return dataclasses.replace(alt, domain=domain, op=op, args=args, attrs=attrs)

    def attr_pattern(self, attr: A.AttrPattern) -> A.AttrPattern:
        name = self.name(attr.name, attr.pos, "an attribute")
        value = attr.value
        given = self.bindings.get(value.id) if isinstance(value, A.Name) else None
        if given is not None and _is_any(given):
            value = None  # `{beta: b}` with b given `_`: any value
        elif given is not None and approx_literal(given) is not None:
            value = approx_literal(given)  # `{alpha: a}` with a given `~0.01`: within tolerance
        elif value is not None and not isinstance(value, A.Literal):
            value = self.expr(value)
        return dataclasses.replace(attr, name=name, value=value)

    def pattern_arg(self, arg, nested: list[A.Equation]):
        if isinstance(arg, A.VarArg) and arg.name in self.bindings:
            value = self.bindings[arg.name]
            if not arg.optional:
                return self.pattern_input(value, arg.pos, nested, param=arg.name)
            name = _value_name(value)
            if name is None:
                raise _error(
                    f"optional input '{arg.name}?' is given a constant"
                    if isinstance(value, (A.Num, A.Const))
                    else f"optional input '{arg.name}?' can be given a name only, not {_given(value)}",
                    arg.pos,
                )
            return dataclasses.replace(arg, name=name)
        if isinstance(arg, A.ParamArg):
            return self._param_input(arg)
        if isinstance(arg, A.RestArg) and arg.name in self.bindings:
            return dataclasses.replace(arg, name=self.name(arg.name, arg.pos, "a list of inputs"))
        if isinstance(arg, A.LiteralArg) and arg.bind in self.bindings:
            return dataclasses.replace(arg, bind=self.name(arg.bind, arg.pos, "a value"))
        return arg

    def pattern_input(self, value: A.Expr, pos: Position, nested: list[A.Equation], param: str | None = None):
        """What an instance gives for an input slot, as a pattern input: a name, a literal,
        ``_``, ``b?``, ``0.5 as half`` or an op call (an equation of its own, in ``nested``
        after those of its own nested calls, as the parser flattens a nested call)."""
        if isinstance(value, A.PatternInput):
            return value.arg
        name = _value_name(value)
        if name is not None:
            return A.VarArg(name, False, pos)
        number = _number(value)
        if number is not None:
            return A.LiteralArg(A.Literal(number, False, pos), None, pos)
        if isinstance(value, A.Call) and value.is_op:
            node = self.call_pattern(value, nested)
            temp = f"${next(self.fresh)}"
            nested.append(A.Equation((A.Out(temp, False, value.pos),), (node,), value.pos))
            return A.VarArg(temp, False, value.pos)
        what = f"'{param}' is given {_given(value)}, read here" if param else f"{_given(value)} is"
        raise _error(
            f"{what} as a pattern input (a name, a literal, `_`, `x?`, `0.5 as c` or an op call)",
            pos if param else getattr(value, "pos", pos),
        )

    def call_pattern(self, call: A.Call, nested: list[A.Equation]) -> A.OpPattern:
        """An op call an instance gives, as a pattern node (its inputs are the instance's)."""
        domain, op = A.split_op_name(call.func)
        args = tuple(self.pattern_input(a, call.pos, nested) for a in call.args)
        attrs = []
        for item in call.attrs or ():
            if isinstance(item, A.AttrSpread):
                raise _error(f"...{item.var}: a pattern node matches attributes, it copies none", item.pos)
            value: A.Expr | A.Literal | None = None if _is_any(item.value) else item.value
            if value is not None and not isinstance(value, A.Literal):
                literal = approx_literal(value)  # `{alpha: ~0.01}`
                if literal is not None:
                    value = literal
                elif _holds_pattern_input(value):
                    raise _error(f"attribute '{item.name}' is given a pattern input", item.pos)
            attrs.append(A.AttrPattern(item.name, value, item.pos))
        return A.OpPattern(domain, op, args, tuple(attrs), call.pos)

    def _param_input(self, arg: A.ParamArg) -> A.PatternArg:
        value = self.bindings.get(arg.param)
        bind = self.name(arg.bind, arg.pos, "a value")
        number = _number(value)
        if number is not None:
            return A.LiteralArg(A.Literal(number, False, arg.pos), bind, arg.pos)
        if value is None:
            raise _error(f"'{arg.param} as {arg.bind}': '{arg.param}' is not a parameter of the rule", arg.pos)
        raise _error(f"'{arg.param} as {arg.bind}' needs a number for '{arg.param}'", arg.pos)

    # ---- examples
    def examples(self, sets: Iterable[A.ExampleSet], instance: str, instances: set[str]) -> tuple:
        """The hints for this instance: those of every instance and its own (``example for
        A: ...``); an item for a parameter given ``none`` (a value it does not have) goes."""
        kept = []
        for group in sets:
            unknown = sorted(set(group.instances) - instances)
            if unknown:
                raise _error(f"example for '{unknown[0]}', which is not an instance of this rule", group.pos)
            if group.instances and instance not in group.instances:
                continue
            items = []
            for item in group.items:
                if item.name in self.bindings and _is_none(self.bindings[item.name]):
                    continue
                if item.name is not None:
                    item = dataclasses.replace(item, name=self.name(item.name, item.pos, "a value"))
                if item.value is not None:
                    item = dataclasses.replace(item, value=self.expr(item.value))
                items.append(item)
            if items:
                kept.append(dataclasses.replace(group, items=tuple(items), instances=()))
        return tuple(kept)


def instantiate(
    rule: A.Rule,
    params: tuple[str, ...],
    instance: A.Instance,
    fresh: Iterator[int],
    instances: Iterable[str] = (),
) -> A.Rule:
    """One rule of a family: ``rule``'s parameters replaced by the instance's arguments."""
    if len(instance.args) != len(params):
        raise _error(
            f"rule '{rule.name}' takes {len(params)} parameters, instance '{instance.name}' gives {len(instance.args)}",
            instance.pos,
        )
    family = f"{rule.name}({describe_args(instance.args)})"
    inst = _Instance(dict(zip(params, instance.args)), fresh)
    try:
        outputs = {name for eq in rule.equations for name in eq.out_names}
        for param, value in inst.bindings.items():
            if _is_any(value) and param in outputs and names_in(rule).count(param) > 1:
                raise _error(
                    f"'{param}' is given `_`, which leaves out an output the rule also reads "
                    f"(the read would match anything)",
                    instance.pos,
                )
        equations = [new for eq in rule.equations for new in inst.equation(eq)]
        wheres = [dataclasses.replace(w, expr=_without_true(inst.expr(w.expr))) for w in rule.wheres]
        lets = [
            dataclasses.replace(let, name=inst.name(let.name, let.pos, "a value"), expr=inst.expr(let.expr))
            for let in rule.lets
            if not (let.name in inst.bindings and _is_any(inst.bindings[let.name]))  # `_`: no such value
        ]
        replacement = []
        for eq in rule.replacement:
            outs = [inst.out(o) for o in eq.outs]
            while len(outs) > 1 and outs[-1].name is None:  # outputs left out at the end
                outs.pop()
            value = _without_trailing_none(inst.expr(eq.value, nodes=True))
            replacement.append(dataclasses.replace(eq, outs=tuple(outs), value=value))
        return dataclasses.replace(
            rule,
            name=instance.name,
            root=inst.name(rule.root, rule.pos, "the root"),
            equations=tuple(equations),
            wheres=tuple(w for w in wheres if not _is_true(w.expr)),
            lets=tuple(lets),
            examples=inst.examples(rule.examples, instance.name, set(instances) or {instance.name}),
            replacement=tuple(replacement),
            family=family,
        )
    except RuleError as err:  # the text is the family's: name the instance that fails
        raise RuleError(f"{err.message} (in {instance.name} = {family})", err.file, err.line, err.column) from None


def fresh_counter(start: int = 1_000_000) -> Iterable[int]:
    """Numbers for temporaries made while expanding (past those the parser hands out)."""
    return itertools.count(start)


def _number(value: object) -> float | int | bool | None:
    """The literal a number or true/false argument stands for (None for anything else)."""
    if isinstance(value, A.Num):
        return value.value
    if isinstance(value, A.Const) and isinstance(value.value, bool):
        return value.value
    return None
