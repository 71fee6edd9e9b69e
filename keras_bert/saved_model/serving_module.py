"""`ServingModule`: the base of every task's exported signatures (SPEC section 7).

A `tf.Module` whose `tf.function`s become SavedModel signatures. It holds the task model (out of
tf.Module's tracking; its variables are tracked, as in `keras.export.ExportArchive`), the in-graph
preprocessor, and the checks every `encoded` signature applies to id inputs.

Id dtype: `encoded` signatures take int32 (the dtype of the SPEC's model inputs), which is what
GetModelMetadata reports; `serving/` casts int64 from clients, stock TensorFlow Serving answers
INVALID_ARGUMENT. Programs that load the SavedModel in TensorFlow may also call the restored
`obj.encoded(...)` with int64 tensors: a second concrete function is saved for that.

Run-time checks on id inputs (InvalidArgumentError, never silent garbage): the three tensors have
the same shape, T <= max_sequence_length (the position table), 0 <= input_word_ids < vocab_size,
0 <= input_type_ids < type_vocab_size, input_mask in {0, 1}.
"""

from __future__ import annotations

import tensorflow as tf

from keras_bert.config import INPUT_NAMES

PREDICT_METHOD_NAME = "tensorflow/serving/predict"


class Untracked:
    """Holds an object out of tf.Module's automatic dependency tracking."""

    def __init__(self, value):
        self.value = value


def id_specs(dtype=tf.int32, rank: int = 2) -> list:
    """TensorSpecs of the three model inputs, `[None] * rank` each."""
    return [tf.TensorSpec([None] * rank, dtype, name=n) for n in INPUT_NAMES]


class ServingModule(tf.Module):
    """Base of the task serving modules.

    Args:
        task: the `keras_bert.tasks.Task` (called with training=False).
        preprocessor: the `BertPreprocessor` used by the text signatures.

    Subclasses define `signatures()` (key -> concrete function), `signature_summary()` (key ->
    its inputs, for export_config.json), `method_names()` (keys whose method name is not predict)
    and `warmup_logs(model_name, texts)`.
    """

    def __init__(self, task, preprocessor):
        super().__init__(name="bert_serving")
        cfg = task.encoder.bert_config
        self._task = Untracked(task)
        self.model_variables = list(task.variables)
        self.preprocessor = preprocessor
        self.is_pair = bool(task.is_pair)
        self.task_type = task.task_type
        self.max_sequence_length = cfg.max_sequence_length
        self.vocab_size = cfg.vocab_size
        self.type_vocab_size = cfg.type_vocab_size

    @property
    def task(self):
        return self._task.value

    def attach_assets(self, assets: dict) -> None:
        """Tracks `tf.saved_model.Asset`s (name -> asset) so their files land in `assets/`."""
        for name, asset in assets.items():
            setattr(self, name, asset)

    def checked_ids(self, input_word_ids, input_mask, input_type_ids) -> dict:
        """Validates id inputs (module docstring) and casts them to int32; any rank >= 2."""
        shape = tf.shape(input_word_ids, out_type=tf.int64)
        checks = [
            tf.debugging.assert_equal(
                tf.shape(input_mask, out_type=tf.int64),
                shape,
                message="input_mask must have the shape of input_word_ids",
            ),
            tf.debugging.assert_equal(
                tf.shape(input_type_ids, out_type=tf.int64),
                shape,
                message="input_type_ids must have the shape of input_word_ids",
            ),
            tf.debugging.assert_less_equal(
                shape[-1],
                tf.constant(self.max_sequence_length, tf.int64),
                message=f"input_word_ids: sequence length exceeds max_sequence_length="
                f"{self.max_sequence_length} (the size of the position table)",
            ),
            tf.debugging.assert_non_negative(input_word_ids, message="input_word_ids: negative id"),
            tf.debugging.assert_less(
                input_word_ids,
                tf.cast(self.vocab_size, input_word_ids.dtype),
                message=f"input_word_ids: id >= vocab_size={self.vocab_size}",
            ),
            tf.debugging.assert_non_negative(input_type_ids, message="input_type_ids: negative id"),
            tf.debugging.assert_less(
                input_type_ids,
                tf.cast(self.type_vocab_size, input_type_ids.dtype),
                message=f"input_type_ids: id >= type_vocab_size={self.type_vocab_size}",
            ),
            tf.debugging.assert_less_equal(
                tf.abs(tf.cast(input_mask, tf.int64) * 2 - 1),
                tf.constant(1, tf.int64),
                message="input_mask: values must be 0 or 1",
            ),
        ]
        with tf.control_dependencies(checks):  # identity: a no-op cast would create no new op
            return {
                "input_word_ids": tf.identity(tf.cast(input_word_ids, tf.int32)),
                "input_mask": tf.identity(tf.cast(input_mask, tf.int32)),
                "input_type_ids": tf.identity(tf.cast(input_type_ids, tf.int32)),
            }

    def signatures(self) -> dict:
        raise NotImplementedError

    def signature_summary(self) -> dict:
        """Signature key -> its inputs in words (assets/export_config.json's "signatures")."""
        raise NotImplementedError

    def method_names(self) -> dict:
        """Signature key -> method name, for keys other than predict (default: none)."""
        return {}

    def warmup_logs(self, model_name: str, texts) -> list:
        """`tensorflow.serving.PredictionLog`s exercising the signatures (default: none)."""
        del model_name, texts
        return []
