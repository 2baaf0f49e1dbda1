"""Every test runs the engine with its fixpoint self-check on (rewrite/options.py): after
each level a full sweep confirms that no rule still applies and no built-in still finds
work, so a missed revisit fails whichever test happens to exercise it."""

from __future__ import annotations

import os

import pytest

from rewriter.rewrite.options import CHECK_FIXPOINT_VARIABLE


@pytest.fixture(autouse=True, scope="session")
def _check_fixpoint():
    before = os.environ.get(CHECK_FIXPOINT_VARIABLE)
    os.environ[CHECK_FIXPOINT_VARIABLE] = "1"
    yield
    if before is None:
        del os.environ[CHECK_FIXPOINT_VARIABLE]
    else:
        os.environ[CHECK_FIXPOINT_VARIABLE] = before
