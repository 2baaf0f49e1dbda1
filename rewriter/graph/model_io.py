"""Reading and writing model files: clear errors in, atomic writes out.

A model that cannot be read is a ``ModelError`` naming the file; the output (and its
external data file, if any) is written to temporary files beside the destination and
renamed only once complete, so a failed run never leaves a half-written model behind.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import ModelProto

from ..errors import ModelError


def load_model(path: str | os.PathLike) -> ModelProto:
    """Load an ONNX model file (with its external data), or raise ``ModelError``."""
    return read_model(path)[0]


def read_model(path: str | os.PathLike) -> tuple[ModelProto, bool]:
    """``load_model``, also telling whether the file kept tensors as external data."""
    path = Path(path)
    if not path.exists():
        raise ModelError(f"{path}: no such file")
    if path.is_dir():
        raise ModelError(f"{path}: is a directory, not an ONNX model")
    try:
        if path.stat().st_size == 0:
            raise ModelError(f"{path}: empty file, not an ONNX model")
        model = onnx.load(str(path), load_external_data=False)
        had_external = _check_external_data(model, path)
        onnx.load_external_data_for_model(model, str(path.parent))
    except ModelError:
        raise
    except (DecodeError, RuntimeError, ValueError, UnicodeDecodeError) as err:
        raise ModelError(f"{path}: not a readable ONNX model ({err.__class__.__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else 'cannot parse'})") from None
    except OSError as err:
        raise ModelError(f"{path}: cannot read: {err.strerror or err}") from None
    except Exception as err:  # onnx raises a zoo of types for corrupt files
        raise ModelError(f"{path}: not a readable ONNX model ({err.__class__.__name__}: {err})") from None
    if not model.HasField("graph"):
        raise ModelError(f"{path}: not an ONNX model (no graph)")
    return model, had_external


def _external_tensors(model: ModelProto):
    from onnx.external_data_helper import _get_all_tensors, uses_external_data

    return [t for t in _get_all_tensors(model) if uses_external_data(t)]


def _check_external_data(model: ModelProto, path: Path) -> bool:
    """Refuse external data that lives outside the model's directory (never read it);
    returns whether the model has any."""
    base = path.parent.resolve()
    tensors = _external_tensors(model)
    for tensor in tensors:
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        target = (base / location).resolve()
        if not location or os.path.isabs(location) or (target != base and base not in target.parents):
            raise ModelError(f"{path}: tensor '{tensor.name}' keeps its data at '{location}', outside "
                             f"the model's directory; refused as unsafe (nothing was read)")
        if not target.is_file():
            raise ModelError(f"{path}: tensor '{tensor.name}' keeps its data in '{location}', which "
                             f"does not exist beside the model")
    return bool(tensors)


PROTOBUF_LIMIT = 2**31 - 1  # bytes: protobuf cannot serialize a bigger message
EXTERNAL_DATA_MODES = ("auto", "always", "never")


def save_model(model: ModelProto, path: str | os.PathLike, external_data: str = "auto",
               location: str | None = None, size_threshold: int = 1024,
               source_used_external: bool = False) -> None:
    """Write ``model`` to ``path`` atomically (temporary files + rename).

    ``external_data``: "always" moves every initializer of at least ``size_threshold``
    bytes (all graphs, subgraphs included) into one file ``location`` beside ``path``
    (default ``<name>.data``), like onnx's ``save_model(save_as_external_data=True,
    all_tensors_to_one_file=True)``; "never" keeps everything inline; "auto" externalizes
    when the input kept its data outside (``source_used_external``) or when the model
    would not fit in one protobuf (2 GB).  ``model`` itself is never modified."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if external_data not in EXTERNAL_DATA_MODES:
        raise ModelError(f"external data mode must be one of {', '.join(EXTERNAL_DATA_MODES)}, "
                         f"not '{external_data}'")
    if not directory.is_dir():
        raise ModelError(f"{path}: directory {directory} does not exist")
    location = location or f"{path.name}.data"
    if os.path.basename(location) != location or location in ("", ".", ".."):
        raise ModelError(f"external data file '{location}' must be a plain file name (it is "
                         f"written beside {path.name})")
    external = external_data == "always" or (external_data == "auto" and (
        source_used_external or _payload_bytes(model) > PROTOBUF_LIMIT - (64 << 20)))
    written: list[str] = []
    try:
        if external:
            data_tmp = _temporary(directory, location)
            written.append(data_tmp)
            model, external = _externalized(model, data_tmp, location, size_threshold)
        model_tmp = _temporary(directory, path.name)
        written.append(model_tmp)
        with open(model_tmp, "wb") as handle:
            handle.write(model.SerializeToString())
        if external:
            os.chmod(data_tmp, _file_mode(directory / location))
            os.replace(data_tmp, directory / location)
        os.chmod(model_tmp, _file_mode(path))
        os.replace(model_tmp, path)
    except ValueError as err:  # protobuf refuses models over 2 GB
        raise ModelError(f"{path}: cannot serialize model ({err}); write its tensors as external "
                         f"data (--external-data always)") from None
    except OSError as err:
        raise ModelError(f"{path}: cannot write: {err.strerror or err}") from None
    finally:
        for tmp in written:
            if os.path.exists(tmp):
                os.unlink(tmp)


