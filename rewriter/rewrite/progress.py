"""Where a run is, for whoever shows progress (the command line's bar): the pipeline says
when a phase begins, a level's worklist says every ``PROGRESS_EVERY`` nodes how far it got.

Coarse on purpose: a report per node would cost more than the display is worth (a
worklist looks at a node in tens of microseconds); one per 512 nodes costs nothing
measurable and still moves several times a second on the biggest graphs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

PROGRESS_EVERY = 512  # worklist nodes between two reports


@dataclass(frozen=True)
class Progress:
    """One report: the phase (``"load rules"``, ``"level 2 extended"``, ``"partition"``...),
    and inside a level's worklist the nodes looked at so far and still queued (the queue
    grows as rewrites make new roots), and the rule applied last."""

    phase: str
    done: int = 0
    left: int = 0
    rule: str = ""


ProgressHook = Callable[[Progress], None]
