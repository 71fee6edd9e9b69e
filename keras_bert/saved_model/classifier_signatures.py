"""Serving signatures of a `TextClassifier`: classification or regression, one text or a pair.

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

B (batch) and T (tokens incl. [CLS]/[SEP]) are dynamic (`None`). Batch 1 keeps its batch dimension
and batch 0 returns empty outputs of the same rank. The method names of `classification` /
`regression` cannot be set through `tf.saved_model.save` (it writes `tensorflow/serving/predict`
for every signature); `versioning.set_method_names` rewrites them afterwards.
"""

from __future__ import annotations

import tensorflow as tf

from keras_bert.data.dynamic_padding import trim_to_longest
from keras_bert.saved_model import warmup
from keras_bert.saved_model.serving_module import INPUT_NAMES, ServingModule, id_specs

CLASSIFY_METHOD_NAME = "tensorflow/serving/classify"  # signature_constants.CLASSIFY_METHOD_NAME
REGRESS_METHOD_NAME = "tensorflow/serving/regress"  # signature_constants.REGRESS_METHOD_NAME
TEXT_FEATURE, TEXT_B_FEATURE = "text", "text_b"  # tf.Example feature names (bytes_list)
TASK_TYPES = ("classification", "regression")


class ClassifierServingModule(ServingModule):
    """The signatures above for a `TextClassifier` task.

    Raises:
        ValueError: a classifier with fewer than 2 label names.
    """

    def __init__(self, task, preprocessor):
        super().__init__(task, preprocessor)
        if self.task_type == "classification" and len(task.label_names or []) < 2:
            raise ValueError(f"a classifier needs >= 2 label_names, got {task.label_names!r}")
        self._label_names = [str(x) for x in (task.label_names or [])]
        # Only the task's tf.Example function exists, so nothing untraced is saved.
        if self.task_type == "classification":
            self.classify = tf.function(self._classify)
        else:
            self.regress = tf.function(self._regress)

    def _outputs(self, inputs):
        """int32 model inputs [B, T] -> dict of the task's serving outputs."""
        raw = tf.cast(self.task(inputs, training=False), tf.float32)  # [B, C] or [B, 1]
        if self.task_type == "regression":
            return {"scores": tf.reshape(raw, [-1])}  # [B]
        probabilities = tf.nn.softmax(raw, axis=-1)  # [B, C]
        label_ids = tf.argmax(probabilities, axis=-1, output_type=tf.int64)  # [B]
        labels = tf.gather(tf.constant(self._label_names), label_ids)  # [B] string
        return {"probabilities": probabilities, "label_ids": label_ids, "labels": labels}

    def _from_text(self, text, text_b=None):
        inputs = self.preprocessor({"text": text, "text_b": text_b} if self.is_pair else text)
        # Cut the batch to its longest row (>= 2: [CLS] [SEP]); padding never changes outputs.
        return self._outputs(trim_to_longest(inputs, minimum=2, model_inputs=True))

    def _parse_examples(self, serialized):
        """Serialized tf.Example [B] -> (text [B], text_b [B] or None); missing `text` fails."""
        spec = {TEXT_FEATURE: tf.io.FixedLenFeature([], tf.string)}
        if self.is_pair:
            spec[TEXT_B_FEATURE] = tf.io.FixedLenFeature([], tf.string)
        features = tf.io.parse_example(serialized, spec)
        return features[TEXT_FEATURE], features.get(TEXT_B_FEATURE)

    @tf.function
    def serving_default(self, text, text_b=None):
        return self._from_text(text, text_b)

    @tf.function
    def encoded(self, input_word_ids, input_mask, input_type_ids):
        return self._outputs(self.checked_ids(input_word_ids, input_mask, input_type_ids))

    def _classify(self, inputs):
        out = self._from_text(*self._parse_examples(inputs))
        batch = tf.shape(inputs)[0]
        classes = tf.tile(tf.constant(self._label_names)[tf.newaxis, :], [batch, 1])  # [B, C]
        return {"classes": classes, "scores": out["probabilities"]}

    def _regress(self, inputs):
        return {"outputs": self._from_text(*self._parse_examples(inputs))["scores"]}

    def signatures(self) -> dict:
        """Signature key -> concrete function; `encoded` is also traced for int64 ids."""
        text = tf.TensorSpec([None], tf.string, name=TEXT_FEATURE)
        if self.is_pair:
            default = self.serving_default.get_concrete_function(
                text, tf.TensorSpec([None], tf.string, name=TEXT_B_FEATURE)
            )
        else:
            default = self.serving_default.get_concrete_function(text)
        self.encoded.get_concrete_function(*id_specs(tf.int64))
        examples = tf.TensorSpec([None], tf.string, name="inputs")
        out = {
            "serving_default": default,
            "encoded": self.encoded.get_concrete_function(*id_specs(tf.int32)),
        }
        if self.task_type == "classification":
            out["classification"] = self.classify.get_concrete_function(examples)
        else:
            out["regression"] = self.regress.get_concrete_function(examples)
        return out

    def method_names(self) -> dict:
        return (
            {"classification": CLASSIFY_METHOD_NAME}
            if self.task_type == "classification"
            else {"regression": REGRESS_METHOD_NAME}
        )

    def signature_summary(self) -> dict:
        """Signature key -> its inputs, for assets/export_config.json."""
        return {
            "serving_default": "text" + (", text_b" if self.is_pair else ""),
            "encoded": ", ".join(INPUT_NAMES),
            self.task_type: "inputs (serialized tf.Example)",
        }

    def warmup_logs(self, model_name: str, texts) -> list:
        """Predict on serving_default (batch 1 and the full batch) and on encoded (int32 ids from
        the module's own preprocessor), then Classify or Regress on serialized tf.Examples.

        Args:
            texts: list of (text, text_b) pairs; text_b is used only for pair tasks.
        """
        a = [t for t, _ in texts]
        b = [t_b for _, t_b in texts] if self.is_pair else None
        logs = []
        for n in (1, len(a)):
            inputs = {TEXT_FEATURE: a[:n]} | ({TEXT_B_FEATURE: b[:n]} if b is not None else {})
            logs.append(warmup.predict_log(model_name, "serving_default", inputs))
        packed = self.preprocessor(
            {"text": tf.constant(a), "text_b": tf.constant(b)} if b is not None else tf.constant(a)
        )
        logs.append(warmup.encoded_log(model_name, packed))
        examples = [
            warmup.text_example({TEXT_FEATURE: t} | ({TEXT_B_FEATURE: t_b} if self.is_pair else {}))
            for t, t_b in texts
        ]
        kind = "classify" if self.task_type == "classification" else "regress"
        logs.append(warmup.example_log(model_name, self.task_type, examples, kind))
        return logs
