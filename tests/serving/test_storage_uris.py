"""Exports and the server on URIs (SPEC 6a, 7, 8): `ram://` in process, half-published versions,
load retries, base paths that cannot be reached.

`ram://` is TensorFlow's in-memory file system, one per process, so these servers run in the
test process (`ModelServer` on free loopback ports, real gRPC and REST). On `ram://` a directory
is published by copying its files (as on `gs://`), so the marker rule applies there.
"""

import json
import threading
import time
import urllib.request
import uuid

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import (
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)
from tensorflow_serving.config import model_server_config_pb2

from keras_bert import fileio
from serving.models import model_manager
from serving.models.model_manager import Scan, State, scan_versions
from serving.server import ModelServer, model_configs
from tests.serving import saved_models
from tests.serving.conftest import free_port

UNAVAILABLE = grpc.StatusCode.UNAVAILABLE.value[0]


def _ram(name):
    """A fresh ram:// directory (the file system lives as long as the test process)."""
    return f"ram://{name}_{uuid.uuid4().hex[:8]}"


def _config(name, base_path):
    return model_server_config_pb2.ModelConfig(
        name=name, base_path=base_path, model_platform="tensorflow"
    )


def _publish_classifier(version_dir, seed, ours=True, marker=True):
    """A classifier SavedModel at `version_dir` (any URI); `ours` adds the exporter's
    assets/export_config.json, `marker` the completion marker."""
    saved_models.build_classifier(version_dir, seed=seed, warmup=False)
    if ours:
        fileio.write_json(fileio.join(version_dir, "assets", "export_config.json"), {"seed": seed})
    if marker:
        fileio.write_bytes(fileio.join(version_dir, fileio.COMPLETE_MARKER), b"")
    return version_dir


class InProcessServer:
    """`ModelServer` on free loopback ports in this process, with gRPC stubs; stop() at the end."""

    def __init__(self, configs, **kwargs):
        kwargs.setdefault("poll_seconds", 0)
        self.server = ModelServer(
            configs, host="127.0.0.1", port=0, rest_api_port=free_port(), **kwargs
        )
        self.server.start()
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.server.port}")
        self.predict = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)
        self.models = model_service_pb2_grpc.ModelServiceStub(self.channel)

    def status(self, name):
        """[(version, state, error_code, error_message)] from GetModelStatus."""
        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = name
        response = self.models.GetModelStatus(request, timeout=30)
        return [
            (s.version, s.state, s.status.error_code, s.status.error_message)
            for s in response.model_version_status
        ]

    def classify(self, name, texts):
        """(served version, probabilities) of a Predict call on `serving_default`."""
        request = predict_pb2.PredictRequest()
        request.model_spec.name = name
        request.inputs["text"].CopyFrom(tf.make_tensor_proto(texts))
        request.inputs["text_b"].CopyFrom(tf.make_tensor_proto([""] * len(texts)))
        response = self.predict.Predict(request, timeout=30)
        return (
            response.model_spec.version.value,
            tf.make_ndarray(response.outputs["probabilities"]),
        )

    def stop(self):
        self.channel.close()
        self.server.stop(grace=1)


@pytest.fixture
def serve():
    servers = []

    def start(configs, **kwargs):
        servers.append(InProcessServer(configs, **kwargs))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def _wait_for(condition, timeout=30.0, step=0.02):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        time.sleep(step)


def _reference(version_dir, texts):
    fn = tf.saved_model.load(version_dir).signatures["serving_default"]
    return fn(text=tf.constant(texts), text_b=tf.constant([""] * len(texts)))["probabilities"]


# ---- which version directories are loaded ---------------------------------------------------


@pytest.mark.parametrize("where", ["ram", "local"])
def test_scan_versions_waits_for_the_marker_only_where_publishing_copies(where, tmp_path):
    base = _ram("scan") if where == "ram" else str(tmp_path)
    layout = {
        "1": {fileio.COMPLETE_MARKER: "", "saved_model.pb": "x", "assets/export_config.json": "{}"},
        "2": {"saved_model.pb": "x", "assets/export_config.json": "{}"},  # ours, being copied
        "3": {"saved_model.pb": "x"},  # another tool's, saved_model.pb readable
        "4": {"variables/variables.index": "x"},  # another tool's, saved_model.pb not yet there
        ".5.tmp-0123abcd": {"saved_model.pb": "x"},  # a staging directory
        "latest": {"saved_model.pb": "x"},
    }
    for name, files in layout.items():
        for rel, text in files.items():
            fileio.makedirs(fileio.parent(fileio.join(base, name, rel)))
            fileio.write_text(fileio.join(base, name, rel), text)
    if where == "ram":
        assert scan_versions(base) == Scan(frozenset({1, 3}), frozenset({2, 4}), True, "")
    else:  # a rename publishes a whole directory: every integer directory is a version
        assert scan_versions(base) == Scan(frozenset({1, 2, 3, 4}), frozenset(), True, "")


