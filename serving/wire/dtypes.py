"""TensorFlow's tensor dtypes for the server, without TensorFlow's runtime.

A signature's input and output dtypes reach the server as `DataType` enum values (a SavedModel's
`TensorInfo.dtype`, a LiteRT flatbuffer's numpy dtypes). The server compares them, names them in
error messages and casts numpy arrays to them; for that it needs what `tf.DType` offers, not the
runtime behind it, so a server whose versions are all LiteRT (`--prefer_tflite_model`) never loads
TensorFlow (`serving.models.servable`). `DType` has `tf.DType`'s names (`float32`, `float16` for
DT_HALF, `string`, `bfloat16`, ...), `as_datatype_enum`, `as_numpy_dtype`, `is_integer` and
`is_floating`, and compares equal to the `tf.DType` of the same enum.
"""

from __future__ import annotations

import numpy as np

from serving.wire.protos import types_pb2

# DataType enum name -> tf.DType name, where the two differ by more than case and the prefix.
_NAMES = {"DT_FLOAT": "float32", "DT_DOUBLE": "float64", "DT_HALF": "float16"}
_INTEGERS = {"int2", "int4", "int8", "int16", "int32", "int64"}
_INTEGERS |= {"u" + name for name in _INTEGERS}


def _name(enum_name: str) -> str:
    return _NAMES.get(enum_name, enum_name[len("DT_") :].lower())


def _numpy_dtype(name: str):
    """numpy's dtype for a tf name: numpy's own, ml_dtypes' (bfloat16, int4, float8_*), object
    for strings; None for the types no array holds (resource, variant, quantized)."""
    if name == "string":
        return np.dtype(object)
    if name == "bool":
        return np.dtype(np.bool_)
    if hasattr(np, name) and name not in ("int2", "uint2", "int4", "uint4"):
        return np.dtype(getattr(np, name))
    import ml_dtypes  # installed with numpy's extended types by jax, TensorFlow and LiteRT

    return np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else None


class DType:
    """One TensorFlow dtype (see the module docstring); make it with `as_dtype`."""

    __slots__ = ("as_datatype_enum", "name", "_numpy")

    def __init__(self, enum: int):
        self.as_datatype_enum = int(enum)
        self.name = _name(types_pb2.DataType.Name(self.as_datatype_enum))
        self._numpy = _numpy_dtype(self.name)

    @property
    def as_numpy_dtype(self):
        """The numpy scalar type (`np.int32`, `object` for strings), as `tf.DType`'s.

        Raises:
            TypeError: a dtype no numpy array holds (resource, variant, quantized).
        """
        if self._numpy is None:
            raise TypeError(f"dtype {self.name} has no numpy equivalent")
        return self._numpy.type

    @property
    def numpy_dtype(self):
        """The numpy dtype arrays of this type have (object for strings); None where no array
        holds one (resource, variant, quantized)."""
        return self._numpy

    @property
    def is_integer(self) -> bool:
        return self.name in _INTEGERS

    @property
    def is_floating(self) -> bool:
        return self.name.startswith(("float", "bfloat"))

    def __eq__(self, other):
        enum = getattr(other, "as_datatype_enum", other)
        return isinstance(enum, int) and enum == self.as_datatype_enum

    def __hash__(self):
        return hash(self.as_datatype_enum)

    def __repr__(self):
        return f"dtypes.{self.name}"


_BY_ENUM = {
    value: DType(value)
    for name, value in types_pb2.DataType.items()
    if value != types_pb2.DT_INVALID and not name.endswith("_REF")
}
_BY_NUMPY = {d._numpy: d for d in _BY_ENUM.values() if d._numpy is not None and d.name != "string"}


def as_dtype(value) -> DType:
    """The DType of a DataType enum value, a numpy dtype (or scalar type), a `tf.DType` or a
    DType.

    Raises:
        TypeError: a value that names no TensorFlow dtype (e.g. numpy's complex256).
    """
    if isinstance(value, DType):
        return value
    enum = getattr(value, "as_datatype_enum", value)
    if isinstance(enum, (int, np.integer)) and not isinstance(enum, bool):
        if int(enum) in _BY_ENUM:
            return _BY_ENUM[int(enum)]
        raise TypeError(f"no TensorFlow dtype has enum value {enum}")
    try:
        numpy_dtype = np.dtype(value)
    except TypeError:
        raise TypeError(f"cannot convert {value!r} to a TensorFlow dtype") from None
    if numpy_dtype.kind in "OSU":
        return string
    found = _BY_NUMPY.get(numpy_dtype.newbyteorder("="))
    if found is None:
        raise TypeError(f"numpy dtype {numpy_dtype} has no TensorFlow dtype")
    return found


float16 = _BY_ENUM[types_pb2.DT_HALF]
float32 = _BY_ENUM[types_pb2.DT_FLOAT]
float64 = _BY_ENUM[types_pb2.DT_DOUBLE]
bfloat16 = _BY_ENUM[types_pb2.DT_BFLOAT16]
int8 = _BY_ENUM[types_pb2.DT_INT8]
int16 = _BY_ENUM[types_pb2.DT_INT16]
int32 = _BY_ENUM[types_pb2.DT_INT32]
int64 = _BY_ENUM[types_pb2.DT_INT64]
uint8 = _BY_ENUM[types_pb2.DT_UINT8]
uint16 = _BY_ENUM[types_pb2.DT_UINT16]
uint32 = _BY_ENUM[types_pb2.DT_UINT32]
uint64 = _BY_ENUM[types_pb2.DT_UINT64]
bool_ = _BY_ENUM[types_pb2.DT_BOOL]
string = _BY_ENUM[types_pb2.DT_STRING]
