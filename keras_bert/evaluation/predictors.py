"""One interface over the three ways to run a model on held-out text (SPEC section 9).

=====================  ==================================================================
predictor              what it runs
=====================  ==================================================================
`TaskPredictor`        a saved task (`.keras` file or fine-tuning output_dir) loaded with
                       `keras_bert.load_task`, through the task's own serving module
                       (`task.serving_module(...).serving_default`, the exported graph)
`SavedModelPredictor`  an exported SavedModel version directory (`<base>/<name>/<version>`),
                       its `serving_default` signature, loaded in process
`GrpcPredictor`        a running server (ours or TensorFlow Serving) at `host:port`, through
                       the official `tensorflow_serving.apis` PredictionService stub
=====================  ==================================================================

Every predictor exposes `info` (a `ModelInfo`: task type, label names, pair flag, vocabulary and
`max_seq_length`, used for token-length slices) and `predict_batch(texts, texts_b)`, which returns
the signature outputs of the task family as a dict of numpy arrays. For classifiers and regressors
that is `classifier_signatures`' `serving_default`: `probabilities` float32 [B, C] (classification)
or `scores` float32 [B] (regression). Other task families (span QA, NER, multiple choice) add their
own outputs; an evaluator for their `task_type` reads them (see `evidence_pack.EVALUATORS`).

`run(...)` times every batch (wall seconds, end to end including tokenization and, for gRPC, the
network) after one untimed warmup batch, so tracing and connection set-up are not counted.
"""

from __future__ import annotations

import dataclasses
import os
import time

import numpy as np
import tensorflow as tf

from keras_bert import fileio
from keras_bert.progress import progress_bar
from keras_bert.tasks.loading import load_task

TEXT_INPUT, TEXT_B_INPUT = "text", "text_b"
EXPORT_CONFIG = "assets/export_config.json"  # relative to a version directory
VOCAB_ASSET = "assets/vocab.txt"


@dataclasses.dataclass
class ModelInfo:
    """What a model is, from the task or the SavedModel's assets.

    Attributes:
        name: str, shown in reports.
        task_type: "classification" or "regression" (later: the Task API's other task types).
        label_names: list of str in id order ([] for regression).
        is_pair: bool, two text segments per example.
        vocabulary: list of str (id = index), for counting WordPiece tokens.
        do_lower_case: bool.
        max_seq_length: int, tokens per example including [CLS]/[SEP].
    """

    name: str
    task_type: str
    label_names: list
    is_pair: bool
    vocabulary: list
    do_lower_case: bool
    max_seq_length: int


class Predictor:
    """Base: subclasses set `self.info` and define `predict_batch`."""

    info: ModelInfo
    path: str = "in-process"

    def predict_batch(self, texts: list[str], texts_b: list[str] | None) -> dict:
        raise NotImplementedError

    def run(self, texts, texts_b=None, batch_size: int = 32, progress: bool = True):
        """All examples in batches of `batch_size`.

        Returns:
            (outputs, seconds, sizes): dict of numpy arrays concatenated over batches (rows in
            input order), float64 [num_batches] wall seconds per batch, int [num_batches] rows.

        Raises:
            ValueError: batch_size < 1, or no texts.
        """
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not texts:
            raise ValueError("no texts to predict")
        self.predict_batch(texts[:batch_size], None if texts_b is None else texts_b[:batch_size])
        parts, seconds, sizes = [], [], []
        starts = range(0, len(texts), batch_size)
        for start in progress_bar(
            starts,
            desc=f"predict {self.info.name}",
            unit="batch",
            disable=not progress or len(starts) < 10,
        ):
            stop = start + batch_size
            t0 = time.perf_counter()
            out = self.predict_batch(
                texts[start:stop], None if texts_b is None else texts_b[start:stop]
            )
            seconds.append(time.perf_counter() - t0)
            sizes.append(len(texts[start:stop]))
            parts.append(out)
        outputs = {k: np.concatenate([p[k] for p in parts], axis=0) for k in parts[0]}
        return outputs, np.asarray(seconds, np.float64), np.asarray(sizes, np.int64)


def _numpy_outputs(result: dict) -> dict:
    return {k: np.asarray(v.numpy() if hasattr(v, "numpy") else v) for k, v in result.items()}


def _text_inputs(texts, texts_b, is_pair) -> dict:
    inputs = {TEXT_INPUT: tf.constant(texts, tf.string)}
    if is_pair:
        if texts_b is None:
            raise ValueError("this model is a pair task: give the second text column")
        inputs[TEXT_B_INPUT] = tf.constant(texts_b, tf.string)
    return inputs


