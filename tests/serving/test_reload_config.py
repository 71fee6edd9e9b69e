"""ModelService/HandleReloadConfigRequest: a new model config replaces the served set as TF Serving's
ServerCore::ReloadConfig does (models added and loaded before the call returns, models removed,
version policies switched without a gap, labels updated only when valid), in process and under load;
and a polled --model_config_file, whose parts that wait on load state (a refused label, a version
or a base path not on disk yet) are applied at the poll after they become possible."""

import logging
import shutil
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

from serving.wire import errors
from serving.models.model_manager import ModelManager, State
from serving.server import ModelServer, model_configs
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
            with pytest.raises(errors.ServingError) as info:
                manager.acquire("reg").__enter__()
            assert info.value.code.name == "NOT_FOUND"
            # As TF Serving: the model asked for, and no name of another model served.
            assert info.value.message == "Servable not found for request: Latest(reg)"
            with pytest.raises(errors.ServingError) as info:
                manager.acquire("reg", 3).__enter__()
            assert info.value.message == "Servable not found for request: Specific(reg, 3)"
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


# ---- --model_config_file polled: what waits on load state is applied at a later poll ---------


def _config_file(path, entries):
    """A ModelServerConfig file of `entries` (ModelConfig text each, base paths relative to it)."""
    path.write_text(
        "model_config_list {\n" + "".join(f"  config {{ {entry} }}\n" for entry in entries) + "}\n"
    )


def _polled_server(config_file, poll_seconds=0):
    """A ModelServer on `config_file` whose polls the test runs (`reload_config_file`)."""
    server = ModelServer(
        model_configs(model_config_file=str(config_file)),
        port=0,
        rest_api_port=0,
        poll_seconds=poll_seconds,
        config_file=str(config_file),
    )
    return server.start()


def _labels(server, name):
    return dict(server.manager._models[name].labels)


def _served_by_label(server, name, label):
    with server.manager.acquire(name, label=label) as servable:
        return servable.version


def _config_log(caplog):
    return [
        r.getMessage() for r in caplog.records if r.name == "serving" and "config" in r.getMessage()
    ]


def test_label_refused_by_a_poll_is_assigned_at_the_poll_after_its_version_loads(
    base, tmp_path, caplog
):
    """TF Serving refuses a label whose version is not loaded and applies the file again at every
    poll; the label appears at the first poll after the version loads, the file unchanged."""
    shutil.copytree(base / "clf" / "1", tmp_path / "m" / "1")
    config_file = tmp_path / "models.config"
    policy = "model_version_policy { specific { versions: 1 versions: 2 } }"
    _config_file(config_file, [f'name: "m" base_path: "m" {policy}'])
    server = _polled_server(config_file)
    try:
        _config_file(
            config_file,
            [
                f'name: "m" base_path: "m" {policy} version_labels {{ key: "stable" value: 1 }} '
                'version_labels { key: "canary" value: 2 }'
            ],
        )
        caplog.set_level(logging.INFO, logger="serving")
        assert server.reload_config_file() is True  # changed: applied; canary refused
        assert _labels(server, "m") == {}
        assert server.reload_config_file() is True  # unchanged, version 2 not there: again
        assert _labels(server, "m") == {}
        assert server.manager.unapplied(model_configs(model_config_file=str(config_file))) == [
            "model m version 2 (its specific policy) is not available",
            "model m label 'canary' not assigned to version 2",
            "model m label 'stable' not assigned to version 1",
        ]
        shutil.copytree(base / "clf" / "2", tmp_path / "m" / "2")
        assert server.reload_config_file() is True  # the file unchanged: version 2 and labels
        assert _labels(server, "m") == {"stable": 1, "canary": 2}
        assert _served_by_label(server, "m", "canary") == 2
        assert _served_by_label(server, "m", "stable") == 1
        assert server.reload_config_file() is False  # all in effect: nothing applied again
        refused = (
            f"model config file {config_file}: Request to assign label to version 2 of model m, "
            "which is not currently available for inference."
        )
        assert _config_log(caplog) == [  # each problem once, not at every poll
            f"model config file {config_file} changed: applying it",
            "reloaded config: serving ['m']",  # once: the same config applied again is not logged
            refused,
            f"model config file {config_file}: not in effect yet: model m version 2 (its specific "
            "policy) is not available; model m label 'canary' not assigned to version 2; model m "
            "label 'stable' not assigned to version 1; applied again at the next poll",
            f"model config file {config_file}: all in effect",
        ]
    finally:
        server.stop(grace=0)


