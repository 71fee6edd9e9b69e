"""The serving benchmarks' harness: the served model, the server process, its model status and
reloads, staged and published versions, gRPC Predict requests, and closed-loop clients with their
figures. Timing and reporting are `benchmarks.common`'s.
"""

from __future__ import annotations

import itertools
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import threading
import time
from typing import Callable, Sequence

from benchmarks import common
from benchmarks.common import PRESET, REPO, percentile, random_batch

STATUS_POLL_S = 0.02  # how often `Controller.wait` asks for the model's versions
EVENT_TIMEOUT_S = 300.0  # the longest a server start, a version load or a reload may take


# ----------------------------------------------------------------------------- clients
def client_threads(make_call, clients: int, during, tolerate: tuple = ()) -> list[tuple]:
    """Closed-loop load: `clients` threads, thread k calling `make_call(k)()` back to back (one
    untimed call first) while `during()` runs in this thread. Returns [(start, end, result)] of
    every timed call (`time.perf_counter()`; result: the call's return value or its exception of
    a type in `tolerate`); a RuntimeError if a call raised another exception."""
    records, lock, stop, errors = [], threading.Lock(), threading.Event(), []

    def worker(k):
        mine = []
        try:
            call = make_call(k)
            call()
            while not stop.is_set():
                start = time.perf_counter()
                try:
                    result = call()
                except tolerate as e:
                    result = e
                mine.append((start, time.perf_counter(), result))
        except Exception as e:
            errors.append(repr(e))
        with lock:
            records.extend(mine)

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(clients)]
    for th in threads:
        th.start()
    try:
        during()
    finally:
        stop.set()
        for th in threads:
            th.join()
    if errors:
        raise RuntimeError(f"client errors: {errors[:3]}")
    return records


def closed_loop(make_call, clients: int, seconds: float, rows_per_call=1, quantiles=(50, 99)):
    """`client_threads` for 1 s of warm-up, then `seconds` measured: (rows/s, the latency
    percentiles `quantiles` in ms, calls measured) of the calls that ENDED inside the window; a
    RuntimeError if a call failed or none ended inside it."""
    window = []

    def during():
        time.sleep(1.0)
        window.append(time.perf_counter())
        time.sleep(seconds)
        window.append(time.perf_counter())

    records = client_threads(make_call, clients, during)
    start, end = window
    lat = [t - s for s, t, _ in records if start <= t <= end]
    if not lat:
        raise RuntimeError("no call completed inside the measured window; raise --seconds")
    ms = [percentile(lat, q) * 1e3 for q in quantiles]
    return (len(lat) * rows_per_call / (end - start), *ms, len(lat))


def rotation(items: Sequence, k: int, clients: int):
    """Client k's endless iterator over `items`: in turn, from the (k * len(items) // clients)-th."""
    start = k * len(items) // clients
    return itertools.cycle([*items[start:], *items[:start]])


# ----------------------------------------------------------------------------- the model
def sst2_classifier(max_seq_length: int = 128, encoder_config: dict | None = None):
    """The served model of the serving benchmarks, ready to `export`: `PRESET`'s encoder (or a
    random one of `encoder_config`, seed 0, PRESET's vocabulary) under a TextClassifier with a
    fixed random head (seed 0), task "sst2", its lower-casing preprocessor at `max_seq_length`."""
    import keras

    import keras_bert
    from keras_bert.checkpoints import resolve_vocab_file
    from keras_bert.tasks import TextClassifier
    from keras_bert.tokenization import BertPreprocessor

    keras.utils.set_random_seed(0)
    preprocessor = BertPreprocessor(
        resolve_vocab_file(PRESET), do_lower_case=True, max_seq_length=max_seq_length
    )
    encoder = (
        keras_bert.from_pretrained(PRESET)
        if encoder_config is None
        else keras_bert.BertEncoder(**encoder_config)
    )
    task = TextClassifier(
        encoder,
        num_classes=2,
        label_names=["negative", "positive"],
        task_name="sst2",
        preprocessor=preprocessor,
    )
    task(random_batch(1, 8))
    return task


