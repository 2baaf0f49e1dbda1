"""The progress bar of a long ``optimize``: on stderr, only at a terminal and not with -q,
shown once the run has lasted a second (a short run never flashes one), and gone when the
run ends (transient: the report is what stays).

The engine tells where it is through ``rewrite.progress.Progress`` reports (a phase begins,
a level's worklist got N nodes further); they only update the bar's fields, which rich
redraws a few times a second from its own thread, so a report costs microseconds.  The
bar appears from a timer thread; if no thread can be started (an address-space ceiling
reached), the run goes on without it.
"""

from __future__ import annotations

import threading
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from ..rewrite.progress import Progress as Report

SHOW_AFTER = 1.0  # seconds a run lasts before its bar appears


class RunProgress:
    """A context manager; call it with engine reports (``optimize(progress=...)``), or
    ``phase("writing")`` for the command line's own steps."""

    def __init__(self, console: Console, enabled: bool, show_after: float = SHOW_AFTER) -> None:
        self.enabled = enabled and console.is_terminal
        self.show_after = show_after
        self._lock = threading.Lock()
        self._shown = self._closed = False
        self._timer: threading.Timer | None = None
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        if self.enabled:
            self._bar = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}", markup=False),
                BarColumn(),
                TextColumn("{task.fields[count]}"),
                TimeElapsedColumn(),
                console=console,
                transient=True,
                refresh_per_second=4,
                redirect_stdout=False,  # (never swap sys.stdout/stderr from the timer's thread)
                redirect_stderr=False,
            )
            self._task = self._bar.add_task("starting", total=None, count="")

    def __enter__(self) -> RunProgress:
        if self.enabled and self.show_after <= 0:
            self._show()
        elif self.enabled:
            try:
                self._timer = threading.Timer(self.show_after, self._show)
                self._timer.daemon = True
                self._timer.start()
            except RuntimeError:  # no thread to be had: no bar
                self.enabled = False
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Remove the bar (before anything else is printed)."""
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            self._closed = True
            if self._shown and self._bar is not None:
                self._bar.stop()
                self._shown = False

    def _show(self) -> None:
        with self._lock:
            if self._closed or self._bar is None:
                return
            try:
                self._bar.start()
            except RuntimeError:  # (rich's refresh thread could not start)
                return
            self._shown = True

    def phase(self, description: str) -> None:
        """A step of the command line's own (reading the model, writing it)."""
        self(Report(description))

    def __call__(self, report: Report) -> None:
        if self._bar is None or self._task is None:
            return
        if report.done or report.left:
            total: int | None = report.done + report.left
            count = f"{report.done}/{total} nodes"
        else:
            total, count = None, ""
        last = f"  (last: {report.rule})" if report.rule else ""
        self._bar.update(
            self._task,
            description=f"{report.phase}{last}",
            completed=report.done,
            total=total,
            count=count,
        )
