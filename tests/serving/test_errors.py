"""Bad requests get TensorFlow Serving's status codes and a message naming the problem; the server
keeps serving (a good request right after each bad one succeeds)."""

import grpc
import hypothesis
import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_service_pb2_grpc,
    prediction_service_pb2_grpc,
    regression_pb2,
)

from tests.serving.conftest import MAX_REQUEST_BATCH_SIZE, MAX_REQUEST_BYTES, MAX_TEXT_LENGTH
from tests.serving.test_grpc_api import example, predict_request

C = grpc.StatusCode


@pytest.fixture(scope="module")
def channel(shared_server):
    with grpc.insecure_channel(
        shared_server.grpc_target, options=[("grpc.max_send_message_length", 8 << 20)]
    ) as ch:
        yield ch


@pytest.fixture(scope="module")
def stub(channel):
    return prediction_service_pb2_grpc.PredictionServiceStub(channel)


def _classify(model, signature, examples, context=None):
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name, request.model_spec.signature_name = model, signature
    if context is not None:
        request.input.example_list_with_context.context.CopyFrom(context)
        request.input.example_list_with_context.examples.extend(examples)
    else:
        request.input.example_list.examples.extend(examples)
    return request


def _regress(model, signature, examples):
    request = regression_pb2.RegressionRequest()
    request.model_spec.name, request.model_spec.signature_name = model, signature
    request.input.example_list.examples.extend(examples)
    return request


def _multi(specs):
    request = inference_pb2.MultiInferenceRequest()
    for model, signature, method in specs:
        task = request.tasks.add()
        task.model_spec.name, task.model_spec.signature_name, task.method_name = (
            model,
            signature,
            method,
        )
    request.input.example_list.examples.append(example(text="t"))
    return request


def _bad_bytes_example():
    ex = example(text="ok")
    ex.features.feature["text"].bytes_list.value[0] = b"\xff\xfe"
    return ex


def _with_output_filter(name):
    request = predict_request(text=["a"], text_b=["b"])
    request.output_filter.append(name)
    return request


IDS = np.array([[101, 102]], dtype=np.int64)
CASES = {
    "unknown model": (
        "Predict",
        predict_request(model="nope", text=["a"], text_b=["b"]),
        C.NOT_FOUND,
        "nope",
    ),
    "unknown version": (
        "Predict",
        predict_request(version=7, text=["a"], text_b=["b"]),
        C.NOT_FOUND,
        "7",
    ),
    "unknown label": (
        "Predict",
        predict_request(label="canary", text=["a"], text_b=["b"]),
        C.INVALID_ARGUMENT,
        "Unrecognized servable version label 'canary'",
    ),
    "unknown signature": (
        "Predict",
        predict_request(signature="nope", text=["a"], text_b=["b"]),
        C.FAILED_PRECONDITION,
        '"nope" not found',
    ),
    "wrong dtype": (
        "Predict",
        predict_request(text=np.array([1, 2], np.int64), text_b=["b", "c"]),
        C.INVALID_ARGUMENT,
        "'text' expects dtype string but got int64",
    ),
    "float ids": (
        "Predict",
        predict_request(
            signature="encoded",
            input_word_ids=IDS.astype(np.float32),
            input_mask=IDS,
            input_type_ids=IDS,
        ),
        C.INVALID_ARGUMENT,
        "'input_word_ids' expects dtype int32 but got float",
    ),
    "int64 out of int32 range": (
        "Predict",
        predict_request(
            signature="encoded", input_word_ids=IDS * 2**40, input_mask=IDS, input_type_ids=IDS
        ),
        C.INVALID_ARGUMENT,
        "outside the int32 range",
    ),
    "wrong shape": (
        "Predict",
        predict_request(text=[["a"], ["b"]], text_b=[["a"], ["b"]]),
        C.INVALID_ARGUMENT,
        "has shape [2, 1] but signature 'serving_default' expects ['?']",
    ),
    "missing input": (
        "Predict",
        predict_request(text=["a"]),
        C.INVALID_ARGUMENT,
        "Missing but required: ['text_b']",
    ),
    "extra input": (
        "Predict",
        predict_request(text=["a"], text_b=["b"], text_c=["c"]),
        C.INVALID_ARGUMENT,
        "Sent extra: ['text_c']",
    ),
    "non-UTF-8 text": (
        "Predict",
        predict_request(text=[b"ok", b"caf\xe9"], text_b=["a", "b"]),
        C.INVALID_ARGUMENT,
        "'text' element 1 is not valid UTF-8",
    ),
    "empty batch": (
        "Predict",
        predict_request(text=np.array([], dtype=object), text_b=np.array([], dtype=object)),
        C.INVALID_ARGUMENT,
        "empty batch",
    ),
    "mismatched text/text_b": (
        "Predict",
        predict_request(text=["a", "b"], text_b=["c"]),
        C.INVALID_ARGUMENT,
        "different batch sizes (dim 0): text=2, text_b=1",
    ),
    "text too long": (
        "Predict",
        predict_request(text=["w" * (MAX_TEXT_LENGTH + 1)], text_b=[""]),
        C.INVALID_ARGUMENT,
        f"limit is {MAX_TEXT_LENGTH} bytes",
    ),
    "batch over limit": (
        "Predict",
        predict_request(
            text=["a"] * (MAX_REQUEST_BATCH_SIZE + 1), text_b=["b"] * (MAX_REQUEST_BATCH_SIZE + 1)
        ),
        C.INVALID_ARGUMENT,
        f"limit of {MAX_REQUEST_BATCH_SIZE} rows",
    ),
    "oversized request": (
        "Predict",
        predict_request(text=["w" * (MAX_REQUEST_BYTES + 10)], text_b=[""]),
        C.RESOURCE_EXHAUSTED,
        "larger than max",
    ),
    "unknown output_filter": (
        "Predict",
        _with_output_filter("logits"),
        C.INVALID_ARGUMENT,
        "['logits']",
    ),
    "classify on predict signature": (
        "Classify",
        _classify("clf", "", [example(text="a")]),
        C.INVALID_ARGUMENT,
        "tensorflow/serving/classify",
    ),
    "classify on regression model": (
        "Classify",
        _classify("reg", "regression", [example(text="a")]),
        C.INVALID_ARGUMENT,
        "Was: tensorflow/serving/regress",
    ),
    "regress on classification signature": (
        "Regress",
        _regress("clf", "classification", [example(text="a")]),
        C.INVALID_ARGUMENT,
        "Was: tensorflow/serving/classify",
    ),
    "classify empty input": (
        "Classify",
        _classify("clf", "classification", []),
        C.INVALID_ARGUMENT,
        "empty",
    ),
    "classify non-UTF-8 feature": (
        "Classify",
        _classify("clf", "classification", [_bad_bytes_example()]),
        C.INVALID_ARGUMENT,
        "feature 'text' is not valid UTF-8",
    ),
    "classify example without text": (
        "Classify",
        _classify("clf", "classification", [example(text_b="b")]),
        C.INVALID_ARGUMENT,
        "text",
    ),
    "multi inference two models": (
        "MultiInference",
        _multi(
            [
                ("clf", "classification", "tensorflow/serving/classify"),
                ("reg", "regression", "tensorflow/serving/regress"),
            ]
        ),
        C.INVALID_ARGUMENT,
        "same model name",
    ),
    "multi inference predict method": (
        "MultiInference",
        _multi([("clf", "", "tensorflow/serving/predict")]),
        C.INVALID_ARGUMENT,
        "Unsupported signature method_name",
    ),
    "metadata without field": (
        "GetModelMetadata",
        get_model_metadata_pb2.GetModelMetadataRequest(model_spec={"name": "clf"}),
        C.INVALID_ARGUMENT,
        "metadata_field",
    ),
}


