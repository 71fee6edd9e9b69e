"""numpy <-> `tensorflow.TensorProto` without TensorFlow (the client's and the server's wire format).

`to_proto` writes what `tf.make_tensor_proto` writes: raw bytes in `tensor_content` for numeric
arrays of more than one element (host byte order), the dtype's value field (`float_val`,
`int_val`, `half_val`, ...) for one element and for bool / uint16, `string_val` for strings.
`to_numpy` reads what `tf.make_ndarray` reads, including a value field shorter than the shape
(TensorFlow repeats the last value; an empty one means zeros / empty strings), and strings in
`tensor_content` (what TensorFlow's C++ `AsProtoTensorContent` writes) as C++ reads them. That compact form
is the one place where a proto's declared shape, not its content, sizes an allocation, so it is
read only up to `max_filled` elements (a 39-byte proto can declare 2**31 strings); the content is
counted against the shape before anything is allocated.
The server (`serving.wire.tensors`) uses the raw fast paths and keeps TensorFlow for everything
else; `serving.client` uses all of it and never imports TensorFlow (`serving.wire.protos`).
"""

import math

import numpy as np

from serving.wire.protos import tensor_pb2, types_pb2

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


# The most elements a compact proto (fewer values than its shape) is expanded to by default:
# the server's default --max_request_elements.
MAX_FILLED = 1 << 22
# numpy's limit on the number of dimensions (TensorFlow's is 254).
MAX_RANK = 64


def dimensions(proto):
    """The declared dimensions (at most MAX_RANK of them; ValueError past that, before reading
    them)."""
    if len(proto.tensor_shape.dim) > MAX_RANK:
        raise ValueError(
            f"TensorProto shape has {len(proto.tensor_shape.dim)} dimensions; at most "
            f"{MAX_RANK} are accepted"
        )
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
    if (
        dtype is None
        or not content
        or proto.tensor_shape.unknown_rank
        or len(proto.tensor_shape.dim) > MAX_RANK
    ):
        return None
    shape = dimensions(proto)
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


def _varint32(data: bytes, pos: int):
    """(value, next position) of the varint32 at `pos` (protobuf's and TensorFlow's
    GetVarint32: at most 5 bytes, a value below 2**32); ValueError otherwise."""
    value = 0
    for shift in range(0, 35, 7):
        if pos >= len(data):
            break
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if value >= 1 << 32:
                break
            return value, pos
    raise ValueError("tensor_content of a string TensorProto has a malformed length")


def decode_string_list(content: bytes, count: int) -> np.ndarray:
    """The `count` strings a DT_STRING TensorProto carries in `tensor_content`, as TensorFlow's
    C++ `Tensor::FromProto` reads them (port::DecodeStringList: every length as a varint32, then
    the bytes, nothing left over) and its `AsProtoTensorContent` writes them; Python's
    tf.make_ndarray does not read this form. Each string takes at least one byte, so `count` is
    checked against the content before anything is allocated.

    Returns:
        object array [count] of bytes.
    Raises:
        ValueError: more strings declared than the content can hold, a malformed length, or
            lengths that do not add up to the rest of the content.
    """
    if count > len(content):
        raise ValueError(
            f"tensor_content holds {len(content)} bytes; {count} strings need at least {count}"
        )
    sizes, pos = [], 0
    for _ in range(count):
        size, pos = _varint32(content, pos)
        sizes.append(size)
    if sum(sizes) != len(content) - pos:
        raise ValueError(
            f"tensor_content holds {len(content) - pos} bytes of strings after their lengths; "
            f"the lengths add up to {sum(sizes)}"
        )
    out = np.empty(count, object)
    for i, size in enumerate(sizes):
        out[i] = content[pos : pos + size]
        pos += size
    return out


def to_numpy(proto, max_filled: int = MAX_FILLED) -> np.ndarray:
    """TensorProto -> numpy (strings as an object array of bytes), as tf.make_ndarray reads it,
    and strings in `tensor_content` as TensorFlow's C++ reads them (`decode_string_list`).

    The content is counted against the declared shape first (`tensor_content` must hold exactly
    the shape's bytes; a value field at most the shape's elements), and a value field shorter
    than the shape (TensorFlow's compact form: the last value repeated) is expanded only up to
    `max_filled` elements, so the proto's content, not its claim, bounds what is allocated.

    Raises:
        ValueError: a dtype outside RAW_DTYPES and strings, unknown rank, more than MAX_RANK
            dimensions, a negative dimension, `tensor_content` / a value field that does not fit
            the shape (strings: `decode_string_list`), or a compact proto declaring more than
            `max_filled` elements.
    """
    array = raw_to_numpy(proto)
    if array is not None:
        return array
    if proto.tensor_shape.unknown_rank:
        raise ValueError("a TensorProto of unknown rank has no numpy value")
    shape = dimensions(proto)
    if min(shape, default=0) < 0:
        raise ValueError(f"TensorProto shape {shape} has a negative dimension")
    size = math.prod(shape)  # a Python int: no overflow, whatever the claim
    if proto.dtype == types_pb2.DT_STRING and proto.tensor_content:
        return decode_string_list(proto.tensor_content, size).reshape(shape)
    if proto.dtype == types_pb2.DT_STRING:
        field, dtype, fill = proto.string_val, np.dtype(object), b""
    elif proto.dtype in RAW_DTYPES:
        dtype = RAW_DTYPES[proto.dtype]
        if proto.tensor_content:
            raise ValueError(
                f"tensor_content holds {len(proto.tensor_content)} bytes; shape {shape} of "
                f"{dtype} needs {size * dtype.itemsize}"
            )
        field, fill = getattr(proto, _VALUE_FIELDS[proto.dtype]), 0
    else:
        known = proto.dtype in types_pb2.DataType.values()
        name = types_pb2.DataType.Name(proto.dtype) if known else proto.dtype
        raise ValueError(f"no numpy value for TensorProto dtype {name}")
    count = len(field)  # counted without reading the values
    if count > size:
        raise ValueError(f"TensorProto holds {count} values for shape {shape}")
    if count < size and size > max_filled:
        raise ValueError(
            f"TensorProto declares shape {shape} ({size} elements) but holds {count} values; "
            f"a proto holding fewer values than its shape is expanded up to {max_filled} "
            "elements only"
        )
    if proto.dtype == types_pb2.DT_HALF:  # the low 16 bits of each int32, as C++ reads them
        values = np.array(field, np.int64).astype(np.uint16).view(np.float16)
    elif proto.dtype == types_pb2.DT_STRING:
        values = np.empty(count, object)
        values[:] = list(field)
    elif dtype.kind in "iu" and dtype.itemsize < 4:
        # int8 / int16 / uint8 / uint16 in int32 `int_val`: wrapped as C++'s static_cast does
        # (numpy refuses a value out of range with OverflowError).
        values = np.array(field, np.int64).astype(dtype)
    else:
        values = np.array(field, dtype)
    if count == size:
        return values.astype(dtype, copy=False).reshape(shape)
    # tf.make_ndarray: repeat the last value (none: zeros / b""). `fill`, not np.full: np.full
    # converts a bytes value through numpy's bytes_, which drops its trailing NUL bytes.
    out = np.empty(size, dtype)
    out.fill(values[-1] if count else fill)
    out[:count] = values
    return out.reshape(shape)
