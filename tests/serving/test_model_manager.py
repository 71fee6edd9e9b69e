"""ModelManager in process: version policies, labels, broken versions, unload after in-flight requests."""

import shutil

import pytest
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from serving.models import model_manager
from serving.wire import errors
from serving.models.model_manager import ModelManager, State, aspired_versions
from serving.server import model_configs
from tests.serving import saved_models


def _policy(text):
    return text_format.Parse(text, model_server_config_pb2.ModelConfig()).model_version_policy


@pytest.mark.parametrize(
    "policy,want",
    [
        ("", {5}),
        ("model_version_policy { latest { num_versions: 2 } }", {3, 5}),
        ("model_version_policy { all {} }", {1, 3, 5}),
        ("model_version_policy { specific { versions: 1 versions: 4 } }", {1}),
    ],
)
def test_version_policies(policy, want):
    assert aspired_versions(_policy(policy), {1, 3, 5}) == want


def test_model_config_file_relative_paths_and_errors(tmp_path):
    config = tmp_path / "models.config"
    config.write_text('model_config_list { config { name: "a" base_path: "models/a" } }')
    (c,) = model_configs(model_config_file=str(config))
    assert c.base_path == str(tmp_path / "models" / "a")
    config.write_text(
        'model_config_list { config { name: "a" base_path: "x" model_platform: "onnx" } }'
    )
    with pytest.raises(ValueError, match="onnx"):
        model_configs(model_config_file=str(config))
    with pytest.raises(ValueError, match="model_base_path"):
        model_configs()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("built")
    return {
        v: saved_models.build_classifier(str(root / str(v)), seed=v, warmup=False) for v in (1, 2)
    }


def _manager(base, policy="", labels=""):
    config = text_format.Parse(
        f'name: "m" base_path: "{base}" {policy} {labels}', model_server_config_pb2.ModelConfig()
    )
    manager = ModelManager([config], poll_seconds=0)
    manager.start()
    return manager


def _states(manager):
    return {s.version: (s.state, s.status.error_message) for s in manager.status("m")}


def _serving_version(manager) -> int:
    """The version a request for model "m" without version or label is served by now."""
    with manager.acquire("m") as servable:
        return servable.version


def test_removed_version_unloads_after_in_flight_requests(tmp_path, built):
    for v in (1, 2):
        shutil.copytree(built[v], tmp_path / str(v))
    manager = _manager(
        tmp_path, "model_version_policy { all {} }", 'version_labels { key: "old" value: 1 }'
    )
    try:
        assert {v: s for v, (s, _) in _states(manager).items()} == {
            1: State.AVAILABLE,
            2: State.AVAILABLE,
        }
        with manager.acquire("m", label="old") as servable:  # an in-flight request on version 1
            shutil.rmtree(tmp_path / "1")
            manager.poll_once()
            assert _states(manager)[1][0] == State.UNLOADING
            with pytest.raises(errors.ServingError) as info:
                with manager.acquire("m", version=1):
                    pass
            assert info.value.code.name == "NOT_FOUND"
            out = servable.run("serving_default", {"text": [b"a"], "text_b": [b""]})  # still works
            assert out["probabilities"].shape == (1, 3)
        assert _states(manager)[1] == (State.END, "")  # unloaded as soon as the request released it
        manager.poll_once()
        assert 1 not in _states(manager)  # and forgotten with its directory
        assert _serving_version(manager) == 2
    finally:
        manager.stop()


def test_the_poll_that_unloads_a_version_gives_its_memory_back(tmp_path, built, monkeypatch):
    """After an unload the poll collects garbage and trims glibc's heaps once, outside the lock
    (requests go on); a poll that unloads nothing does neither."""
    trims = []
    monkeypatch.setattr(model_manager, "_MALLOC_TRIM", lambda pad: trims.append(pad))
    shutil.copytree(built[1], tmp_path / "1")
    manager = _manager(tmp_path)
    monkeypatch.setattr(
        model_manager.gc, "collect", lambda: trims.append(("collect", manager._lock._is_owned()))
    )
    try:
        manager.poll_once()
        assert trims == []
        shutil.copytree(built[2], tmp_path / "2")
        manager.poll_once()  # loads version 2; the latest-1 policy unloads version 1
        assert _states(manager)[1][0] == State.END
        assert trims == [("collect", False), 0]
    finally:
        manager.stop()


