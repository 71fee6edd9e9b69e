"""The in-process server the serving fuzz targets call: small SavedModels, a ModelManager, an
InferenceService, the REST answer path and (on first use) the REST port's HTTP server on
loopback, built once per process (about 5 s).

Models (tests/serving/saved_models.py, plus a SWAG-like one):
    clf/1 (label "stable"): serving_default text, text_b [B] string; encoded input_word_ids,
        input_mask, input_type_ids [B,T] int32; classification (tf.Example).
    reg/1: serving_default text [B] string; regression (tf.Example).
    echo/1: every dtype JSON and TensorProtos carry, unknown rank, returned unchanged.
    hp2/123 (label "stable"): half_plus_two, x float of any shape; classify/regress signatures.
    swag/1: serving_default text [B] string, choices [B,4] string -> scores [B,4] float32.
Limits are the server's defaults (`python -m serving.server` with no limit flags).
"""

import pathlib
import tempfile

import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.config import model_server_config_pb2

from serving.protocol import rest
from serving.wire import tensors
from serving.dispatch.inference import InferenceService
from serving.monitoring.metrics import Metrics
from serving.models.model_manager import ModelManager
from tests.serving import saved_models

# The server's defaults: --max_request_batch_size, --max_text_length, --max_request_elements,
# --max_request_bytes.
LIMITS = tensors.Limits(max_batch_size=4096, max_text_length=65536)
MAX_REQUEST_BYTES = 64 << 20
MODELS = ("clf", "reg", "echo", "hp2", "swag")


def build_swag(path):
    """A SWAG-like multiple-choice signature: text [B] and choices [B,4] strings -> scores
    [B,4] float32 (the UTF-8 length of the context plus each choice's)."""
    module = tf.Module()

    def score(text, choices):
        total = tf.strings.length(text, "UTF8_CHAR")[:, None] + tf.strings.length(choices)
        return {"scores": tf.cast(total, tf.float32)}

    signature = tf.function(
        score,
        input_signature=[
            tf.TensorSpec([None], tf.string, name="text"),
            tf.TensorSpec([None, 4], tf.string, name="choices"),
        ],
    )
    tf.saved_model.save(module, path, signatures={"serving_default": signature})
    return path


def build_models(base: pathlib.Path) -> str:
    """Writes every model under `base` and returns a ModelServerConfig text for them."""
    saved_models.build_classifier(str(base / "clf" / "1"), seed=0, warmup=False)
    saved_models.build_regressor(str(base / "reg" / "1"), seed=1)
    saved_models.build_echo(str(base / "echo" / "1"))
    saved_models.build_half_plus_two(str(base / "hp2" / "123"))
    build_swag(str(base / "swag" / "1"))
    labels = {"clf": 1, "hp2": 123}
    configs = "".join(
        f'config {{ name: "{name}" base_path: "{base / name}" model_platform: "tensorflow" '
        + (f'version_labels {{ key: "stable" value: {labels[name]} }} ' if name in labels else "")
        + "}\n"
        for name in MODELS
    )
    return f"model_config_list {{\n{configs}}}\n"


class InProcessServer:
    """`service` (InferenceService), `rest_api` (RestApi) and `answer(method, path, body)` ->
    (HTTP status, body bytes, content type), the REST port's answer without its transport."""

    def __init__(self, base: pathlib.Path):
        config = text_format.Parse(build_models(base), model_server_config_pb2.ModelServerConfig())
        self.manager = ModelManager(list(config.model_config_list.config), poll_seconds=0)
        self.manager.start()
        self.metrics = Metrics()
        self.service = InferenceService(self.manager, LIMITS, None, self.metrics)
        self.rest_api = rest.RestApi(self.service, MAX_REQUEST_BYTES)
        self.answer = rest._Responder(self.rest_api, self.metrics).answer
        self._warm_up()
        self._rest_server = None

    @property
    def rest_port(self) -> int:
        """The port of the REST port's own HTTP server (`rest.RestServer`, Tornado) over this
        service on loopback, started on first use: the raw bytes of a request go through the
        parser a client's socket feeds."""
        if self._rest_server is None:
            self._rest_server = rest.RestServer(
                "127.0.0.1",
                0,
                self.rest_api,
                self.metrics,
                options=rest.RestOptions(num_threads=2, idle_timeout_s=5, body_timeout_s=5),
            ).start()
        return self._rest_server.port

    def _warm_up(self):
        """One call of each signature, so that no target's first input pays for the first call
        of a concrete function (graph set-up: a second or more of CPU)."""
        for name in self.manager.model_names():
            with self.manager.acquire(name) as servable:
                for key, signature in servable.signatures.items():
                    if signature.method_name != "tensorflow/serving/predict":
                        continue
                    request = predict_pb2.PredictRequest()
                    request.model_spec.name = name
                    request.model_spec.signature_name = key
                    for alias, spec in signature.inputs.items():
                        request.inputs[alias].CopyFrom(tensors.to_proto(_one_row(spec)))
                    try:
                        self.service.predict(request)
                    except Exception:  # a signature that refuses one row of zeros
                        pass


def _one_row(spec):
    shape = [1 if d < 0 else d for d in spec.shape] if spec.shape is not None else [1]
    if spec.dtype.name == "string":
        return np.full(shape, b"a", object)
    return np.zeros(shape, spec.dtype.as_numpy_dtype)


_SERVER = None


def server() -> InProcessServer:
    """The process's InProcessServer, built on first use in a temporary directory."""
    global _SERVER
    if _SERVER is None:
        _SERVER = InProcessServer(pathlib.Path(tempfile.mkdtemp(prefix="serving-fuzz-")))
    return _SERVER
