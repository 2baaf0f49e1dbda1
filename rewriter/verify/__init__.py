"""Fuzz-verification of rules: every rewrite must keep the numbers."""

from .campaign import DEFAULT_EXAMPLES, RuleVerdict, VerifyReport, verify, verify_rule

__all__ = ["DEFAULT_EXAMPLES", "RuleVerdict", "VerifyReport", "verify", "verify_rule"]
