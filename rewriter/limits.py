"""The command line's memory ceiling: a run that would need more fails with one clear line.

Why this exists: the engine checks sizes before it computes (constant folding, rule
expressions), but it also runs code it cannot look into: onnx's shape inference, given a
few hundred bytes of model, allocated until the machine ran out (13 GB in a minute).
Under an address-space limit that allocation fails instead (``MemoryError``; the engine
then infers without the part that failed), and anything else that hits the limit ends the
run as an error, not as the kernel's OOM kill.

The default ceiling is a fixed base plus a multiple of what the run was given (model
files, rules files), raised once the model is loaded by an allowance per node; ``--max-memory``
sets it instead.  Only the command line sets it: the library never changes process limits.
"""

from __future__ import annotations

import re
from types import ModuleType

resource: ModuleType | None  # absent where the platform has no process limits
try:
    import resource
except ImportError:  # pragma: no cover - not on this platform: no ceiling
    resource = None

BASE = 1 << 30  # bytes: the interpreter, onnx, onnxruntime, the bundled packs (~270 MB)
PER_INPUT_BYTE = 6  # loaded model + optimized one + the copy one tensor at a time...
PER_NODE = 16 << 10  # a node's view entries, NetworkX dicts, proto copy (~3 KB measured)
PER_RULES_BYTE = 1024  # parse tree and rule objects of a rules file

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int | None:
    """``512M``, ``4G``, ``1.5g``, a number of bytes; ``none`` / ``0`` for no ceiling."""
    value = str(text).strip().lower()
    if value in ("none", "0", "off", "unlimited"):
        return None
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?", value)
    if match is None:
        raise ValueError(f"'{text}' is not a size (use e.g. 512M, 4G, or none)")
    size = int(float(match.group(1)) * _UNITS[match.group(2)])
    if size < 64 << 20:
        raise ValueError(f"'{text}' is below 64M, too little to run at all")
    return size


def _memory_available() -> int | None:
    """What this process may still take: the memory the kernel calls available, plus what
    the process holds already (Linux: /proc; elsewhere None)."""
    try:
        with open("/proc/meminfo") as handle:
            fields = dict(line.split(":", 1) for line in handle)
        available = int(fields["MemAvailable"].split()[0]) * 1024
        with open("/proc/self/statm") as handle:
            mapped = int(handle.read().split()[0]) * (resource.getpagesize() if resource else 4096)
    except (OSError, KeyError, ValueError, IndexError):
        return None
    return available + mapped


_available = _memory_available()


def describe(size: int) -> str:
    return f"{size / (1 << 30):.1f} GiB" if size >= 1 << 30 else f"{size >> 20} MiB"


STARTUP_HEADROOM = 128 << 20  # bytes above what is mapped at start: onnxruntime, threads


def mapped_now() -> int | None:
    """The address space this process maps now (Linux: /proc; elsewhere None)."""
    try:
        with open("/proc/self/statm") as handle:
            pages = int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pages * (resource.getpagesize() if resource else 4096)


class TooLittle(ValueError):
    """A ceiling below what the program maps before it reads anything: under it a thread
    could not even start (glibc aborts with its own message), so it is refused up front."""


class MemoryCeiling:
    """The address-space limit of this process (``RLIMIT_AS``'s soft limit), never above
    a limit that was set before (by a shell's ulimit, a container, a test harness)."""

    def __init__(self, fixed: int | None = None, automatic: bool = True) -> None:
        """``fixed``: the ceiling in bytes; else, with ``automatic``, one computed from
        the inputs (see ``allow``); else none."""
        self.fixed = fixed
        self.automatic = automatic and fixed is None
        self.current: int | None = None
        # what the process maps already is not the run's: a command run in-process (a test,
        # a tool embedding the command line) may start with gigabytes mapped, and a ceiling
        # below that failed inside the interpreter (SystemError), not with one clear line
        self._allowed = BASE + (mapped_now() or 0)
        self._outer = None
        self._before: int | None = None  # the soft limit to give back (``release``)
        if resource is not None and hasattr(resource, "RLIMIT_AS"):
            soft, _ = resource.getrlimit(resource.RLIMIT_AS)
            self._before = soft
            self._outer = None if soft == resource.RLIM_INFINITY else soft
        if fixed is not None:
            mapped = mapped_now()
            if mapped is not None and fixed < mapped + STARTUP_HEADROOM:
                raise TooLittle(
                    f"{describe(fixed)} is below what the program needs before reading "
                    f"anything (about {describe(mapped + STARTUP_HEADROOM)})"
                )
            self._set(fixed)

    def allow(self, input_bytes: int = 0, nodes: int = 0, rules_bytes: int = 0) -> None:
        """Raise the automatic ceiling for these inputs (they add up)."""
        if not self.automatic:
            return
        self._allowed += input_bytes * PER_INPUT_BYTE + nodes * PER_NODE + rules_bytes * PER_RULES_BYTE
        self._set(self._allowed)

    def _set(self, size: int) -> None:
        if resource is None or not hasattr(resource, "RLIMIT_AS"):
            return
        if self.automatic and _available is not None:
            # never more than the machine has: past it the kernel's OOM killer, not this
            # ceiling, would end the run (inputs that claim terabytes, a sparse data file)
            size = min(size, _available)
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            size = min(size, hard)
        if self._outer is not None:
            size = min(size, self._outer)
        try:
            resource.setrlimit(resource.RLIMIT_AS, (size, hard))
        except (ValueError, OSError):  # pragma: no cover - refused: keep what there is
            return
        self.current = size

    def release(self) -> None:
        """Give back the soft limit the process had before: the ceiling is the command's,
        not the process's (a command run in-process, by a test or a tool that embeds the
        command line, must not leave the rest of that process under it)."""
        if self.current is None or self._before is None or resource is None:
            return
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        try:
            resource.setrlimit(resource.RLIMIT_AS, (self._before, hard))
        except (ValueError, OSError):  # pragma: no cover - refused: keep what there is
            return
        self.current = None

    def describe(self) -> str:
        if self.current is not None:
            return describe(self.current)
        if resource is not None and hasattr(resource, "RLIMIT_AS"):
            soft, _ = resource.getrlimit(resource.RLIMIT_AS)
            if soft != resource.RLIM_INFINITY:
                return describe(soft)
        return "the memory available"
