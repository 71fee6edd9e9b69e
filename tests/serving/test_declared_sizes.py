"""Every size a request declares is checked against its content and the limits before anything is
allocated: a TensorProto's dimensions (their count, each, their product, the batch), a REST body's
rows and nesting, a Classify request's examples. Each hostile request below is refused at once with
INVALID_ARGUMENT (400 on REST) naming the problem, the server's resident memory does not grow
from it, and a good request right after it succeeds.

The first case is a report: a 39-byte Predict declaring 268,435,456 strings and carrying three
kept a server busy past a 60 s deadline and grew it by 2 GB; 2**31 ended it by the OOM killer.
"""

import json
import pathlib
import time
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.example import example_pb2
from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow_serving.apis import classification_pb2, predict_pb2, prediction_service_pb2_grpc

from serving.wire import tensor_protos, tensors
from serving.models.servable import Signature, TensorSpec
from serving.wire import dtypes
from tests.serving.conftest import MAX_REQUEST_BATCH_SIZE
from tests.serving.test_grpc_api import predict_request

C = grpc.StatusCode
DEFAULT_ELEMENTS = tensors.Limits().max_elements  # the server's --max_request_elements default
# A refused request may cost the server at most this much resident memory (it allocates nothing
# from the claim; the slack covers gRPC's buffers and Python's allocator).
RSS_SLACK_BYTES = 64 << 20


def _proto(dtype, dims, unknown_rank=False, **fields):
    proto = tensor_pb2.TensorProto(dtype=dtype)
    if unknown_rank:
        proto.tensor_shape.unknown_rank = True
    for n in dims:
        proto.tensor_shape.dim.add(size=n)
    for name, values in fields.items():
        if name == "tensor_content":
            proto.tensor_content = values
        else:
            getattr(proto, name).extend(values)
    return proto


def _strings(dims, values=(b"a", b"b", b"c"), **kw):
    return _proto(types_pb2.DT_STRING, dims, string_val=list(values), **kw)


def _ids(dims, **fields):
    return _proto(types_pb2.DT_INT32, dims, **fields)


def _predict(signature="serving_default", model="clf", **inputs):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    for name, proto in inputs.items():
        request.inputs[name].CopyFrom(proto)
    return request


def _text_pair(proto):
    return _predict(text=proto, text_b=_strings([1], [b""]))


def _encoded(ids, model="clf"):
    one = _ids([1, 2], int_val=[1, 2])
    return _predict("encoded", model, input_word_ids=ids, input_mask=one, input_type_ids=one)


def declared_size_cases(name="clf"):
    """[(request, fragment)]: hostile `encoded` requests to model `name`, for any servable with
    our `encoded` signature (SavedModel or LiteRT) at the server's default limits."""
    return [
        (
            _encoded(_ids([1, 2**31], int_val=[7]), name),
            f"input 'input_word_ids' has shape [1, 2147483648], 2147483648 elements; the limit "
            f"is {DEFAULT_ELEMENTS} elements per input (--max_request_elements)",
        ),
        (_encoded(_ids([64, 2**20]), name), "67108864 elements; the limit is"),
        (
            _encoded(_ids([2, 2**30], tensor_content=b"\0" * 16), name),
            "2147483648 elements; the limit is",
        ),
        (
            _encoded(_ids([1, 3], tensor_content=b"\0" * 16), name),
            "tensor_content holds 16 bytes; shape [1, 3] of int32 needs 12",
        ),
        (
            _encoded(_ids([1] * 200_000), name),
            "input 'input_word_ids' has 200000 dimensions; signature 'encoded' expects ['?', '?']",
        ),
    ]


