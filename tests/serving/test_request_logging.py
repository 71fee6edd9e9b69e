"""Request logging (`logging_config` in the model config file) against a real server, and the
`python -m serving.request_log` tool.

One server on loopback serves four models from one config file:
- clf: logs at rate 0.5 under a relative filename_prefix (resolved under the config's directory),
  files rotated at 4096 bytes;
- reg: logs every request under a prefix whose directory is a regular file, so no file can be
  created there by any user (a chmod-read-only directory would not stop root, who runs many CI
  containers);
- big: logs every request; the server runs under RLIMIT_FSIZE, so writing its records (larger than
  the limit) fails mid-file as on a full disk (EFBIG; Python ignores SIGXFSZ). clf's rotated files
  stay under the limit;
- warm: no logging; a version 2 published with the tool's warmup file proves the file replays.
Clients are grpcio with the tensorflow-serving-api stubs, and urllib for REST.

In-process tests cover what a server cannot show deterministically: a writer stuck on a slow disk
(the queue bound: requests never wait, the overflow is counted exactly) and a real ENOSPC
(/dev/full).
"""

import csv
import json
import math
import resource
import shutil
import threading
import time
import types
import urllib.request

import grpc
import pytest
import tensorflow as tf
from prometheus_client.parser import text_string_to_metric_families
from tensorboard.summary.writer.record_writer import RecordWriter
from tensorflow_serving.apis import (
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_log_pb2,
    prediction_service_pb2_grpc,
)
from tensorflow_serving.config import model_server_config_pb2

from serving import request_log
from serving.monitoring import request_logger
from serving.monitoring.metrics import Metrics
from keras_bert import fileio
from tests.serving.conftest import ServerProcess
from tests.serving.test_grpc_api import outputs, predict_request

RATE, GRPC_REQUESTS, REST_REQUESTS = 0.5, 300, 100
MAX_FILE_BYTES = 4096
FILE_SIZE_LIMIT = 64 << 10  # RLIMIT_FSIZE of the server: bytes any file it writes may reach
BIG_TEXT = "x" * (FILE_SIZE_LIMIT + 1000)  # one record of it cannot be written
WARMUP_RECORDS = 25
SETTLE_TIMEOUT_S = 60


def _limit_file_size():
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))


@pytest.fixture(scope="module")
def logging_server(model_base, tmp_path_factory):
    root = tmp_path_factory.mktemp("request_logging")
    (root / "not_a_dir").write_text("a regular file where the log directory should be")
    shutil.copytree(model_base / "clf" / "1", root / "warm" / "1")

    def logging(prefix, rate):
        return (
            f"logging_config {{ sampling_config {{ sampling_rate: {rate} }} "
            f'log_collector_config {{ filename_prefix: "{prefix}" }} }}'
        )

    (root / "models.config").write_text(f"""
model_config_list {{
  config {{ name: "clf" base_path: "{model_base / "clf"}" model_platform: "tensorflow"
           {logging("logs/clf/requests", RATE)} }}
  config {{ name: "reg" base_path: "{model_base / "reg"}" model_platform: "tensorflow"
           {logging(root / "not_a_dir" / "reg" / "requests", 1.0)} }}
  config {{ name: "big" base_path: "{model_base / "clf"}" model_platform: "tensorflow"
           {logging(root / "logs" / "big" / "requests", 1.0)} }}
  config {{ name: "warm" base_path: "{root / "warm"}" model_platform: "tensorflow" }}
}}
""")
    server = ServerProcess(
        [
            f"--model_config_file={root / 'models.config'}",
            "--file_system_poll_wait_seconds=0.3",
            f"--request_log_max_file_bytes={MAX_FILE_BYTES}",
            "--max_text_length=0",
        ],
        root / "server.log",
        preexec_fn=_limit_file_size,
    )
    try:
        server.wait_serving()
        server.root = root
        yield server
    finally:
        server.stop()