def export_max_seq_length(model_dir) -> int:
    """The max_seq_length of the export at `model_dir` (its assets/export_config.json)."""
    from keras_bert import fileio

    config = fileio.read_json(fileio.join(str(model_dir), "assets", "export_config.json"))
    return int(config["max_seq_length"])


def served_model_dir(model_dir: str | None, work: pathlib.Path, max_seq_length=128, **export_args):
    """`model_dir` (a benchmark's `--model_dir`, a local path or a URI: `publish` copies it) when
    given, else `sst2_classifier(max_seq_length)` exported under `work` as "minilm"
    (`export_args`: more `Task.export` arguments)."""
    if model_dir:
        return model_dir
    task = sst2_classifier(max_seq_length)
    return pathlib.Path(task.export(str(work), "minilm", **export_args))


# ----------------------------------------------------------------------------- the server
def free_port() -> int:
    """A TCP port free on the loopback interface now (bound, read and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_command(*flags: str) -> list[str]:
    """The command line of `python -m serving.server` with `flags` under this interpreter."""
    return [sys.executable, "-m", "serving.server", *flags]


def stop_process(proc: subprocess.Popen, timeout: float) -> None:
    """Stops a child process: SIGTERM first (serving.server then shuts down gracefully), SIGKILL
    if it is still running `timeout` seconds later; returns once it has exited."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


class Controller:
    """GetModelStatus / HandleReloadConfigRequest on its own gRPC channel to a server."""

    def __init__(self, address: str):
        import grpc
        from tensorflow_serving.apis import model_service_pb2_grpc

        self._channel = grpc.insecure_channel(address)
        self._stub = model_service_pb2_grpc.ModelServiceStub(self._channel)

    def states(self, name: str) -> dict:
        """version -> state name ({} while the server cannot answer)."""
        import grpc
        from tensorflow_serving.apis import get_model_status_pb2

        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = name
        try:
            response = self._stub.GetModelStatus(request, timeout=10)
        except grpc.RpcError:
            return {}
        state = get_model_status_pb2.ModelVersionStatus.State
        return {s.version: state.Name(s.state) for s in response.model_version_status}

    def wait(self, name: str, done, timeout: float = EVENT_TIMEOUT_S, proc=None) -> None:
        """Polls `states(name)` until `done(states)`; raises RuntimeError after `timeout` s, or
        as soon as the process `proc` (when given) has exited."""
        deadline = time.monotonic() + timeout
        while not done(self.states(name)):
            if time.monotonic() > deadline or (proc is not None and proc.poll() is not None):
                raise RuntimeError(f"{name}: not done after {timeout:g} s: {self.states(name)}")
            time.sleep(STATUS_POLL_S)

    def wait_version(self, name: str, version: int, proc=None) -> None:
        """`wait` until `version` of `name` is AVAILABLE and every other version of it has ENDed."""

        def done(states):
            ended = all(x == "END" for v, x in states.items() if v != version)
            return ended and states.get(version) == "AVAILABLE"

        self.wait(name, done, proc=proc)

    def reload(self, bases: dict) -> None:
        """HandleReloadConfigRequest: model name -> its base directory (`model_config`)."""
        from tensorflow_serving.apis import model_management_pb2

        request = model_management_pb2.ReloadConfigRequest()
        configs = request.config.model_config_list.config
        configs.extend(model_config(name, base) for name, base in bases.items())
        response = self._stub.HandleReloadConfigRequest(request, timeout=EVENT_TIMEOUT_S)
        if response.status.error_code:
            raise RuntimeError(f"reload failed: {response.status.error_message}")

    def close(self):
        self._channel.close()


