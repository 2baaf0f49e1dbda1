"""Reading and writing model files: clear errors in, atomic writes out.

A model that cannot be read is a ``ModelError`` naming the file.  External data is read
only from regular files beside the model, each tensor from its own bytes of them (never
past a file's end, never two tensors from the same bytes: a few hundred bytes of model
must not make the engine read gigabytes).

Every model written goes through ``save_model``: the output is decided first (see
output_file.py: regular files replaced atomically, devices and FIFOs written in place,
anything else refused, the input never touched), then written piece by piece (wire.py),
its external data file beside it; both are renamed into place together at the end, so a
failed or interrupted run leaves neither a half-written model nor a temporary file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import onnx
from google.protobuf.message import DecodeError
from onnx import ModelProto, TensorProto

from ..errors import ArgumentError, ModelError, expect
from ..signals import deferred, interruptible
from .output_file import OutputFile, Writing, file_status, output_file
from .tensor_data import all_graphs, external_location, graph_tensors, raw_bytes_needed
from .wire import ModelParts, copy_without, varint, write_model


@dataclass
class ModelFile:
    """A model read from a file, with the files it was read from."""

    model: ModelProto
    path: Path
    external_files: tuple[Path, ...] = ()  # its external data files

    @property
    def had_external(self) -> bool:
        return bool(self.external_files)

    def protected(self) -> list[os.stat_result]:
        """The files an output must never replace: the model and its data files."""
        return file_status([self.path, *self.external_files])


def load_model(path: str | os.PathLike) -> ModelProto:
    """Load an ONNX model file (with its external data), or raise ``ModelError``."""
    return read_model(path).model


def read_model(path: str | os.PathLike, reserve: Callable[[int], None] | None = None) -> ModelFile:
    """``load_model``, also telling which external data files the model was read from.
    ``reserve(nbytes)`` is told what is about to be read before it is (the file's size,
    then its external data's): the command line raises its memory ceiling with it."""
    expect(path, (str, os.PathLike), "the model file")
    path = Path(path)
    try:
        status = path.stat()
    except FileNotFoundError:
        raise ModelError(f"{path}: no such file") from None
    except OSError as err:
        raise ModelError(f"{path}: cannot read: {err.strerror or err}") from None
    if stat.S_ISDIR(status.st_mode):
        raise ModelError(f"{path}: is a directory, not an ONNX model")
    if not stat.S_ISREG(status.st_mode):
        raise ModelError(f"{path}: is not a regular file")
    if status.st_size == 0:
        raise ModelError(f"{path}: empty file, not an ONNX model")
    if reserve is not None:
        reserve(status.st_size)
    try:
        model = onnx.load(str(path), load_external_data=False)
        files, data_bytes = _check_external_data(model, path)
        if files:
            if reserve is not None:
                reserve(data_bytes)
            onnx.load_external_data_for_model(model, str(path.parent))
    except ModelError:
        raise
    except DecodeError as err:
        if "alloc" in str(err).lower():  # protobuf's arena could not grow: out of memory
            raise MemoryError(str(err)) from None
        raise ModelError(
            f"{path}: not a readable ONNX model ({err.__class__.__name__}: "
            f"{str(err).splitlines()[0] if str(err) else 'cannot parse'})"
        ) from None
    except (RuntimeError, ValueError, UnicodeDecodeError) as err:
        raise ModelError(
            f"{path}: not a readable ONNX model ({err.__class__.__name__}: "
            f"{str(err).splitlines()[0] if str(err) else 'cannot parse'})"
        ) from None
    except OSError as err:
        raise ModelError(f"{path}: cannot read: {err.strerror or err}") from None
    except MemoryError:
        raise
    except Exception as err:  # onnx raises a zoo of types for corrupt files
        raise ModelError(f"{path}: not a readable ONNX model ({err.__class__.__name__}: {err})") from None
    if not model.HasField("graph"):
        raise ModelError(f"{path}: not an ONNX model (no graph)")
    return ModelFile(model, path, tuple(files))


def _check_external_data(model: ModelProto, path: Path) -> tuple[list[Path], int]:
    """Refuse external data that lives outside the model's directory or in anything but a
    regular file, regions past a file's end or shared by two tensors, and regions whose
    size is not what the tensor's type and dims need: all before anything is read.
    Returns the data files and how many bytes will be read from them."""
    base = path.parent.resolve()
    regions: dict[Path, list[tuple[int, int, str]]] = {}
    for _, tensor in graph_tensors(model.graph):
        entries = external_location(tensor)
        if entries is None:
            continue
        location = entries.get("location", "")
        target = (base / location).resolve()
        if not location or os.path.isabs(location) or (target != base and base not in target.parents):
            raise ModelError(
                f"{path}: tensor '{tensor.name}' keeps its data at '{location}', outside "
                f"the model's directory; refused as unsafe (nothing was read)"
            )
        if not target.is_file():
            raise ModelError(
                f"{path}: tensor '{tensor.name}' keeps its data in '{location}', which "
                f"does not exist beside the model (as a regular file)"
            )
        size = target.stat().st_size
        try:
            offset = int(entries.get("offset", 0))
            length = int(entries["length"]) if "length" in entries else size - offset
        except ValueError:
            raise ModelError(
                f"{path}: tensor '{tensor.name}' has an external data offset or length that is not a number"
            ) from None
        if offset < 0 or length < 0 or offset + length > size:
            raise ModelError(
                f"{path}: tensor '{tensor.name}' keeps bytes {offset} to {offset + length} "
                f"of '{location}', which has {size}"
            )
        needed = raw_bytes_needed(tensor)
        if needed is not None and needed != length:
            raise ModelError(
                f"malformed initializer '{tensor.name}': its external data holds {length} "
                f"bytes, its shape {list(tensor.dims)} of "
                f"{TensorProto.DataType.Name(tensor.data_type).lower()} needs {needed}"
            )
        regions.setdefault(target, []).append((offset, length, tensor.name))
    for target, spans in regions.items():
        spans.sort()
        for (start, length, name), (next_start, _, other) in zip(spans, spans[1:]):
            if start + length > next_start:
                raise ModelError(
                    f"{path}: tensors '{name}' and '{other}' read the same bytes of "
                    f"'{target.name}'; refused (each byte of external data belongs to "
                    f"one tensor)"
                )
    return sorted(regions), sum(length for spans in regions.values() for _, length, _ in spans)


PROTOBUF_LIMIT = 2**31 - 1  # bytes: protobuf cannot serialize a bigger message
EXTERNAL_DATA_MODES = ("auto", "always", "never")
_ALIGNMENT = 4096  # onnx aligns external tensors like this for memory mapping
_OWNED_HEADER_LIMIT = 64 << 20  # bytes of an old output read to see which data file it names


class HasModelParts(Protocol):
    def model_parts(self) -> ModelParts: ...


def check_output(
    path: str | os.PathLike,
    external_data: str = "auto",
    location: str | None = None,
    protect: Iterable[os.stat_result] = (),
) -> OutputFile:
    """Refuse an output (and its external data file name) that ``save_model`` would refuse,
    before any work is done; returns the model's output file."""
    if external_data not in EXTERNAL_DATA_MODES:
        raise ModelError(f"external data mode must be one of {', '.join(EXTERNAL_DATA_MODES)}, not '{external_data}'")
    protect = list(protect)
    target = output_file(path, protect)
    if target.in_place and external_data == "always":
        raise ModelError(
            f"{path}: is not a regular file, so no external data file can be written "
            f"beside it (use --external-data never)"
        )
    if not target.in_place:
        _data_file(target, location, protect)
    return target


def written_files(target: OutputFile, external_data: str = "auto", location: str | None = None) -> list[Path]:
    """The files ``save_model`` may write for the output ``target`` (as ``check_output``
    returned it): the model, and beside a regular file its external data file (where it
    would go, whether or not this run ends up writing one).  Another output of the run
    (``--json``) must be none of them."""
    files = [target.destination]
    if not target.in_place and external_data != "never":
        files.append(target.directory / (location or f"{target.destination.name}.data"))
    return files


def _data_file(target: OutputFile, location: str | None, protect: list[os.stat_result]) -> OutputFile:
    """Where the external data goes: a plain name beside the model, which is not the model,
    not the input or its data, and not a file this run did not create — unless it is the
    data file of the model being replaced (written again, the same way)."""
    name = target.destination.name
    location = location or f"{name}.data"
    if os.path.basename(location) != location or location in ("", ".", "..") or "\0" in location:
        raise ModelError(f"external data file '{location}' must be a plain file name (it is written beside {name})")
    if location.casefold() == name.casefold():
        raise ModelError(f"external data file '{location}' is the output model's own name")
    protected = protect + ([target.status] if target.status is not None else [])
    data = output_file(target.directory / location, protected, what="external data file")
    if data.exists and not (not data.in_place and _names_its_data(target, location)):
        raise ModelError(
            f"{data.given}: already exists and was not written by this run; "
            f"refused as the external data file (remove it or choose another name)"
        )
    return data


def _names_its_data(target: OutputFile, location: str) -> bool:
    """Whether the model being replaced keeps its external data in ``location``."""
    status = target.status  # (None exactly when the file does not exist)
    if not target.exists or status is None or target.in_place or status.st_size > _OWNED_HEADER_LIMIT:
        return False
    try:
        old = onnx.load(str(target.destination), load_external_data=False)
    except Exception:
        return False
    return any((external_location(t) or {}).get("location") == location for _, t in graph_tensors(old.graph))


def save_model(
    model: ModelProto | HasModelParts,
    path: str | os.PathLike,
    external_data: str = "auto",
    location: str | None = None,
    size_threshold: int = 1024,
    source_used_external: bool = False,
    protect: Iterable[os.stat_result] = (),
) -> None:
    """Write ``model`` (an ``onnx.ModelProto``, or ``optimize``'s ``Result``, which is
    written without assembling a model first) to ``path``.

    ``external_data``: "always" moves every initializer of at least ``size_threshold``
    bytes (all graphs, subgraphs included) into one file ``location`` beside ``path``
    (default ``<name>.data``), like onnx's ``save_model(save_as_external_data=True,
    all_tensors_to_one_file=True)``; "never" keeps everything inline; "auto" externalizes
    when the input kept its data outside (``source_used_external``) or when the model
    would not fit in one protobuf (2 GB).  ``protect``: ``os.stat`` results of files that
    must not be written (the input's).  The model itself is never modified."""
    if not isinstance(model, ModelProto) and not callable(getattr(model, "model_parts", None)):
        raise ArgumentError(f"save_model() takes an onnx.ModelProto or optimize()'s Result, not {type(model).__name__}")
    expect(path, (str, os.PathLike), "save_model()'s path")
    expect(external_data, str, "save_model()'s external_data")
    expect(size_threshold, int, "save_model()'s size_threshold")
    if size_threshold < 0:
        raise ModelError(f"external data threshold must be a number of bytes >= 0, not {size_threshold}")
    if location is not None:
        expect(location, str, "save_model()'s location")
    expect(source_used_external, bool, "save_model()'s source_used_external")
    parts = ModelParts.of(model) if isinstance(model, ModelProto) else model.model_parts()
    with interruptible(sigint=False):
        _save(parts, Path(path), external_data, location, size_threshold, source_used_external, list(protect))


def _save(
    parts: ModelParts,
    path: Path,
    external_data: str,
    location: str | None,
    threshold: int,
    source_used_external: bool,
    protect: list[os.stat_result],
) -> None:
    target = check_output(path, external_data, location, protect)
    subgraph_tensors = [t for g in list(all_graphs(parts.graph))[1:] for t in g.initializer]
    payload = sum(_inline_bytes(t) for t in parts.initializers) + sum(_inline_bytes(t) for t in subgraph_tensors)
    too_big = payload > PROTOBUF_LIMIT - (64 << 20)
    external = external_data == "always" or (
        external_data == "auto" and (too_big or (source_used_external and not target.in_place))
    )
    if external and not any(_movable(t, threshold) for t in (*parts.initializers, *subgraph_tensors)):
        external = False  # nothing to move: no data file
    if external and target.in_place:
        raise ModelError(
            f"{path}: the model is too large for one file and a device or FIFO "
            f"cannot have an external data file beside it"
        )
    try:
        with Writing(target) as model_out:
            if not external:
                _write(model_out, parts)
                model_out.commit()
                return
            data_target = _data_file(target, location, protect)
            with Writing(data_target) as data_out:
                light = _externalize(parts, data_out, data_target.destination.name, threshold)
                _write(model_out, light)
                data_out.finish()
                model_out.finish()
                with deferred():  # the model and its data are replaced together
                    data_out.commit()
                    model_out.commit()
    except OSError as err:
        raise ModelError(f"{path}: cannot write: {err.strerror or err}") from None
    except ValueError as err:  # a tensor whose data does not fit its header
        raise ModelError(f"{path}: cannot write: {err}") from None


def _movable(tensor: TensorProto, threshold: int) -> bool:
    """Whether a tensor's data goes to the external data file."""
    return (
        tensor.HasField("raw_data")
        and tensor.data_location != TensorProto.EXTERNAL
        and _inline_bytes(tensor) >= max(threshold, 1)
    )


def _write(out: Writing, parts: ModelParts) -> None:
    size = parts.head.ByteSize() + parts.graph.ByteSize() + sum(_serialized_size(t) for t in parts.initializers)
    if size > PROTOBUF_LIMIT:
        raise ModelError(
            f"{out.target.given}: cannot write a model of {size} bytes in one file "
            f"(protobuf's limit is 2 GB); write its tensors as external data "
            f"(--external-data always)"
        )
    write_model(out.write, parts.head, parts.graph, parts.initializers, _serialized_size)


def _inline_bytes(tensor: TensorProto) -> int:
    """Bytes of data a tensor holds inline (from its header where it can)."""
    if tensor.data_location == TensorProto.EXTERNAL:
        return 0
    if tensor.HasField("raw_data"):
        needed = raw_bytes_needed(tensor)
        return needed if needed is not None else len(tensor.raw_data)
    return tensor.ByteSize()


_RAW = TensorProto.DESCRIPTOR.fields_by_name["raw_data"].number


def _serialized_size(tensor: TensorProto) -> int:
    """``tensor.ByteSize()`` without serializing its data (upb's ByteSize serializes the
    whole message): the header's size plus the raw_data field's, whose length the type and
    dims give (write_model checks each against what it serializes)."""
    if not tensor.HasField("raw_data"):
        return tensor.ByteSize()
    needed = raw_bytes_needed(tensor)
    if needed is None:
        return tensor.ByteSize()
    return copy_without(tensor, "raw_data").ByteSize() + len(varint(_RAW << 3 | 2)) + len(varint(needed)) + needed


def _externalize(parts: ModelParts, out: Writing, location: str, threshold: int) -> ModelParts:
    """The parts with every big initializer's data written to ``out`` (aligned like onnx's)
    and a header naming where it is in its place; subgraph initializers too (the graph is
    the writer's own copy, edited in place)."""
    offset = 0

    def move(tensor: TensorProto) -> TensorProto:
        nonlocal offset
        header = copy_without(tensor, "raw_data")
        payload = tensor.raw_data
        padding = (-offset) % _ALIGNMENT
        out.write(b"\0" * padding)
        offset += padding
        out.write(payload)
        del header.external_data[:]
        for key, value in (("location", location), ("offset", str(offset)), ("length", str(len(payload)))):
            entry = header.external_data.add()
            entry.key, entry.value = key, value
        header.data_location = TensorProto.EXTERNAL
        offset += len(payload)
        return header

    initializers = [move(t) if _movable(t, threshold) else t for t in parts.initializers]
    for graph in list(all_graphs(parts.graph))[1:]:
        for index, tensor in enumerate(graph.initializer):
            if _movable(tensor, threshold):
                graph.initializer[index].CopyFrom(move(tensor))
    return ModelParts(parts.head, parts.graph, initializers)