def _metrics(server):
    """{(name, frozenset(labels.items())): value} of our Prometheus metrics."""
    with urllib.request.urlopen(
        server.rest_url + "/monitoring/prometheus/metrics", timeout=30
    ) as response:
        text = response.read().decode()
    text = text[: text.index("# TYPE :tensorflow")]  # ours only (TF Serving's follow)
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _log_counts(server, model):
    """(sampled, written, dropped by reason) once every sampled record is written or dropped."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        values = _metrics(server)
        sampled = values.get(("serving_request_log_sampled_total", frozenset({("model", model)})))
        written = values.get(("serving_request_log_written_total", frozenset({("model", model)})))
        dropped = {
            dict(labels)["reason"]: v
            for (name, labels), v in values.items()
            if name == "serving_request_log_dropped_total" and ("model", model) in labels
        }
        if sampled is not None and sampled == (written or 0) + sum(dropped.values()):
            return sampled, written or 0, dropped
        assert time.monotonic() < deadline, f"records of {model} never settled: {values}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def stub(logging_server):
    with grpc.insecure_channel(logging_server.grpc_target) as channel:
        yield prediction_service_pb2_grpc.PredictionServiceStub(channel)


@pytest.fixture(scope="module")
def clf_traffic(logging_server, stub):
    """Sends GRPC_REQUESTS Predict calls and REST_REQUESTS REST predicts to clf, each with its own
    texts; returns {text: the gRPC response or the REST JSON}."""
    answers = {}
    started = time.time()
    for i in range(GRPC_REQUESTS):
        request = predict_request(text=[f"grpc {i}"], text_b=[f"b {i}"])
        answers[f"grpc {i}"] = stub.Predict(request, timeout=30)
    for i in range(REST_REQUESTS):
        body = json.dumps({"instances": [{"text": f"rest {i}", "text_b": f"b {i}"}]}).encode()
        with urllib.request.urlopen(
            logging_server.rest_url + "/v1/models/clf:predict", body, timeout=30
        ) as response:
            answers[f"rest {i}"] = json.loads(response.read())
    return answers, started, time.time()


def test_sampled_requests_are_prediction_logs_at_the_configured_rate(logging_server, clf_traffic):
    answers, started, ended = clf_traffic
    sampled, written, dropped = _log_counts(logging_server, "clf")
    n = GRPC_REQUESTS + REST_REQUESTS
    bound = 6 * math.sqrt(n * RATE * (1 - RATE))  # binomial, 6 sigma: fails ~1 run in 5e8
    assert abs(sampled - n * RATE) <= bound, (sampled, n * RATE, bound)
    assert written == sampled and dropped == {}

    files = request_log.log_files(str(logging_server.root / "logs" / "clf" / "requests"))
    logs, truncated = request_log.read_logs(files)
    assert len(logs) == written and truncated == []
    assert len(files) > 1  # rotated by size; a record is never split, so a file ends past the limit
    largest = max(len(log.SerializeToString()) for log in logs) + 16
    assert all(tf.io.gfile.stat(f).length < MAX_FILE_BYTES + largest for f in files)
    texts = set()
    for log in logs:
        assert log.WhichOneof("log_type") == "predict_log"
        meta = log.log_metadata
        assert (meta.model_spec.name, meta.model_spec.version.value) == ("clf", 1)
        assert meta.model_spec.signature_name == "serving_default"
        assert meta.sampling_config.sampling_rate == RATE
        assert list(meta.saved_model_tags) == ["serve"]
        assert int(started) <= meta.timestamp_secs <= ended
        request, response = log.predict_log.request, log.predict_log.response
        (text,) = tf.make_ndarray(request.inputs["text"]).astype(str)
        texts.add(text)
        got = outputs(response)
        if text.startswith("grpc"):
            assert response == answers[text]
        else:
            want = answers[text]["predictions"][0]
            assert got["labels"][0].decode() == want["labels"]
            assert got["probabilities"][0].tolist() == pytest.approx(want["probabilities"])
    assert len(texts) == len(logs)  # each request logged at most once
    assert {t.split()[0] for t in texts} == {"grpc", "rest"}  # both front ends log


def test_unwritable_log_directory_serves_every_request_and_counts_drops(logging_server, stub):
    for i in range(20):
        response = stub.Predict(predict_request(model="reg", text=[f"r {i}"]), timeout=30)
        assert outputs(response)["scores"].shape == (1,)
    sampled, written, dropped = _log_counts(logging_server, "reg")
    assert (sampled, written, dropped) == (20, 0, {"write_error": 20})


def test_full_disk_serves_every_request_and_counts_drops(logging_server, stub):
    for _ in range(3):
        response = stub.Predict(
            predict_request(model="big", text=[BIG_TEXT], text_b=[""]), timeout=30
        )
        assert outputs(response)["labels"].shape == (1,)
    sampled, written, dropped = _log_counts(logging_server, "big")
    assert (sampled, written, dropped) == (3, 0, {"write_error": 3})
    assert "File too large" in logging_server.log() or "EFBIG" in logging_server.log()


def _wait_available(server, name, version):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = name
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = model_service_pb2_grpc.ModelServiceStub(channel)
        while True:
            states = {
                s.version: s.state
                for s in stub.GetModelStatus(request, timeout=30).model_version_status
            }
            if states.get(version) == get_model_status_pb2.ModelVersionStatus.AVAILABLE:
                return
            assert time.monotonic() < deadline, states
            time.sleep(0.2)


def test_tool_makes_a_warmup_file_the_server_replays_and_texts_to_label(
    logging_server, clf_traffic, tmp_path
):
    prefix = logging_server.root / "logs" / "clf" / "requests"
    warm2 = tmp_path / "warm2"
    shutil.copytree(logging_server.root / "warm" / "1", warm2)
    warmup = warm2 / "assets.extra" / "tf_serving_warmup_requests"
    warmup.unlink()
    texts = tmp_path / "to_label.csv"
    lines = request_log.run(
        str(prefix), str(warmup), str(texts), max_warmup_records=WARMUP_RECORDS
    )  # what `python -m serving.request_log --log --warmup --texts` does, in process
    logs, _ = request_log.read_logs(request_log.log_files(str(prefix)))
    assert lines == [
        f"read {len(logs)} logged requests from {len(request_log.log_files(str(prefix)))} files",
        f"wrote {WARMUP_RECORDS} warmup requests to {warmup}",
        f"wrote {len(logs)} texts to {texts} (0 repeated ones left out, 0 requests without text "
        "inputs): fill in the label column",
    ]

    # The warmup file: the first requests, without responses; the server replays each one.
    records = [
        prediction_log_pb2.PredictionLog.FromString(r)
        for r in tf.data.TFRecordDataset(str(warmup)).as_numpy_iterator()
    ]
    assert [r.predict_log.request for r in records] == [
        log.predict_log.request for log in logs[:WARMUP_RECORDS]
    ]
    assert not any(r.predict_log.HasField("response") for r in records)
    shutil.move(str(warm2), str(logging_server.root / "warm" / "2"))
    _wait_available(logging_server, "warm", 2)
    replayed = ("serving_warmup_requests_total", frozenset({("model", "warm"), ("version", "2")}))
    assert _metrics(logging_server)[replayed] == WARMUP_RECORDS

    # The texts: one row per logged request, label empty; evaluate.py's reader takes it labelled.
    with texts.open(newline="") as f:
        rows = list(csv.DictReader(f))
    want = [tf.make_ndarray(log.predict_log.request.inputs["text"])[0].decode() for log in logs]
    assert [r["text"] for r in rows] == want
    assert [r["text_b"] for r in rows] == ["b " + t.split()[1] for t in want]
    assert {(r["label"], r["model"], r["version"], r["signature"]) for r in rows} == {
        ("", "clf", "1", "serving_default")
    }
    from keras_bert.data import text_files  # keras_bert loads Keras: only for this check

    labelled = tmp_path / "labelled.csv"
    with labelled.open("w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows({**r, "label": "positive"} for r in rows)
    examples = text_files.read_text_file(str(labelled), "text", "text_b", "label")
    assert [(e.text_a, e.text_b, e.label) for e in examples] == [
        (r["text"], r["text_b"], "positive") for r in rows
    ]


def test_texts_of_classify_requests_as_jsonl_without_repeats(tmp_path):
    log = prediction_log_pb2.PredictionLog()
    examples = log.classify_log.request.input.example_list_with_context
    examples.context.features.feature["text_b"].bytes_list.value.append(b"shared")
    for text in ("one", "two\u2028lines", "one"):  # U+2028: raw in JSON, not a line end
        examples.examples.add().features.feature["text"].bytes_list.value.append(text.encode())
    log.log_metadata.model_spec.name = "clf"
    ids_only = prediction_log_pb2.PredictionLog()
    ids_only.predict_log.request.inputs["input_word_ids"].CopyFrom(tf.make_tensor_proto([[1, 2]]))
    rows, without_text = request_log.text_rows([log, ids_only])
    assert without_text == 1
    assert [(r["text"], r["text_b"]) for r in rows] == [
        ("one", "shared"),
        ("two\u2028lines", "shared"),
        ("one", "shared"),
    ]
    path = tmp_path / "texts.jsonl"
    assert request_log.write_texts(rows, str(path)) == (2, 1)
    lines = fileio.read_jsonl(str(path))
    assert [(r["text"], r["text_b"], r["label"], r["model"]) for r in lines] == [
        ("one", "shared", "", "clf"),
        ("two\u2028lines", "shared", "", "clf"),
    ]
    from keras_bert.data import text_files  # keras_bert loads Keras: only for this check

    examples = text_files.read_text_file(str(path), "text", "text_b", None)
    assert [e.text_a for e in examples] == ["one", "two\u2028lines"]
    with pytest.raises(ValueError, match="give a .csv, .tsv or .jsonl"):
        request_log.write_texts(rows, str(tmp_path / "texts.txt"))


# ---------------------------------------------------------------- in process: slow and full disks
def _config(prefix, rate=1.0):
    config = model_server_config_pb2.ModelConfig(name="m", base_path="unused")
    config.logging_config.sampling_config.sampling_rate = rate
    config.logging_config.log_collector_config.filename_prefix = str(prefix)
    return config


def _count(metrics, name, **labels):
    return metrics.registry.get_sample_value(name, labels) or 0


def _settled(metrics, sampled):
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        written = _count(metrics, "serving_request_log_written_total", model="m")
        dropped = sum(
            _count(metrics, "serving_request_log_dropped_total", model="m", reason=r)
            for r in (request_logger.QUEUE_FULL, request_logger.WRITE_ERROR)
        )
        if written + dropped == sampled:
            return written
        assert time.monotonic() < deadline
        time.sleep(0.05)


SERVABLE = types.SimpleNamespace(name="m", version=3)


def _log(logger, text):
    request = predict_request(model="m", text=[text])
    logger.log("predict_log", SERVABLE, request, predict_pb2.PredictResponse(), "serving_default")


def test_a_stuck_writer_never_blocks_requests_and_the_overflow_is_counted(tmp_path, monkeypatch):
    entered, release = threading.Event(), threading.Event()

    class StuckWriter:  # the first write blocks until released, as on a disk that hangs
        def __init__(self, path):
            self._writer = tf.io.TFRecordWriter(path)

        def write(self, data):
            entered.set()
            release.wait()
            self._writer.write(data)

        def flush(self):
            self._writer.flush()

        def close(self):
            self._writer.close()

    monkeypatch.setattr(request_logger, "open_records", StuckWriter)
    metrics = Metrics()
    logger = request_logger.RequestLogger(metrics, queue_size=4)
    logger.update([_config(tmp_path / "logs" / "m")])
    _log(logger, "first")
    assert entered.wait(SETTLE_TIMEOUT_S)  # the writer holds "first"; its queue is empty
    for i in range(10):
        _log(logger, f"later {i}")  # returns at once: 4 queued, 6 dropped
    assert _count(metrics, "serving_request_log_sampled_total", model="m") == 11
    assert _count(metrics, "serving_request_log_dropped_total", model="m", reason="queue_full") == 6
    release.set()
    assert _settled(metrics, 11) == 5
    logger.stop()
    (path,) = request_log.log_files(str(tmp_path / "logs" / "m"))
    logs, _ = request_log.read_logs([path])
    assert [tf.make_ndarray(log.predict_log.request.inputs["text"])[0] for log in logs] == [
        b"first",
        *(f"later {i}".encode() for i in range(4)),
    ]
    assert {(log.log_metadata.model_spec.version.value) for log in logs} == {3}


def test_enospc_drops_records_and_a_later_file_is_tried(tmp_path, monkeypatch):
    opened = []

    def full_disk(path):  # the kernel's "No space left on device" on every flush
        opened.append(path)
        return tf.io.TFRecordWriter("/dev/full")

    monkeypatch.setattr(request_logger, "open_records", full_disk)
    metrics = Metrics()
    logger = request_logger.RequestLogger(metrics, retry_interval_s=0.0)
    logger.update([_config(tmp_path / "m", rate=1.0)])
    _log(logger, "a")
    assert _settled(metrics, 1) == 0
    _log(logger, "b")
    assert _settled(metrics, 2) == 0
    logger.stop()
    assert (
        _count(metrics, "serving_request_log_dropped_total", model="m", reason="write_error") == 2
    )
    assert len(opened) == 2 and opened[0] != opened[1]  # a failed file is closed, the next is new


class _FillingDisk:
    """Files on a disk that fills while the request log writes: a record is one write; the first
    `records` fit, the next stores half of its bytes and fails with ENOSPC, as every later one
    (storing nothing)."""

    def __init__(self, records):
        self.left = records

    def open(self, path):
        disk, file = self, open(path, "wb")

        class File:
            def write(self, data):
                disk.left -= 1
                if disk.left < 0:
                    file.write(data[: len(data) // 2] if disk.left == -1 else b"")
                    raise OSError(28, "No space left on device")
                file.write(data)

            def flush(self):
                file.flush()

            def close(self):
                file.close()

        return RecordWriter(File())


def test_a_disk_that_fills_keeps_the_complete_records_and_no_empty_file(tmp_path, monkeypatch):
    monkeypatch.setattr(request_logger, "open_records", _FillingDisk(records=2).open)
    metrics = Metrics()
    logger = request_logger.RequestLogger(metrics, retry_interval_s=0.0)
    logger.update([_config(tmp_path / "m")])
    for i, text in enumerate("abcde"):  # one at a time: a, b fit; c is cut; d, e find no room
        _log(logger, text)
        _settled(metrics, i + 1)
    logger.stop()
    assert _count(metrics, "serving_request_log_written_total", model="m") == 2
    assert (
        _count(metrics, "serving_request_log_dropped_total", model="m", reason="write_error") == 3
    )
    files = request_log.log_files(str(tmp_path / "m"))  # d's and e's empty files are gone
    assert [f[-14:] for f in files] == ["00000.tfrecord"]
    logs, truncated = request_log.read_logs(files)
    assert [tf.make_ndarray(x.predict_log.request.inputs["text"])[0] for x in logs] == [b"a", b"b"]
    assert truncated == files  # cut inside c: every record before it reads


def test_a_reloaded_logging_config_applies_at_once(tmp_path):
    metrics = Metrics()
    logger = request_logger.RequestLogger(metrics)
    logger.update([_config(tmp_path / "a")])
    _log(logger, "to a")
    logger.update([_config(tmp_path / "a", rate=0.0)])  # same prefix: same writer, new rate
    _log(logger, "not sampled")
    logger.update([_config(tmp_path / "b")])  # a new prefix: a new writer; a's ends
    _log(logger, "to b")
    logger.update([])  # logging removed
    _log(logger, "no logger")
    assert _settled(metrics, 2) == 2
    logger.stop()
    assert _count(metrics, "serving_request_log_sampled_total", model="m") == 2
    for prefix, want in (("a", b"to a"), ("b", b"to b")):
        logs, _ = request_log.read_logs(request_log.log_files(str(tmp_path / prefix)))
        assert [tf.make_ndarray(x.predict_log.request.inputs["text"])[0] for x in logs] == [want]


def test_bad_logging_configs_are_refused():
    with pytest.raises(ValueError, match="sampling_rate must be in"):
        request_logger.check_logging_configs([_config("p", rate=1.5)])
    with pytest.raises(ValueError, match="filename_prefix is empty"):
        request_logger.check_logging_configs([_config("")])
    second = _config("p")
    second.name = "n"
    with pytest.raises(ValueError, match="Duplicate LogCollectorConfig across models"):
        request_logger.check_logging_configs([_config("p"), second])
