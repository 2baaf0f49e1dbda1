"""Every test runs the engine with its fixpoint self-check on: after each level a full
sweep confirms that no rule still applies and no built-in still finds work, so a missed
revisit fails whichever test happens to exercise it."""

from __future__ import annotations

import pytest

from rewriter.rewrite import fixpoint


@pytest.fixture(autouse=True, scope="session")
def _check_fixpoint():
    fixpoint.check_fixpoint = True
    yield
    fixpoint.check_fixpoint = False
