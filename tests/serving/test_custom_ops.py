"""A SavedModel with a tensorflow-text op (CaseFoldUTF8): served when the server imports
tensorflow_text (the default --custom_op_modules); otherwise GetModelStatus names the op and the fix
and the other models keep serving."""

import time

import grpc
import pytest
import tensorflow as tf
from tensorflow_serving.apis import (
    get_model_status_pb2,
    model_service_pb2_grpc,
    prediction_service_pb2_grpc,
)

from tests.serving.test_grpc_api import predict_request

State = get_model_status_pb2.ModelVersionStatus


def test_custom_op_model_served_with_tensorflow_text(shared_server):
    with grpc.insecure_channel(shared_server.grpc_target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        got = stub.Predict(predict_request(model="tft", text_in=["ÀB Straße"]), timeout=30)
        assert tf.make_ndarray(got.outputs["folded"]).tolist() == ["àb strasse".encode()]


@pytest.mark.slow
def test_custom_op_missing_is_reported_with_op_name_and_fix(start_server, model_base):
    server = start_server(
        [f"--model_config_file={model_base / 'models.config'}", "--custom_op_modules="],
        rest=False,
        wait=False,
    )
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = model_service_pb2_grpc.ModelServiceStub(channel)
        request = get_model_status_pb2.GetModelStatusRequest(model_spec={"name": "tft"})
        deadline, status = time.monotonic() + 120, None
        while time.monotonic() < deadline:
            try:
                (status,) = stub.GetModelStatus(request, timeout=10).model_version_status
                if status.state == State.END:
                    break
            except (grpc.RpcError, ValueError):
                assert server.proc.poll() is None, server.log()[-2000:]
            time.sleep(0.2)
        assert status is not None and status.state == State.END, server.log()[-2000:]
        assert "Op type not registered 'CaseFoldUTF8'" in status.status.error_message
        assert "pip install tensorflow-text" in status.status.error_message
        predict = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        response = predict.Predict(predict_request(model="reg", text=["still served"]), timeout=30)
        assert response.model_spec.version.value == 1
