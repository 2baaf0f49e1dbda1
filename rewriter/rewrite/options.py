"""How a run of the engine behaves, beside what it optimizes: one object passed down from
``optimize`` to every level's runner, never a module global that a caller flips.

``check_fixpoint`` is the engine's self-check (tests turn it on for every run, through the
environment variable below, which also reaches ``verify``'s worker processes): after each
level the graph and its indexes are checked against the node protos, and one more sweep
over the whole graph must find no rule that applies and no built-in with work left (else
the worklist missed a root).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..partition.kernels import KernelTables
from .progress import ProgressHook

CHECK_FIXPOINT_VARIABLE = "REWRITER_CHECK_FIXPOINT"


@dataclass(frozen=True)
class RunOptions:
    max_rewrites: int | None = None  # per level; None: 10 per node plus 1000
    check_fixpoint: bool = False
    kernels: KernelTables = field(default_factory=KernelTables)  # where provider kernels are looked up
    # after partitioning, CPU float16 without float16 kernels computes in float32 (partition/float16.py)
    float16_in_float32: bool = True
    progress: ProgressHook | None = None  # told how far each level's worklist got (rewrite/progress.py)
    # the layout level (3) may leave the graph larger than the extended level made it, and
    # rules marked ``grows`` run (see pipeline.py, "node budget"); off: never larger
    layout_may_grow: bool = False

    @classmethod
    def from_environment(
        cls,
        max_rewrites: int | None = None,
        kernels: KernelTables | None = None,
        float16_in_float32: bool = True,
        progress: ProgressHook | None = None,
        layout_may_grow: bool = False,
    ) -> RunOptions:
        return cls(
            max_rewrites=max_rewrites,
            check_fixpoint=os.environ.get(CHECK_FIXPOINT_VARIABLE) == "1",
            kernels=kernels or KernelTables(),
            float16_in_float32=float16_in_float32,
            progress=progress,
            layout_may_grow=layout_may_grow,
        )
