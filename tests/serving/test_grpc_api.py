"""gRPC round trips with the official tensorflow-serving-api stubs against a real server process."""

import contextlib

import grpc
import numpy as np
import pytest
import tensorflow as tf
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tensorflow.core.example import example_pb2
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)

from tests.serving.saved_models import LABELS

TEXTS = ["a gripping, funny film", "naïve café", "x"]
TEXTS_B = ["", "second segment", "y y"]


@pytest.fixture(scope="module")
def channel(shared_server):
    with grpc.insecure_channel(shared_server.grpc_target) as ch:
        yield ch


@pytest.fixture(scope="module")
def stub(channel):
    return prediction_service_pb2_grpc.PredictionServiceStub(channel)


@contextlib.contextmanager
def prediction_stub(target):
    """A PredictionService stub on a plain-text channel to `target` (a server's grpc_target), the
    channel closed on leaving the block."""
    with grpc.insecure_channel(target) as channel:
        yield prediction_service_pb2_grpc.PredictionServiceStub(channel)


def predict_request(model="clf", signature="", version=None, label="", **inputs):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    if version is not None:
        request.model_spec.version.value = version
    if label:
        request.model_spec.version_label = label
    for name, value in inputs.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    return request


def example(**features):
    ex = example_pb2.Example()
    for name, value in features.items():
        ex.features.feature[name].bytes_list.value.append(value.encode("utf-8"))
    return ex


def outputs(response):
    return {k: tf.make_ndarray(v) for k, v in response.outputs.items()}


def test_predict_serving_default_equals_in_process_call(stub, reference):
    response = stub.Predict(predict_request(text=TEXTS, text_b=TEXTS_B), timeout=30)
    got = outputs(response)
    want = reference("clf", text=TEXTS, text_b=TEXTS_B)
    assert response.model_spec.name == "clf"
    assert response.model_spec.version.value == 1
    assert response.model_spec.signature_name == "serving_default"
    assert got["probabilities"].dtype == np.float32 and got["probabilities"].shape == (
        3,
        len(LABELS),
    )
    np.testing.assert_allclose(got["probabilities"], want["probabilities"], rtol=0, atol=1e-7)
    assert got["label_ids"].dtype == np.int64
    np.testing.assert_array_equal(got["label_ids"], want["label_ids"])
    assert list(got["labels"]) == list(want["labels"])
    assert set(got["labels"]) <= {s.encode() for s in LABELS}


def test_batch_of_one_keeps_batch_dimension(stub):
    got = outputs(stub.Predict(predict_request(text=["one"], text_b=[""]), timeout=30))
    assert got["probabilities"].shape == (1, len(LABELS))
    assert got["label_ids"].shape == (1,) and got["labels"].shape == (1,)


def test_output_filter_returns_only_requested_outputs(stub, reference):
    request = predict_request(text=TEXTS, text_b=TEXTS_B)
    request.output_filter.append("label_ids")
    got = outputs(stub.Predict(request, timeout=30))
    assert set(got) == {"label_ids"}
    np.testing.assert_array_equal(
        got["label_ids"], reference("clf", text=TEXTS, text_b=TEXTS_B)["label_ids"]
    )


def test_version_and_label_select_version_one(stub):
    for request in (
        predict_request(version=1, text=["v"], text_b=[""]),
        predict_request(label="stable", text=["v"], text_b=[""]),
    ):
        assert stub.Predict(request, timeout=30).model_spec.version.value == 1


def test_encoded_signature_int32_and_int64_ids_agree(stub, reference):
    ids = np.array([[101, 7592, 102, 0], [101, 2088, 2003, 102]], dtype=np.int32)
    mask = (ids > 0).astype(np.int32)
    types = np.array([[0, 0, 0, 0], [0, 0, 1, 1]], dtype=np.int32)
    want = reference("clf", "encoded", input_word_ids=ids, input_mask=mask, input_type_ids=types)
    for dtype in (np.int32, np.int64):  # int64 ids are cast to the signature's int32 (documented)
        got = outputs(
            stub.Predict(
                predict_request(
                    signature="encoded",
                    input_word_ids=ids.astype(dtype),
                    input_mask=mask.astype(dtype),
                    input_type_ids=types.astype(dtype),
                ),
                timeout=30,
            )
        )
        np.testing.assert_allclose(got["probabilities"], want["probabilities"], rtol=0, atol=1e-7)
        np.testing.assert_array_equal(got["label_ids"], want["label_ids"])


def _serialized(examples):
    return np.array([e.SerializeToString() for e in examples], dtype=object)


def test_classify_equals_classification_signature(stub, reference):
    examples = [example(text=t, text_b=b) for t, b in zip(TEXTS, TEXTS_B)]
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "clf"
    request.model_spec.signature_name = "classification"
    request.input.example_list.examples.extend(examples)
    response = stub.Classify(request, timeout=30)
    want = reference("clf", "classification", inputs=_serialized(examples))
    assert response.model_spec.signature_name == "classification"
    assert len(response.result.classifications) == 3
    for row, classification in enumerate(response.result.classifications):
        assert [c.label for c in classification.classes] == list(LABELS)
        np.testing.assert_allclose(
            [c.score for c in classification.classes], want["scores"][row], atol=1e-7
        )


