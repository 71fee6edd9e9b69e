"""Fixtures for the serving tests: small SavedModels and real server processes on loopback ports.

Every server is a `python -m serving.server` subprocess on free 127.0.0.1 ports, stopped by its
fixture's finalizer (SIGTERM, then SIGKILL after a timeout).
"""

import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.conftest import REPO_ROOT
from tests.serving import saved_models

START_TIMEOUT_S = 180


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """`python -m serving.server` with `args`; .grpc_target / .rest_url once started.
    `preexec_fn` runs in the child before the server starts (e.g. to set a resource limit)."""

    def __init__(self, args, log_path, rest=True, preexec_fn=None):
        self.port, self.rest_port = free_port(), (free_port() if rest else 0)
        self.log_path = pathlib.Path(log_path)
        cmd = [
            sys.executable,
            "-m",
            "serving.server",
            f"--port={self.port}",
            f"--rest_api_port={self.rest_port}",
            "--host=127.0.0.1",
            *args,
        ]
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            cmd,
            cwd=REPO_ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=preexec_fn,
        )
        self.grpc_target = f"127.0.0.1:{self.port}"
        self.rest_url = f"http://127.0.0.1:{self.rest_port}"

    def log(self):
        return self.log_path.read_text(errors="replace")

    def wait_serving(self, timeout=START_TIMEOUT_S, want=health_pb2.HealthCheckResponse.SERVING):
        deadline = time.monotonic() + timeout
        with grpc.insecure_channel(self.grpc_target) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"server exited with {self.proc.returncode}:\n{self.log()[-3000:]}"
                    )
                try:
                    if stub.Check(health_pb2.HealthCheckRequest(), timeout=2).status == want:
                        return self
                except grpc.RpcError:
                    pass
                time.sleep(0.2)
        raise TimeoutError(f"server not serving after {timeout}s:\n{self.log()[-3000:]}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)
        self._log.close()


@pytest.fixture
def start_server(tmp_path):
    """Factory: start_server(args, rest=True, wait=True) -> ServerProcess; all stopped at test end."""
    servers = []

    def start(args, rest=True, wait=True):
        server = ServerProcess(args, tmp_path / f"server{len(servers)}.log", rest)
        servers.append(server)
        return server.wait_serving() if wait else server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def model_base(tmp_path_factory):
    """clf/1 (classifier, warmup records), reg/1 (regressor), tft/1 (needs a tensorflow-text op)
    and a ModelServerConfig for all three."""
    base = tmp_path_factory.mktemp("models")
    saved_models.build_classifier(str(base / "clf" / "1"), seed=0)
    saved_models.build_regressor(str(base / "reg" / "1"), seed=1)
    saved_models.build_custom_op_model(str(base / "tft" / "1"))
    (base / "models.config").write_text(f"""
model_config_list {{
  config {{ name: "clf" base_path: "{base / "clf"}" model_platform: "tensorflow"
           version_labels {{ key: "stable" value: 1 }} }}
  config {{ name: "reg" base_path: "{base / "reg"}" model_platform: "tensorflow" }}
  config {{ name: "tft" base_path: "{base / "tft"}" model_platform: "tensorflow" }}
}}
""")
    return base


MAX_REQUEST_BYTES = 1 << 20
MAX_TEXT_LENGTH = 2000
MAX_REQUEST_BATCH_SIZE = 64


@pytest.fixture(scope="session")
def shared_server(model_base, tmp_path_factory):
    """One server (clf + reg, REST on) shared by the API, REST, error and client test modules."""
    log = tmp_path_factory.mktemp("server") / "server.log"
    server = ServerProcess(
        [
            f"--model_config_file={model_base / 'models.config'}",
            "--file_system_poll_wait_seconds=0",
            f"--max_request_bytes={MAX_REQUEST_BYTES}",
            f"--max_text_length={MAX_TEXT_LENGTH}",
            f"--max_request_batch_size={MAX_REQUEST_BATCH_SIZE}",
        ],
        log,
    )
    try:
        server.wait_serving()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def reference(model_base):
    """reference(model, signature, **inputs) -> dict of numpy: the in-process SavedModel call."""
    import tensorflow as tf

    loaded = {}

    def call(model, signature="serving_default", version=1, **inputs):
        key = (model, version)
        if key not in loaded:
            loaded[key] = tf.saved_model.load(str(model_base / model / str(version)))
        fn = loaded[key].signatures[signature]
        return {
            k: v.numpy() for k, v in fn(**{k: tf.constant(v) for k, v in inputs.items()}).items()
        }

    return call
