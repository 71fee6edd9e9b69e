"""Serving signatures of an exported sentence (pair) classifier or regressor (SPEC section 7).

`ClassifierServingModule` wraps a fine-tuned `BertClassifier` and an in-graph `BertPreprocessor`
in a `tf.Module` whose `tf.function`s become the SavedModel signatures:

=================  ===================================  ========================================
signature key      inputs                               outputs
=================  ===================================  ========================================
serving_default    text (, text_b): tf.string [B]       classification: probabilities [B,C]
                                                        float32, label_ids [B] int64, labels [B]
                                                        string; regression: scores [B] float32
encoded            input_word_ids, input_mask,          the same outputs as serving_default
                   input_type_ids: int32 [B, T]
classification     inputs: serialized tf.Example [B]    classes [B,C] string, scores [B,C]
 (classifiers)     (features `text`, `text_b`)          float32 (method tensorflow/serving/classify)
regression         inputs: serialized tf.Example [B]    outputs [B] float32
 (regressors)                                           (method tensorflow/serving/regress)
=================  ===================================  ========================================

B (batch) and T (sequence length, in tokens incl. [CLS]/[SEP]) are dynamic (`None`). Batch 1 keeps
its batch dimension and batch 0 returns empty outputs of the same rank.

Id dtype: the `encoded` *signature* takes int32 (the dtype of the SPEC's model inputs), which is
what GetModelMetadata reports; a gRPC/REST client sending int64 must cast (our serving/ does, stock
TensorFlow Serving answers INVALID_ARGUMENT). Programs that load the SavedModel in TensorFlow can
also call the restored `obj.encoded(...)` function with int64 tensors: a second concrete function
is saved for that.

Run-time checks on `encoded` (InvalidArgumentError, never silent garbage): the three tensors have
the same shape, T <= max_sequence_length (the position table), 0 <= input_word_ids < vocab_size,
0 <= input_type_ids < type_vocab_size, input_mask in {0, 1}.

The method names of `classification` / `regression` cannot be set through `tf.saved_model.save`
(it writes `tensorflow/serving/predict` for every signature, see tensorflow/python/saved_model/
save.py `_generate_signatures`); `export_saved_model.set_method_names` rewrites them afterwards.
"""
from __future__ import annotations

import keras
import tensorflow as tf

from keras_bert.models.bert_encoder import BertEncoder

CLASSIFY_METHOD_NAME = "tensorflow/serving/classify"  # signature_constants.CLASSIFY_METHOD_NAME
REGRESS_METHOD_NAME = "tensorflow/serving/regress"    # signature_constants.REGRESS_METHOD_NAME
PREDICT_METHOD_NAME = "tensorflow/serving/predict"
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
TEXT_FEATURE, TEXT_B_FEATURE = "text", "text_b"  # tf.Example feature names (bytes_list)
TASK_TYPES = ("classification", "regression")


def find_encoder(model: keras.Model) -> BertEncoder:
    """The `BertEncoder` inside a task model (its `.encoder`, else the first one among its layers).

    Raises:
        ValueError: if the model holds no BertEncoder.
    """
    encoder = getattr(model, "encoder", None)
    if isinstance(encoder, BertEncoder):
        return encoder
    for layer in getattr(model, "layers", []):
        if isinstance(layer, BertEncoder):
            return layer
    raise ValueError(f"{type(model).__name__} holds no BertEncoder; export needs one to read "
                     "max_sequence_length, vocab_size and type_vocab_size")


class _Untracked:
    """Holds an object out of tf.Module's automatic dependency tracking."""

    def __init__(self, value):
        self.value = value


