"""One loaded model version: its SignatureDefs and a call path.

The server knows a model only through its signatures, like stock TensorFlow Serving: the signature
keys, method names (`tensorflow/serving/{predict,classify,regress}`), input/output names, dtypes and
shapes all come from the MetaGraphDef tagged `serve` (`Servable`), or, with
`--prefer_tflite_model` and a `model.tflite` in the version directory, from the LiteRT flatbuffer's
SignatureDefs (`LiteRtServable`), as tensorflow_model_server does with the same flag
(tensorflow_serving/servables/tensorflow/tflite_session.cc): then only the flatbuffer's signatures
are served.

TensorFlow's runtime (about 670 MB resident) is loaded on the first SavedModel load, not at
import (`tensorflow()`): a server whose versions are all served from LiteRT never loads it. The
signatures, protos and dtypes the server reads need none of it (`serving.wire.protos`,
`serving.wire.dtypes`).
"""

import dataclasses
import logging
import os
import re
import threading

import grpc
import numpy as np

from serving.wire import dtypes, errors
from keras_bert import fileio
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2

PREDICT_METHOD = "tensorflow/serving/predict"
CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"
INIT_OP_SIGNATURE = "__saved_model_init_op"
TFLITE_FILENAME = "model.tflite"  # tensorflow_model_server's name for it
_LOG = logging.getLogger(__name__)
_LOAD_LOCK = threading.Lock()  # one SavedModel load at a time: see load_saved_model
_OP_NOT_REGISTERED = re.compile(r"Op type not registered '([^']+)'")
_ON_TENSORFLOW_IMPORT = []  # callables run once, right after the first `tensorflow()`
_TENSORFLOW_LOCK = threading.Lock()


def on_tensorflow_import(fn) -> None:
    """Runs `fn()` once when this process first needs TensorFlow's runtime (`tensorflow()`), or
    now if it already has: for set-up that must precede the first model load (thread pools,
    custom-op libraries)."""
    with _TENSORFLOW_LOCK:
        if _tensorflow_ready:
            fn()
        else:
            _ON_TENSORFLOW_IMPORT.append(fn)


_tensorflow_ready = False


def tensorflow():
    """The `tensorflow` module, imported on first use, after which the `on_tensorflow_import`
    callables run (in the order given), each once.

    Raises:
        the first exception a callable raised, after all of them ran (one failing set-up step,
        e.g. thread pools sized too late, does not skip the next, e.g. the custom-op imports).
    """
    global _tensorflow_ready
    with _TENSORFLOW_LOCK:
        import tensorflow as tf

        if not _tensorflow_ready:
            _tensorflow_ready = True
            pending, failures = list(_ON_TENSORFLOW_IMPORT), []
            _ON_TENSORFLOW_IMPORT.clear()
            for fn in pending:
                try:
                    fn()
                except Exception as e:
                    _LOG.error("TensorFlow set-up step %r failed: %s", fn, e)
                    failures.append(e)
            if failures:
                raise failures[0]
        return tf


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """Name, dtype (`serving.wire.dtypes.DType`) and shape (list of int, -1 = any; None = unknown
    rank) of a tensor."""

    name: str
    dtype: dtypes.DType
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
    return TensorSpec(alias, dtypes.as_dtype(tensor_info.dtype), shape)


def read_signatures(path: str) -> dict:
    """Reads the `serve` MetaGraphDef's SignatureDefs from `path`/saved_model.pb (`path`: any URI
    `keras_bert.fileio` handles).

    Returns:
        dict signature key -> Signature (the `__saved_model_init_op` entry left out).
    Raises:
        OSError / google.protobuf.message.DecodeError: missing or corrupt saved_model.pb.
        ValueError: no MetaGraphDef tagged `serve`.
    """
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString(fileio.read_bytes(fileio.join(path, "saved_model.pb")))
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
        return (
            f"Op type not registered '{match.group(1)}': the SavedModel uses an op from a custom-op "
            "library that this server process has not imported (tensorflow-text ops such as "
            "FastBertTokenizer / CaseFoldUTF8 / WordpieceTokenizeWithOffsets). Fix: pip install "
            f"tensorflow-text=={_tensorflow_minor()}.* and start the server with "
            "--custom_op_modules=tensorflow_text (the default), or export the model with the "
            "core-op tokenizer so no custom op is needed."
        )
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    return f"{type(error).__name__}: {first}"


def _tensorflow_minor() -> str:
    from importlib import metadata

    try:
        return metadata.version("tensorflow").rsplit(".", 1)[0]
    except metadata.PackageNotFoundError:
        return "<your TensorFlow version>"


def _gradient_registry() -> dict:
    tensorflow()
    from tensorflow.python.framework import ops

    return ops._gradient_registry._registry  # name -> gradient function, process-wide


