"""ModelService/HandleReloadConfigRequest: a new model config replaces the served set as TF Serving's
ServerCore::ReloadConfig does (models added and loaded before the call returns, models removed,
version policies switched without a gap, labels updated only when valid), in process and under load."""

import threading
import time

import grpc
import pytest
from google.protobuf import text_format
from tensorflow_serving.apis import (
    get_model_status_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
    prediction_service_pb2_grpc,
)
from tensorflow_serving.config import model_server_config_pb2

from serving import errors
from serving.model_manager import ModelManager, State
from tests.serving import saved_models
from tests.serving.test_grpc_api import predict_request


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """clf/1, clf/2 (different weights), reg/1, empty/ (no version)."""
    root = tmp_path_factory.mktemp("reload")
    for v in (1, 2):
        saved_models.build_classifier(str(root / "clf" / str(v)), seed=v, warmup=False)
    saved_models.build_regressor(str(root / "reg" / "1"))
    (root / "empty").mkdir()
    return root


def configs(base, text):
    """ModelConfig protos from `name:policy` entries, e.g. "clf:specific{versions:2} reg"."""
    out = []
    for entry in text.split():
        name, _, extra = entry.partition(":")
        model_dir = name.split("_")[0]
        out.append(
            text_format.Parse(
                f'name: "{name}" base_path: "{base / model_dir}" {extra.replace(",", " ")}',
                model_server_config_pb2.ModelConfig(),
            )
        )
    return out


def versions(manager, name):
    return {s.version: s.state for s in manager.status(name)}


def test_reload_adds_removes_and_switches_versions(base):
    manager = ModelManager(
        configs(base, "clf:model_version_policy{specific{versions:1}} reg"), poll_seconds=0
    )
    manager.start()
    try:
        assert versions(manager, "clf") == {1: State.AVAILABLE}
        with manager.acquire("reg") as in_flight:  # a request on reg while reg is removed
            manager.reload(configs(base, "clf:model_version_policy{specific{versions:2}} clf_b"))
            assert in_flight.run("serving_default", {"text": [b"still served"]})[
                "scores"
            ].shape == (1,)
            with pytest.raises(errors.ServingError, match="is not served") as info:
                manager.acquire("reg").__enter__()
            assert info.value.code.name == "NOT_FOUND"
        assert manager.model_names() == ["clf", "clf_b"]
        assert versions(manager, "clf") == {
            2: State.AVAILABLE,
            1: State.END,
        }  # switched, 1 unloaded
        assert versions(manager, "clf_b") == {2: State.AVAILABLE}  # loaded before reload returned
        with manager.acquire("clf") as servable:
            assert servable.version == 2
        manager.reload(
            configs(base, 'clf:model_version_policy{all{}},version_labels{key:"old",value:1} reg')
        )
        assert versions(manager, "clf") == {2: State.AVAILABLE, 1: State.AVAILABLE}
        with manager.acquire("clf", label="old") as servable:
            assert servable.version == 1
        assert versions(manager, "reg") == {1: State.AVAILABLE}
    finally:
        manager.stop()


def test_reload_errors(base):
    manager = ModelManager(
        configs(base, 'clf:version_labels{key:"stable",value:2}'), poll_seconds=0
    )
    manager.start()
    try:
        with pytest.raises(errors.ServingError, match="unique") as info:
            manager.reload(configs(base, "clf reg") + configs(base, "reg"))
        assert info.value.code.name == "INVALID_ARGUMENT" and manager.model_names() == ["clf"]
        with pytest.raises(
            errors.ServingError, match="version 1 of model clf, which is not currently available"
        ) as info:
            manager.reload(configs(base, 'clf:version_labels{key:"stable",value:1}'))
        assert info.value.code.name == "FAILED_PRECONDITION"
        with manager.acquire("clf", label="stable") as servable:  # the previous label stays
            assert servable.version == 2
        with pytest.raises(
            errors.ServingError, match="No versions of servable empty found"
        ) as info:
            manager.reload(configs(base, "clf empty"))
        assert info.value.code.name == "NOT_FOUND" and manager.model_names() == ["clf", "empty"]
    finally:
        manager.stop()


def _reload(stub, base, text):
    request = model_management_pb2.ReloadConfigRequest()
    request.config.model_config_list.config.extend(configs(base, text))
    start = time.monotonic()
    response = stub.HandleReloadConfigRequest(request, timeout=120)
    assert response.status.error_code == 0, response
    return start, time.monotonic()


@pytest.mark.slow
def test_reload_under_load(start_server, base, tmp_path):
    """8 clients x 200 Predicts on clf while the config switches clf 1 -> 2 -> 1 and adds/removes
    models: 0 errors, and every answer comes from a version of a config in force during the call."""
    config = tmp_path / "models.config"
    config.write_text(
        f'model_config_list {{ config {{ name: "clf" base_path: "{base / "clf"}" '
        "model_version_policy { specific { versions: 1 } } } "
        f'config {{ name: "reg" base_path: "{base / "reg"}" }} }}'
    )
    server = start_server(
        [
            f"--model_config_file={config}",
            "--file_system_poll_wait_seconds=0",
            "--grpc_max_threads=16",
        ]
    )
    channel = grpc.insecure_channel(server.grpc_target)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    model_stub = model_service_pb2_grpc.ModelServiceStub(channel)
    calls, failures, started = [], [], threading.Barrier(9)

    def client(c):
        started.wait()
        for i in range(200):
            sent = time.monotonic()
            try:
                version = stub.Predict(
                    predict_request(text=[f"client {c} request {i}"], text_b=[""]), timeout=60
                ).model_spec.version.value
                calls.append((sent, time.monotonic(), version))
            except grpc.RpcError as e:
                failures.append(f"{e.code().name}: {e.details()}")
            time.sleep(0.002)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(8)]
    for t in threads:
        t.start()
    started.wait()
    time.sleep(0.3)
    b = _reload(model_stub, base, "clf:model_version_policy{specific{versions:2}} clf_b")
    status = get_model_status_pb2.GetModelStatusRequest()
    status.model_spec.name = "clf_b"
    assert (
        model_stub.GetModelStatus(status, timeout=30).model_version_status[0].state
        == State.AVAILABLE
    )
    status.model_spec.name = "reg"
    with pytest.raises(grpc.RpcError) as info:
        model_stub.GetModelStatus(status, timeout=30)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    time.sleep(0.3)
    c = _reload(
        model_stub,
        base,
        'clf:model_version_policy{specific{versions:1}},version_labels{key:"v",value:1} reg',
    )
    for t in threads:
        t.join(timeout=300)
    channel.close()
    assert failures == [] and len(calls) == 1600
    # config A (clf 1) until reload B returned, B (clf 2) from B's start to C's end, C (clf 1) from C's start
    in_force = [(float("-inf"), b[1], {1}), (b[0], c[1], {2}), (c[0], float("inf"), {1})]
    for sent, answered, version in calls:
        allowed = set().union(
            *(v for start, end, v in in_force if start <= answered and sent <= end)
        )
        assert version in allowed, (sent, answered, version, b, c)
    seen = {v for _, _, v in calls}
    assert seen == {1, 2}, "the load spanned both switches"
    print(f"1600 requests, 0 errors; reloads took {b[1] - b[0]:.2f} s and {c[1] - c[0]:.2f} s")
