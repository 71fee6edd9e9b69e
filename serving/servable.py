"""One loaded SavedModel version: its SignatureDefs (read from saved_model.pb) and a call path.

The server knows a model only through its signatures, like stock TensorFlow Serving: the signature
keys, method names (`tensorflow/serving/{predict,classify,regress}`), input/output names, dtypes and
shapes all come from the MetaGraphDef tagged `serve`.
"""
import dataclasses
import os
import re
import threading

import tensorflow as tf
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2

from serving import errors

PREDICT_METHOD = "tensorflow/serving/predict"
CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"
INIT_OP_SIGNATURE = "__saved_model_init_op"
_OP_NOT_REGISTERED = re.compile(r"Op type not registered '([^']+)'")


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """Name, dtype (tf.DType) and shape (list of int, -1 = any; None = unknown rank) of a tensor."""

    name: str
    dtype: tf.DType
    shape: list | None


@dataclasses.dataclass(frozen=True)
class Signature:
    key: str
    method_name: str
    inputs: dict  # alias -> TensorSpec
    outputs: dict  # alias -> TensorSpec
    proto: meta_graph_pb2.SignatureDef


def _spec(alias, tensor_info) -> TensorSpec:
    shape = None
    if not tensor_info.tensor_shape.unknown_rank:
        shape = [int(d.size) for d in tensor_info.tensor_shape.dim]
    return TensorSpec(alias, tf.dtypes.as_dtype(tensor_info.dtype), shape)


def read_signatures(path: str) -> dict:
    """Reads the `serve` MetaGraphDef's SignatureDefs from `path`/saved_model.pb.

    Returns:
        dict signature key -> Signature (the `__saved_model_init_op` entry left out).
    Raises:
        OSError / google.protobuf.message.DecodeError: missing or corrupt saved_model.pb.
        ValueError: no MetaGraphDef tagged `serve`.
    """
    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    for meta_graph in saved_model.meta_graphs:
        if "serve" in meta_graph.meta_info_def.tags:
            break
    else:
        raise ValueError(f"{path}: saved_model.pb has no MetaGraphDef tagged 'serve'")
    signatures = {}
    for key, sig in meta_graph.signature_def.items():
        if key == INIT_OP_SIGNATURE:
            continue
        signatures[key] = Signature(
            key=key,
            method_name=sig.method_name or PREDICT_METHOD,
            inputs={k: _spec(k, v) for k, v in sorted(sig.inputs.items())},
            outputs={k: _spec(k, v) for k, v in sorted(sig.outputs.items())},
            proto=sig,
        )
    return signatures


def explain_load_error(error: Exception) -> str:
    """A message for a failed load; names the op and the fix when a custom op is not registered."""
    text = str(error)
    match = _OP_NOT_REGISTERED.search(text)
    if match:
        return (f"Op type not registered '{match.group(1)}': the SavedModel uses an op from a custom-op "
                "library that this server process has not imported (tensorflow-text ops such as "
                "FastBertTokenizer / CaseFoldUTF8 / WordpieceTokenizeWithOffsets). Fix: pip install "
                f"tensorflow-text=={tf.__version__.rsplit('.', 1)[0]}.* and start the server with "
                "--custom_op_modules=tensorflow_text (the default), or export the model with the "
                "core-op tokenizer so no custom op is needed.")
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    return f"{type(error).__name__}: {first}"


class Servable:
    """A loaded SavedModel version.

    Args:
        name: model name. version: int version number. path: the version directory.
    Raises (from __init__):
        any load error; callers turn it into a status with `explain_load_error`.
    """

    def __init__(self, name: str, version: int, path: str):
        self.name = name
        self.version = version
        self.path = path
        self.signatures = read_signatures(path)
        self._loaded = tf.saved_model.load(path, tags=["serve"])
        self._functions = {key: self._loaded.signatures[key] for key in self.signatures
                           if key in self._loaded.signatures}
        self._closers = []
        self._lock = threading.Lock()

    def signature(self, key: str) -> Signature:
        if key not in self.signatures or key not in self._functions:
            raise errors.failed_precondition(
                f'Serving signature key "{key}" not found. Model "{self.name}" version {self.version} '
                f"has signatures: {sorted(self._functions)}")
        return self.signatures[key]

    def run(self, key: str, inputs: dict) -> dict:
        """Calls signature `key` with numpy `inputs` (dtypes already matching); returns numpy outputs."""
        fn = self._functions[key]
        try:
            outputs = fn(**{k: tf.constant(v) for k, v in inputs.items()})
        except Exception as e:  # noqa: BLE001 - mapped to a gRPC status
            raise errors.from_tf_error(e) from e
        return {k: v.numpy() for k, v in outputs.items()}

    def add_closer(self, fn):
        with self._lock:
            self._closers.append(fn)

    def close(self):
        """Stops helpers (batch schedulers) and drops the TF object so its memory can be freed."""
        with self._lock:
            closers, self._closers = self._closers, []
        for fn in closers:
            fn()
        self._functions = {}
        self._loaded = None

