"""gRPC tensors: reports filed against the peers that own TensorProto handling (tensorflow/serving,
tensorflow/tensorflow's TensorProto readers, Triton, KServe, OpenVINO Model Server, ONNX), each
replayed as a PredictRequest to our InferenceService (tests/fuzz/servables.py, the server's default
limits) with the value the peer's report (or its fix) expects. `echo` returns every input unchanged
(one signature per dtype, unknown rank), `hp2` is half_plus_two (x float, any shape), `clf` takes
text and text_b [B] strings.

A test marked xfail(strict=True) is a report our code does not meet yet; its reason says how.
"""

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow_serving.apis import predict_pb2

from serving.wire import errors, tensors
from tests.fuzz import servables

C = grpc.StatusCode


@pytest.fixture(scope="module")
def service():
    return servables.server().service


def proto(dtype, dims, **fields):
    """A TensorProto of `dtype` and `dims`, with `tensor_content` or the named value fields."""
    p = tensor_pb2.TensorProto(dtype=dtype)
    p.tensor_shape.SetInParent()
    for n in dims:
        p.tensor_shape.dim.add(size=n)
    for name, values in fields.items():
        if name == "tensor_content":
            p.tensor_content = values
        else:
            getattr(p, name).extend(values)
    return p


def request(model, signature="", **inputs):
    r = predict_pb2.PredictRequest()
    r.model_spec.name = model
    r.model_spec.signature_name = signature
    for name, value in inputs.items():
        r.inputs[name].CopyFrom(value)
    return r


def refused(service, req):
    """(status code, message) of a Predict that must fail."""
    with pytest.raises(errors.ServingError) as caught:
        service.predict(req)
    return caught.value.code, caught.value.message


def echoed(service, signature, value):
    """The `default` output proto of echo's `signature` for input `value`."""
    return service.predict(request("echo", signature, default=value)).outputs["default"]


# ------------------------------------------------------------------ names and dtypes
def test_tfs_435_unknown_alias_names_the_expected_inputs(service):
    """tensorflow/serving#435: 'input tensor alias not found in signature' should say which inputs
    the signature expects (kirilg: 'I'll update the error message with the expected list of
    inputs'). Expected: INVALID_ARGUMENT naming the sent alias and the expected ones."""
    req = request("hp2", images=proto(types_pb2.DT_FLOAT, [1], float_val=[1.0]))
    assert refused(service, req) == (
        C.INVALID_ARGUMENT,
        "input size does not match signature 'serving_default': got ['images'], expected ['x']. "
        "Missing but required: ['x']. Sent extra: ['images']",
    )


def test_tfs_719_missing_input(service):
    """tensorflow/serving#719: 'input size does not match signature' when the request fills
    'images' but not 'phase' (chrisolston: the request must carry every input of the signature).
    Expected: INVALID_ARGUMENT naming the input that is missing."""
    req = request("clf", text=proto(types_pb2.DT_STRING, [1], string_val=[b"a"]))
    assert refused(service, req) == (
        C.INVALID_ARGUMENT,
        "input size does not match signature 'serving_default': got ['text'], expected "
        "['text', 'text_b']. Missing but required: ['text_b']. Sent extra: []",
    )


def test_tfs_1495_927_string_for_a_float_input(service):
    """tensorflow/serving#1495 and #927: image bytes (DT_STRING) sent to a float input. The
    reports' value: INVALID_ARGUMENT 'Expects arg[0] to be float but string is provided'.
    Expected here: INVALID_ARGUMENT naming the input and both dtypes, before the model runs."""
    req = request("hp2", x=proto(types_pb2.DT_STRING, [1], string_val=[b"\xff\xd8"]))
    assert refused(service, req) == (
        C.INVALID_ARGUMENT,
        "input 'x' expects dtype float32 but got string",
    )


# ------------------------------------------------------------------ tensor_content
def test_tensorflow_25064_int32_in_tensor_content(service):
    """tensorflow/tensorflow#25064: make_tensor_proto([165, 60, 35], int32) writes tensor_content
    "\\245\\000\\000\\000<\\000\\000\\000#\\000\\000\\000" (what a Go client must fill). Expected:
    the server reads [165, 60, 35]."""
    content = b"\245\000\000\000<\000\000\000#\000\000\000"
    assert tf.make_tensor_proto([165, 60, 35], tf.int32).tensor_content == content
    out = echoed(service, "int32", proto(types_pb2.DT_INT32, [3], tensor_content=content))
    assert tf.make_ndarray(out).tolist() == [165, 60, 35]


