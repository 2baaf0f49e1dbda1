"""What evaluating a rule's expressions may spend, checked before each value is made.

Why this exists: every operation of the expression language was bounded only by the
values it was given, and those compound: ``((10**60)**60)**60`` is made of small
exponents and ran for ever; ``"ab" * 10**9``, ``[0] * 10**8``, broadcasting two long
ranges and a concat of several ``zeros`` each made gigabytes.  Now each operation says how
large its result will be before making it, and the values made while the expressions of
one match attempt run (its wheres, lets, replacement values) add up against one
allowance: a fixed base plus a multiple of the model constants they read (computed
initializers are as large as the weights they come from).  Integers are bounded by bits.
And what all attempts of one ``optimize`` make adds up too, against a base plus a multiple
of the model's constants: making a value takes time in proportion to its size, so that is
the expressions' time budget (a where-clause making 8 MB, tried at every node of a big
model, would otherwise run for minutes).  The one operation whose time is not its
result's size is the matrix product: ``a @ b`` of two 4096 x 4096 matrices makes 128 MB
but does 69 billion multiply-adds.  Its result is charged like any value, and its work
(``charge_multiply_adds``) to the run's account and to a bound per operation, in bytes' worth of
time: a multiply-add costs about what making one byte does where numpy calls BLAS
(float32, float64: 6-7 billion a second here, against 5-14 GB/s made), and 16 times that
in numpy's own loops (integers, float16: 0.3-1.2 billion a second).  Past any bound the
rule is at fault: the evaluator reports ``file:line:col`` of the operation (see evaluate.py).
"""

from __future__ import annotations

import numpy as np

MAX_INT_BITS = 1024  # an int past this is no dim, axis or attribute value
BASE_BYTES = 64 << 20  # what one match attempt may make beyond what it reads
PER_READ_BYTE = 4  # ...plus this many times each model constant it reads, once
OBJECT_BYTES = 32  # a Python number in a list (``list(x)``, ``take``)
POINTER_BYTES = 8  # one slot of a list
RUN_BASE_BYTES = 4 << 30  # what all expressions of one optimize run may make...
RUN_PER_MODEL_BYTE = 16  # ...plus this many times the model's constants
OPERATION_WORK = 16 << 30  # the most one operation may do, in bytes' worth of time (2-3 s)
FAST_MULTIPLY_ADD = 1  # what a multiply-add costs, in bytes' worth of time, with BLAS...
SLOW_MULTIPLY_ADD = 16  # ...and in numpy's own loops


class OverBudget(Exception):
    """An operation would exceed the budget (the evaluator adds where it is)."""


class _Ledger:
    __slots__ = ("spent", "allowance", "read")

    def __init__(self) -> None:
        self.spent = 0
        self.allowance = BASE_BYTES
        self.read: set[str] = set()


_ledger: _Ledger | None = None  # None: no attempt open, each value is bounded on its own
_run: list[int] | None = None  # [made, allowed] over one optimize run; None: no run open


def start_run(model_bytes: int) -> None:
    """Open the account of a whole run (see the module docstring)."""
    global _run
    _run = [0, RUN_BASE_BYTES + RUN_PER_MODEL_BYTE * model_bytes]


def end_run() -> None:
    global _run
    _run = None


def start_attempt() -> None:
    """Open a fresh account: a new match attempt (a root and a rule) or one evaluation.
    (Called for every rule tried at every node: the open account is reset in place.)"""
    global _ledger
    ledger = _ledger
    if ledger is None:
        _ledger = _Ledger()
    elif ledger.spent or ledger.read:
        ledger.spent, ledger.allowance = 0, BASE_BYTES
        ledger.read.clear()


def attempt_open() -> bool:
    return _ledger is not None


def end_attempts() -> None:
    """Close the account (values are then bounded one by one)."""
    global _ledger
    _ledger = None