class TaskPredictor(Predictor):
    """A `keras_bert.tasks.Task` in process, through its serving module's `serving_default`.

    Args:
        task_or_path: a Task, or a `.keras` file / fine-tuning output_dir for `load_task`.
        name: display name (default: the path's name).

    Raises:
        FileNotFoundError / TypeError: see `keras_bert.tasks.load_task`.
        ValueError: the task has no preprocessor.
    """

    def __init__(self, task_or_path, name: str | None = None):
        if isinstance(task_or_path, (str, os.PathLike)):
            task = load_task(task_or_path)
            default_name = fileio.basename(os.fspath(task_or_path))
        else:
            task, default_name = task_or_path, task_or_path.name
        preprocessor = task.require_preprocessor("evaluation")
        self.task = task
        self.module = task.serving_module(preprocessor)
        # The exported signature's concrete function ([None] string inputs): one trace, so a
        # last batch of another size is not timed with a retrace in it.
        self.signature = self.module.signatures()["serving_default"]
        self.info = ModelInfo(
            name or default_name,
            task.task_type,
            list(task.label_names or []),
            task.is_pair,
            list(preprocessor.vocabulary),
            preprocessor.do_lower_case,
            preprocessor.max_seq_length,
        )
        self.path = "in-process task (keras)"

    def predict_batch(self, texts, texts_b=None):
        return _numpy_outputs(self.signature(**_text_inputs(texts, texts_b, self.info.is_pair)))


def read_export_info(version_dir, name: str | None = None) -> ModelInfo:
    """`ModelInfo` from a SavedModel version directory's assets (export_config.json, vocab.txt).

    Raises:
        FileNotFoundError: the directory lacks assets/export_config.json or assets/vocab.txt.
    """
    version_dir = os.fspath(version_dir)
    for relative in (EXPORT_CONFIG, VOCAB_ASSET):
        if not fileio.isfile(fileio.join(version_dir, relative)):
            raise FileNotFoundError(
                f"{version_dir}: not a keras_bert SavedModel version directory ({relative} missing)"
            )
    config = fileio.read_json(fileio.join(version_dir, EXPORT_CONFIG))
    vocabulary = fileio.read_text(fileio.join(version_dir, VOCAB_ASSET)).split("\n")[:-1]
    return ModelInfo(
        name or config.get("model_name") or fileio.basename(fileio.parent(version_dir)),
        config["task_type"],
        list(config.get("label_names") or []),
        bool(config.get("is_pair")),
        vocabulary,
        bool(config["do_lower_case"]),
        int(config["max_seq_length"]),
    )


class SavedModelPredictor(Predictor):
    """An exported SavedModel version directory, loaded in process (`tf.saved_model.load`).

    Raises:
        FileNotFoundError: see `read_export_info`.
    """

    def __init__(self, version_dir, name: str | None = None):
        self.info = read_export_info(version_dir, name)
        config = fileio.read_json(fileio.join(os.fspath(version_dir), EXPORT_CONFIG))
        if config.get("requires_tensorflow_text"):
            import tensorflow_text  # noqa: F401  (registers the custom ops the graph needs)
        self.loaded = tf.saved_model.load(os.fspath(version_dir))
        self.signature = self.loaded.signatures["serving_default"]
        self.path = "in-process SavedModel"

    def predict_batch(self, texts, texts_b=None):
        return _numpy_outputs(self.signature(**_text_inputs(texts, texts_b, self.info.is_pair)))


class GrpcPredictor(Predictor):
    """A running server's PredictionService/Predict on `serving_default`, over gRPC.

    Args:
        target: "host:port" of the gRPC API.
        info: the served model's `ModelInfo` (from its SavedModel or task: label names, vocabulary).
        model_name: the name the server serves it under (default: `info.name`).
        timeout_s: seconds per request.
    """

    def __init__(
        self, target: str, info: ModelInfo, model_name: str | None = None, timeout_s: float = 60.0
    ):
        import grpc
        from tensorflow_serving.apis import prediction_service_pb2_grpc

        self.info = info
        self.model_name = model_name or info.name
        self.timeout_s = float(timeout_s)
        self.channel = grpc.insecure_channel(
            target,
            options=[
                ("grpc.max_send_message_length", 256 << 20),
                ("grpc.max_receive_message_length", 256 << 20),
            ],
        )
        self.stub = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)
        self.path = f"gRPC {target} (model {self.model_name})"

    def predict_batch(self, texts, texts_b=None):
        from tensorflow_serving.apis import predict_pb2

        request = predict_pb2.PredictRequest()
        request.model_spec.name = self.model_name
        request.model_spec.signature_name = "serving_default"
        for key, value in _text_inputs(texts, texts_b, self.info.is_pair).items():
            request.inputs[key].CopyFrom(tf.make_tensor_proto(value.numpy()))
        response = self.stub.Predict(request, timeout=self.timeout_s)
        return {k: tf.make_ndarray(v) for k, v in response.outputs.items()}

    def close(self):
        self.channel.close()


def open_predictor(
    model: str,
    server: str | None = None,
    server_model_name: str | None = None,
    name: str | None = None,
) -> Predictor:
    """The predictor for `model` (a SavedModel version dir, a `.keras` file or an output_dir).

    With `server` ("host:port"), predictions go over gRPC to that server; `model` then only
    supplies what the model is (label names, vocabulary for token counts).

    Raises:
        FileNotFoundError: `model` is none of the above.
    """
    path = os.fspath(model)
    if not fileio.exists(path):
        raise FileNotFoundError(f"--model {model}: no such file or directory")
    is_saved_model = fileio.isfile(fileio.join(path, "saved_model.pb"))
    if server:
        info = read_export_info(path, name) if is_saved_model else TaskPredictor(path, name).info
        return GrpcPredictor(server, info, model_name=server_model_name)
    if is_saved_model:
        return SavedModelPredictor(path, name)
    return TaskPredictor(path, name)