def load_saved_model(path: str):
    """(`tf.saved_model.load(path, tags=["serve"])`, the names of the gradient functions it
    registered).

    A load registers each custom-gradient function of the SavedModel in TensorFlow's process-wide
    gradient registry (`CustomGradient-<uid>`: 168 for a keras_bert export) and nothing removes
    them. They hold the loaded functions and, through their captures, the variables, so each
    version kept all its memory after it was unloaded (about 250 MB per version swap of the
    MiniLM-L6 classifier, until the kernel killed the server). A server never takes gradients:
    `forget_gradients` removes them when the version unloads. Loads run one at a time, so each
    claims only the names its own load added; a load that fails (a corrupt version, retried)
    removes what it registered before raising."""
    registry = _gradient_registry()
    with _LOAD_LOCK:
        before = set(registry)
        try:
            loaded = tensorflow().saved_model.load(path, tags=["serve"])
        except BaseException:
            forget_gradients(set(registry) - before)
            raise
        return loaded, set(registry) - before


def forget_gradients(names) -> None:
    """Removes the gradient functions `names` (from `load_saved_model`) from the registry."""
    if not names:
        return  # a LiteRT version: nothing registered, and no TensorFlow to load for it
    registry = _gradient_registry()
    for name in names:
        registry.pop(name, None)


def release_resources(loaded) -> None:
    """Destroys the resources a loaded SavedModel restored (its lookup tables: a keras_bert
    export's vocabulary). A restored table has no destroy function, so TensorFlow's resource
    manager kept each one after its object was gone: 3 MiB per version swap of an export over
    the 30,522-piece vocabulary, never freed (tools/soak.py, docs/results/hardening.md "Soak and
    faults").
    Each load restores its own tables, so another loaded version of the same export keeps its."""
    tf = tensorflow()
    from tensorflow.python.trackable import resource as resource_lib  # TensorFlow: loaded lazily

    for obj in tf.train.TrackableView(loaded).descendants():
        if isinstance(obj, resource_lib.CapturableResource):
            tf.raw_ops.DestroyResourceOp(resource=obj.resource_handle, ignore_lookup_error=True)


class Servable:
    """A loaded SavedModel version.

    Args:
        name: model name. version: int version number. path: the version directory (any URI
            `keras_bert.fileio` handles, as typed).
    Raises (from __init__):
        any load error; callers turn it into a status with `explain_load_error`.
    """

    backend = "tensorflow"

    def __init__(self, name: str, version: int, path: str):
        self.name = name
        self.version = version
        self.path = path
        self._closers = []
        self._lock = threading.Lock()
        self._load()

    def _load(self):
        self.signatures = read_signatures(self.path)
        self._loaded, self._gradients = load_saved_model(self.path)
        self._functions = {
            key: self._loaded.signatures[key]
            for key in self.signatures
            if key in self._loaded.signatures
        }
        if fileio.exists(fileio.join(self.path, TFLITE_FILENAME)):
            _LOG.info(
                "%s version %d also holds %s; serving the SavedModel (start the server with "
                "--prefer_tflite_model to serve the LiteRT file instead)",
                self.name,
                self.version,
                TFLITE_FILENAME,
            )

    def signature(self, key: str) -> Signature:
        if key not in self.signatures or key not in self._functions:
            raise errors.failed_precondition(
                f'Serving signature key "{key}" not found. Model "{self.name}" version {self.version} '
                f"has signatures: {sorted(self._functions)}"
            )
        return self.signatures[key]

    def run(self, key: str, inputs: dict) -> dict:
        """Calls signature `key` with numpy `inputs` (dtypes already matching); returns numpy outputs."""
        fn, tf = self._functions[key], tensorflow()
        try:
            outputs = fn(**{k: tf.constant(v) for k, v in inputs.items()})
        except Exception as e:
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
        loaded, self._loaded = getattr(self, "_loaded", None), None
        if loaded is not None and self.backend == "tensorflow":
            release_resources(loaded)  # what kept the memory: its tables and (below) gradients
        forget_gradients(getattr(self, "_gradients", ()))


def _litert_spec(alias, detail) -> TensorSpec:
    return TensorSpec(
        alias,
        dtypes.as_dtype(np.dtype(detail["dtype"])),
        [int(d) for d in detail["shape_signature"]],
    )


def _signature_def(method_name, inputs, outputs, details) -> meta_graph_pb2.SignatureDef:
    """A SignatureDef proto (for GetModelMetadata) from TensorSpecs and LiteRT tensor names."""
    proto = meta_graph_pb2.SignatureDef(method_name=method_name)
    for target, specs in ((proto.inputs, inputs), (proto.outputs, outputs)):
        for alias, spec in specs.items():
            info = target[alias]
            info.name = details[alias]["name"]
            info.dtype = spec.dtype.as_datatype_enum
            for d in spec.shape:
                info.tensor_shape.dim.add(size=d)
    return proto