def test_tensorflow_38258_half_in_tensor_content_and_half_val(service):
    """tensorflow/tensorflow#38258: make_tensor_proto(np.float16 [10.0, 20.0]) moved from
    half_val 18688, 19712 to tensor_content "\\000I\\000M". Expected: both forms read as
    [10.0, 20.0] float16, and the response written as tf.make_tensor_proto writes it."""
    want = tf.make_tensor_proto(np.array([10.0, 20.0], np.float16))
    assert want.tensor_content == b"\000I\000M"
    for sent in (
        proto(types_pb2.DT_HALF, [2], tensor_content=b"\000I\000M"),
        proto(types_pb2.DT_HALF, [2], half_val=[18688, 19712]),
    ):
        out = echoed(service, "float16", sent)
        assert out == want
        got = tf.make_ndarray(out)
        assert got.dtype == np.float16 and got.tolist() == [10.0, 20.0]


def test_onnx_6604_6646_bfloat16_raw_content_is_read(service):
    """onnx/onnx#6604 and #6646: a bfloat16 tensor carried as raw bytes came back empty (the raw
    field ignored). Our bfloat16 path (TensorFlow's make_ndarray, the one dtype we do not read
    ourselves) must read the bytes. Expected: [1.0, 2.0, -0.5] from tensor_content 80 3F 00 40 00 BF
    and from half_val [0x3F80, 0x4000, 0xBF00]; a bfloat16 sent to a float input is refused as a
    dtype mismatch, not misread."""
    content = bytes.fromhex("803f0040 00bf".replace(" ", ""))
    for sent in (
        proto(types_pb2.DT_BFLOAT16, [3], tensor_content=content),
        proto(types_pb2.DT_BFLOAT16, [3], half_val=[0x3F80, 0x4000, 0xBF00]),
    ):
        got = tensors.to_numpy(sent, "x")
        assert got.dtype == tf.bfloat16.as_numpy_dtype
        assert got.astype(np.float32).tolist() == [1.0, 2.0, -0.5]
    req = request(
        "echo", "float", default=proto(types_pb2.DT_BFLOAT16, [3], tensor_content=content)
    )
    assert refused(service, req) == (
        C.INVALID_ARGUMENT,
        "input 'default' expects dtype float32 but got bfloat16",
    )


def test_triton_7427_tensor_content_byte_size_must_match_the_shape(service):
    """triton-inference-server/server#7427 (and client#742): input byte size checks, so that data
    whose byte size does not match its shape is refused. Expected: 60 bytes for an int32 [16]
    (64 bytes) is INVALID_ARGUMENT naming both sizes."""
    req = request(
        "echo", "int32", default=proto(types_pb2.DT_INT32, [16], tensor_content=b"\0" * 60)
    )
    assert refused(service, req) == (
        C.INVALID_ARGUMENT,
        "input 'default' is not a valid TensorProto: tensor_content holds 60 bytes; shape [16] of "
        "int32 needs 64",
    )


def test_triton_3158_more_values_than_the_shape(service):
    """triton-inference-server/server#3158: shape [1, 16] with 18 values. The report's value:
    400 'Unable to parse 'data': Shape does not match true shape of 'data' field', and the server
    keeps serving. Expected here: INVALID_ARGUMENT naming the count and the shape, then a good
    request of the same signature answered."""
    too_many = proto(types_pb2.DT_INT32, [1, 16], int_val=list(range(1, 19)))
    assert refused(service, request("echo", "int32", default=too_many)) == (
        C.INVALID_ARGUMENT,
        "input 'default' is not a valid TensorProto: TensorProto holds 18 values for shape [1, 16]",
    )
    good = proto(types_pb2.DT_INT32, [1, 16], int_val=list(range(1, 17)))
    assert tf.make_ndarray(echoed(service, "int32", good)).tolist() == [list(range(1, 17))]


def test_tensorflow_6151_strings_in_tensor_content(service):
    """tensorflow/tensorflow#6151 (tensor_content: 'This representation can be used for all tensor
    types', Tensor::AsProtoTensorContent): a DT_STRING in tensor_content is every length as a
    varint, then the bytes. Expected: b"\\x03\\x02fooba" is [b"foo", b"ba"]; lengths that do not
    add up to the rest are INVALID_ARGUMENT."""
    out = echoed(
        service, "string", proto(types_pb2.DT_STRING, [2], tensor_content=b"\x03\x02fooba")
    )
    assert tf.make_ndarray(out).tolist() == [b"foo", b"ba"]
    bad = proto(types_pb2.DT_STRING, [2], tensor_content=b"\x03\x05fooba")
    assert refused(service, request("echo", "string", default=bad)) == (
        C.INVALID_ARGUMENT,
        "input 'default' is not a valid TensorProto: tensor_content holds 5 bytes of strings after "
        "their lengths; the lengths add up to 8",
    )


