"""Fuzz-verification of rules: every rewrite must keep the numbers.

The campaign (hypothesis, onnxruntime sessions) is imported when first used, not with this
package: ``rewriter`` exports ``verify`` and must stay cheap to import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .campaign import DEFAULT_EXAMPLES, RuleVerdict, VerifyReport, verify_rule

__all__ = ["DEFAULT_EXAMPLES", "RuleVerdict", "VerifyReport", "verify", "verify_rule"]


def verify(*args: Any, **kwargs: Any) -> VerifyReport:
    """Verify every rule of the given packs (or only the named ``rule``s) and return a
    ``VerifyReport``; the arguments are ``rewriter.verify.campaign.verify``'s: ``paths``,
    ``rule``, ``examples``, ``seed``, ``out``, ``on_rule``, ``packs``, ``jobs``."""
    from .campaign import verify as run

    return run(*args, **kwargs)


def __getattr__(name: str) -> Any:
    """The campaign's other public names, imported on first use."""
    if name not in ("DEFAULT_EXAMPLES", "RuleVerdict", "VerifyReport", "verify_rule"):
        raise AttributeError(f"module 'rewriter.verify' has no attribute '{name}'")
    from . import campaign

    value = getattr(campaign, name)
    globals()[name] = value
    return value
