"""Termination signals as an exception, so that every ``finally`` runs.

Why this exists: SIGTERM, SIGHUP and the other signals whose default action ends the
process end it at once, skipping the cleanup that removes a half-written temporary output
(50-70 MB of it, measured); only SIGINT ran it, because Python turns it into
``KeyboardInterrupt``.  Inside ``interruptible()`` each of them raises ``Interrupted``
instead, and SIGXFSZ is ignored, so that a write past the file size limit fails with an
error rather than killing the process.  ``deferred()`` holds them over a step that must not
be cut in two (renaming a model and its data file into place) and raises when it ends.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

_TERMINATING = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGALRM", "SIGUSR1", "SIGUSR2", "SIGXCPU", "SIGVTALRM", "SIGPROF")
    if hasattr(signal, name)
)
_IGNORED = tuple(getattr(signal, name) for name in ("SIGXFSZ",) if hasattr(signal, name))


class Interrupted(BaseException):
    """A termination signal arrived (a ``BaseException``, like ``KeyboardInterrupt``: code
    that handles ``Exception`` must not swallow it)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")


_deferring = 0
_pending: list[int] = []

# what ``signal.signal`` takes and gives back: a function, SIG_DFL / SIG_IGN, or None
# (a handler installed from outside Python)
_Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


def _raise(signum: int, frame) -> None:
    if _deferring:
        _pending.append(signum)
        return
    raise Interrupted(signum)


@contextmanager
def interruptible(sigint: bool = True) -> Iterator[None]:
    """Within, the terminating signals that still have their default action raise
    ``Interrupted`` (handlers someone else installed, and ignored signals, are left as they
    are); with ``sigint`` False, SIGINT stays ``KeyboardInterrupt`` (which runs ``finally``
    blocks already: what a library called from an interactive session should keep).  Only
    the main thread can install handlers: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, _Handler] = {}
    for signum in _TERMINATING:
        if signum == signal.SIGINT and not sigint:
            continue
        current = signal.getsignal(signum)
        if current is signal.SIG_DFL or current is signal.default_int_handler:
            previous[signum] = signal.signal(signum, _raise)
    for signum in _IGNORED:
        if signal.getsignal(signum) is signal.SIG_DFL:
            previous[signum] = signal.signal(signum, signal.SIG_IGN)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextmanager
def deferred() -> Iterator[None]:
    """A signal arriving within is raised when the block ends (after it completed)."""
    global _deferring
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
        if not _deferring and _pending:
            signum = _pending[0]
            _pending.clear()
            raise Interrupted(signum)
