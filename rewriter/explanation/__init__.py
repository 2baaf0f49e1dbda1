"""Why a rule did or did not apply: per rule and candidate root, the deepest partial match
(which pattern equation bound to which node) and the first thing that failed.

``rewriter.explain(...)`` (pipeline.py) runs the pipeline with an ``Explainer`` watching
each level start; ``model.py`` is what it returns.  See docs/explain.md.
"""

from __future__ import annotations

from .collect import Explainer
from .model import CAUSE_KINDS, OUTCOMES, Attempt, Binding, Cause, Explanation, Note

__all__ = ["CAUSE_KINDS", "OUTCOMES", "Attempt", "Binding", "Cause", "Explainer", "Explanation", "Note"]