class ServerProcess:
    """`python -m serving.server` with `flags` in a child process, its output in `log_path`: how
    every serving benchmark runs its server. gRPC on a free loopback port, REST on another with
    `rest`, else off; TF_CPP_MIN_LOG_LEVEL 2 unless set; `controller`: its Controller. `stop()`
    may be called more than once; as a context manager it stops on leaving, printing the log's
    tail to stderr after an error. The first one a program starts makes SIGTERM end that program
    through its `finally` blocks and context managers (`common.exit_on_sigterm`), so its server is
    stopped too."""

    def __init__(self, flags, log_path, rest: bool = False):
        common.exit_on_sigterm()
        self.port, self.rest_port = free_port(), free_port() if rest else 0
        self.address = f"127.0.0.1:{self.port}"
        self.rest_address = f"127.0.0.1:{self.rest_port}" if rest else None
        self.log_path, self.base = pathlib.Path(log_path), None  # base: set by `serve`
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            server_command(f"--port={self.port}", f"--rest_api_port={self.rest_port}", *flags),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env={"TF_CPP_MIN_LOG_LEVEL": "2", **os.environ},
        )
        self.controller = Controller(self.address)

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def wait_available(self, *models: str) -> ServerProcess:
        """Waits until a version of each of `models` is AVAILABLE (GetModelStatus); if the server
        exits or EVENT_TIMEOUT_S pass first, stops it and raises a RuntimeError with the log's
        tail."""
        try:
            for model in models:
                self.controller.wait(model, lambda s: "AVAILABLE" in s.values(), proc=self.proc)
        except RuntimeError as e:
            self.stop()
            raise RuntimeError(f"{e} (server exit code {self.proc.poll()}):\n{self.log_tail()}")
        except BaseException:  # SIGTERM (SystemExit), Ctrl-C: the server does not outlive us
            self.stop()
            raise
        return self

    def swap_version(self, model_dir: pathlib.Path, version: int) -> float:
        """Publishes `model_dir` as `version` of the model `serve` staged, waits until it alone is
        AVAILABLE, then deletes `version - 1`; returns `time.perf_counter()` when it was."""
        publish(model_dir, self.base, version)
        self.controller.wait_version(self.base.name, version, proc=self.proc)
        available = time.perf_counter()
        shutil.rmtree(self.base / str(version - 1))
        return available

    def stop(self) -> None:
        if self.proc.poll() is None:
            stop_process(self.proc, timeout=60)
        self.controller.close()
        self._log.close()

    close = stop  # as a peer closes (`close_all`)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        self.stop()
        if exc_type is not None:
            print(f"server log tail:\n{self.log_tail()}", file=sys.stderr)


# ----------------------------------------------------------------------------- versions
def publish(source, base: pathlib.Path, version: int) -> None:
    """Copies `source` (a local path or a URI) to `base/.tmp-<version>`, then renames it to
    `base/<version>` (atomic), as `python -m export` publishes a version."""
    from keras_bert import fileio

    staged = base / f".tmp-{version}"
    fileio.copy_tree(str(source), str(staged))
    staged.rename(base / str(version))


def stage_model(model_dir: pathlib.Path, work: pathlib.Path, name: str) -> pathlib.Path:
    """`work/models/<name>`, made, holding a copy of `model_dir` as version 1 (`publish`)."""
    base = work / "models" / name
    base.mkdir(parents=True)
    publish(model_dir, base, 1)
    return base


def model_config(name: str, base: pathlib.Path, version: int | None = None):
    """A ModelConfig of `name` at `base` with the `latest { num_versions: 1 }` policy, or with
    `specific { versions: <version> }`."""
    from tensorflow_serving.config import model_server_config_pb2

    config = model_server_config_pb2.ModelConfig(
        name=name, base_path=str(base), model_platform="tensorflow"
    )
    if version is None:
        config.model_version_policy.latest.num_versions = 1
    else:
        config.model_version_policy.specific.versions.append(version)
    return config


def config_flag(path: pathlib.Path, configs) -> str:
    """Writes a ModelServerConfig of `configs` (ModelConfigs) to `path` (text proto), whole (a
    temporary file renamed over it: a server polling the file never reads half of it); returns the
    server flag naming it."""
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    config = model_server_config_pb2.ModelServerConfig()
    config.model_config_list.config.extend(configs)
    staged = path.with_name(f".{path.name}.tmp")
    staged.write_text(text_format.MessageToString(config))
    staged.replace(path)
    return f"--model_config_file={path}"


