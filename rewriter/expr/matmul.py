"""The matrix product ``a @ b`` of the expression language: numpy's ``matmul`` rule for
shapes, known before anything is computed.

Why a module of its own: the same rule answers two questions at two times.  The checker
(``dsl.check``) asks it about shapes the rule's text spells out (a literal list,
``zeros([2, 3])``), with dims it cannot know left as ``None``, so that ``[[1, 2]] @ [[1, 2]]``
is an error before any model runs; the evaluator asks it about the actual operands, so
that the size of the result and the work of computing it are charged to the budget
(``budget.py``) before numpy starts, and a mismatch is a reason the match is refused
rather than a numpy message.

numpy's rule: neither operand may be a scalar (rank 0); a 1-D left operand is a row
(``[1, n]``) and a 1-D right one a column (``[n, 1]``), the added axis dropped from the
result; the last dim of the left must equal the second-to-last of the right; the leading
("batch") dims broadcast.
"""

from __future__ import annotations

from collections.abc import Sequence

Dim = int | None  # None: a dim the caller does not know


class MatmulError(ValueError):
    """Operands numpy's ``matmul`` refuses; the message says why in the rule's terms."""


def matmul_shape(left: Sequence[Dim], right: Sequence[Dim]) -> tuple[Dim, ...]:
    """The shape of ``left @ right`` (unknown dims stay ``None``); ``MatmulError`` when the
    shapes cannot be multiplied (only known dims can disagree)."""
    if not left or not right:
        side = "left" if not left else "right"
        raise MatmulError(f"the {side} operand of '@' has rank 0 (a matrix product needs rank 1 or more)")
    a = [1, *left] if len(left) == 1 else list(left)
    b = [*right, 1] if len(right) == 1 else list(right)
    inner_left, inner_right = a[-1], b[-2]
    if inner_left is not None and inner_right is not None and inner_left != inner_right:
        raise MatmulError(
            f"inner dimensions differ: {inner_left} (last dim of the left operand, shape {_shown(left)}) "
            f"and {inner_right} ({'the only' if len(right) == 1 else 'second-to-last'} dim of the right "
            f"operand, shape {_shown(right)})"
        )
    batch = _broadcast(a[:-2], b[:-2], left, right)
    out = [*batch]
    if len(left) > 1:
        out.append(a[-2])
    if len(right) > 1:
        out.append(b[-1])
    return tuple(out)


def multiply_adds(left: Sequence[int], right: Sequence[int]) -> int:
    """How many multiply-adds ``left @ right`` takes (shapes known and compatible): one per
    element of the result per entry of the inner dimension."""
    count = 1
    for dim in matmul_shape(left, right):
        count *= int(dim or 0)
    return count * int(left[-1])


def _broadcast(a: list[Dim], b: list[Dim], left: Sequence[Dim], right: Sequence[Dim]) -> list[Dim]:
    """numpy broadcasting of the batch dims (right-aligned; a 1 stretches)."""
    width = max(len(a), len(b))
    one: list[Dim] = [1]
    a = one * (width - len(a)) + a
    b = one * (width - len(b)) + b
    out: list[Dim] = []
    for x, y in zip(a, b):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif x is None or y is None:
            out.append(x if y is None else y)
        elif x != y:
            raise MatmulError(
                f"batch dimensions {x} and {y} do not broadcast (shapes {_shown(left)} and {_shown(right)})"
            )
        else:
            out.append(x)
    return out


def _shown(shape: Sequence[Dim]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