def test_classify_with_context_merges_features(stub, reference):
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "clf"
    request.model_spec.signature_name = "classification"
    request.input.example_list_with_context.context.CopyFrom(
        example(text_b="shared second segment")
    )
    request.input.example_list_with_context.examples.extend(
        [example(text="first"), example(text="other")]
    )
    response = stub.Classify(request, timeout=30)
    want = reference(
        "clf",
        "classification",
        inputs=_serialized(
            [
                example(text="first", text_b="shared second segment"),
                example(text="other", text_b="shared second segment"),
            ]
        ),
    )
    got = [[c.score for c in row.classes] for row in response.result.classifications]
    np.testing.assert_allclose(got, want["scores"], atol=1e-7)


def test_regress_equals_regression_signature(stub, reference):
    examples = [example(text=t) for t in TEXTS]
    request = regression_pb2.RegressionRequest()
    request.model_spec.name = "reg"
    request.model_spec.signature_name = "regression"
    request.input.example_list.examples.extend(examples)
    response = stub.Regress(request, timeout=30)
    want = reference("reg", "regression", inputs=_serialized(examples))["outputs"]
    np.testing.assert_allclose([r.value for r in response.result.regressions], want, atol=1e-6)
    # serving_default of the regressor gives the same scores from raw text
    got = outputs(stub.Predict(predict_request(model="reg", text=TEXTS), timeout=30))["scores"]
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_multi_inference_classify_and_regress(stub, reference):
    for model, signature, method in (
        ("clf", "classification", "tensorflow/serving/classify"),
        ("reg", "regression", "tensorflow/serving/regress"),
    ):
        request = inference_pb2.MultiInferenceRequest()
        task = request.tasks.add()
        task.model_spec.name, task.model_spec.signature_name, task.method_name = (
            model,
            signature,
            method,
        )
        examples = [example(text="multi"), example(text="inference")]
        request.input.example_list.examples.extend(examples)
        (result,) = stub.MultiInference(request, timeout=30).results
        assert result.model_spec.name == model and result.model_spec.signature_name == signature
        want = reference(model, signature, inputs=_serialized(examples))
        if model == "clf":
            got = [
                [c.score for c in row.classes]
                for row in result.classification_result.classifications
            ]
            np.testing.assert_allclose(got, want["scores"], atol=1e-7)
        else:
            np.testing.assert_allclose(
                [r.value for r in result.regression_result.regressions], want["outputs"], atol=1e-6
            )


def test_get_model_metadata_reports_signature_defs(stub):
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = "clf"
    response = stub.GetModelMetadata(request, timeout=30)
    assert response.model_spec.version.value == 1
    sig_map = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(sig_map)
    sigs = sig_map.signature_def
    assert set(sigs) == {"serving_default", "encoded", "classification"}
    assert sigs["classification"].method_name == "tensorflow/serving/classify"
    assert sigs["serving_default"].method_name == "tensorflow/serving/predict"
    assert {k: v.dtype for k, v in sigs["serving_default"].inputs.items()} == {
        "text": tf.string.as_datatype_enum,
        "text_b": tf.string.as_datatype_enum,
    }
    assert sigs["encoded"].inputs["input_word_ids"].dtype == tf.int32.as_datatype_enum
    assert [d.size for d in sigs["serving_default"].outputs["probabilities"].tensor_shape.dim] == [
        -1,
        3,
    ]


def test_get_model_status_and_health(channel):
    stub = model_service_pb2_grpc.ModelServiceStub(channel)
    for kwargs in ({}, {"version": 1}, {"label": "stable"}):
        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = "clf"
        if "version" in kwargs:
            request.model_spec.version.value = kwargs["version"]
        if "label" in kwargs:
            request.model_spec.version_label = kwargs["label"]
        (status,) = stub.GetModelStatus(request, timeout=30).model_version_status
        assert status.version == 1
        assert status.state == get_model_status_pb2.ModelVersionStatus.AVAILABLE
        assert status.status.error_code == 0 and status.status.error_message == ""
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", "tensorflow.serving.PredictionService"):
        assert (
            health.Check(health_pb2.HealthCheckRequest(service=service), timeout=30).status
            == health_pb2.HealthCheckResponse.SERVING
        )


def test_thread_pool_flags_size_tensorflow_and_results_are_unchanged(
    start_server, model_base, reference
):
    server = start_server(
        [
            f"--model_config_file={model_base / 'models.config'}",
            "--file_system_poll_wait_seconds=0",
            "--tensorflow_intra_op_parallelism=1",
            "--tensorflow_inter_op_parallelism=3",
        ],
        rest=False,
    )
    assert "TensorFlow threads: intra-op 1, inter-op 3" in server.log()
    with prediction_stub(server.grpc_target) as stub:
        got = outputs(stub.Predict(predict_request(text=TEXTS, text_b=TEXTS_B), timeout=30))
    want = reference("clf", text=TEXTS, text_b=TEXTS_B)
    np.testing.assert_allclose(got["probabilities"], want["probabilities"], rtol=0, atol=1e-6)
    np.testing.assert_array_equal(got["label_ids"], want["label_ids"])


def test_negative_thread_pool_flag_is_a_usage_error(start_server):
    server = start_server(["--tensorflow_intra_op_parallelism=-1"], rest=False, wait=False)
    assert server.proc.wait(timeout=120) != 0
    assert "tensorflow_intra_op_parallelism" in server.log()
