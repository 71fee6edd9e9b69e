"""numpy <-> `tensorflow.TensorProto` without TensorFlow (the client's and the server's wire format).

`to_proto` writes what `tf.make_tensor_proto` writes: raw bytes in `tensor_content` for numeric
arrays of more than one element (host byte order), the dtype's value field (`float_val`,
`int_val`, `half_val`, ...) for one element and for bool / uint16, `string_val` for strings.
`to_numpy` reads what `tf.make_ndarray` reads, including a value field shorter than the shape
(TensorFlow repeats the last value; an empty one means zeros / empty strings).
The server (`serving.tensors`) uses the raw fast paths and keeps TensorFlow for everything else;
`serving.client` uses all of it and never imports TensorFlow (`serving.protos`).
"""

import math

import numpy as np

from serving.protos import tensor_pb2, types_pb2

# Numeric dtypes a TensorProto can carry as raw bytes in `tensor_content`.
RAW_DTYPES = {
    types_pb2.DT_FLOAT: np.dtype(np.float32),
    types_pb2.DT_DOUBLE: np.dtype(np.float64),
    types_pb2.DT_HALF: np.dtype(np.float16),
    types_pb2.DT_INT8: np.dtype(np.int8),
    types_pb2.DT_INT16: np.dtype(np.int16),
    types_pb2.DT_INT32: np.dtype(np.int32),
    types_pb2.DT_INT64: np.dtype(np.int64),
    types_pb2.DT_UINT8: np.dtype(np.uint8),
    types_pb2.DT_UINT16: np.dtype(np.uint16),
    types_pb2.DT_UINT32: np.dtype(np.uint32),
    types_pb2.DT_UINT64: np.dtype(np.uint64),
    types_pb2.DT_BOOL: np.dtype(np.bool_),
}
# numpy dtype -> enum for writing raw bytes; tf.make_tensor_proto writes these two as values.
RAW_ENUMS = {
    dtype: enum
    for enum, dtype in RAW_DTYPES.items()
    if dtype not in (np.dtype(np.bool_), np.dtype(np.uint16))
}
# enum -> the value field `tf.make_tensor_proto` fills (and `tf.make_ndarray` reads).
_VALUE_FIELDS = {
    types_pb2.DT_FLOAT: "float_val",
    types_pb2.DT_DOUBLE: "double_val",
    types_pb2.DT_HALF: "half_val",
    types_pb2.DT_INT8: "int_val",
    types_pb2.DT_INT16: "int_val",
    types_pb2.DT_INT32: "int_val",
    types_pb2.DT_INT64: "int64_val",
    types_pb2.DT_UINT8: "int_val",
    types_pb2.DT_UINT16: "int_val",
    types_pb2.DT_UINT32: "uint32_val",
    types_pb2.DT_UINT64: "uint64_val",
    types_pb2.DT_BOOL: "bool_val",
}
_ENUMS = {dtype: enum for enum, dtype in RAW_DTYPES.items()}


def _shape(proto):
    return [d.size for d in proto.tensor_shape.dim]


def _set_shape(proto, shape):
    proto.tensor_shape.SetInParent()  # present even for a scalar, as TensorFlow writes it
    dims = proto.tensor_shape.dim
    for n in shape:
        dims.add(size=n)
    return proto


def raw_to_numpy(proto):
    """A numeric proto carried in `tensor_content` -> a writable numpy array; None otherwise
    (a value field, strings, another dtype, unknown rank, or content of the wrong size)."""
    dtype = RAW_DTYPES.get(proto.dtype)
    content = proto.tensor_content
    if dtype is None or not content or proto.tensor_shape.unknown_rank:
        return None
    shape = _shape(proto)
    if min(shape, default=0) < 0 or len(content) != math.prod(shape) * dtype.itemsize:
        return None
    return np.frombuffer(content, dtype).reshape(shape).copy()


