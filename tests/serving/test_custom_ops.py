"""A SavedModel with tensorflow-text ops: loads when the server imports tensorflow_text; otherwise
GetModelStatus names the op and the fix."""
import time

import grpc
import pytest
import tensorflow as tf
from tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc, prediction_service_pb2_grpc

from tests.serving import saved_models
from tests.serving.test_grpc_api import predict_request

State = get_model_status_pb2.ModelVersionStatus


@pytest.mark.slow
def test_custom_op_model_status_names_op_and_fix_then_loads_with_tensorflow_text(start_server, tmp_path):
    saved_models.build_custom_op_model(str(tmp_path / "tft" / "1"))
    without = start_server([f"--model_base_path={tmp_path / 'tft'}", "--model_name=tft",
                            "--custom_op_modules=", "--rest_api_port=0"], rest=False, wait=False)
    with_tft = start_server([f"--model_base_path={tmp_path / 'tft'}", "--model_name=tft"], rest=False)
    with grpc.insecure_channel(with_tft.grpc_target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        got = stub.Predict(predict_request(model="tft", text_in=["ÀB"]), timeout=30)
        assert tf.make_ndarray(got.outputs["folded"]).tolist() == ["àb".encode()]
    with grpc.insecure_channel(without.grpc_target) as channel:
        stub = model_service_pb2_grpc.ModelServiceStub(channel)
        request = get_model_status_pb2.GetModelStatusRequest(model_spec={"name": "tft"})
        deadline, status = time.monotonic() + 120, None
        while time.monotonic() < deadline:
            try:
                (status,) = stub.GetModelStatus(request, timeout=10).model_version_status
                if status.state == State.END:
                    break
            except (grpc.RpcError, ValueError):
                pass
            time.sleep(0.2)
        assert status is not None and status.state == State.END, without.log()[-2000:]
        assert "Op type not registered 'CaseFoldUTF8'" in status.status.error_message
        assert "pip install tensorflow-text" in status.status.error_message