def test_label_is_assigned_at_the_next_poll_when_the_file_system_poll_loaded_it(base, tmp_path):
    """With file-system polling on, the version loads between config polls; the next config poll
    assigns the label it refused."""
    shutil.copytree(base / "clf" / "1", tmp_path / "m" / "1")
    config_file = tmp_path / "models.config"
    _config_file(config_file, ['name: "m" base_path: "m" model_version_policy { all {} }'])
    server = _polled_server(config_file, poll_seconds=0.05)
    try:
        _config_file(
            config_file,
            [
                'name: "m" base_path: "m" model_version_policy { all {} } '
                'version_labels { key: "canary" value: 2 }'
            ],
        )
        assert server.reload_config_file() is True and _labels(server, "m") == {}
        shutil.copytree(base / "clf" / "2", tmp_path / "m" / "2")
        deadline = time.monotonic() + 60
        while versions(server.manager, "m") != {2: State.AVAILABLE, 1: State.AVAILABLE}:
            assert time.monotonic() < deadline, versions(server.manager, "m")
            time.sleep(0.02)
        assert _labels(server, "m") == {}  # loaded, but the label waits for a config poll
        assert server.reload_config_file() is True
        assert _served_by_label(server, "m", "canary") == 2
        assert server.reload_config_file() is False
    finally:
        server.stop(grace=0)


def test_model_whose_base_path_appears_later_and_the_labels_it_held_up(base, tmp_path):
    """A model added with no version yet (NOT_FOUND) holds up every label of that config, as a
    refused label does; the poll after its base path appears loads it and assigns them."""
    shutil.copytree(base / "clf" / "1", tmp_path / "m" / "1")
    config_file = tmp_path / "models.config"
    _config_file(config_file, ['name: "m" base_path: "m"'])
    server = _polled_server(config_file)
    try:
        _config_file(
            config_file,
            [
                'name: "m" base_path: "m" version_labels { key: "stable" value: 1 }',
                'name: "late" base_path: "late"',
            ],
        )
        assert server.reload_config_file() is True
        configs = model_configs(model_config_file=str(config_file))
        assert server.manager.model_names() == ["late", "m"] and _labels(server, "m") == {}
        assert server.manager.unapplied(configs) == [
            "model m label 'stable' not assigned to version 1",
            "model late has no available version",
        ]
        shutil.copytree(base / "reg" / "1", tmp_path / "late" / "1")
        assert server.reload_config_file() is True
        assert versions(server.manager, "late") == {1: State.AVAILABLE}
        assert _served_by_label(server, "m", "stable") == 1
        assert server.manager.unapplied(configs) == []
        assert server.reload_config_file() is False
    finally:
        server.stop(grace=0)


def test_specific_version_missing_at_start_loads_at_a_config_poll(base, tmp_path):
    """The config the server started with counts too: with file-system polling off, a version its
    specific policy names that appears later loads at the next config poll."""
    shutil.copytree(base / "clf" / "1", tmp_path / "m" / "1")
    config_file = tmp_path / "models.config"
    _config_file(
        config_file,
        ['name: "m" base_path: "m" model_version_policy { specific { versions: 1 versions: 2 } }'],
    )
    server = _polled_server(config_file)
    try:
        assert versions(server.manager, "m") == {1: State.AVAILABLE}
        assert server.reload_config_file() is True  # version 2 still missing: applied again
        shutil.copytree(base / "clf" / "2", tmp_path / "m" / "2")
        assert server.reload_config_file() is True
        assert versions(server.manager, "m") == {2: State.AVAILABLE, 1: State.AVAILABLE}
        assert server.reload_config_file() is False
    finally:
        server.stop(grace=0)


def test_config_in_effect_is_not_applied_again(base, tmp_path, caplog):
    config_file = tmp_path / "models.config"
    _config_file(config_file, [f'name: "clf" base_path: "{base / "clf"}"'])
    server = _polled_server(config_file)
    try:
        caplog.set_level(logging.INFO, logger="serving")
        assert [server.reload_config_file() for _ in range(3)] == [False, False, False]
        assert _config_log(caplog) == []
    finally:
        server.stop(grace=0)