# case -> (request, exact fragment of the message)
CASES = {
    "268,435,456 strings declared, 3 sent (the report)": (
        _text_pair(_strings([268435456])),
        f"batch size 268435456 exceeds the limit of {MAX_REQUEST_BATCH_SIZE} rows",
    ),
    "2**31 strings declared, 3 sent": (
        _text_pair(_strings([2**31])),
        f"batch size 2147483648 exceeds the limit of {MAX_REQUEST_BATCH_SIZE} rows",
    ),
    "2**63-1 strings declared": (
        _text_pair(_strings([2**63 - 1])),
        "batch size 9223372036854775807 exceeds the limit",
    ),
    "a row of 2**31 ids declared by one int_val": (
        _encoded(_ids([1, 2**31], int_val=[7])),
        f"input 'input_word_ids' has shape [1, 2147483648], 2147483648 elements; the limit is "
        f"{DEFAULT_ELEMENTS} elements per input (--max_request_elements)",
    ),
    "ids whose dimensions multiply past int64": (
        _encoded(_ids([1, 2**62, 2**62], int_val=[7])),
        "has shape [1, 4611686018427387904, 4611686018427387904] but signature 'encoded' "
        "expects ['?', '?']",
    ),
    "ids declared by an empty value field": (
        _encoded(_ids([64, 2**20])),
        "67108864 elements; the limit is",
    ),
    "tensor_content short of its declared shape": (
        _encoded(_ids([2, 2**30], tensor_content=b"\0" * 16)),
        "2147483648 elements; the limit is",
    ),
    "tensor_content that does not fit a shape within the limits": (
        _encoded(_ids([1, 3], tensor_content=b"\0" * 16)),
        "tensor_content holds 16 bytes; shape [1, 3] of int32 needs 12",
    ),
    "more values than the shape holds": (
        _predict(text=_strings([2]), text_b=_strings([2], [b"", b""])),
        "TensorProto holds 3 values for shape [2]",
    ),
    "a negative dimension": (
        _text_pair(_strings([-1])),
        "input 'text' has shape [-1]: dimensions cannot be negative",
    ),
    "100 dimensions": (
        _text_pair(_strings([1] * 100)),
        "input 'text' has 100 dimensions; signature 'serving_default' expects ['?']",
    ),
    "200,000 dimensions": (
        _text_pair(_strings([1] * 200_000)),
        "input 'text' has 200000 dimensions; signature 'serving_default' expects ['?']",
    ),
    "unknown rank": (
        _text_pair(_strings([], unknown_rank=True)),
        "input 'text' has unknown rank but signature 'serving_default' expects ['?']",
    ),
    "a batch over the limit declared by one value": (
        _text_pair(_strings([MAX_REQUEST_BATCH_SIZE + 1], [b"x"])),
        f"batch size {MAX_REQUEST_BATCH_SIZE + 1} exceeds the limit",
    ),
    "batch sizes that differ, declared": (
        _predict(text=_strings([3]), text_b=_strings([2], [b"x"])),
        "different batch sizes (dim 0): text=3, text_b=2",
    ),
}


