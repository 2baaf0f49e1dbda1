"""Which nodes a provider can run: its kernel table.

The CPU provider's table is read from the installed onnxruntime
(``get_all_opkernel_def()``); other providers' tables come from ``*.kernels`` data files
shipped in ``rewriter/partition/kernels/`` (format documented at the top of
``CUDAExecutionProvider.kernels``).  More providers can be added with
``register_kernel_file(path)`` or ``--provider-kernels FILE`` on the command line.

A kernel matches a node when domain and op agree, the op's schema version at the model's
opset lies in the kernel's version range, and every type parameter the kernel constrains
has one of the listed element types (types the engine does not know are not held against
a node).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from onnx import NodeProto

from ..errors import RewriterError
from ..graph.type_reading import type_string
from ..graph.view import GraphView, NodeId
from ..onnx_facts.providers import CPU, provider_name
from ..onnx_facts.schemas import OpInfo, find_schema, function_body_ops, normalize_domain
from ..text_files import TextFileError, read_text

_DATA_DIR = Path(__file__).resolve().parent / "kernels"
_OPEN = 1 << 31


@dataclass(frozen=True)
class Kernel:
    domain: str
    op: str
    since: int
    until: int
    types: dict  # type parameter -> frozenset of "tensor(float)"-style type strings


class KernelTable:
    """The kernels one provider registers, indexed by (domain, op)."""

    def __init__(self, provider: str, kernels: list[Kernel]) -> None:
        self.provider = provider
        self._answers: dict[tuple, bool] = {}  # (op, opset, value types) -> supported
        self.by_op: dict[tuple[str, str], list[Kernel]] = {}
        for kernel in kernels:
            self.by_op.setdefault((kernel.domain, kernel.op), []).append(kernel)

    def __len__(self) -> int:
        return sum(len(v) for v in self.by_op.values())

    def supports(
        self,
        view: GraphView,
        proto: NodeProto,
        node_id: NodeId | None = None,
        names: tuple[list[str], list[str]] | None = None,
    ) -> bool:
        """Whether this provider has a kernel for the node as it is (op, version, types).

        The node need not be in the view yet (a replacement being checked); the types of
        its inputs and outputs are looked up there.  ``node_id`` names it when it is in the
        view (its names are then read from the view's cache); ``names`` gives its (inputs,
        outputs) when the caller has them."""
        if node_id is None:
            domain, op = normalize_domain(proto.domain), proto.op_type
            inputs, outputs = (proto.input, proto.output) if names is None else names
        else:
            (domain, op), inputs, outputs = view.node_key(node_id), view.inputs(node_id), view.outputs(node_id)
        if domain == "" and op == "Constant":
            return True  # ONNX Runtime turns Constant nodes into initializers before partitioning
        kernels = self.by_op.get((domain, op))
        if not kernels:
            # an op onnx defines as a function (HardSwish) that onnxruntime inlines
            return self._runs_body(domain, op, view.opset(domain), _float_types(view, inputs))
        # the node's signature: the type string of each input and output ("" when absent),
        # remembered per value in the view (types are replaced, never edited)
        cache = view.pass_caches.get(_TYPE_STRINGS)
        if cache is None:
            cache = view.pass_caches[_TYPE_STRINGS] = {}
        types, signature = view.types, [domain, op, view.opset(domain)]
        for side in (inputs, outputs):
            for name in side:
                if not name:
                    signature.append("")
                    continue
                type_proto = types.get(name) or view.type_of(name)
                cached = cache.get(name)
                if cached is None or cached[0] is not type_proto:
                    cached = cache[name] = (type_proto, type_string(type_proto))
                signature.append(cached[1])
            signature.append("|")
        key = tuple(signature)
        answer = self._answers.get(key)
        if answer is None:
            answer = self._answers[key] = self._supports(view, proto, domain, kernels)
        return answer

    def supports_in_float32(self, view: GraphView, node_id: NodeId) -> bool:
        """Whether this provider has a kernel for the node once its float16 tensors are
        float (ONNX Runtime's CPU provider then runs it between Casts)."""
        proto = view.node(node_id)
        domain, op = view.node_key(node_id)
        kernels = self.by_op.get((domain, op))
        if not kernels:  # (an inlined function: its body's ops in float)
            floats = _float_types(view, view.inputs(node_id))
            return bool(floats) and self._runs_body(domain, op, view.opset(domain), {FLOAT})
        return self._supports(view, proto, domain, kernels, {FLOAT16: FLOAT})

    def _runs_body(self, domain: str, op: str, opset: int | None, floats: set[str]) -> bool:
        """Whether every op of the function onnx defines ``op`` by has a kernel here, one
        that takes each of the node's floating-point input types (``floats``): onnxruntime
        inlines such a node (HardSwish: HardSigmoid, Mul), and a float16 one whose body has
        float kernels only runs between Casts, as any float16 node without a kernel."""
        body = function_body_ops(domain, op, opset)
        if not body:
            return False
        for key in body:
            kernels = self.by_op.get(key)
            if not kernels:
                return False
            offered = {t for kernel in kernels for allowed in kernel.types.values() for t in allowed}
            if not floats <= offered:
                return False
        return True

    def _supports(
        self, view: GraphView, proto: NodeProto, domain: str, kernels: list[Kernel], as_types: dict | None = None
    ) -> bool:
        info = find_schema(domain, proto.op_type, view.opset(domain))
        version = info.since_version if info is not None else view.opset(domain) or 1
        actual = _actual_types(view, proto, info) if info is not None else {}
        if as_types:
            actual = {name: {as_types.get(t, t) for t in types} for name, types in actual.items()}
        for kernel in kernels:
            if not kernel.since <= version <= kernel.until:
                continue
            if all(name not in actual or actual[name] <= allowed for name, allowed in kernel.types.items()):
                return True
        return False


FLOAT16, FLOAT = "tensor(float16)", "tensor(float)"
_FLOATS = frozenset({FLOAT16, FLOAT, "tensor(double)", "tensor(bfloat16)"})


def _float_types(view: GraphView, names: Iterable[str]) -> set[str]:
    """The floating-point tensor types (``tensor(float16)``...) of the named values."""
    found = {type_string(view.type_of(name)) for name in names if name}
    return {t for t in found if t in _FLOATS}


_TYPE_STRINGS = "kernel_type_strings"  # view.pass_caches: value -> (its TypeProto, type string)


def _actual_types(view: GraphView, proto, info: OpInfo) -> dict[str, set[str]]:
    """Type parameter -> the element types the node binds it to (known ones only)."""
    actual: dict[str, set[str]] = {}

    def bind(formals, names) -> None:
        for i, name in enumerate(names):
            if not name:
                continue
            if i < len(formals):
                type_str, _ = formals[i]
            elif formals and formals[-1][1]:  # variadic: the last formal repeats
                type_str = formals[-1][0]
            else:
                continue
            if type_str.startswith(("tensor(", "seq(")):
                continue  # a fixed type, not a parameter
            known = type_string(view.type_of(name))
            if known is not None:
                actual.setdefault(type_str, set()).add(known)

    bind(info.inputs, list(proto.input))
    bind(info.outputs, list(proto.output))
    return actual


# --------------------------------------------------------------------------- loading


@lru_cache(maxsize=1)
def cpu_table() -> KernelTable:
    """The CPU provider's kernels, from the installed onnxruntime."""
    from onnxruntime.capi import _pybind_state as ort_state

    kernels = []
    for k in ort_state.get_all_opkernel_def():
        if k.provider != CPU:
            continue
        since, until = k.version_range
        kernels.append(
            Kernel(
                normalize_domain(k.domain),
                k.op_name,
                since,
                until,
                {name: frozenset(types) for name, types in k.type_constraints.items()},
            )
        )
    return KernelTable(CPU, kernels)


def parse_kernel_file(text: str, source: str = "<kernels>") -> KernelTable:
    """Parse the ``.kernels`` format (see the CUDA file's header)."""
    provider = None
    sets: dict[str, frozenset[str]] = {}  # each expanded where it is defined ("usable below")
    kernels: list[Kernel] = []

    def expand(items: list[str]) -> frozenset[str]:
        return frozenset(t for item in items for t in sets.get(item, (item,)))

    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        try:
            if words[0] == "provider":
                provider = provider_name(words[1])
            elif words[0] == "set":
                sets[words[1]] = expand(words[2:])
            else:
                domain, op, versions, *constraints = words
                if versions.endswith("+"):
                    since, until = int(versions[:-1]), _OPEN
                elif "-" in versions:
                    since, until = (int(v) for v in versions.split("-"))
                else:
                    since = until = int(versions)
                types = {}
                for constraint in constraints:
                    name, _, listed = constraint.partition("=")
                    types[name] = frozenset(f"tensor({t})" for t in expand(listed.split(",")))
                kernels.append(Kernel(normalize_domain(domain), op, since, until, types))
        except (ValueError, IndexError, KeyError, RewriterError) as err:
            raise RewriterError(
                f"{source}:{number}: bad kernel line ({err.__class__.__name__}: {err}): {raw.strip()}"
            ) from None
    if provider is None:
        raise RewriterError(f"{source}: no 'provider NAME' line")
    return KernelTable(provider, kernels)


_REGISTERED: dict[str, KernelTable] = {}


def read_kernel_file(path: str | Path) -> KernelTable:
    """A provider's kernel table from a ``.kernels`` file (one clear error when unreadable)."""
    path = Path(path)
    try:
        text = read_text(path)
    except TextFileError as err:
        raise RewriterError(f"{path}: cannot read kernel file: {err}") from None
    return parse_kernel_file(text, str(path))


def register_kernel_file(path: str | Path) -> str:
    """Add (or replace), for the whole process, a provider's kernel table from a ``.kernels``
    file; returns its name.  ``optimize(provider_kernels=...)`` does not call this: a run's
    own tables live in its ``KernelTables``."""
    table = read_kernel_file(path)
    _REGISTERED[table.provider] = table
    return table.provider


@dataclass(frozen=True)
class KernelTables:
    """The kernel tables one run looks providers up in: the tables given for the run, else
    the process-wide ones (``kernel_table``).  A run's ``--provider-kernels`` files change
    nothing for the next run in the same process."""

    given: tuple[KernelTable, ...] = ()

    @classmethod
    def from_files(cls, paths: Iterable[str | Path]) -> KernelTables:
        return cls(tuple(read_kernel_file(path) for path in paths))

    def table(self, provider: str) -> KernelTable:
        for table in reversed(self.given):  # (a later file for the same provider wins)
            if table.provider == provider:
                return table
        return kernel_table(provider)


def kernel_table(provider: str) -> KernelTable:
    """The kernel table of a provider (CPU from onnxruntime, others from data files)."""
    if provider == CPU:
        return cpu_table()
    if provider in _REGISTERED:
        return _REGISTERED[provider]
    path = _DATA_DIR / f"{provider}.kernels"
    if not path.is_file():
        known = sorted([CPU, *_REGISTERED, *(p.stem for p in _DATA_DIR.glob("*.kernels"))])
        raise RewriterError(
            f"no kernel table for {provider} (known: {', '.join(known)}; add one with --provider-kernels FILE)"
        )
    _REGISTERED[provider] = parse_kernel_file(path.read_text(encoding="utf-8"), str(path))
    return _REGISTERED[provider]
