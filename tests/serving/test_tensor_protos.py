"""serving.wire.tensors' and serving.wire.tensor_protos' direct TensorProto <-> numpy conversions
against TensorFlow's own."""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2

from serving.wire import errors, tensor_protos, tensors

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


# ---- serving.wire.tensor_protos: the TensorFlow-free conversions the client uses ----------------


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_tensorflow_free_protos_equal_tensorflows_both_ways(dtype):
    for shape in SHAPES:
        signed = np.dtype(dtype).kind in "if"
        array = (np.arange(int(np.prod(shape))).reshape(shape) % 3 - signed).astype(dtype)
        theirs = tf.make_tensor_proto(array)
        assert tensor_protos.to_proto(array) == theirs, shape
        values = tf.make_tensor_proto(array.tolist(), dtype=tf.as_dtype(dtype), shape=shape)
        for proto in (theirs, values):
            back = tensor_protos.to_numpy(proto)
            assert back.dtype == array.dtype and back.shape == shape
            np.testing.assert_array_equal(back, array)
            np.testing.assert_array_equal(back, tf.make_ndarray(proto))


def test_tensorflow_free_strings_and_short_value_fields_read_as_tensorflow_reads_them():
    text = np.array([["caf\u00e9", ""], ["a", "b c"]])  # numpy "U": written as UTF-8
    proto = tensor_protos.to_proto(text)
    assert proto == tf.make_tensor_proto(text)
    want = np.array([[b"caf\xc3\xa9", b""], [b"a", b"b c"]], dtype=object)
    got = tensor_protos.to_numpy(proto)
    assert got.dtype == object and got.shape == (2, 2)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, tf.make_ndarray(proto))
    # A value field shorter than the shape: TensorFlow repeats the last value (none: zeros).
    for dtype, values in ((tf.float32, [1.5, 2.5]), (tf.int64, []), (tf.string, [b"x"])):
        short = tensor_pb2.TensorProto(dtype=dtype.as_datatype_enum)
        short.tensor_shape.dim.add(size=4)
        field = {tf.float32: "float_val", tf.int64: "int64_val", tf.string: "string_val"}[dtype]
        getattr(short, field).extend(values)
        got, want = tensor_protos.to_numpy(short), tf.make_ndarray(short)
        assert got.dtype == want.dtype and got.tolist() == want.tolist(), dtype


def test_tensorflow_free_errors_name_the_problem():
    bad = tensor_pb2.TensorProto(dtype=tf.int32.as_datatype_enum, tensor_content=b"\x01\x00\x00")
    bad.tensor_shape.dim.add(size=1)
    with pytest.raises(ValueError, match="tensor_content holds 3 bytes; shape \\[1\\] of int32"):
        tensor_protos.to_numpy(bad)
    with pytest.raises(ValueError, match="no numpy value for TensorProto dtype DT_COMPLEX64"):
        tensor_protos.to_numpy(tf.make_tensor_proto(np.array([1j], np.complex64)))
    with pytest.raises(ValueError, match="no TensorProto dtype for numpy dtype complex64"):
        tensor_protos.to_proto(np.array([1j], np.complex64))
    with pytest.raises(ValueError, match="cannot write int into a string tensor"):
        tensor_protos.to_proto(np.array([b"a", 3], dtype=object))


def _string_content(*strings):
    """TensorFlow C++'s EncodeStringList: the varint32 lengths, then the bytes."""
    lengths = b""
    for s in strings:
        n = len(s)
        while n >= 0x80:
            lengths += bytes([n & 0x7F | 0x80])
            n >>= 7
        lengths += bytes([n])
    return lengths + b"".join(strings)


def _string_proto(content, *shape):
    proto = tensor_pb2.TensorProto(dtype=tf.string.as_datatype_enum, tensor_content=content)
    for n in shape:
        proto.tensor_shape.dim.add(size=n)
    return proto