def raw_to_proto(array: np.ndarray):
    """A numeric array of more than one element -> TensorProto with `tensor_content` (as
    tf.make_tensor_proto writes it); None for the cases it writes as values."""
    enum = RAW_ENUMS.get(array.dtype)
    if enum is None or not array.dtype.isnative or array.size == 1:
        return None
    return _set_shape(
        tensor_pb2.TensorProto(dtype=enum, tensor_content=array.tobytes()), array.shape
    )


def _is_text(array):
    return array.dtype == object or array.dtype.kind in "SU"


def to_proto(array):
    """numpy (or anything np.asarray takes) -> TensorProto, equal to tf.make_tensor_proto's.

    Raises:
        ValueError: a dtype outside RAW_DTYPES and strings (e.g. complex), or an object array
            holding something other than str / bytes.
    """
    array = np.asarray(array)
    if _is_text(array):
        values = []
        for value in array.flat:
            if isinstance(value, str):
                value = value.encode("utf-8")
            elif not isinstance(value, (bytes, np.bytes_)):
                raise ValueError(f"cannot write {type(value).__name__} into a string tensor")
            values.append(bytes(value))
        return _set_shape(
            tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=values), array.shape
        )
    proto = raw_to_proto(array)
    if proto is not None:
        return proto
    enum = _ENUMS.get(array.dtype.newbyteorder("="))
    if enum is None:
        raise ValueError(f"no TensorProto dtype for numpy dtype {array.dtype}")
    proto = _set_shape(tensor_pb2.TensorProto(dtype=enum), array.shape)
    flat = array.astype(array.dtype.newbyteorder("="), copy=False).reshape(-1)
    if enum == types_pb2.DT_HALF:
        flat = flat.view(np.uint16)
    getattr(proto, _VALUE_FIELDS[enum]).extend(flat.tolist())
    return proto


def to_numpy(proto) -> np.ndarray:
    """TensorProto -> numpy (strings as an object array of bytes), as tf.make_ndarray reads it.

    Raises:
        ValueError: a dtype outside RAW_DTYPES and strings, unknown rank, or `tensor_content` /
            a value field that does not fit the shape.
    """
    array = raw_to_numpy(proto)
    if array is not None:
        return array
    if proto.tensor_shape.unknown_rank:
        raise ValueError("a TensorProto of unknown rank has no numpy value")
    shape = _shape(proto)
    if min(shape, default=0) < 0:
        raise ValueError(f"TensorProto shape {shape} has a negative dimension")
    size = int(np.prod(shape))
    if proto.dtype == types_pb2.DT_STRING:
        values, dtype, fill = list(proto.string_val), None, b""
    elif proto.dtype in RAW_DTYPES:
        if proto.tensor_content:
            raise ValueError(
                f"tensor_content holds {len(proto.tensor_content)} bytes; shape {shape} of "
                f"{RAW_DTYPES[proto.dtype]} needs {size * RAW_DTYPES[proto.dtype].itemsize}"
            )
        dtype = RAW_DTYPES[proto.dtype]
        values = getattr(proto, _VALUE_FIELDS[proto.dtype])
        if proto.dtype == types_pb2.DT_HALF:
            values = np.array(values, np.uint16).view(np.float16)
        values, fill = list(values), 0
    else:
        known = proto.dtype in types_pb2.DataType.values()
        name = types_pb2.DataType.Name(proto.dtype) if known else proto.dtype
        raise ValueError(f"no numpy value for TensorProto dtype {name}")
    if len(values) > size:
        raise ValueError(f"TensorProto holds {len(values)} values for shape {shape}")
    if len(values) < size:  # tf.make_ndarray: repeat the last value (none: zeros / b"")
        values += [values[-1] if values else fill] * (size - len(values))
    if proto.dtype == types_pb2.DT_STRING:  # an object array of bytes, never numpy's "S"
        out = np.empty(size, object)
        out[:] = values
        return out.reshape(shape)
    return np.array(values, dtype).reshape(shape)