def serve(model_dir: pathlib.Path, work: pathlib.Path, name: str, *flags, rest: bool = False):
    """A `ServerProcess` with `flags` serving a copy of `model_dir` as version 1 of `name`
    (`stage_model`; `server.base`: its base directory) through a model config file in `work`
    (so that reloads may change it), its log in `work`, that version AVAILABLE."""
    base = stage_model(model_dir, work, name)
    flags = [config_flag(work / "models.config", [model_config(name, base)]), *flags]
    server = ServerProcess(flags, work / "server.log", rest=rest)
    server.base = base
    return server.wait_available(name)


def batching_flags(work, max_batch_size, timeout_micros, threads, allowed=(), buckets=()):
    """The server flags of batching with these parameters (`allowed`: allowed_batch_sizes,
    `buckets`: length_buckets) and max_enqueued_batches 1000, its file (text proto) in `work`."""
    path = work / "batching.config"
    work.mkdir(parents=True, exist_ok=True)
    lists = [f"allowed_batch_sizes: {s}" for s in allowed]
    lists += [f"length_buckets: {b}" for b in buckets]
    path.write_text(
        f"max_batch_size {{ value: {max_batch_size} }}\n"
        f"batch_timeout_micros {{ value: {timeout_micros} }}\n"
        f"num_batch_threads {{ value: {threads} }}\n"
        "max_enqueued_batches { value: 1000 }\n" + "".join(f"{x}\n" for x in lists)
    )
    return ["--enable_batching", f"--batching_parameters_file={path}"]


def proc_status(pid: int) -> dict:
    """Field -> value text of /proc/<pid>/status (Linux), e.g. "VmRSS" -> "1234 kB"."""
    lines = pathlib.Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict((k, v.strip()) for k, _, v in (line.partition(":") for line in lines))


# ----------------------------------------------------------------------------- requests
def string_inputs(address: str, model: str) -> list:
    """The string input names of `model`'s serving_default signature (GetModelMetadata)."""
    import grpc
    from tensorflow_serving.apis import get_model_metadata_pb2, prediction_service_pb2_grpc

    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = model
    with grpc.insecure_channel(address) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        response = stub.GetModelMetadata(request, timeout=60)
    signatures = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(signatures)
    inputs = signatures.signature_def["serving_default"].inputs
    return sorted(name for name, info in inputs.items() if info.dtype == 7)  # DT_STRING


def predict_request(model: str, inputs: dict, signature: str = "serving_default"):
    """A PredictRequest of `signature` of `model`: each input a list of texts (str or bytes, a
    DT_STRING tensor built from the protos alone: cheap enough inside a timed call) or an array
    (`tf.make_tensor_proto`)."""
    from tensorflow.core.framework import types_pb2
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name, request.model_spec.signature_name = model, signature
    for name, value in inputs.items():
        tensor = request.inputs[name]
        if isinstance(value, (list, tuple)):
            tensor.dtype = types_pb2.DT_STRING
            tensor.tensor_shape.dim.add(size=len(value))
            tensor.string_val.extend(t if isinstance(t, bytes) else t.encode() for t in value)
        else:
            import tensorflow as tf

            tensor.CopyFrom(tf.make_tensor_proto(value))
    return request


def predict_stub(address: str):
    """A PredictionService stub on a new insecure channel to `address` (host:port)."""
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    return prediction_service_pb2_grpc.PredictionServiceStub(grpc.insecure_channel(address))


def predict_call(address: str, request) -> Callable[[], object]:
    """A zero-argument callable sending `request` through its own channel to `address`."""
    stub = predict_stub(address)
    return lambda: stub.Predict(request, timeout=60)


def predict_rotation(address: str, items: Sequence, clients: int, request_of=None, timeout=60):
    """`make_call` for `client_threads` / `closed_loop`: client k, on its own channel, sends Predict
    of `items` in turn from the (k * len(items) // clients)-th (`request_of(item)`, or the item
    itself, a PredictRequest); a call returns the PredictResponse."""
    to_request = request_of or (lambda item: item)

    def make_call(k):
        stub, mine = predict_stub(address), rotation(items, k, clients)
        return lambda: stub.Predict(to_request(next(mine)), timeout=timeout)

    return make_call
