"""Every test runs the engine with its fixpoint self-check on (rewrite/options.py): after
each level a full sweep confirms that no rule still applies and no built-in still finds
work, so a missed revisit fails whichever test happens to exercise it.

The pack cache (README.md, "Cache") of a test run is a directory of its own, made before
any test module loads a pack and removed at the end: tests never read or fill the user's
cache, and every run starts cold (the command-line tests' processes inherit it).
``REWRITER_CACHE=0 pytest`` runs the suite with the cache off (tests/test_pack_cache.py
turns it on for itself)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from rewriter.disk_cache import CACHE_DIR_VARIABLE, CACHE_SWITCH_VARIABLE
from rewriter.dsl import forget_loaded
from rewriter.rewrite.options import CHECK_FIXPOINT_VARIABLE

_TEST_CACHE = tempfile.mkdtemp(prefix="rewriter-test-cache-")
os.environ[CACHE_DIR_VARIABLE] = _TEST_CACHE


@pytest.fixture(autouse=True, scope="session")
def _own_pack_cache():
    yield
    shutil.rmtree(_TEST_CACHE, ignore_errors=True)


@pytest.fixture(autouse=True, scope="session")
def _check_fixpoint():
    before = os.environ.get(CHECK_FIXPOINT_VARIABLE)
    os.environ[CHECK_FIXPOINT_VARIABLE] = "1"
    yield
    if before is None:
        del os.environ[CHECK_FIXPOINT_VARIABLE]
    else:
        os.environ[CHECK_FIXPOINT_VARIABLE] = before


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    """A cache of this test's own, on, and no pack remembered by the process."""
    directory = tmp_path / "cache"
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(directory))
    monkeypatch.delenv(CACHE_SWITCH_VARIABLE, raising=False)
    forget_loaded()
    yield directory
    forget_loaded()