@pytest.mark.parametrize("error", [OSError("no C library by name"), TypeError("name is None")])
def test_a_platform_without_a_c_library_by_name_trims_nothing(monkeypatch, error):
    """Windows' ctypes cannot open CDLL(None): the server starts and skips the trim."""

    def no_library(name):
        raise error

    monkeypatch.setattr(model_manager.ctypes, "CDLL", no_library)
    assert model_manager._malloc_trim() is None


def test_broken_and_half_written_versions_never_replace_serving_one(tmp_path, built):
    shutil.copytree(built[1], tmp_path / "1")
    manager = _manager(tmp_path)
    try:
        (tmp_path / "2").mkdir()  # half-written: no saved_model.pb yet
        manager.poll_once()
        state, message = _states(manager)[2]
        assert state == State.END and "saved_model.pb" in message
        assert _serving_version(manager) == 1
        shutil.rmtree(tmp_path / "2")
        shutil.copytree(
            built[2], tmp_path / "2"
        )  # the copy completes: files changed, so it is retried
        manager.poll_once()
        assert _states(manager)[2][0] == State.AVAILABLE
        assert _states(manager)[1][0] == State.END  # latest-1 policy: version 1 unloaded
        assert _serving_version(manager) == 2
    finally:
        manager.stop()


def test_failed_warmup_fails_the_load_and_keeps_serving_version(tmp_path, built):
    from tensorflow_serving.apis import predict_pb2

    shutil.copytree(built[1], tmp_path / "1")
    shutil.copytree(built[2], tmp_path / "2")
    bad = predict_pb2.PredictRequest()
    bad.model_spec.signature_name = "no_such_signature"
    saved_models.write_warmup(str(tmp_path / "2"), [bad])
    config = text_format.Parse(
        f'name: "m" base_path: "{tmp_path}" model_version_policy {{ all {{}} }}',
        model_server_config_pb2.ModelConfig(),
    )

    def warmup(servable):  # what the server does: replay the records, raise on error
        from serving.dispatch.inference import InferenceService
        from serving.monitoring.metrics import Metrics
        from serving.wire.tensors import Limits

        InferenceService(None, Limits(), None, Metrics()).warmup(servable)

    manager = ModelManager([config], poll_seconds=0, on_loaded=warmup)
    manager.start()
    try:
        states = _states(manager)
        assert states[1] == (State.AVAILABLE, "")
        assert states[2][0] == State.END
        assert "warmup request 0 failed" in states[2][1] and "no_such_signature" in states[2][1]
        assert _serving_version(manager) == 1
    finally:
        manager.stop()


def test_example_configs_parse():
    from serving.dispatch.batching import BatchingOptions, parse_batching_parameters
    from tests.conftest import REPO_ROOT

    configs = model_configs(
        model_config_file=str(REPO_ROOT / "serving" / "configs" / "models.config")
    )
    assert [c.name for c in configs] == ["sst2", "mrpc"]
    assert dict(configs[1].version_labels) == {"stable": 1, "canary": 2}
    assert aspired_versions(configs[1].model_version_policy, {1, 2, 3}) == {1, 2}
    text = (REPO_ROOT / "serving" / "configs" / "batching.config").read_text()
    assert parse_batching_parameters(text) == BatchingOptions(32, 2000, 4, 100, (8, 16, 32))


def test_no_versions_warning_at_start_and_on_change_only(tmp_path, caplog):
    import logging

    caplog.set_level(logging.WARNING, logger="serving")

    def warnings():
        got = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        caplog.clear()
        return got

    missing = tmp_path / "nope"
    manager = _manager(missing)
    manager.poll_once()  # unchanged: not logged again
    assert warnings() == [
        f"No versions of servable m found under base path {missing} (the path does not exist)"
    ]
    manager.stop()

    version_dir = tmp_path / "sst2" / "1"
    version_dir.mkdir(parents=True)
    (version_dir / "saved_model.pb").write_bytes(b"")
    manager = _manager(version_dir)
    assert warnings() == [
        f"No versions of servable m found under base path {version_dir}; did you "
        "point --model_base_path at a version directory? use its parent "
        f"{tmp_path / 'sst2'}"
    ]
    manager.stop()

    empty = tmp_path / "empty"
    empty.mkdir()
    manager = _manager(empty)
    try:
        manager.poll_once()
        assert warnings() == [f"No versions of servable m found under base path {empty}"]
        (empty / "1").mkdir()  # a (broken) version appears: the warning state clears
        manager.poll_once()
        shutil.rmtree(empty / "1")
        manager.poll_once()  # and it is gone again: warned again, once
        manager.poll_once()
        assert warnings() == [f"No versions of servable m found under base path {empty}"]
    finally:
        manager.stop()