class ClassifierServingModule(tf.Module):
    """tf.Module whose functions are the serving signatures of a classifier or regressor.

    Args:
        model: Keras model, dict of int32 [B, T] `input_word_ids/input_mask/input_type_ids` ->
            float logits [B, C] (classification) or scores [B, 1] (regression), e.g.
            `BertClassifier`. Called with training=False.
        preprocessor: Keras layer, tf.string [B] (or a dict of `text`, `text_b`) -> dict of
            the three int32 [B, max_seq_length] inputs (`BertPreprocessor`).
        label_names: list of C str (classification; C >= 2 for softmax probabilities); ignored for
            regression.
        task_type: "classification" or "regression".
        is_pair: bool; True adds the `text_b` input and tf.Example feature.
        assets: optional dict name -> `tf.saved_model.Asset`, tracked so their files land in
            `assets/` (vocab, label list, config JSON).

    Raises:
        ValueError: unknown task_type, a classifier with fewer than 2 labels, or a model without
            BertEncoder.
    """

    def __init__(self, model, preprocessor, label_names, task_type="classification",
                 is_pair=False, assets=None):
        super().__init__(name="bert_serving")
        if task_type not in TASK_TYPES:
            raise ValueError(f"task_type must be one of {TASK_TYPES}, got {task_type!r}")
        if task_type == "classification" and (not label_names or len(label_names) < 2):
            raise ValueError(f"a classifier needs >= 2 label_names, got {label_names!r}")
        cfg = find_encoder(model).bert_config
        # The Keras model is not tracked as a child (its `_default_save_signature` would be traced
        # from build shapes, which fails for a model built without them); its variables are,
        # as in keras.export.ExportArchive.
        self._model = _Untracked(model)
        self.model_variables = list(model.variables)
        self.preprocessor = preprocessor
        self.task_type = task_type
        self.is_pair = bool(is_pair)
        self.max_sequence_length = cfg.max_sequence_length
        self.vocab_size = cfg.vocab_size
        self.type_vocab_size = cfg.type_vocab_size
        self._label_names = [str(x) for x in (label_names or [])]
        for name, asset in (assets or {}).items():
            setattr(self, name, asset)
        # Only the task's tf.Example function exists, so nothing untraced is saved.
        if task_type == "classification":
            self.classify = tf.function(self._classify)
        else:
            self.regress = tf.function(self._regress)

    # ---- shared graph pieces -------------------------------------------------------------

    def _outputs(self, inputs):
        """int32 model inputs [B, T] -> dict of the task's serving outputs."""
        raw = tf.cast(self._model.value(inputs, training=False), tf.float32)  # [B, C] or [B, 1]
        if self.task_type == "regression":
            return {"scores": tf.reshape(raw, [-1])}  # [B]
        probabilities = tf.nn.softmax(raw, axis=-1)  # [B, C]
        label_ids = tf.argmax(probabilities, axis=-1, output_type=tf.int64)  # [B]
        labels = tf.gather(tf.constant(self._label_names), label_ids)  # [B] string
        return {"probabilities": probabilities, "label_ids": label_ids, "labels": labels}

    def _from_text(self, text, text_b=None):
        inputs = self.preprocessor({"text": text, "text_b": text_b} if self.is_pair else text)
        # The preprocessor pads every row to max_seq_length; cut the batch to its longest row
        # (>= 2: [CLS] [SEP]). Padding never changes outputs at real positions, and short texts
        # (SST-2 averages 25 of 128 tokens) then cost about a third of the compute.
        longest = tf.maximum(tf.reduce_max(tf.reduce_sum(inputs["input_mask"], axis=1)), 2)
        return self._outputs({k: tf.cast(inputs[k][:, :longest], tf.int32) for k in INPUT_NAMES})

    def _checked(self, input_word_ids, input_mask, input_type_ids):
        """Validates `encoded` inputs (module docstring) and casts them to int32."""
        shape = tf.shape(input_word_ids, out_type=tf.int64)
        checks = [
            tf.debugging.assert_equal(
                tf.shape(input_mask, out_type=tf.int64), shape,
                message="input_mask must have the shape of input_word_ids [batch_size, seq_length]"),
            tf.debugging.assert_equal(
                tf.shape(input_type_ids, out_type=tf.int64), shape,
                message="input_type_ids must have the shape of input_word_ids [batch_size, seq_length]"),
            tf.debugging.assert_less_equal(
                shape[1], tf.constant(self.max_sequence_length, tf.int64),
                message=f"input_word_ids: sequence length exceeds max_sequence_length="
                        f"{self.max_sequence_length} (the size of the position table)"),
            tf.debugging.assert_non_negative(input_word_ids, message="input_word_ids: negative id"),
            tf.debugging.assert_less(
                input_word_ids, tf.cast(self.vocab_size, input_word_ids.dtype),
                message=f"input_word_ids: id >= vocab_size={self.vocab_size}"),
            tf.debugging.assert_non_negative(input_type_ids, message="input_type_ids: negative id"),
            tf.debugging.assert_less(
                input_type_ids, tf.cast(self.type_vocab_size, input_type_ids.dtype),
                message=f"input_type_ids: id >= type_vocab_size={self.type_vocab_size}"),
            tf.debugging.assert_less_equal(
                tf.abs(tf.cast(input_mask, tf.int64) * 2 - 1), tf.constant(1, tf.int64),
                message="input_mask: values must be 0 or 1"),
        ]
        with tf.control_dependencies(checks):  # identity: a no-op cast would create no new op
            return {"input_word_ids": tf.identity(tf.cast(input_word_ids, tf.int32)),
                    "input_mask": tf.identity(tf.cast(input_mask, tf.int32)),
                    "input_type_ids": tf.identity(tf.cast(input_type_ids, tf.int32))}

    def _parse_examples(self, serialized):
        """Serialized tf.Example [B] -> (text [B], text_b [B] or None); missing `text` fails."""
        spec = {TEXT_FEATURE: tf.io.FixedLenFeature([], tf.string)}
        if self.is_pair:
            spec[TEXT_B_FEATURE] = tf.io.FixedLenFeature([], tf.string)
        features = tf.io.parse_example(serialized, spec)
        return features[TEXT_FEATURE], features.get(TEXT_B_FEATURE)

    # ---- signature functions ---------------------------------------------------------------

    @tf.function
    def serving_default(self, text, text_b=None):
        return self._from_text(text, text_b)

    @tf.function
    def encoded(self, input_word_ids, input_mask, input_type_ids):
        return self._outputs(self._checked(input_word_ids, input_mask, input_type_ids))

    def _classify(self, inputs):
        out = self._from_text(*self._parse_examples(inputs))
        batch = tf.shape(inputs)[0]
        classes = tf.tile(tf.constant(self._label_names)[tf.newaxis, :], [batch, 1])  # [B, C]
        return {"classes": classes, "scores": out["probabilities"]}

    def _regress(self, inputs):
        return {"outputs": self._from_text(*self._parse_examples(inputs))["scores"]}

    def signatures(self) -> dict:
        """Signature key -> concrete function, for `tf.saved_model.save(..., signatures=)`.

        Also traces `encoded` for int64 ids so the restored function accepts both widths.
        """
        text = tf.TensorSpec([None], tf.string, name=TEXT_FEATURE)
        if self.is_pair:
            default = self.serving_default.get_concrete_function(
                text, tf.TensorSpec([None], tf.string, name=TEXT_B_FEATURE))
        else:
            default = self.serving_default.get_concrete_function(text)
        ids = {dtype: [tf.TensorSpec([None, None], dtype, name=n) for n in INPUT_NAMES]
               for dtype in (tf.int32, tf.int64)}
        self.encoded.get_concrete_function(*ids[tf.int64])
        examples = tf.TensorSpec([None], tf.string, name="inputs")
        sigs = {"serving_default": default,
                "encoded": self.encoded.get_concrete_function(*ids[tf.int32])}
        if self.task_type == "classification":
            sigs["classification"] = self.classify.get_concrete_function(examples)
        else:
            sigs["regression"] = self.regress.get_concrete_function(examples)
        return sigs


def method_names(task_type: str) -> dict:
    """Signature key -> method name that `set_method_names` writes (others stay predict)."""
    return ({"classification": CLASSIFY_METHOD_NAME} if task_type == "classification"
            else {"regression": REGRESS_METHOD_NAME})