def test_half_published_version_is_loaded_once_its_marker_appears(serve):
    base = _ram("half")
    _publish_classifier(f"{base}/1", seed=1)
    _publish_classifier(f"{base}/2", seed=2, marker=False)  # every file copied but the marker
    server = serve([_config("clf", base)])
    assert server.status("clf") == [(1, State.AVAILABLE, 0, "")]
    server.server.manager.poll_once()
    assert server.status("clf") == [(1, State.AVAILABLE, 0, "")]
    version, probabilities = server.classify("clf", ["a fine film"])
    assert version == 1
    np.testing.assert_array_equal(probabilities, _reference(f"{base}/1", ["a fine film"]))

    fileio.write_bytes(fileio.join(base, "2", fileio.COMPLETE_MARKER), b"")
    server.server.manager.poll_once()
    assert server.status("clf") == [(2, State.AVAILABLE, 0, ""), (1, State.END, 0, "")]
    version, probabilities = server.classify("clf", ["a fine film"])
    assert version == 2
    np.testing.assert_array_equal(probabilities, _reference(f"{base}/2", ["a fine film"]))


def test_version_written_by_another_tool_is_served_without_a_marker(serve):
    base = _ram("foreign")
    _publish_classifier(f"{base}/7", seed=7, ours=False, marker=False)  # tf.saved_model.save
    server = serve([_config("clf", base)])
    assert server.status("clf") == [(7, State.AVAILABLE, 0, "")]


# ---- load failures ----------------------------------------------------------------------------


def test_failed_load_is_retried_the_stated_times_while_the_old_version_serves(
    serve, tmp_path, monkeypatch
):
    _publish_classifier(str(tmp_path / "1"), seed=1)
    attempts = []
    real_load = model_manager.load_servable

    def counting_load(name, version, path, *args):
        attempts.append((version, time.monotonic()))
        return real_load(name, version, path, *args)

    monkeypatch.setattr(model_manager, "load_servable", counting_load)
    server = serve(
        [_config("clf", str(tmp_path))], max_num_load_retries=2, load_retry_interval_s=0.3
    )
    manager = server.server.manager
    (tmp_path / "2").mkdir()
    (tmp_path / "2" / "saved_model.pb").write_bytes(b"not a SavedModel")
    # One poll finds version 2; no poll after it (poll_seconds=0): the retries come from the
    # retry schedule alone.
    manager.poll_once()
    _wait_for(lambda: [v for v, _ in attempts].count(2) == 3)
    _wait_for(lambda: manager._models["clf"].versions[2].retry_at is None)
    time.sleep(0.9)  # three more intervals: no fourth attempt
    times = [t for v, t in attempts if v == 2]
    assert len(times) == 3 and [v for v, _ in attempts].count(1) == 1
    assert min(b - a for a, b in zip(times, times[1:])) >= 0.3
    ((v2, state2, code2, message2), (v1, state1, code1, message1)) = server.status("clf")
    assert (v2, state2, code2) == (2, State.END, grpc.StatusCode.UNKNOWN.value[0])
    assert message2.startswith("Failed to load clf version 2: ")
    assert (v1, state1, code1, message1) == (1, State.AVAILABLE, 0, "")
    assert server.classify("clf", ["still one"])[0] == 1

    # Its files change (the copy completes): a fresh load, served.
    (tmp_path / "2" / "saved_model.pb").unlink()
    _publish_classifier(str(tmp_path / "2"), seed=2)
    manager.poll_once()
    assert server.status("clf")[0] == (2, State.AVAILABLE, 0, "")
    assert server.classify("clf", ["now two"])[0] == 2


# ---- base paths that cannot be reached --------------------------------------------------------


