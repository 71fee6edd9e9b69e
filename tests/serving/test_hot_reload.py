"""Hot reload against a real server: a new version is served without a restart and without a failed
request; a corrupt version is reported in GetModelStatus and never replaces the serving one."""
import shutil
import threading
import time

import grpc
import pytest
from tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc, prediction_service_pb2_grpc

from tests.serving import saved_models
from tests.serving.test_grpc_api import predict_request

POLL_S = 1.0
State = get_model_status_pb2.ModelVersionStatus


def _status(stub, name="clf"):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = name
    return {s.version: s for s in stub.GetModelStatus(request, timeout=30).model_version_status}


@pytest.mark.slow
def test_new_version_served_without_failures_and_corrupt_version_reported(start_server, tmp_path):
    base, staging = tmp_path / "clf", tmp_path / "staging"
    saved_models.build_classifier(str(base / "1"), seed=1, warmup=False)
    saved_models.build_classifier(str(staging / "2"), seed=2)
    server = start_server([f"--model_base_path={base}", "--model_name=clf",
                           f"--file_system_poll_wait_seconds={POLL_S}"])
    channel = grpc.insecure_channel(server.grpc_target)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    model_stub = model_service_pb2_grpc.ModelServiceStub(channel)
    stop, failures, seen = threading.Event(), [], []

    def client():
        for _ in range(5000):  # bounded; normally ended by `stop`
            if stop.is_set():
                return
            try:
                seen.append((time.monotonic(), stub.Predict(
                    predict_request(text=["reload"], text_b=[""]), timeout=30).model_spec.version.value))
            except grpc.RpcError as e:
                failures.append(f"{e.code().name}: {e.details()}")

    threads = [threading.Thread(target=client) for _ in range(4)]
    try:
        for t in threads:
            t.start()
        time.sleep(1.0)
        shutil.copytree(staging / "2", base / "2")  # copied in place, while clients send requests
        copied = time.monotonic()
        deadline = copied + 60
        while time.monotonic() < deadline and not any(v == 2 and t > copied for t, v in seen):
            time.sleep(0.05)
        served_after = min(t for t, v in seen if v == 2) - copied
        time.sleep(0.5)

        (base / "3").mkdir()  # corrupt version 3
        (base / "3" / "saved_model.pb").write_bytes(b"this is not a SavedModel")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _status(model_stub).get(3, State()).state != State.END:
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert failures == []
    print(f"version 2 served {served_after:.2f} s after the copy finished ({len(seen)} requests, 0 failed)")
    assert served_after <= 2 * POLL_S + 3.0  # two poll intervals + load time on a loaded 2-core box
    versions = [v for _, v in sorted(seen)]
    assert versions[0] == 1 and versions[-1] == 2
    assert versions == sorted(versions)  # never back to 1 once 2 served, never 3
    status = _status(model_stub)
    assert status[3].state == State.END and status[3].status.error_code != 0
    assert "Failed to load clf version 3" in status[3].status.error_message
    assert status[2].state == State.AVAILABLE
    assert stub.Predict(predict_request(text=["after"], text_b=[""]), timeout=30).model_spec.version.value == 2
    channel.close()
