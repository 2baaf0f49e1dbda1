"""Reading and writing model files: clear errors in, atomic writes out.

A model that cannot be read is a ``ModelError`` naming the file; the output is written to
a temporary file beside the destination and renamed only once it is complete, so a failed
run never leaves a half-written model behind.
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
    path = Path(path)
    if not path.exists():
        raise ModelError(f"{path}: no such file")
    if path.is_dir():
        raise ModelError(f"{path}: is a directory, not an ONNX model")
    try:
        if path.stat().st_size == 0:
            raise ModelError(f"{path}: empty file, not an ONNX model")
        model = onnx.load(str(path), load_external_data=False)
        _check_external_data(model, path)
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
    return model


def _external_tensors(model: ModelProto):
    from onnx.external_data_helper import _get_all_tensors, uses_external_data

    return [t for t in _get_all_tensors(model) if uses_external_data(t)]


def _check_external_data(model: ModelProto, path: Path) -> None:
    """Refuse external data that lives outside the model's directory (never read it)."""
    base = path.parent.resolve()
    for tensor in _external_tensors(model):
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        target = (base / location).resolve()
        if not location or os.path.isabs(location) or (target != base and base not in target.parents):
            raise ModelError(f"{path}: tensor '{tensor.name}' keeps its data at '{location}', outside "
                             f"the model's directory; refused as unsafe (nothing was read)")
        if not target.is_file():
            raise ModelError(f"{path}: tensor '{tensor.name}' keeps its data in '{location}', which "
                             f"does not exist beside the model")


def save_model(model: ModelProto, path: str | os.PathLike) -> None:
    """Write ``model`` to ``path`` atomically (temporary file + rename)."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise ModelError(f"{path}: directory {directory} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(model.SerializeToString())
        os.chmod(tmp, _file_mode(path))
        os.replace(tmp, path)
    except ValueError as err:  # protobuf refuses models over 2 GB
        raise ModelError(f"{path}: cannot serialize model: {err}") from None
    except OSError as err:
        raise ModelError(f"{path}: cannot write: {err.strerror or err}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _file_mode(path: Path) -> int:
    """The mode a plain open() would give (mkstemp's 0600 would surprise), or the old file's."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
