"""The serving benchmarks' harness: the served model, the server process, its model status and
reloads, model-config files and published versions, gRPC Predict requests, and closed-loop clients
with their figures. Timing and reporting are `benchmarks.common`'s.
"""

from __future__ import annotations

import itertools
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time
from typing import Callable, Sequence

from benchmarks.common import PRESET, REPO, percentile, random_batch


def client_threads(
    make_call: Callable[[int], Callable[[], object]],
    clients: int,
    during: Callable[[], object],
    tolerate: tuple = (),
) -> list[tuple[float, float, object]]:
    """Closed-loop load: `clients` threads, thread k calling `make_call(k)()` back to back (one
    untimed call first: channel set-up, first trace) while `during()` runs in this thread, then
    stopped.

    Returns [(start, end, result)] of every timed call (`time.perf_counter()` at send and at the
    answer; result: the call's return value, or the exception of a type in `tolerate` it raised).

    Raises:
        RuntimeError: a client call raised another exception.
    """
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


def closed_loop(
    make_call: Callable[[int], Callable[[], object]], clients: int, seconds: float
) -> tuple[list[float], float]:
    """`client_threads` for 1 s of warm-up, then `seconds` measured.

    Returns (latencies in s of the calls that ENDED inside the measured window, window in s).

    Raises:
        RuntimeError: a client call failed, or no call ended inside the window.
    """
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
    return lat, end - start