def charge(nbytes: int, what: str = "a value") -> None:
    """Account for ``nbytes`` about to be made; raises ``OverBudget`` past the allowance."""
    if nbytes <= 0:
        return
    run = _run
    if run is not None:
        run[0] += nbytes
        if run[0] > run[1]:
            raise OverBudget(
                f"the rules' expressions made {_size(run[0])} in this run, more than "
                f"the {_size(run[1])} they may ({_size(RUN_BASE_BYTES)} plus "
                f"{RUN_PER_MODEL_BYTE}x the model's constants)"
            )
    ledger = _ledger
    if ledger is None:
        if nbytes > BASE_BYTES:
            raise OverBudget(f"{what} of {_size(nbytes)} exceeds the expression budget of {_size(BASE_BYTES)}")
        return
    ledger.spent += nbytes
    if ledger.spent > ledger.allowance:
        raise OverBudget(
            f"{what} of {_size(nbytes)} exceeds the expression budget "
            f"({_size(ledger.spent)} made, {_size(ledger.allowance)} allowed: "
            f"{_size(BASE_BYTES)} plus {PER_READ_BYTE}x the constants read)"
        )


def charge_multiply_adds(count: int, dtype: np.dtype, what: str = "a matrix product") -> None:
    """Account for ``count`` multiply-adds of ``dtype`` about to be done (see the module
    docstring): against the bound of one operation and the run's account; raises
    ``OverBudget`` past either."""
    cost = FAST_MULTIPLY_ADD if dtype in _BLAS_TYPES else SLOW_MULTIPLY_ADD
    units = count * cost
    if units > OPERATION_WORK:
        raise OverBudget(
            f"{what} of {count:,} multiply-adds of {dtype} is more work than one operation may do "
            f"({OPERATION_WORK // cost:,} of {dtype})"
        )
    run = _run
    if run is not None and units > 0:
        run[0] += units
        if run[0] > run[1]:
            raise OverBudget(
                f"the rules' expressions made and computed the worth of {_size(run[0])} in this run "
                f"({what} of {count:,} multiply-adds last), more than the {_size(run[1])} they may "
                f"({_size(RUN_BASE_BYTES)} plus {RUN_PER_MODEL_BYTE}x the model's constants)"
            )


_BLAS_TYPES = (np.dtype(np.float32), np.dtype(np.float64))


def charge_elements(count: int, itemsize: int = 8, what: str = "a tensor") -> None:
    charge(int(count) * itemsize, what)


def read(name: str, nbytes: int) -> None:
    """A model constant was read: the attempt may make values as large as it (once per
    constant)."""
    ledger = _ledger
    if ledger is not None and name not in ledger.read:
        ledger.read.add(name)
        ledger.allowance += PER_READ_BYTE * nbytes


def check_int_bits(bits: int) -> None:
    if bits > MAX_INT_BITS:
        raise OverBudget(f"an integer of about {bits} bits exceeds the bound of {MAX_INT_BITS} bits")


def list_elements(value: object) -> int:
    """Elements numpy makes of a (nested) list: the product of the lengths along its first
    items (numpy refuses a ragged list, so the first items tell the shape)."""
    count = 1
    while isinstance(value, (list, tuple)):
        count *= len(value)
        if not value:
            return count
        value = value[0]
    if isinstance(value, np.ndarray):
        count *= value.size
    return count


def _list_shape(value: object) -> tuple[int, ...]:
    """The shape numpy gives a (nested) list, read along its first items (np.shape would
    build the array to find out)."""
    shape: list[int] = []
    while isinstance(value, (list, tuple)):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    if isinstance(value, np.ndarray):
        shape.extend(value.shape)
    return tuple(shape)


def broadcast_elements(*values: object) -> int:
    """Elements of the broadcast of ``values`` (numpy's rule), known before computing it."""
    shapes = []
    for value in values:
        if isinstance(value, np.ndarray):
            shapes.append(value.shape)
        elif isinstance(value, (list, tuple)):
            shapes.append(_list_shape(value))
        else:
            shapes.append(())
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        return 0  # they do not broadcast: numpy will say so, making nothing
    count = 1
    for d in shape:
        count *= int(d)
    return count


def _size(nbytes: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"
