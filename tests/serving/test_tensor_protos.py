"""serving.tensors' direct TensorProto <-> numpy conversions against TensorFlow's own."""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2

from serving import errors, tensors

DTYPES = (
    np.float32,
    np.float64,
    np.float16,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.bool_,
)
SHAPES = ((), (0,), (1,), (2, 3), (1, 32), (0, 4), (3, 0, 2), (2, 1, 3))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_protos_equal_tensorflows_and_arrays_round_trip(dtype):
    for shape in SHAPES:
        signed = np.dtype(dtype).kind in "if"
        array = (np.arange(int(np.prod(shape))).reshape(shape) % 3 - signed).astype(dtype)
        ours, theirs = tensors.to_proto(array), tf.make_tensor_proto(array)
        assert ours == theirs, (shape, ours, theirs)  # the same bytes on the wire
        for proto in (
            theirs,
            tf.make_tensor_proto(
                array.tolist() if array.size else array,
                dtype=tf.as_dtype(array.dtype),
                shape=list(shape),
            ),
        ):
            back = tensors.to_numpy(proto, "x")
            assert back.dtype == array.dtype and back.shape == shape
            np.testing.assert_array_equal(back, array)
            back.flat[:1] = 1  # writable: a copy, not a view of the request's bytes


def test_strings_and_bad_content_take_tensorflows_path():
    text = np.array([b"caf\xc3\xa9", b""], dtype=object)
    np.testing.assert_array_equal(tensors.to_numpy(tensors.to_proto(text), "text"), text)
    proto = tensor_pb2.TensorProto(dtype=tf.int32.as_datatype_enum, tensor_content=b"\x01\x00\x00")
    proto.tensor_shape.dim.add(size=1)  # 3 bytes for one int32
    with pytest.raises(
        errors.ServingError, match="input 'input_word_ids' is not a valid TensorProto"
    ):
        tensors.to_numpy(proto, "input_word_ids")
