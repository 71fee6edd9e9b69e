"""Hot reload against a real server: a new version is served without a restart and without a failed
request; a corrupt version is reported in GetModelStatus and never replaces the serving one.

What must hold during a version switch (TF Serving's default availability-preserving policy: the new
version is loaded, then the old one unloaded; a request without a version goes to the newest
AVAILABLE one): no request fails; every answer comes from a version that was served (1 or 2, never
the corrupt 3); and versions never go backwards in real (causal) order: a request *sent after*
another request's *answer arrived* is answered by the same or a newer version. Requests in flight
at the same time as the switch may be answered by either version, in any order: their client-side
send times say nothing about when the server picked a version (a thread can be descheduled between
reading the clock and sending), so the test never orders overlapping requests.
"""

import shutil
import threading
import time

import grpc
import pytest
from tensorflow_serving.apis import (
    get_model_status_pb2,
    model_service_pb2_grpc,
    prediction_service_pb2_grpc,
)

from tests.serving import saved_models
from tests.serving.test_grpc_api import predict_request

POLL_S = 1.0
State = get_model_status_pb2.ModelVersionStatus


def _status(stub, name="clf"):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = name
    return {s.version: s for s in stub.GetModelStatus(request, timeout=30).model_version_status}


def causal_violations(calls):
    """Pairs (a, b) of calls (sent, answered, version) where b was sent after a's answer arrived but
    b got an older version than a; [] when versions never go backwards in real order."""
    by_answer = sorted(calls, key=lambda c: c[1])
    violations, newest, i = [], None, 0
    for call in sorted(calls, key=lambda c: c[0]):
        while i < len(by_answer) and by_answer[i][1] < call[0]:
            if newest is None or by_answer[i][2] > newest[2]:
                newest = by_answer[i]
            i += 1
        if newest is not None and call[2] < newest[2]:
            violations.append((newest, call))
    return violations


def test_causal_violations_finds_only_non_overlapping_reversals():
    # (sent, answered, version): overlapping calls may come back in any version order
    assert causal_violations([(0, 2, 2), (1, 3, 1), (2.5, 4, 2)]) == []
    # a call sent after a version-2 answer arrived got version 1
    assert causal_violations([(0, 1, 2), (1.5, 2, 1)]) == [((0, 1, 2), (1.5, 2, 1))]
    assert causal_violations([(0, 1, 1), (2, 3, 2), (4, 5, 2)]) == []


@pytest.mark.slow
def test_new_version_served_without_failures_and_corrupt_version_reported(start_server, tmp_path):
    base, staging = tmp_path / "clf", tmp_path / "staging"
    saved_models.build_classifier(str(base / "1"), seed=1, warmup=False)
    saved_models.build_classifier(str(staging / "2"), seed=2)
    server = start_server(
        [
            f"--model_base_path={base}",
            "--model_name=clf",
            f"--file_system_poll_wait_seconds={POLL_S}",
        ]
    )
    channel = grpc.insecure_channel(server.grpc_target)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    model_stub = model_service_pb2_grpc.ModelServiceStub(channel)
    stop, failures, calls = threading.Event(), [], []

    def client():
        for _ in range(5000):  # bounded; normally ended by `stop`
            if stop.is_set():
                return
            sent = time.monotonic()
            try:
                version = stub.Predict(
                    predict_request(text=["reload"], text_b=[""]), timeout=30
                ).model_spec.version.value
                calls.append((sent, time.monotonic(), version))
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
        while time.monotonic() < deadline and not any(v == 2 for _, _, v in list(calls)):
            time.sleep(0.05)
        served_after = min(answered for _, answered, v in calls if v == 2) - copied
        time.sleep(0.5)

        (base / "3").mkdir()  # corrupt version 3
        (base / "3" / "saved_model.pb").write_bytes(b"this is not a SavedModel")
        deadline = time.monotonic() + 30
        while (
            time.monotonic() < deadline and _status(model_stub).get(3, State()).state != State.END
        ):
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert failures == []
    print(
        f"version 2 served {served_after:.2f} s after the copy finished ({len(calls)} requests, 0 failed)"
    )
    assert served_after <= 2 * POLL_S + 3.0  # two poll intervals + load time on a loaded 2-core box
    assert {v for _, _, v in calls} == {1, 2}  # never the corrupt version 3
    first, last = min(calls), max(calls, key=lambda c: c[0])
    assert first[2] == 1 and last[2] == 2
    assert causal_violations(calls) == []  # never back to 1 once a 2 was answered
    status = _status(model_stub)
    assert status[3].state == State.END and status[3].status.error_code != 0
    assert "Failed to load clf version 3" in status[3].status.error_message
    assert status[2].state == State.AVAILABLE
    assert (
        status[1].state == State.END and status[1].status.error_code == 0
    )  # unloaded after 2 loaded
    assert (
        stub.Predict(
            predict_request(text=["after"], text_b=[""]), timeout=30
        ).model_spec.version.value
        == 2
    )
    channel.close()