def _temporary(directory: Path, name: str) -> str:
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    os.close(fd)
    return tmp


def _all_graphs(graph) -> list:
    from .view import subgraphs_of

    graphs = [graph]
    for node in graph.node:
        for sub in subgraphs_of(node):
            graphs.extend(_all_graphs(sub))
    return graphs


def _payload_bytes(model: ModelProto) -> int:
    """Bytes of tensor data held inline (initializers of every graph)."""
    return sum(len(t.raw_data) for g in _all_graphs(model.graph) for t in g.initializer)


_ALIGNMENT = 4096  # onnx aligns external tensors like this for memory mapping


def _externalized(model: ModelProto, data_path: str, location: str,
                  threshold: int) -> tuple[ModelProto, bool]:
    """A copy of ``model`` whose large initializers live in ``data_path`` (named ``location``
    in the model), and whether there were any.  The big payloads are never duplicated in
    memory: they are written straight from ``model``."""
    from onnx import TensorProto

    light = ModelProto()
    graph = model.graph
    big: dict[int, TensorProto] = {}
    for g in _all_graphs(graph):
        for tensor in g.initializer:
            if tensor.HasField("raw_data") and len(tensor.raw_data) >= max(threshold, 1):
                big[id(tensor)] = tensor
    if not big:
        return model, False
    # copy everything but the big payloads: clear them on the source for the copy, then restore
    saved = {key: tensor.raw_data for key, tensor in big.items()}
    try:
        for tensor in big.values():
            tensor.ClearField("raw_data")
        light.CopyFrom(model)
    finally:
        for key, tensor in big.items():
            tensor.raw_data = saved[key]
    offset = 0
    with open(data_path, "wb") as handle:
        originals = [t for g in _all_graphs(graph) for t in g.initializer]
        copies = [t for g in _all_graphs(light.graph) for t in g.initializer]
        for original, copy in zip(originals, copies):
            if id(original) not in big:
                continue
            payload = saved[id(original)]
            padding = (-offset) % _ALIGNMENT
            handle.write(b"\0" * padding)
            offset += padding
            handle.write(payload)
            del copy.external_data[:]
            for key, value in (("location", location), ("offset", str(offset)),
                               ("length", str(len(payload)))):
                entry = copy.external_data.add()
                entry.key, entry.value = key, value
            copy.data_location = TensorProto.EXTERNAL
            offset += len(payload)
    return light, True


def _file_mode(path: Path) -> int:
    """The mode a plain open() would give (mkstemp's 0600 would surprise), or the old file's."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
