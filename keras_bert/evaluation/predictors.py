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
`max_seq_length`, used for token-length slices) and `predict_inputs(inputs)`, which calls the
model's `serving_default` on named inputs and returns its outputs as a dict of numpy arrays
(`predict_batch(texts, texts_b)` for the text signature). For classifiers and regressors that is
`classifier_signatures`' `serving_default`: `probabilities` float32 [B, C] (classification) or
`scores` float32 [B] (regression). The other task families take and give their own signature's
tensors: NER `text` -> `tags` [B, W]; span QA `question`, `context` -> `answer_text`, `score`;
multiple choice `context` [B], `endings` [B, C] -> `probabilities`, `choice`; an evaluator for
their `task_type` reads them (see `kinds.EvidenceKind.evaluate`).

`run(...)` / `run_inputs(...)` time every batch (wall seconds, end to end including tokenization and, for gRPC, the
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
        settings: dict, the rest of the task's export metadata (assets/export_config.json or
            `task.export_metadata()`): e.g. SQuAD's `version_2_with_negative` and
            `null_score_diff_threshold`, multiple choice's `num_choices`.
    """

    name: str
    task_type: str
    label_names: list
    is_pair: bool
    vocabulary: list
    do_lower_case: bool
    max_seq_length: int
    settings: dict = dataclasses.field(default_factory=dict)


class Predictor:
    """Base: subclasses set `self.info` and define `predict_inputs`."""

    info: ModelInfo
    path: str = "in-process"

    def predict_inputs(self, inputs: dict) -> dict:
        """`serving_default` on named inputs (name -> numpy array [B, ...]); numpy outputs."""
        raise NotImplementedError

    def predict_batch(self, texts: list[str], texts_b: list[str] | None) -> dict:
        return self.predict_inputs(_text_inputs(texts, texts_b, self.info.is_pair))

    def run(self, texts, texts_b=None, batch_size: int = 32, progress: bool = True):
        """`run_inputs` of the text signature ("text", and "text_b" for a pair task)."""
        if not texts:
            raise ValueError("no texts to predict")
        return self.run_inputs(
            _text_inputs(texts, texts_b, self.info.is_pair), batch_size, progress
        )

    def run_inputs(self, inputs: dict, batch_size: int = 32, progress: bool = True):
        """All rows of `inputs` (signature input name -> list or array of N rows) in batches of
        `batch_size`.

        Returns:
            (outputs, seconds, sizes): dict of numpy arrays concatenated over batches (rows in
            input order; an output whose second axis varies by batch, e.g. NER's tags [B, W], is
            padded to the widest with "" / 0), float64 [num_batches] wall seconds per batch, int
            [num_batches] rows.

        Raises:
            ValueError: batch_size < 1, or no rows.
        """
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        inputs = {k: np.asarray(v, object if _is_text(v) else None) for k, v in inputs.items()}
        rows = len(next(iter(inputs.values()))) if inputs else 0
        if not rows:
            raise ValueError("no texts to predict")
        self.predict_inputs({k: v[:batch_size] for k, v in inputs.items()})  # warmup, untimed
        parts, seconds, sizes = [], [], []
        starts = range(0, rows, batch_size)
        for start in progress_bar(
            starts,
            desc=f"predict {self.info.name}",
            unit="batch",
            disable=not progress or len(starts) < 10,
        ):
            batch = {k: v[start : start + batch_size] for k, v in inputs.items()}
            t0 = time.perf_counter()
            out = self.predict_inputs(batch)
            seconds.append(time.perf_counter() - t0)
            sizes.append(len(next(iter(batch.values()))))
            parts.append(out)
        outputs = {k: _concatenate([p[k] for p in parts]) for k in parts[0]}
        return outputs, np.asarray(seconds, np.float64), np.asarray(sizes, np.int64)


def _is_text(values) -> bool:
    first = np.asarray(values, object).reshape(-1)[:1]
    return bool(len(first)) and isinstance(first[0], (str, bytes))


def _concatenate(parts: list) -> np.ndarray:
    """Batches [B_i, W_i, ...] -> [sum B_i, max W_i, ...], padded with "" (strings) or 0."""
    if parts[0].ndim < 2 or len({p.shape[1:] for p in parts}) == 1:
        return np.concatenate(parts, axis=0)
    width = max(p.shape[1] for p in parts)
    fill = b"" if parts[0].dtype.kind in "OSU" else 0
    padded = [
        np.pad(p, [(0, 0), (0, width - p.shape[1])] + [(0, 0)] * (p.ndim - 2), constant_values=fill)
        for p in parts
    ]
    return np.concatenate(padded, axis=0)


def _numpy_outputs(result: dict) -> dict:
    return {k: np.asarray(v.numpy() if hasattr(v, "numpy") else v) for k, v in result.items()}


def _tensors(inputs: dict) -> dict:
    """numpy / list inputs -> tf tensors (text as tf.string)."""
    return {
        k: tf.constant(
            np.asarray(v).tolist() if _is_text(v) else v, tf.string if _is_text(v) else None
        )
        for k, v in inputs.items()
    }


def _text_inputs(texts, texts_b, is_pair) -> dict:
    inputs = {TEXT_INPUT: np.asarray(list(texts), object)}
    if is_pair:
        if texts_b is None:
            raise ValueError("this model is a pair task: give the second text column")
        inputs[TEXT_B_INPUT] = np.asarray(list(texts_b), object)
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
            task.export_metadata(),
        )
        self.path = "in-process task (keras)"

    def predict_inputs(self, inputs):
        return _numpy_outputs(self.signature(**_tensors(inputs)))


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
    vocabulary = fileio.text_lines(fileio.read_user_text(fileio.join(version_dir, VOCAB_ASSET)))
    return ModelInfo(
        name or config.get("model_name") or fileio.basename(fileio.parent(version_dir)),
        config["task_type"],
        list(config.get("label_names") or []),
        bool(config.get("is_pair")),
        vocabulary,
        bool(config["do_lower_case"]),
        int(config["max_seq_length"]),
        config,
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

    def predict_inputs(self, inputs):
        return _numpy_outputs(self.signature(**_tensors(inputs)))


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

    def predict_inputs(self, inputs):
        from tensorflow_serving.apis import predict_pb2

        request = predict_pb2.PredictRequest()
        request.model_spec.name = self.model_name
        request.model_spec.signature_name = "serving_default"
        for key, value in _tensors(inputs).items():
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