def test_kserve_3731_non_utf8_bytes_pass_through(service):
    """kserve/kserve#3731: a bytes input that is not UTF-8 raised UnicodeDecodeError. Expected: a
    string input that is not text (not text/text_b) takes any bytes and returns them unchanged;
    a text input refuses them with INVALID_ARGUMENT naming the element, never an internal error."""
    sent = proto(types_pb2.DT_STRING, [2], string_val=[b"\xff\xfe", "h\u00e9llo".encode()])
    assert tf.make_ndarray(echoed(service, "string", sent)).tolist() == [
        b"\xff\xfe",
        b"h\xc3\xa9llo",
    ]
    req = request(
        "clf",
        text=proto(types_pb2.DT_STRING, [1], string_val=[b"\xff"]),
        text_b=proto(types_pb2.DT_STRING, [1], string_val=[b""]),
    )
    assert refused(service, req) == (
        C.INVALID_ARGUMENT,
        "input 'text' element 0 is not valid UTF-8 text (invalid start byte at byte 0); send text "
        "as UTF-8",
    )


# ------------------------------------------------------------------ declared shapes
def test_ovms_435_negative_dimension(service):
    """openvinotoolkit/model_server PR #435 (CVS-41481): a request shape with a negative value is
    refused ('Negative dimension size is not acceptable'). Expected: INVALID_ARGUMENT naming the
    shape, for an input whose signature accepts any shape."""
    req = request("hp2", x=proto(types_pb2.DT_FLOAT, [-1]))
    assert refused(service, req) == (
        C.INVALID_ARGUMENT,
        "input 'x' has shape [-1]: dimensions cannot be negative",
    )


def test_tensorflow_115728_empty_value_field_cannot_size_an_allocation(service):
    """tensorflow/tensorflow#115728 (CWE-770 in Tensor::FromProto): a 12-byte proto declaring
    912,345,678 floats and carrying none allocated 3.65 GB. Expected: refused before any
    allocation (INVALID_ARGUMENT, the --max_request_elements limit), while broadcasting one value
    over a small shape (the compact form the fix keeps) still works: [4] of 1.5."""
    huge = proto(types_pb2.DT_FLOAT, [912345678])
    assert len(huge.SerializeToString()) < 16
    assert refused(service, request("hp2", x=huge)) == (
        C.INVALID_ARGUMENT,
        "input 'x' has shape [912345678], 912345678 elements; the limit is 4194304 elements per "
        "input (--max_request_elements)",
    )
    compact = proto(types_pb2.DT_FLOAT, [4], float_val=[1.5])
    assert tf.make_ndarray(echoed(service, "float", compact)).tolist() == [1.5] * 4


def test_tensorflow_108663_dimensions_whose_product_overflows_int64(service):
    """tensorflow/tensorflow#108663: dimensions [2147476476, 2147478413, 2147474133, 2147492768,
    2147491838] overflow the int64 element count and abort the process (Check failed in
    tensor_shape.cc). Expected: INVALID_ARGUMENT with the true product, the process alive."""
    dims = [2147476476, 2147478413, 2147474133, 2147492768, 2147491838]
    product = 1
    for n in dims:
        product *= n
    assert product > 2**63
    req = request("echo", "float", default=proto(types_pb2.DT_FLOAT, dims))
    assert refused(service, req) == (
        C.INVALID_ARGUMENT,
        f"input 'default' has shape {dims}, {product} elements; the limit is 4194304 elements "
        "per input (--max_request_elements)",
    )
    assert tf.make_ndarray(
        echoed(service, "float", proto(types_pb2.DT_FLOAT, [1], float_val=[2.0]))
    ).tolist() == [2.0]


def test_triton_5972_172_zero_sized_dimensions(service):
    """triton-inference-server/server#5972 and PR #172 ('Allow wildcard dimension to have zero
    size': no data is expected for such an input): an input of shape [0] or [2, 0] must not crash
    the server. Expected: echoed with its shape, no values."""
    for dims in ([0], [2, 0]):
        out = echoed(service, "int32", proto(types_pb2.DT_INT32, dims))
        got = tf.make_ndarray(out)
        assert got.shape == tuple(dims) and got.dtype == np.int32 and got.size == 0
