"""The package's version, in a module of its own so that ``rewriter --version`` and the
pack cache's keys read it without importing the engine (or ``importlib.metadata``, 50 ms).
pyproject.toml holds the same string (tests/test_packaging.py keeps them equal)."""

__version__ = "0.1.0"