def _rss_bytes(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def stub(shared_server):
    with grpc.insecure_channel(
        shared_server.grpc_target, options=[("grpc.max_send_message_length", 8 << 20)]
    ) as channel:
        yield prediction_service_pb2_grpc.PredictionServiceStub(channel)


def _good_request_succeeds(stub):
    response = stub.Predict(predict_request(text=["still serving"], text_b=[""]), timeout=30)
    assert tf.make_ndarray(response.outputs["probabilities"]).shape == (1, 3)


@pytest.mark.parametrize("case", sorted(CASES))
def test_declared_size_is_refused_before_allocation(stub, shared_server, case):
    request, fragment = CASES[case]
    _good_request_succeeds(stub)
    before = _rss_bytes(shared_server.proc.pid)
    start = time.monotonic()
    with pytest.raises(grpc.RpcError) as info:
        stub.Predict(request, timeout=30)
    assert info.value.code() == C.INVALID_ARGUMENT, info.value.details()
    assert fragment in info.value.details()
    assert time.monotonic() - start < 10  # refused, not worked on (a deadline, not a timing)
    assert _rss_bytes(shared_server.proc.pid) - before < RSS_SLACK_BYTES
    _good_request_succeeds(stub)


def test_the_reported_request_is_a_few_bytes(stub):
    report = predict_pb2.PredictRequest()
    report.model_spec.name = "clf"
    report.inputs["text"].CopyFrom(_strings([268435456]))
    assert report.ByteSize() < 64
    with pytest.raises(grpc.RpcError) as info:
        stub.Predict(report, timeout=30)
    assert info.value.code() == C.INVALID_ARGUMENT
    assert "Missing but required: ['text_b']" in info.value.details()  # names first, no reading


def test_classify_counts_examples_before_reading_them(stub):
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name, request.model_spec.signature_name = "clf", "classification"
    context = request.input.example_list_with_context
    context.context.features.feature["text"].bytes_list.value.append(b"c" * 1000)
    for _ in range(MAX_REQUEST_BATCH_SIZE + 1):
        context.examples.add()
    with pytest.raises(grpc.RpcError) as info:
        stub.Classify(request, timeout=30)
    assert info.value.code() == C.INVALID_ARGUMENT
    assert f"batch size {MAX_REQUEST_BATCH_SIZE + 1} exceeds the limit" in info.value.details()
    _good_request_succeeds(stub)


# ------------------------------------------------------------------ REST: rows and nesting
def _post(server, body, path="/v1/models/clf:predict"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(server.rest_url + path, data=data)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _nested(depth, leaf='"x"'):
    return ("[" * depth + leaf + "]" * depth).encode()


REST_CASES = {
    "rows over the batch limit": (
        {"instances": [{"text": "a", "text_b": ""}] * (MAX_REQUEST_BATCH_SIZE + 1)},
        f"batch size {MAX_REQUEST_BATCH_SIZE + 1} exceeds the limit",
    ),
    "columnar text nested 100 deep": (
        b'{"inputs": {"text": ' + _nested(100) + b', "text_b": [""]}}',
        "input 'text' has 100 dimensions; signature 'serving_default' expects ['?']",
    ),
    "row text nested 70 deep": (
        b'{"instances": [{"text": ' + _nested(70) + b', "text_b": ""}]}',
        "input 'text' has 71 dimensions; signature 'serving_default' expects ['?']",
    ),
    "instances nested 5,000 deep": (
        b'{"instances": ' + _nested(5000) + b"}",
        "JSON Parse error: arrays or objects nested too deeply to parse",
    ),
    "objects nested 5,000 deep": (
        b'{"instances": [' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"]}",
        "JSON Parse error: arrays or objects nested too deeply to parse",
    ),
    "ids with a ragged deep row": (
        {
            "signature_name": "encoded",
            "instances": [{"input_word_ids": [1, [[[2]]]], "input_mask": [1, 1]}],
        },
        "Encountered list at unexpected level",
    ),
}


@pytest.mark.parametrize("case", sorted(REST_CASES))
def test_rest_body_is_refused_before_conversion(stub, shared_server, case):
    body, fragment = REST_CASES[case]
    status, answer = _post(shared_server, body)
    assert status == 400, answer
    assert fragment in answer["error"]
    status, answer = _post(shared_server, {"instances": [{"text": "ok", "text_b": ""}]})
    assert status == 200 and len(answer["predictions"]) == 1


def test_rest_classify_counts_examples_before_reading_them(shared_server):
    body = {"examples": [{"text": "a"}] * (MAX_REQUEST_BATCH_SIZE + 1)}
    status, answer = _post(shared_server, body, "/v1/models/clf:classify")
    assert status == 400
    assert f"batch size {MAX_REQUEST_BATCH_SIZE + 1} exceeds the limit" in answer["error"]


# ------------------------------------------------------------------ the rule, in process
_SIGNATURE = Signature(
    "encoded",
    "tensorflow/serving/predict",
    {
        "ids": TensorSpec("ids", dtypes.int32, [-1, -1]),
        "any": TensorSpec("any", dtypes.int32, None),
    },
    {},
    None,
)


def test_compact_protos_still_read_as_tensorflow_reads_them():
    """The compact form (fewer values than the shape: the last one repeated) within the limits."""
    proto = _ids([2, 3], int_val=[4, 5])
    np.testing.assert_array_equal(tensor_protos.to_numpy(proto), [[4, 5, 5], [5, 5, 5]])
    np.testing.assert_array_equal(tensor_protos.to_numpy(proto), tf.make_ndarray(proto))
    strings = _strings([2, 2], [b"x"])
    assert tensor_protos.to_numpy(strings).tolist() == [[b"x", b"x"], [b"x", b"x"]]
    assert tensor_protos.to_numpy(_ids([3])).tolist() == [0, 0, 0]


def test_compact_protos_past_the_bound_are_refused_by_every_reader():
    """The client and the request-log tools read with the same bound as the server."""
    with pytest.raises(ValueError, match=r"declares shape \[4194305\] \(4194305 elements\) but"):
        tensor_protos.to_numpy(_ids([tensor_protos.MAX_FILLED + 1], int_val=[1]))
    with pytest.raises(ValueError, match="has 65 dimensions; at most 64"):
        tensor_protos.to_numpy(_ids([1] * 65, int_val=[1]))
    assert tensor_protos.raw_to_numpy(_ids([1] * 65, tensor_content=b"\0" * 4)) is None


def test_unknown_rank_inputs_are_bounded_too():
    limits = tensors.Limits(max_batch_size=4, max_elements=100)
    one = {"ids": _ids([1, 1], int_val=[1])}
    with pytest.raises(tensors.errors.ServingError, match="has 65 dimensions; at most 64"):
        tensors.read_inputs(_SIGNATURE, {**one, "any": _ids([1] * 65)}, limits)
    with pytest.raises(tensors.errors.ServingError, match="101 elements; the limit is 100"):
        tensors.read_inputs(_SIGNATURE, {**one, "any": _ids([101])}, limits)
    arrays = tensors.read_inputs(_SIGNATURE, {**one, "any": _ids([5, 20], int_val=[3])}, limits)
    assert arrays["any"].shape == (5, 20)  # no batch dimension assumed: 5 rows is not over 4


def test_refusing_allocates_nothing_from_the_claim():
    """tracemalloc: refusing the reported request costs well under a megabyte in process."""
    import tracemalloc

    signature = Signature(
        "serving_default",
        "tensorflow/serving/predict",
        {"text": TensorSpec("text", dtypes.string, [-1])},
        {},
        None,
    )
    limits = tensors.Limits(max_batch_size=0, max_elements=tensor_protos.MAX_FILLED)
    tracemalloc.start()
    try:
        with pytest.raises(tensors.errors.ServingError, match="268435456 elements"):
            tensors.read_inputs(signature, {"text": _strings([268435456])}, limits)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak


def test_an_example_list_is_counted_without_reading_it():
    from serving.dispatch.inference import count_examples
    from tensorflow_serving.apis import input_pb2

    request = input_pb2.Input()
    assert count_examples(request) == 0
    request.example_list_with_context.examples.extend([example_pb2.Example()] * 3)
    assert count_examples(request) == 3


@pytest.mark.slow
def test_a_batching_server_refuses_them_before_its_queue(start_server, model_base):
    """With --enable_batching the same checks run before a request joins the batch queue."""
    server = start_server(
        [
            f"--model_base_path={model_base / 'clf'}",
            "--model_name=clf",
            "--enable_batching",
            "--file_system_poll_wait_seconds=0",
        ],
        rest=False,
    )
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        hostile = [(_text_pair(_strings([2**31])), "batch size 2147483648 exceeds the limit")]
        for request, fragment in hostile + declared_size_cases():
            before = _rss_bytes(server.proc.pid)
            with pytest.raises(grpc.RpcError) as info:
                stub.Predict(request, timeout=30)
            assert info.value.code() == C.INVALID_ARGUMENT, info.value.details()
            assert fragment in info.value.details()
            assert _rss_bytes(server.proc.pid) - before < RSS_SLACK_BYTES
            _good_request_succeeds(stub)