def test_strings_in_tensor_content_are_read_as_tensorflows_cpp_reads_them():
    """A DT_STRING proto may carry its strings in tensor_content (C++ AsProtoTensorContent);
    it was read as empty strings (a fuzz finding). Lengths of 1 and 2 varint bytes."""
    strings = [b"a", b"", b"\xff" * 300, "é".encode()]
    for reader in (tensor_protos.to_numpy, lambda p: tensors.to_numpy(p, "text")):
        array = reader(_string_proto(_string_content(*strings), 2, 2))
        assert array.dtype == object and array.shape == (2, 2)
        assert array.tolist() == [[b"a", b""], [b"\xff" * 300, "é".encode()]]


@pytest.mark.parametrize(
    "content,shape,message",
    [
        (b"\x01a", [2**40], "tensor_content holds 2 bytes; 1099511627776 strings need at least"),
        (b"\x02a", [1], "after their lengths; the lengths add up to 2"),
        (b"\x01ab", [1], "tensor_content holds 2 bytes of strings after their lengths"),
        (b"\xff\xff\xff\xff\xff\x01" + b"a" * 8, [1], "has a malformed length"),
        (b"\x80", [1], "has a malformed length"),
    ],
)
def test_strings_in_tensor_content_that_do_not_fit_are_refused(content, shape, message):
    with pytest.raises(ValueError, match=message):
        tensor_protos.to_numpy(_string_proto(content, *shape))
    with pytest.raises(errors.ServingError, match="input 'text' is not a valid TensorProto"):
        tensors.to_numpy(_string_proto(content, *shape), "text")


@pytest.mark.parametrize(
    "dtype,field,values,want",
    [
        (tf.float16, "half_val", [141096748, -1, 15360], [0xF72C, 0xFFFF, 0x3C00]),
        (tf.int8, "int_val", [300, -129, 5], [44, 127, 5]),
        (tf.int16, "int_val", [70000, -32769], [4464, 32767]),
        (tf.uint8, "int_val", [256, -1], [0, 255]),
        (tf.uint16, "int_val", [65536, -1], [0, 65535]),
    ],
)
def test_value_fields_wider_than_the_dtype_are_cut_as_cpp_reads_them(dtype, field, values, want):
    """A half_val / int_val value outside its dtype (a fuzz finding: OverflowError, not the
    documented ValueError) keeps its low bits, as TensorFlow's C++ static_cast reads it."""
    proto = tensor_pb2.TensorProto(dtype=dtype.as_datatype_enum)
    proto.tensor_shape.dim.add(size=len(values))
    getattr(proto, field).extend(values)
    array = tensor_protos.to_numpy(proto)
    assert array.dtype == dtype.as_numpy_dtype
    bits = array.view(np.uint16) if dtype == tf.float16 else array
    assert bits.tolist() == want


def test_a_proto_of_unknown_rank_has_no_value_on_either_reader():
    """tf.make_ndarray reads the dimensions of a proto flagged unknown_rank (a fuzz finding: it
    allocated what they claim); both readers refuse it before anything is read."""
    proto = tensor_pb2.TensorProto(dtype=tf.bfloat16.as_datatype_enum, half_val=[16256])
    proto.tensor_shape.unknown_rank = True
    proto.tensor_shape.dim.add(size=2**33)
    with pytest.raises(
        errors.ServingError,
        match="x' is not a valid TensorProto: a TensorProto of unknown rank has no numpy value",
    ):
        tensors.to_numpy(proto, "x")
    proto.dtype = tf.float32.as_datatype_enum
    with pytest.raises(ValueError, match="a TensorProto of unknown rank has no numpy value"):
        tensor_protos.to_numpy(proto)


def test_a_compact_string_proto_repeats_its_last_string_whole():
    """TensorFlow's compact form repeats the last value; a string ending in NUL bytes lost them
    in the copies (np.full goes through numpy's bytes_; a fuzz finding against tf.make_ndarray)."""
    proto = tensor_pb2.TensorProto(dtype=tf.string.as_datatype_enum, string_val=[b"a", b"l\0\0"])
    proto.tensor_shape.dim.add(size=4)
    assert tensor_protos.to_numpy(proto).tolist() == [b"a", b"l\0\0", b"l\0\0", b"l\0\0"]
    assert tf.make_ndarray(proto).tolist() == [b"a", b"l\0\0", b"l\0\0", b"l\0\0"]
