"""SavedModel warmup records (`assets.extra/tf_serving_warmup_requests`).

TensorFlow Serving replays these `tensorflow.serving.PredictionLog` records when it loads a version
(tensorflow_serving/servables/tensorflow/saved_model_warmup.cc), so the first real request does not
pay for graph optimisation; `serving/` replays them too. Each task's serving module builds its own
records with the helpers here.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import (
    classification_pb2,
    input_pb2,
    predict_pb2,
    prediction_log_pb2,
    regression_pb2,
)

from keras_bert import fileio
from keras_bert.config import INPUT_NAMES

WARMUP_FILENAME = "tf_serving_warmup_requests"


def predict_log(model_name: str, signature_name: str, inputs: dict):
    """A PredictLog for `signature_name` with numpy (or nested list) `inputs` (name -> array)."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    for name, value in inputs.items():
        if isinstance(value, (list, tuple)) or (
            isinstance(value, np.ndarray) and value.dtype == object
        ):
            value = np.array(value, dtype=object)
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    return prediction_log_pb2.PredictionLog(
        predict_log=prediction_log_pb2.PredictLog(request=request)
    )


def encoded_log(model_name: str, packed: dict):
    """The PredictLog of the `encoded` signature for packed ids (the three INPUT_NAMES, int32),
    the signature every task exports beside its text ones."""
    return predict_log(
        model_name, "encoded", {name: np.asarray(packed[name], np.int32) for name in INPUT_NAMES}
    )


def text_example(features: dict) -> tf.train.Example:
    """A tf.Example with one UTF-8 bytes feature per (name -> str) item."""
    return tf.train.Example(
        features=tf.train.Features(
            feature={
                name: tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode("utf-8")]))
                for name, text in features.items()
            }
        )
    )


def example_log(model_name: str, signature_name: str, examples: list, kind: str):
    """A ClassifyLog (`kind="classify"`) or RegressLog (`kind="regress"`) over tf.Examples."""
    request_input = input_pb2.Input(example_list=input_pb2.ExampleList(examples=examples))
    if kind == "classify":
        request = classification_pb2.ClassificationRequest(input=request_input)
        request.model_spec.name, request.model_spec.signature_name = model_name, signature_name
        return prediction_log_pb2.PredictionLog(
            classify_log=prediction_log_pb2.ClassifyLog(request=request)
        )
    if kind == "regress":
        request = regression_pb2.RegressionRequest(input=request_input)
        request.model_spec.name, request.model_spec.signature_name = model_name, signature_name
        return prediction_log_pb2.PredictionLog(
            regress_log=prediction_log_pb2.RegressLog(request=request)
        )
    raise ValueError(f"kind must be 'classify' or 'regress', got {kind!r}")


def write_warmup_requests(export_dir: str, logs) -> str:
    """Writes `export_dir/assets.extra/tf_serving_warmup_requests` (TFRecord of PredictionLog);
    `export_dir` is any URI (an export's staging directory: the file is written in place).
    Returns the file's path."""
    path = fileio.join(str(export_dir), "assets.extra", WARMUP_FILENAME)
    fileio.makedirs(fileio.parent(path))
    with tf.io.TFRecordWriter(path) as writer:
        for log in logs:
            writer.write(log.SerializeToString())
    return path