def _good_request_succeeds(stub):
    response = stub.Predict(predict_request(text=["still serving"], text_b=[""]), timeout=30)
    assert tf.make_ndarray(response.outputs["probabilities"]).shape == (1, 3)


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_request_status_and_message(stub, case):
    method, request, code, fragment = CASES[case]
    with pytest.raises(grpc.RpcError) as info:
        getattr(stub, method)(request, timeout=30)
    assert info.value.code() == code, info.value.details()
    assert fragment in info.value.details()
    assert info.value.code() != C.INTERNAL
    _good_request_succeeds(stub)


def test_model_status_unknown_model_and_version(channel, stub):
    model_stub = model_service_pb2_grpc.ModelServiceStub(channel)
    for spec, fragment in (
        ({"name": "nope"}, "nope"),
        ({"name": "clf", "version": {"value": 9}}, "9"),
    ):
        with pytest.raises(grpc.RpcError) as info:
            model_stub.GetModelStatus(
                get_model_status_pb2.GetModelStatusRequest(model_spec=spec), timeout=30
            )
        assert info.value.code() == C.NOT_FOUND and fragment in info.value.details()
    _good_request_succeeds(stub)


_arrays = hnp.arrays(
    dtype=st.sampled_from([np.int32, np.int64, np.float32, np.float64, np.bool_, np.dtype("S4")]),
    shape=hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3),
)


@hypothesis.settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture],
)
@hypothesis.given(
    text=_arrays, text_b=_arrays, signature=st.sampled_from(["serving_default", "encoded"])
)
def test_arbitrary_tensors_get_ok_or_invalid_argument(stub, text, text_b, signature):
    if signature == "serving_default":
        inputs = {"text": text, "text_b": text_b}
    else:
        inputs = {"input_word_ids": text, "input_mask": text_b, "input_type_ids": text_b}
    request = predict_request(signature=signature, **inputs)
    try:
        stub.Predict(request, timeout=30)
    except grpc.RpcError as e:
        assert e.code() == C.INVALID_ARGUMENT, e.details()
