"""The three records a batch prediction writes per row.

- predictions-*.jsonl: `{"<key column>": key, "input_file": ..., "input_row": n, "<output>":
  value, ...}`: the key under the key column's name (when --key_column is given), where the row
  came from (file as expanded from --input, 0-based data row), then each `serving_default`
  output under its signature name (numbers, lists; strings decoded from UTF-8).
- errors-*.jsonl: `{"<key column>": key or null, "input_file", "input_row", "raw": the row as
  read, "reason": one line}`: the key whenever the row's key column could be read, whatever else
  is wrong with the row.

Each is one line of `keras_bert.fileio.jsonl_line` (text raw, U+2028 included: every reader
splits at "\n" only).
- prediction_logs-*.tfrecord: `tensorflow.serving.PredictionLog` with `predict_log.request` (the
  model spec, `text` [1] and `text_b` [1]) and `predict_log.response` (every output with a
  leading batch dimension of 1), as tfx-bsl's RunInference writes them and TF Serving logs them.

`sort_key` orders a shard's records by (input file, row), so an output does not depend on the
runner, the worker count or the batching.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import prediction_log_pb2

from keras_bert import fileio

SIGNATURE = "serving_default"
SUMMARY_FILE = "batch_predict.json"
INPUT_FILE, INPUT_ROW = "input_file", "input_row"


def sort_key(item) -> tuple:
    """(file index, row) of an `InputRow` / `RowError` (a corrupt file's tail sorts last)."""
    return item.file_index, float("inf") if item.row is None else item.row


def _where(item, key_column) -> dict:
    head = {key_column: item.key} if key_column else {}
    return {**head, INPUT_FILE: item.file, INPUT_ROW: item.row}


def prediction_json(row, outputs: dict, key_column: str | None) -> str:
    """One line of predictions-*.jsonl (no newline)."""
    record = _where(row, key_column)
    for name in sorted(outputs):
        record[name] = as_json(outputs[name])
    return fileio.jsonl_line(record)


def error_json(item, reason: str, key_column: str | None) -> str:
    """One line of errors-*.jsonl for a `RowError`, or an `InputRow` whose prediction failed."""
    record = _where(item, key_column)
    record.update(raw=item.raw, reason=reason)
    return fileio.jsonl_line(record)


def prediction_log(row, outputs: dict, export) -> bytes:
    """A serialized `PredictionLog` (predict_log) of one row (`export`: the model's
    `model_handler.ExportSignature`)."""
    log = prediction_log_pb2.PredictionLog()
    request, response = log.predict_log.request, log.predict_log.response
    request.model_spec.name = export.model_name
    request.model_spec.version.value = export.version
    request.model_spec.signature_name = SIGNATURE
    texts = {"text": row.text} if row.text_b is None else {"text": row.text, "text_b": row.text_b}
    for name, text in texts.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto([text.encode("utf-8")], tf.string))
    response.model_spec.CopyFrom(request.model_spec)
    for name in sorted(outputs):
        response.outputs[name].CopyFrom(tf.make_tensor_proto(np.asarray(outputs[name])[None]))
    return log.SerializeToString(deterministic=True)


def as_json(value) -> Any:
    """A numpy output value of one row as JSON: numbers, lists, strings (bytes decoded as UTF-8,
    undecodable bytes as `\\xNN`)."""
    array = np.asarray(value)
    plain = array.tolist()
    if array.dtype.kind not in "SO":
        return plain

    def decode(item):
        if isinstance(item, list):
            return [decode(x) for x in item]
        return item.decode("utf-8", "backslashreplace") if isinstance(item, bytes) else item

    return decode(plain)
