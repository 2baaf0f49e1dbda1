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
  by the instance, its parameters replaced: by an op name where the template calls ``Op``,
  by a constant where it reads ``k`` (in a pattern input slot a number becomes a literal
  the input must equal), by a name where a name is given.

Definitions come before their uses, so the file reads top-down; the expansion is bounded
(``MAX_DEPTH`` nested uses, each definition expanded once per use).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable

from ..errors import Position, RuleError
from ..expr.dtypes import DTYPES
from ..expr.functions import CONSTANTS, FUNCTIONS
from . import ast as A
from .unparse import show

MAX_DEPTH = 16  # constraints calling constraints, fragments using fragments

# fields of rule objects that hold a name of the rule's (renamed by a substitution)
_NAME_FIELDS: dict[type, tuple[str, ...]] = {
    A.Name: ("id",),
    A.AttrRef: ("var",),
    A.AttrSpread: ("var",),
    A.VarArg: ("name",),
    A.RestArg: ("name",),
    A.LiteralArg: ("bind",),
    A.Out: ("name",),
    A.Let: ("name",),
    A.Example: ("name",),
    A.Use: (),
}


def _error(message: str, pos: Position) -> RuleError:
    return RuleError(message, pos.file, pos.line, pos.column)


def transform(obj, visit: Callable[[object], object | None]):
    """``obj`` rebuilt bottom-up where ``visit`` returns a replacement (None: keep, and
    look inside).  Rule objects are frozen dataclasses and tuples of them."""
    replaced = visit(obj)
    if replaced is not None:
        return replaced
    return transform_inside(obj, visit)


def transform_inside(obj, visit: Callable[[object], object | None]):
    """``transform`` of ``obj``'s parts (not of ``obj`` itself)."""
    if isinstance(obj, tuple):
        return tuple(transform(item, visit) for item in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, (type, Position)):
        changes = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            new = transform(value, visit)
            if new is not value:
                changes[f.name] = new
        return dataclasses.replace(obj, **changes) if changes else obj
    return obj


# ------------------------------------------------------------------------- substitution


class Substitution:
    """Names renamed, parameters bound to values, op names replaced."""

    def __init__(
        self,
        names: dict[str, str] | None = None,
        values: dict[str, A.Expr] | None = None,
        ops: dict[str, str] | None = None,
        reposition: bool = True,
    ) -> None:
        self.names = names or {}
        self.values = values or {}
        self.ops = ops or {}
        self.reposition = reposition  # a value takes the place (for errors) of the name it replaces

    def __call__(self, obj):
        return transform(obj, self._visit)

    def _visit(self, obj):
        if isinstance(obj, A.Name) and obj.id in self.values:
            value = self.values[obj.id]
            if isinstance(value, A.Name) and "." in value.id:
                raise _error(f"'{obj.id}' is given the op name '{value.id}', read here as a value", obj.pos)
            return dataclasses.replace(value, pos=obj.pos) if self.reposition else value
        if isinstance(obj, A.VarArg) and obj.name in self.values:
            return self._literal_input(obj)
        if isinstance(obj, A.ParamArg):
            return self._param_input(obj)
        if isinstance(obj, A.OpPattern) and not obj.domain and obj.op in self.ops:
            domain, op = A.split_op_name(self.ops[obj.op])
            return transform_inside(dataclasses.replace(obj, domain=domain, op=op), self._visit)
        if isinstance(obj, A.Call) and obj.func in self.ops:
            return transform_inside(dataclasses.replace(obj, func=self.ops[obj.func]), self._visit)
        fields = _NAME_FIELDS.get(type(obj))
        if fields:
            changes = {f: self.names[getattr(obj, f)] for f in fields if getattr(obj, f) in self.names}
            if changes:
                return transform_inside(dataclasses.replace(obj, **changes), self._visit)
        return None

    def _param_input(self, arg: A.ParamArg) -> A.PatternArg:
        value = self.values.get(arg.param)
        bind = self.names.get(arg.bind, arg.bind)
        if isinstance(value, A.Num) or (isinstance(value, A.Const) and isinstance(value.value, bool)):
            return A.LiteralArg(A.Literal(value.value, False, arg.pos), bind, arg.pos)
        if value is None:
            raise _error(f"'{arg.param} as {arg.bind}': '{arg.param}' is not a parameter of the rule", arg.pos)
        raise _error(f"'{arg.param} as {arg.bind}' needs a number for '{arg.param}'", arg.pos)

    def _literal_input(self, arg: A.VarArg) -> A.PatternArg:
        value = self.values[arg.name]
        if isinstance(value, A.Name):  # a name given for a name
            return dataclasses.replace(arg, name=value.id)
        if isinstance(value, A.Num) or (isinstance(value, A.Const) and isinstance(value.value, bool)):
            if arg.optional:
                raise _error(f"optional input '{arg.name}?' is given a constant", arg.pos)
            return A.LiteralArg(A.Literal(value.value, False, arg.pos), None, arg.pos)
        raise _error(
            f"pattern input '{arg.name}' can be given a name or a number, not {type(value).__name__.lower()}", arg.pos
        )


# --------------------------------------------------------------------------- constraints


class Constraints:
    """The constraints defined so far in a file, and their inlining."""

    def __init__(self) -> None:
        self.defined: dict[str, A.Constraint] = {}

    def define(self, constraint: A.Constraint, builtin: Iterable[str]) -> None:

        if constraint.name in self.defined or constraint.name in FUNCTIONS:
            raise _error(
                f"'{constraint.name}' is defined already"
                + (" (a built-in function)" if constraint.name in FUNCTIONS else ""),
                constraint.pos,
            )
        if len(set(constraint.params)) != len(constraint.params):
            raise _error(f"constraint '{constraint.name}' names a parameter twice", constraint.pos)
        body = self.inline(constraint.expr)
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
        if not any(isinstance(i, A.Equation) for i in body):
            raise _error(f"fragment '{fragment.name}' has no equation", fragment.pos)
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


def instantiate(rule: A.Rule, params: tuple[str, ...], instance: A.Instance) -> A.Rule:
    """One rule of a family: ``rule``'s parameters replaced by the instance's arguments."""
    if len(instance.args) != len(params):
        raise _error(
            f"rule '{rule.name}' takes {len(params)} parameters, instance '{instance.name}' gives {len(instance.args)}",
            instance.pos,
        )
    ops = {p: a.id for p, a in zip(params, instance.args) if isinstance(a, A.Name) and A.is_op_name(a.id)}
    names = {p: a.id for p, a in zip(params, instance.args) if isinstance(a, A.Name) and not A.is_op_name(a.id)}
    values = {p: a for p, a in zip(params, instance.args) if not isinstance(a, A.Name)}
    # a lower-case name given for a parameter read as a value (a dtype: float) is a value
    values.update({p: A.Name(n, instance.pos) for p, n in names.items()})
    subst = Substitution(names=names, values=values, ops=ops)
    expanded = subst(dataclasses.replace(rule, name=instance.name, family="", pos=rule.pos))
    root = names.get(rule.root, rule.root)
    return dataclasses.replace(
        expanded, name=instance.name, root=root, family=f"{rule.name}({describe_args(instance.args)})"
    )


def fresh_counter(start: int = 1_000_000) -> Iterable[int]:
    """Numbers for temporaries made while expanding (past those the parser hands out)."""
    return itertools.count(start)
