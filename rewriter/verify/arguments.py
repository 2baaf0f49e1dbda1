"""``verify``'s arguments checked before any work: the wrong kind is the library's own
error (``ArgumentError``), not a TypeError from deep inside hypothesis."""

from __future__ import annotations

import os

from ..errors import RewriterError, expect


def check_arguments(paths, rule, examples, seed, out, jobs=None, strata=None, isolated=False) -> None:
    if paths is not None:
        expect(paths, (list, tuple), "verify()'s paths (a list of files or directories)")
        for item in paths:
            expect(item, (str, os.PathLike), "each of verify()'s paths")
    if rule is not None:
        expect(rule, (str, list, tuple), "verify()'s rule (a name or a list of names)")
        for name in [rule] if isinstance(rule, str) else rule:
            expect(name, str, "each of verify()'s rule names")
    if jobs is not None:
        expect(jobs, int, "verify()'s jobs")
        if jobs < 1:
            raise RewriterError(f"verify()'s jobs must be at least 1, not {jobs}")
    expect(isolated, bool, "verify()'s isolated")
    expect(examples, int, "verify()'s examples")
    if examples < 1:
        raise RewriterError(f"verify()'s examples must be at least 1, not {examples}")
    expect(seed, int, "verify()'s seed")
    expect(out, (str, os.PathLike), "verify()'s out")
    if isinstance(strata, str):
        raise RewriterError("verify()'s strata is a list of stratum names, not one string")
    if strata is not None:
        expect(strata, (list, tuple), "verify()'s strata (a list of stratum names)")