def test_unregistered_scheme_shows_in_status_and_the_other_model_serves(serve, tmp_path, caplog):
    caplog.set_level("ERROR", logger="serving")
    _publish_classifier(str(tmp_path / "clf" / "1"), seed=1)
    server = serve([_config("clf", str(tmp_path / "clf")), _config("far", "s3://bucket/m")])
    message = (
        "cannot reach model base path s3://bucket/m: File system scheme 's3' not implemented "
        "(file: 's3://bucket/m')"
    )
    assert server.status("far") == [(0, State.START, UNAVAILABLE, message)]
    with urllib.request.urlopen(f"http://127.0.0.1:{server.server.rest.port}/v1/models/far") as r:
        assert json.loads(r.read()) == {
            "model_version_status": [
                {
                    "version": "0",
                    "state": "START",
                    "status": {"error_code": "UNAVAILABLE", "error_message": message},
                }
            ]
        }
    assert [r.getMessage() for r in caplog.records] == [f"model far: {message}"]
    server.server.manager.poll_once()  # logged once, not on every poll
    assert len(caplog.records) == 1
    assert server.classify("clf", ["served"])[0] == 1


def test_base_path_that_does_not_answer_is_served_once_it_answers(serve, tmp_path, monkeypatch):
    hang = _ram("hang")
    answering = threading.Event()
    real_listdir = fileio.listdir

    def listdir(path):
        if path.startswith(hang):
            answering.wait(30)
        return real_listdir(path)

    monkeypatch.setattr(fileio, "listdir", listdir)
    _publish_classifier(f"{hang}/m/3", seed=3)
    _publish_classifier(str(tmp_path / "clf" / "1"), seed=1)
    server = serve(
        [_config("clf", str(tmp_path / "clf")), _config("slow", f"{hang}/m")],
        poll_seconds=0.1,
        reach_timeout_s=0.2,
    )
    message = f"cannot reach model base path {hang}/m: no answer from its file system in 0.2 s"
    assert server.status("slow") == [(0, State.START, UNAVAILABLE, message)]
    assert server.classify("clf", ["served"])[0] == 1
    answering.set()
    _wait_for(lambda: server.status("slow") == [(3, State.AVAILABLE, 0, "")])
    assert server.classify("slow", ["now"])[0] == 3


# ---- the config file on a URI, polled ---------------------------------------------------------


def test_model_config_file_on_ram_is_polled_and_applied(serve):
    base = _ram("config")
    _publish_classifier(f"{base}/a/1", seed=1)
    _publish_classifier(f"{base}/b/2", seed=2)
    config_file = f"{base}/models.config"
    fileio.write_text(config_file, 'model_config_list { config { name: "a" base_path: "a" } }')
    configs = model_configs(model_config_file=config_file)
    assert [(c.name, c.base_path) for c in configs] == [("a", f"{base}/a")]
    server = serve(configs, config_file=config_file, config_poll_seconds=0.1)
    fileio.write_text(
        config_file,
        'model_config_list { config { name: "a" base_path: "a" } '
        'config { name: "b" base_path: "b" } }',
    )
    manager = server.server.manager
    _wait_for(lambda: manager.model_names() == ["a", "b"] and manager.all_available())
    assert server.status("b") == [(2, State.AVAILABLE, 0, "")]
    fileio.write_text(config_file, "not a config")  # logged; the served set stays
    time.sleep(0.3)
    assert server.server.manager.model_names() == ["a", "b"]


# ---- export to ram:// then serve from it ------------------------------------------------------


@pytest.mark.slow
def test_export_to_ram_is_published_complete_and_served(serve, uncased_vocab):
    from tests.export.conftest import LABELS3, tiny_classifier

    task = tiny_classifier(3, LABELS3, "own_sentiment", seed=1, vocab_file=uncased_vocab)
    base = _ram("export")
    path = task.export(base, "sst3")
    assert path == f"{base}/sst3/1"
    assert fileio.listdir(f"{base}/sst3") == ["1"]  # no staging directory left
    assert fileio.listdir(path) == [
        fileio.COMPLETE_MARKER,
        "assets",
        "assets.extra",
        "fingerprint.pb",
        "saved_model.pb",
        "variables",
    ]
    assert fileio.listdir(f"{path}/assets") == ["export_config.json", "labels.txt", "vocab.txt"]
    server = serve([_config("sst3", f"{base}/sst3")])
    assert server.status("sst3") == [(1, State.AVAILABLE, 0, "")]
    texts = ["a gripping , beautifully acted film .", "a dull mess ."]
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "sst3"
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(texts))
    response = server.predict.Predict(request, timeout=30)
    want = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(texts))
    np.testing.assert_array_equal(
        tf.make_ndarray(response.outputs["probabilities"]), want["probabilities"].numpy()
    )
    assert [x.decode() for x in tf.make_ndarray(response.outputs["labels"])] == [
        x.decode() for x in want["labels"].numpy()
    ]
    np.testing.assert_allclose(
        tf.make_ndarray(response.outputs["probabilities"]), task.predict(texts), atol=1e-5
    )