def free_port() -> int:
    """A TCP port free on the loopback interface now (bound, read and released): where a serving
    benchmark starts its server."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sst2_classifier(max_seq_length: int = 128, encoder_config: dict | None = None):
    """The served model of the serving benchmarks: `PRESET`'s encoder under a TextClassifier with
    a fixed random head (seed 0), labels negative/positive, task "sst2", its lower-casing
    BertPreprocessor at `max_seq_length`; built by one call, ready to `export`.
    `encoder_config`: BertEncoder arguments of a randomly drawn encoder (seed 0) to use instead
    of PRESET's (its vocabulary stays PRESET's: vocab_size 30522)."""
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


def served_model_dir(model_dir: str | None, work: pathlib.Path, **export_args) -> pathlib.Path:
    """The SavedModel version directory a serving benchmark serves: `model_dir` (its
    `--model_dir`) when given, else `sst2_classifier()` exported under `work` as "minilm"
    (`export_args`: more `Task.export` arguments); Keras is imported only then."""
    if model_dir:
        return pathlib.Path(model_dir)
    return pathlib.Path(sst2_classifier().export(str(work), "minilm", **export_args))


def served_model_name(model_dir: str | None) -> str:
    """How a serving benchmark's notes name its model: `model_dir`'s name, or the default one."""
    return pathlib.Path(model_dir).name if model_dir else "MiniLM-L6 classifier"


def server_command(*flags: str) -> list[str]:
    """The command line that starts `python -m serving.server` with `flags` under this
    interpreter: how every serving benchmark runs the server, in its own process (started in the
    repository root)."""
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


STATUS_POLL_S = 0.02  # how often `Controller.wait` asks for the model's versions
EVENT_TIMEOUT_S = 300.0  # the longest a server start, a version load or a reload may take


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
        self.wait(
            name,
            lambda s: (
                s.get(version) == "AVAILABLE"
                and all(state == "END" for v, state in s.items() if v != version)
            ),
            proc=proc,
        )

    def reload(self, configs) -> None:
        from tensorflow_serving.apis import model_management_pb2

        request = model_management_pb2.ReloadConfigRequest()
        request.config.model_config_list.config.extend(configs)
        response = self._stub.HandleReloadConfigRequest(request, timeout=EVENT_TIMEOUT_S)
        if response.status.error_code:
            raise RuntimeError(f"reload failed: {response.status.error_message}")

    def close(self):
        self._channel.close()


class ServerProcess:
    """`python -m serving.server` with `flags` in a child process, its output in `log_path`: how
    every serving benchmark runs its server. gRPC on a free loopback port (`port=0`: the port the
    server binds, read back from its log by `wait_available`), REST on another with `rest`, else
    off; started in `cwd` (default this repository), TF_CPP_MIN_LOG_LEVEL 2 unless set. `stop()`
    may be called more than once; as a context manager it stops on leaving."""

    def __init__(self, flags, log_path, rest: bool = False, port: int | None = None, cwd=REPO):
        self.port = free_port() if port is None else port
        self.rest_port = free_port() if rest else 0
        self.address = f"127.0.0.1:{self.port}" if self.port else None
        self.rest_address = f"127.0.0.1:{self.rest_port}" if rest else None
        self.log_path = pathlib.Path(log_path)
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            server_command(f"--port={self.port}", f"--rest_api_port={self.rest_port}", *flags),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env={"TF_CPP_MIN_LOG_LEVEL": "2", **os.environ},
        )

    def log_tail(self, n: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-n:]

    def wait_available(self, *models: str, timeout: float = EVENT_TIMEOUT_S) -> "ServerProcess":
        """Waits until a version of each of `models` is AVAILABLE (GetModelStatus); if the server
        exits or `timeout` seconds pass first, stops it and raises a RuntimeError with the log's
        tail."""
        import re

        deadline = time.monotonic() + timeout
        while self.address is None:  # port 0: "Running gRPC ModelServer at host:port"
            log = self.log_path.read_text(errors="replace")
            found = re.search(r"Running gRPC ModelServer at [^\s:]+:(\d+)", log)
            if found:
                self.port = int(found.group(1))
                self.address = f"127.0.0.1:{self.port}"
            elif self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"server exited or bound no port:\n{self.log_tail()}")
            time.sleep(0.5)
        controller = Controller(self.address)
        try:
            for model in models:
                left = max(deadline - time.monotonic(), 0.0)
                controller.wait(model, lambda s: "AVAILABLE" in s.values(), left, self.proc)
        except RuntimeError as e:
            self.stop()
            raise RuntimeError(f"{e} (server exit code {self.proc.poll()}):\n{self.log_tail()}")
        finally:
            controller.close()
        return self

    def stop(self) -> None:
        if self.proc.poll() is None:
            stop_process(self.proc, timeout=60)
        self._log.close()

    close = stop  # as a peer closes (`close_all`)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def publish(source: pathlib.Path, base: pathlib.Path, version: int) -> None:
    """Copies `source` to `base/.tmp-<version>`, then renames it to `base/<version>` (atomic), as
    `python -m export` publishes a version."""
    staged = base / f".tmp-{version}"
    shutil.copytree(source, staged)
    staged.rename(base / str(version))


def stage_model(model_dir: pathlib.Path, work: pathlib.Path, name: str) -> pathlib.Path:
    """`work/models/<name>`, made, holding a copy of `model_dir` as version 1 (`publish`)."""
    base = work / "models" / name
    base.mkdir(parents=True)
    publish(model_dir, base, 1)
    return base


def model_config(name: str, base: pathlib.Path):
    """A ModelConfig of `name` at `base` with the `latest { num_versions: 1 }` policy."""
    from tensorflow_serving.config import model_server_config_pb2

    config = model_server_config_pb2.ModelConfig(
        name=name, base_path=str(base), model_platform="tensorflow"
    )
    config.model_version_policy.latest.num_versions = 1
    return config


class ConfigServer(ServerProcess):
    """A `ServerProcess` serving `name` from `base` through a model config file in `work` (so that
    reloads may change it), polling every `poll_s` (`extra`: more flags), its log in `work`."""

    def __init__(self, name: str, base: pathlib.Path, work: pathlib.Path, poll_s: float, *extra):
        from google.protobuf import text_format
        from tensorflow_serving.config import model_server_config_pb2

        config = model_server_config_pb2.ModelServerConfig()
        config.model_config_list.config.append(model_config(name, base))
        (work / "models.config").write_text(text_format.MessageToString(config))
        flags = [f"--model_config_file={work / 'models.config'}"]
        flags += [f"--file_system_poll_wait_seconds={poll_s}", *extra]
        super().__init__(flags, work / "server.log")


def serve_version(model_dir: pathlib.Path, work: pathlib.Path, name: str, poll_s: float, *extra):
    """A `ConfigServer` on a copy of `model_dir` as version 1 of `name` (`stage_model`), that
    version AVAILABLE: (server, its Controller, the model's base directory). On failure the server
    is stopped and the RuntimeError carries its log's tail."""
    base = stage_model(model_dir, work, name)
    server = ConfigServer(name, base, work, poll_s, *extra)
    controller = Controller(server.address)
    try:
        controller.wait_version(name, 1, proc=server.proc)
    except RuntimeError as e:
        controller.close()
        server.stop()
        raise RuntimeError(f"{e}\nserver log:\n{server.log_tail()}") from None
    return server, controller, base


def proc_status(pid: int) -> dict:
    """Field -> value text of /proc/<pid>/status (Linux), e.g. "VmRSS" -> "1234 kB"."""
    lines = pathlib.Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict((k, v.strip()) for k, _, v in (line.partition(":") for line in lines))


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


def batching_config(
    max_batch_size: int, batch_timeout_micros: int, num_batch_threads: int, extra: str = ""
) -> str:
    """The server's batching parameters file (text proto) with these values,
    max_enqueued_batches 1000, and `extra` fields (e.g. "allowed_batch_sizes: 8") at the end."""
    return (
        f"max_batch_size {{ value: {max_batch_size} }}\n"
        f"batch_timeout_micros {{ value: {batch_timeout_micros} }}\n"
        f"num_batch_threads {{ value: {num_batch_threads} }}\n"
        "max_enqueued_batches { value: 1000 }\n" + (f"{extra}\n" if extra else "")
    )


def string_tensor(texts: Sequence) -> object:
    """A DT_STRING TensorProto [len(texts)] of `texts` (str or bytes), built from the protos
    alone: cheap enough to build inside a timed client call."""
    from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2

    return tensor_pb2.TensorProto(
        dtype=types_pb2.DT_STRING,
        tensor_shape=tensor_shape_pb2.TensorShapeProto(
            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=len(texts))]
        ),
        string_val=[t if isinstance(t, bytes) else t.encode() for t in texts],
    )