class LiteRtServable(Servable):
    """A version served from its `model.tflite` by the LiteRT interpreter (XNNPACK on CPUs).

    Signatures are the flatbuffer's (keys, input / output names, dtypes, shapes with -1 for
    dynamic dimensions), all with the predict method. One interpreter per version; calls are
    serialised on it (an interpreter is not thread-safe) and each uses `num_threads` threads.
    Inputs are resized per call, so any batch size and sequence length the model allows works.

    A failed call replaces the interpreter with a fresh one before the next call runs: the LiteRT
    Python wrapper's error reporter never empties its text (every later error would repeat this
    one, whoever sent it), and a failed invoke may leave tensors and delegates half-prepared. So
    each error message is the one a fresh interpreter gives for that request alone, and the next
    request runs as on a fresh interpreter.

    Args:
        name, version, path: as `Servable`. num_threads: interpreter threads (0 = one per CPU
            this process may run on).
    Raises (from __init__):
        ImportError: ai-edge-litert missing. ValueError / RuntimeError: a bad flatbuffer.
    """

    backend = "litert"

    def __init__(self, name: str, version: int, path: str, num_threads: int = 0):
        self._num_threads = num_threads or len(os.sched_getaffinity(0))
        super().__init__(name, version, path)

    def _load(self):
        self._run_lock = threading.Lock()
        self._stale = False  # True after a failed call until a fresh interpreter replaces it
        self._closed = False
        self._new_interpreter()
        self.signatures = {}
        for key, runner in self._functions.items():
            in_details, out_details = runner.get_input_details(), runner.get_output_details()
            inputs = {k: _litert_spec(k, d) for k, d in sorted(in_details.items())}
            outputs = {k: _litert_spec(k, d) for k, d in sorted(out_details.items())}
            self.signatures[key] = Signature(
                key=key,
                method_name=PREDICT_METHOD,
                inputs=inputs,
                outputs=outputs,
                proto=_signature_def(PREDICT_METHOD, inputs, outputs, in_details | out_details),
            )
        _LOG.info(
            "%s version %d: serving %s with LiteRT (%d threads), signatures %s",
            self.name,
            self.version,
            TFLITE_FILENAME,
            self._num_threads,
            sorted(self.signatures),
        )

    def run(self, key: str, inputs: dict) -> dict:
        """Calls signature `key` with numpy `inputs`; returns numpy outputs (copies).

        Raises:
            ServingError INVALID_ARGUMENT: the interpreter refused the inputs (for example an id
                outside the embedding table: "gather index out of bounds"), or an `input_mask`
                value is not 0 or 1 (the SavedModel's Assert, which the converter drops).
        """
        mask = inputs.get("input_mask")
        # One pass: an integer other than 0 and 1 is nonzero shifted right by one (negatives too).
        if mask is not None and mask.dtype.kind in "iu" and np.right_shift(mask, 1).any():
            raise errors.invalid_argument("input_mask: values must be 0 or 1")
        with self._run_lock:
            if self._stale:  # the last replacement failed: try again before running anything
                self._replace_interpreter()
            try:
                outputs = self._functions[key](
                    **{k: np.ascontiguousarray(v) for k, v in inputs.items()}
                )
                return {k: np.array(v, copy=True) for k, v in outputs.items()}
            except Exception as e:
                self._stale = True
                failure = e
            # The error reporter's text now holds this request's failure, and the next request's
            # would start with it: a fresh interpreter for the next request.
            try:
                self._replace_interpreter()
            except errors.ServingError:
                pass  # logged; the next call retries before it runs
        if isinstance(failure, (RuntimeError, ValueError)):
            raise errors.invalid_argument(
                f"LiteRT could not run signature '{key}': {str(failure).strip()}"
            ) from failure
        raise errors.ServingError(
            grpc.StatusCode.INTERNAL,
            f"LiteRT could not run signature '{key}': {type(failure).__name__}: {failure}",
        ) from failure

    def _new_interpreter(self):
        from ai_edge_litert.interpreter import Interpreter

        # The bytes, read through fileio: a version on any file system (the interpreter's
        # model_path takes local files only).
        content = fileio.read_bytes(fileio.join(self.path, TFLITE_FILENAME))
        interpreter = Interpreter(model_content=content, num_threads=self._num_threads)
        self._functions = {
            key: interpreter.get_signature_runner(key) for key in interpreter.get_signature_list()
        }
        self._interpreter = interpreter

    def _replace_interpreter(self):
        """With `_run_lock` held: a fresh interpreter (empty error text, fresh tensors).
        Raises ServingError UNAVAILABLE when the file cannot be loaded again."""
        if self._closed:
            return
        try:
            self._new_interpreter()
        except Exception as e:
            _LOG.error(
                "%s version %d: could not reload %s after a failed call: %s",
                self.name,
                self.version,
                TFLITE_FILENAME,
                e,
            )
            raise errors.unavailable(
                f'Model "{self.name}" version {self.version}: the LiteRT interpreter could not '
                f"be reloaded after a failed call ({type(e).__name__}); retry later"
            ) from e
        self._stale = False

    def close(self):
        super().close()
        with self._run_lock:  # after any call in flight, which then replaces nothing
            self._closed = True
            self._interpreter, self._functions = None, {}


def load_servable(
    name: str, version: int, path: str, prefer_tflite_model: bool = False, num_threads: int = 0
) -> Servable:
    """The servable for a version directory: its `model.tflite` through LiteRT when
    `prefer_tflite_model` and the file exists, else its SavedModel."""
    if prefer_tflite_model and fileio.exists(fileio.join(path, TFLITE_FILENAME)):
        return LiteRtServable(name, version, path, num_threads)
    return Servable(name, version, path)
