"""ONNX element types by the names rules use (``float``, ``float16``, ``int64``...)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

DTYPES: dict[str, int] = {
    "float": TensorProto.FLOAT,
    "float32": TensorProto.FLOAT,
    "double": TensorProto.DOUBLE,
    "float64": TensorProto.DOUBLE,
    "float16": TensorProto.FLOAT16,
    "half": TensorProto.FLOAT16,
    "bfloat16": TensorProto.BFLOAT16,
    "int8": TensorProto.INT8,
    "int16": TensorProto.INT16,
    "int32": TensorProto.INT32,
    "int64": TensorProto.INT64,
    "uint8": TensorProto.UINT8,
    "uint16": TensorProto.UINT16,
    "uint32": TensorProto.UINT32,
    "uint64": TensorProto.UINT64,
    "bool": TensorProto.BOOL,
    "string": TensorProto.STRING,
}

FLOAT_TYPES = frozenset({TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16})


def to_numpy_dtype(elem_type: int) -> np.dtype:
    return np.dtype(helper.tensor_dtype_to_np_dtype(int(elem_type)))


def from_numpy_dtype(dtype: np.dtype) -> int:
    return int(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