def predict_request(model: str, inputs: dict, signature: str = "serving_default"):
    """A PredictRequest of `signature` of `model`: each input a list of texts (`string_tensor`)
    or an array (`tf.make_tensor_proto`)."""
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name, request.model_spec.signature_name = model, signature
    for name, value in inputs.items():
        if isinstance(value, (list, tuple)):
            request.inputs[name].CopyFrom(string_tensor(value))
        else:
            import tensorflow as tf

            request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
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


def predict_rotation(
    address: str, items: Sequence, clients: int, request_of=None, timeout: float = 60
) -> Callable[[int], Callable[[], object]]:
    """`make_call` for `client_threads` / `closed_loop`: client k, on its own channel, sends Predict
    of `items` in turn from the (k * len(items) // clients)-th (`request_of(item)`, or the item
    itself, a PredictRequest); a call returns the PredictResponse."""

    to_request = request_of or (lambda item: item)

    def make_call(k):
        stub, mine = predict_stub(address), rotation(items, k, clients)
        return lambda: stub.Predict(to_request(next(mine)), timeout=timeout)

    return make_call


def rotation(items: Sequence, k: int, clients: int):
    """Client k's endless iterator over `items`: in turn, from the (k * len(items) // clients)-th."""
    start = k * len(items) // clients
    return itertools.cycle([*items[start:], *items[:start]])


def load_figures(
    latencies: Sequence[float], window: float, rows_per_call: int = 1, quantiles=(50, 99)
) -> tuple:
    """`closed_loop`'s result as (rows/s, then the latency percentiles `quantiles` in ms)."""
    return (
        len(latencies) * rows_per_call / window,
        *(percentile(latencies, q) * 1e3 for q in quantiles),
    )
