"""Symbolic dims as polynomials: one spelling per size, whoever wrote it.

A dim of a tensor is a number or a name.  Names combine: a KV cache's total length is
``past + new``, heads folded into the batch ``4*batch``, a flattened ``[batch, seq, 64]``
is ``[batch*seq, 64]``, an audio front end's frames ``(samples//10) + -1``.  The dynamo
exporter writes such sizes into value_info as sympy prints them
(``((samples//10)) - 1``, ``batch*(((samples//10)) - 1)``), while ``dims()`` computes
them from the graph's shape arithmetic; two spellings of one size must compare equal, or
two tensors of one shape do not look alike and rules refuse.

So every dim is read as a polynomial with integer coefficients over *atoms* (names, and
floor divisions that do not divide exactly, ``(samples//10)``) and written back in one
canonical form: terms sorted, each an optional coefficient then its atoms sorted and
joined by ``*``, the number last, joined by `` + `` (``a + -1*b + 3``, ``4*batch``,
``batch*seq``).  ``Max(a, b)`` and ``Min(a, b)`` are the argument provably larger
(smaller) for all sizes, else a polynomial with one atom ``Max(0, d)`` (``Min(128, seq)``
is ``seq + -1*Max(0, seq + -128)``), an atom a model's broadcasts may prove 0; a name this
grammar cannot read (``Max(1, 2, 3)``, a name with odd characters) stays one opaque atom,
exactly as written.  Unknown dims (onnx's fresh
``unk__N``, ``dims()``'s ``?`` tokens) take part in no arithmetic: ``EvalFailure``.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .values import EvalFailure

Monomial = tuple[str, ...]  # sorted atoms; () is the constant term
Poly = dict[Monomial, int]

_PLAIN = re.compile(r"[A-Za-z_][\w.]*")  # an ordinary name: itself, no parsing needed
_UNKNOWN = ("unk__", "?")
# bounds, so that a hostile dim_param costs little: a longer name is read whole, and a
# product with more terms (sums multiplied out) is unknown
MAX_TEXT = 256
MAX_TERMS = 64


def is_unknown_atom(atom: str) -> bool:
    return atom.startswith(_UNKNOWN)


def poly_of(d: int | str) -> Poly:
    """The polynomial a dim stands for; ``EvalFailure`` for an unknown dim."""
    if isinstance(d, int):
        return {(): d} if d else {}
    return dict(_parsed(d))


@lru_cache(maxsize=1 << 14)
def _parsed(d: str) -> tuple[tuple[Monomial, int], ...]:
    if is_unknown_atom(d):
        raise EvalFailure("arithmetic on an unknown dim")
    if _PLAIN.fullmatch(d) or len(d) > MAX_TEXT:
        return (((d,), 1),)
    try:
        poly = _Parser(d).expression_only()
    except (_NotAnExpression, _TooLarge):
        return (((d,), 1),)  # an opaque name
    return tuple(poly.items())


def dim_of(poly: Poly) -> int | str:
    """The canonical dim of a polynomial: a number when it has no atoms."""
    terms = []
    for monomial, k in sorted(poly.items()):
        if not k or not monomial:
            continue
        text = "*".join(monomial)
        terms.append(text if k == 1 else f"{k}*{text}")
    number = poly.get((), 0)
    if not terms:
        return number
    return " + ".join(terms + ([str(number)] if number else []))


def canonical_dim(d: int | str) -> int | str:
    """A dim as this module spells it (a declared ``((samples//10)) - 1`` is
    ``(samples//10) + -1``); an unknown or unreadable dim as it was."""
    if isinstance(d, int) or _PLAIN.fullmatch(d) or is_unknown_atom(d):
        return d
    return _canonical(d)


@lru_cache(maxsize=1 << 14)
def _canonical(d: str) -> int | str:
    try:
        return dim_of(poly_of(d))
    except EvalFailure:  # an unknown atom inside an expression
        return d


def _accumulate(out: Poly, monomial: Monomial, k: int) -> None:
    """out[monomial] += k, a term that cancels dropped (equal sums get equal spellings)."""
    total = out.get(monomial, 0) + k
    if total:
        out[monomial] = total
    else:
        out.pop(monomial, None)


def add(a: Poly, b: Poly, scale: int = 1) -> Poly:
    out = dict(a)
    for monomial, k in b.items():
        _accumulate(out, monomial, scale * k)
    return out


def multiply(a: Poly, b: Poly) -> Poly:
    if len(a) * len(b) > MAX_TERMS:
        raise _TooLarge("a product of dims with too many terms")
    out: Poly = {}
    for ma, ka in a.items():
        for mb, kb in b.items():
            _accumulate(out, tuple(sorted(ma + mb)), ka * kb)
    return out


def divide_exactly(a: Poly, b: Poly) -> Poly | None:
    """a / b when b is one term (a number times atoms) dividing every term of a exactly
    (``batch*seq + -1*batch`` by ``batch``); None otherwise."""
    if len(b) != 1:
        return None
    ((mb, kb),) = b.items()
    if kb == 0:
        return None
    out: Poly = {}
    for ma, ka in a.items():
        rest = list(ma)
        for atom in mb:
            if atom not in rest:
                return None
            rest.remove(atom)
        if ka % kb:
            return None
        out[tuple(rest)] = out.get(tuple(rest), 0) + ka // kb
    return {m: k for m, k in out.items() if k}


def floor_divide(a: Poly, k: int) -> Poly:
    """floor(a / k) for k > 0: the terms k divides and the number's multiple of k come out
    exactly (``(s + -10)//5`` is ``(s//5) + -2``, as sympy writes it too), what is left
    stays the atom ``(rest//k)``."""
    if k <= 0:
        raise EvalFailure("floor division of a dim by a number <= 0")
    number = a.get((), 0)
    out: Poly = {(): number // k} if number // k else {}
    rest: Poly = {(): number % k} if number % k else {}
    for monomial, c in a.items():
        if not monomial:
            continue
        if c % k == 0:
            out[monomial] = c // k
        else:
            rest[monomial] = c
    if set(rest) <= {()}:  # (a number below k: floor 0)
        return out
    nested = _nested_floor(rest, k)
    if nested is not None:
        return add(out, nested)
    inner = dim_of(rest)
    text = f"({inner})" if isinstance(inner, str) and not _PLAIN.fullmatch(inner) else str(inner)
    return add(out, {(f"({text}//{k})",): 1})


_FLOOR_ATOM = re.compile(r"\((.+)//(\d+)\)")


def _nested_floor(rest: Poly, k: int) -> Poly | None:
    """floor((y//a + r) / k) as floor((y + r*a) / (a*k)) (both are floor((y + r*a) / a / k)
    for integers and a, k > 0): a strided convolution after another names its length
    ``(samples//10)``, not ``((samples//5)//2)``, as the exporter does.  None unless
    ``rest`` is one floor atom plus a number."""
    atoms = [m for m in rest if m]
    if len(atoms) != 1 or len(atoms[0]) != 1 or rest[atoms[0]] != 1:
        return None
    found = _FLOOR_ATOM.fullmatch(atoms[0][0])
    if found is None:
        return None
    a = int(found.group(2))
    try:
        y = poly_of(found.group(1))
    except EvalFailure:
        return None
    if a <= 0 or a * k > 1 << 62 or floor_divide(y, a) != {atoms[0]: 1}:
        return None  # (not the atom floor_divide writes for y // a)
    return floor_divide(add(y, {(): rest.get((), 0) * a}), a * k)


CLAMP = "Max(0, "  # the one atom an extremum that is not provable is written with


def extremum(a: Poly, b: Poly, largest: bool) -> Poly:
    """Max(a, b) (largest) or Min(a, b).  The argument that is provably the larger (smaller)
    for every size, when there is one: a name is a size, never negative, so a - b >= 0
    holds when a - b is over names only and none of its coefficients is negative (a floor
    atom such as ``(n - s)//2`` may be negative).  Otherwise one atom ``Max(0, d)`` carries
    what is not known: ``Max(a, b) = a + Max(0, b - a)`` and ``Min(a, b) = a + b - Max(a,
    b)``, with d's first term positive (``Max(0, d) = d + Max(0, -d)``), so every spelling
    of one size reads alike: ``Min(128, seq)`` and ``128 - Max(0, 128 - seq)`` are both
    ``seq + -1*Max(0, seq + -128)``, and a model whose runs bound seq (``vanishing_atom``)
    drops the atom."""
    difference = add(a, b, -1)
    if all(_PLAIN.fullmatch(atom) for monomial in difference for atom in monomial):
        if all(k >= 0 for k in difference.values()):  # a >= b
            return a if largest else b
        if all(k <= 0 for k in difference.values()):  # a <= b
            return b if largest else a
    elif _nonnegative(difference, 0):  # (a clamped size: Min(128, seq) <= 128)
        return a if largest else b
    elif _nonnegative({m: -k for m, k in difference.items()}, 0):
        return b if largest else a
    d = add(b, a, -1)  # Max(a, b) = a + Max(0, d)
    base = a
    leading = next((k for monomial, k in sorted(d.items()) if monomial), 0)
    if leading < 0:  # Max(0, d) = d + Max(0, -d)
        base, d = b, difference
    inner = dim_of(d)
    highest = add(base, {(f"{CLAMP}{inner})",): 1})
    return highest if largest else add(add(a, b), highest, -1)


def _clamp_inner(atom: str) -> Poly | None:
    """d of an atom ``Max(0, d)``; None for another atom (or a d that names an unknown)."""
    if not atom.startswith(CLAMP) or not atom.endswith(")"):
        return None
    try:
        return poly_of(atom[len(CLAMP) : -1])
    except EvalFailure:
        return None


def provably_nonnegative(d: int | str) -> bool:
    """Whether a dim is >= 0 for all sizes: a polynomial with coefficients >= 0 over names
    (sizes), ``Max(0, d)`` atoms and floors of such sums; ``r + Max(0, d)``, which is
    ``Max(r, r + d)``, where r or r + d is; ``r - Max(0, d)``, which is ``Min(r, r - d)``
    (``Min(512, seq)``), where both are."""
    if isinstance(d, int):
        return d >= 0
    try:
        return _nonnegative(poly_of(d), 0)
    except EvalFailure:
        return False


def _nonnegative(poly: Poly, depth: int) -> bool:
    if depth > 6:
        return False
    clamp = next((m for m, k in poly.items() if len(m) == 1 and m[0].startswith(CLAMP) and k in (1, -1)), None)
    if clamp is None:
        return all(k >= 0 for k in poly.values()) and all(
            _nonnegative_atom(atom, depth) for monomial in poly for atom in monomial
        )
    rest = {m: k for m, k in poly.items() if m != clamp}
    inner = _clamp_inner(clamp[0])
    if inner is None:
        return False
    if poly[clamp] == 1:
        return _nonnegative(rest, depth + 1) or _nonnegative(add(rest, inner), depth + 1)
    return _nonnegative(rest, depth + 1) and _nonnegative(add(rest, inner, -1), depth + 1)


def _nonnegative_atom(atom: str, depth: int) -> bool:
    """A name is a size; a floor is >= 0 where what it divides is."""
    found = _FLOOR_ATOM.fullmatch(atom)
    if found is None:
        return True
    try:
        return _nonnegative(poly_of(found.group(1)), depth + 1)
    except EvalFailure:
        return False


def _clamped(a: int | str, b: int | str) -> tuple[str, Poly, int] | None:
    """(the atom, the larger dim, c) when one of a and b is ``Min(c, other)`` for a number
    c: a - b is ``Max(0, d)`` (or minus it) and the larger less d is c."""
    try:
        pa, pb = poly_of(a), poly_of(b)
    except EvalFailure:
        return None
    difference = add(pa, pb, -1)
    if len(difference) != 1:
        return None
    ((monomial, k),) = difference.items()
    d = _clamp_inner(monomial[0]) if len(monomial) == 1 and k in (1, -1) else None
    if d is None:
        return None
    larger = pa if k == 1 else pb
    rest = add(larger, d, -1)
    if set(rest) - {()}:
        return None
    return monomial[0], larger, rest.get((), 0)


def vanishing_atom(a: int | str, b: int | str) -> str | None:
    """The atom ``Max(0, d)`` that is 0 wherever a broadcast of dims a and b runs, if
    there is one.  That is so when one is ``Min(c, other)`` for a number c >= 2 (a causal
    buffer of c positions sliced to a sequence's length): a - b is that atom (or minus it)
    and the larger less d is c; were d > 0, the larger would be > c >= 2 and the smaller
    c, two sizes neither 1 nor equal, which do not broadcast.  So where the model runs,
    ``Min(128, seq)`` is seq."""
    found = _clamped(a, b)
    return found[0] if found is not None and found[2] >= 2 else None


def broadcast_result(a: int | str, b: int | str) -> int | str | None:
    """The dim a broadcast of dims a and b gives wherever it runs, when that is provable:
    the one they share, the other of a 1, and the larger of ``Min(c, x)`` and x for a
    number c >= 1 (``Min(1, seq)`` is 1, or 0 where seq is: either way the result is
    seq; c >= 2: see ``vanishing_atom``).  None otherwise (onnx's inference then names
    one of the two, which need not be the result)."""
    if a == b or b == 1:
        return a
    if a == 1:
        return b
    found = _clamped(a, b)
    if found is None or found[2] < 1:
        return None
    return dim_of(found[1])


def without_atoms(d: int | str, zero: frozenset[str] | set[str]) -> int | str:
    """d with the atoms in ``zero`` (known to be 0) taken as 0; d itself when it has none."""
    if not zero or isinstance(d, int) or _PLAIN.fullmatch(d):
        return d
    try:
        poly = poly_of(d)
    except EvalFailure:
        return d
    kept = {m: k for m, k in poly.items() if not any(_vanishes(atom, zero) for atom in m)}
    return d if len(kept) == len(poly) else dim_of(kept)


def _vanishes(atom: str, zero: frozenset[str] | set[str]) -> bool:
    """An atom known to be 0, or ``Max(0, e)`` where some ``Max(0, d)`` known to be 0 has
    d >= e (d <= 0 then e <= 0: ``past <= 127`` gives ``past <= 128``)."""
    if atom in zero:
        return True
    e = _clamp_inner(atom)
    if e is None:
        return False
    known = (_clamp_inner(z) for z in zero)
    return any(d is not None and _nonnegative(add(d, e, -1), 0) for d in known)


class _NotAnExpression(Exception):
    pass


class _TooLarge(EvalFailure):
    """A product past MAX_TERMS: unknown in arithmetic, an opaque name when read."""


_TOKEN = re.compile(r"\s*(//|\d+(?![\w.])|[()+*,]|-|[^\s()+*/,]+)")


class _Parser:
    """expression := term (('+' | '-') term)*; term := unary (('*' | '//') unary)*;
    unary := '-' unary | atom; atom := integer | name | '(' expression ')'.  A '-' inside
    a name's characters (``seq-len``) is part of the name; a single '/' reads nothing."""

    def __init__(self, text: str) -> None:
        self.tokens = self._tokens(text)
        self.at = 0

    @staticmethod
    def _tokens(text: str) -> list[str]:
        tokens: list[str] = []
        position = 0
        while text[position:].strip():
            match = _TOKEN.match(text, position)
            if match is None:
                raise _NotAnExpression
            tokens.append(match.group(1))
            position = match.end(1)
        return tokens

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise _NotAnExpression
        self.at += 1
        return token

    def expression_only(self) -> Poly:
        poly = self.expression()
        if self.peek() is not None:
            raise _NotAnExpression
        return poly

    def expression(self) -> Poly:
        poly = self.term()
        while self.peek() in ("+", "-"):
            sign = 1 if self.take() == "+" else -1
            poly = add(poly, self.term(), sign)
        return poly

    def term(self) -> Poly:
        poly = self.unary()
        while self.peek() in ("*", "//"):
            if self.take() == "*":
                poly = multiply(poly, self.unary())
            else:
                poly = self.floor_divided(poly, self.unary())
        return poly

    @staticmethod
    def floor_divided(poly: Poly, divisor: Poly) -> Poly:
        """poly // divisor: by a positive number (floor_divide), or by a term that divides
        every term of poly exactly (sympy leaves the dynamo exporter's
        ``((batch*seq)//batch)`` unsimplified; it is ``seq``: a size divided by a
        dim of the same tensor, which is not 0 where the quotient is computed)."""
        if not set(divisor) - {()}:
            if divisor.get((), 0) <= 0:
                raise _NotAnExpression  # only by a positive number
            return floor_divide(poly, divisor[()])
        quotient = divide_exactly(poly, divisor)
        if quotient is None:
            raise _NotAnExpression
        return quotient

    def extremum(self, largest: bool) -> Poly:
        """``Max(a, b)`` / ``Min(a, b)`` as sympy prints the dynamo exporter's sizes (a KV
        cache's causal slice: ``1 - Max(0, -past - 1)``): see ``extremum``."""
        self.take()  # (
        a = self.expression()
        if self.take() != ",":
            raise _NotAnExpression
        b = self.expression()
        if self.take() != ")":
            raise _NotAnExpression
        return extremum(a, b, largest)

    def unary(self) -> Poly:
        if self.peek() == "-":
            self.take()
            return {m: -k for m, k in self.unary().items()}
        return self.atom()

    def atom(self) -> Poly:
        token = self.take()
        if token == "(":
            poly = self.expression()
            if self.take() != ")":
                raise _NotAnExpression
            return poly
        if token in (")", "+", "*", "//"):
            raise _NotAnExpression
        if token in ("Max", "Min") and self.peek() == "(":
            return self.extremum(token == "Max")
        if token.isdigit():
            value = int(token)
            return {(): value} if value else {}
        if is_unknown_atom(token):
            raise EvalFailure("arithmetic on an unknown dim")
        return {(token,): 1}
