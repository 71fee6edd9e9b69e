"""gRPC server reflection, checked from a separate client process that imports no TF Serving proto."""

import base64
import json
import subprocess
import sys

import numpy as np
import pytest
from google.protobuf import descriptor_pool
from tensorflow_serving.apis import predict_pb2

from serving.wire import service_protos
from tests.conftest import REPO_ROOT
from tests.serving.saved_models import LABELS

WHEEL_APIS = pytest.importorskip("tensorflow_serving").__path__[0] + "/apis"


def _wheel_serialized_pb(module):
    """The serialized FileDescriptorProto inside the wheel's (unimportable) `<module>_pb2.py`."""
    import ast

    tree = ast.parse(open(f"{WHEEL_APIS}/{module}_pb2.py").read())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "serialized_pb":
            value = node.value.args[0] if isinstance(node.value, ast.Call) else node.value
            return ast.literal_eval(value).encode("latin1")
    raise AssertionError(f"no serialized_pb in {module}_pb2.py")


@pytest.mark.parametrize("module", ["prediction_service", "model_service"])
def test_service_files_are_byte_identical_to_the_wheel(module):
    ours = service_protos.file_descriptor_proto(f"{module}.proto").SerializeToString()
    assert ours == _wheel_serialized_pb(module)


def test_register_resolves_both_services_in_a_fresh_pool():
    pool = descriptor_pool.DescriptorPool()
    for module in (
        "get_model_status_pb2",
        "model_management_pb2",
        "classification_pb2",
        "get_model_metadata_pb2",
        "inference_pb2",
        "predict_pb2",
        "regression_pb2",
    ):
        with pytest.raises(KeyError):
            pool.FindFileByName(f"tensorflow_serving/apis/{module[:-4]}.proto")
    # the default pool has them after register(); re-registering is a no-op
    assert (
        service_protos.register()
        == service_protos.register()
        == ["tensorflow.serving.PredictionService", "tensorflow.serving.ModelService"]
    )
    method = descriptor_pool.Default().FindMethodByName(
        "tensorflow.serving.ModelService.HandleReloadConfigRequest"
    )
    assert method.input_type.full_name == "tensorflow.serving.ReloadConfigRequest"


def test_reflection_lists_services_and_resolves_request_types(shared_server, reference):
    run = subprocess.run(
        [sys.executable, "tests/serving/reflection_client.py", shared_server.grpc_target, "clf"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout)
    assert not got["imported_tensorflow_serving"]
    assert got["services"] == [
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
        "tensorflow.serving.ModelService",
        "tensorflow.serving.PredictionService",
    ]
    # Each method with its request and response message: <package><message>Request / Response.
    ts, health = "tensorflow.serving.", "grpc.health.v1."
    for method, package, message in (
        (f"{ts}PredictionService/Predict", ts, "Predict"),
        (f"{ts}PredictionService/Classify", ts, "Classification"),
        (f"{ts}PredictionService/GetModelMetadata", ts, "GetModelMetadata"),
        (f"{ts}ModelService/GetModelStatus", ts, "GetModelStatus"),
        (f"{ts}ModelService/HandleReloadConfigRequest", ts, "ReloadConfig"),
        (f"{health}Health/Check", health, "HealthCheck"),
    ):
        want = [f"{package}{message}Request", f"{package}{message}Response"]
        assert got["methods"][method] == want, method
    assert got["predict_request_fields"] == sorted(
        f.name for f in predict_pb2.PredictRequest.DESCRIPTOR.fields
    )
    assert {"inputs", "model_spec", "output_filter"} <= set(got["predict_request_fields"])
    # a Predict built only from reflected descriptors returns the in-process model's answer
    response = got["predict_response"]
    assert response["model_spec"]["name"] == "clf" and response["model_spec"]["version"] == "1"
    want = reference("clf", text=["reflection"], text_b=[""])
    tensor = response["outputs"][
        "probabilities"
    ]  # make_tensor_proto packs numbers in tensor_content
    assert tensor["dtype"] == "DT_FLOAT" and [d["size"] for d in tensor["tensor_shape"]["dim"]] == [
        "1",
        "3",
    ]
    probabilities = np.frombuffer(base64.b64decode(tensor["tensor_content"]), dtype="<f4")
    np.testing.assert_array_equal(probabilities, want["probabilities"].reshape(-1))
    labels = [base64.b64decode(s) for s in response["outputs"]["labels"]["string_val"]]
    assert labels == list(want["labels"]) and labels[0].decode() in LABELS
