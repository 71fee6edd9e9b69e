"""`serving.wire.dtypes` against `tf.DType`: the same name, enum, kind and numpy type for every
DataType, the same dtype for numpy dtypes, and equality with TensorFlow's own objects."""

import numpy as np
import pytest
import tensorflow as tf

from serving.wire import dtypes
from serving.wire.protos import types_pb2
from tests.serving.test_tensor_protos import DTYPES

ENUMS = [
    value
    for name, value in types_pb2.DataType.items()
    if value != types_pb2.DT_INVALID and not name.endswith("_REF")
]


@pytest.mark.parametrize("enum", ENUMS, ids=[types_pb2.DataType.Name(e) for e in ENUMS])
def test_every_dtype_matches_tensorflow(enum):
    ours, theirs = dtypes.as_dtype(enum), tf.dtypes.as_dtype(enum)
    assert ours.name == theirs.name
    assert ours.as_datatype_enum == theirs.as_datatype_enum == enum
    assert ours.is_integer == theirs.is_integer
    assert ours.is_floating == theirs.is_floating
    assert ours == theirs and hash(ours) == hash(enum)
    assert dtypes.as_dtype(theirs) is ours
    if theirs.name in ("resource", "variant") or theirs.is_quantized:
        with pytest.raises(TypeError, match=f"dtype {theirs.name} has no numpy equivalent"):
            ours.as_numpy_dtype
    else:
        assert np.dtype(ours.as_numpy_dtype) == np.dtype(theirs.as_numpy_dtype)


def test_names_tensorflow_gives_half_float_and_double():
    assert (dtypes.float16.name, dtypes.float32.name, dtypes.float64.name) == (
        "float16",
        "float32",
        "float64",
    )
    assert dtypes.bool_.name == "bool" and dtypes.string.name == "string"


@pytest.mark.parametrize(
    "numpy_dtype",
    [*DTYPES, np.complex64, np.complex128, ">i4", "<f4"],
)
def test_numpy_dtypes_map_as_tensorflow_maps_them(numpy_dtype):
    assert dtypes.as_dtype(np.dtype(numpy_dtype)) == tf.dtypes.as_dtype(np.dtype(numpy_dtype))


def test_text_arrays_are_strings_and_others_are_refused():
    for array in (np.array([b"a"]), np.array(["a"]), np.array([b"a"], object)):
        assert dtypes.as_dtype(array.dtype) is dtypes.string
    with pytest.raises(TypeError, match="numpy dtype datetime64"):
        dtypes.as_dtype(np.dtype("datetime64[s]"))
    with pytest.raises(TypeError, match="no TensorFlow dtype has enum value 999"):
        dtypes.as_dtype(999)
    assert dtypes.int32 != dtypes.int64 and dtypes.int32 != "int32"
