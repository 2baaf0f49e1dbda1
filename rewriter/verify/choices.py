"""Choices drawn with hypothesis that replay the same in every process.

Hypothesis labels a ``sampled_from`` draw with the hash of its elements — of strings
(salted per process), of objects (their ids) — and its mutations of earlier draws go by
those labels: the same ``--seed`` then gave other draws in another process, or after an
unrelated import.  Drawing an index with ``st.integers`` has a label of its own class
only; it shrinks to the first option, as ``sampled_from`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import TypeVar

from hypothesis import strategies as st

T = TypeVar("T")


_STEPS = 1000  # a wide range: hypothesis's extra weight on its smallest value is one step
_WINDOW = st.integers(0, _STEPS - 1)


@lru_cache(maxsize=256)
def _indices(count: int) -> st.SearchStrategy[int]:
    """``sampled_from(range(count))``, made once per count: hypothesis checks a strategy
    the first time it draws from it, and a new one per choice made that a tenth of a
    campaign's time (the draws are the same: a strategy's label is its elements')."""
    return st.sampled_from(range(count))


def pick(draw: Callable, options: Sequence[T], label: str | None = None) -> T:
    """One of ``options``, about uniformly; shrinks toward the first.  ``sampled_from`` over
    the indices: its label is the hash of ints (not salted), and it spreads its draws
    evenly, where an ``st.integers`` range cut into equal slices gave the first of five
    options about half the draws and the last a twentieth (hypothesis favours small
    values), so a rule's last example clauses were rarely drawn."""
    options = list(options)
    return options[draw(_indices(len(options)), label=label)]


def permutation(draw: Callable, items: Sequence[T], label: str | None = None) -> list[T]:
    """``items`` in a drawn order (shrinks toward the order given)."""
    left, order = list(items), []
    while left:
        order.append(left.pop(draw(_indices(len(left)), label=label)))
    return order


def chance(draw: Callable, one_in: float, label: str | None = None) -> bool:
    """True about once in ``one_in`` draws.  Hypothesis favours the smallest values of a
    range (``st.booleans()`` mostly gives False), and shrinks toward them, so the rare
    outcome is a window in the middle of a wide range: rare things are as rare as asked,
    and shrinking takes them away unless a failure needs them."""
    value = draw(_WINDOW, label=label)
    return (value - _STEPS // 3) % _STEPS < round(_STEPS / one_in)
