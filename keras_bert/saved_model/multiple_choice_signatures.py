"""Serving signatures of a `MultipleChoice` task (SWAG; SPEC section 7).

=================  ===================================  ========================================
signature key      inputs                               outputs
=================  ===================================  ========================================
serving_default    context: tf.string [B],              probabilities [B, C] float32 (softmax
                   endings: tf.string [B, C]            over choices), choice [B] int64 (argmax)
encoded            input_word_ids, input_mask,          the same outputs
                   input_type_ids: int32 [B, C, T]
=================  ===================================  ========================================

`endings` are the whole second segments (for SWAG: the start of the second sentence, a space,
the ending), C = the task's num_choices. Each (context, ending) pair is tokenized and packed in the
graph as `[CLS] context [SEP] ending [SEP]`, as `task.predict` does.
"""

from __future__ import annotations

import tensorflow as tf

from keras_bert.saved_model import warmup
from keras_bert.saved_model.serving_module import INPUT_NAMES, ServingModule, id_specs

WARMUP = (
    "A man is sitting on a roof. He",
    [
        "starts pulling up roofing on a roof.",
        "is ripping level tiles off.",
        "is holding a rubik's cube.",
        "is using a crowbar.",
    ],
)


class MultipleChoiceServingModule(ServingModule):
    """The signatures above for a `MultipleChoice` task."""

    def __init__(self, task, preprocessor):
        super().__init__(task, preprocessor)
        self._num_choices = int(task.num_choices)

    def _outputs(self, inputs):
        probabilities = tf.nn.softmax(tf.cast(self.task(inputs, training=False), tf.float32), -1)
        return {
            "probabilities": probabilities,
            "choice": tf.argmax(probabilities, axis=-1, output_type=tf.int64),
        }

    @tf.function
    def serving_default(self, context, endings):
        check = tf.debugging.assert_equal(
            tf.shape(endings),
            tf.stack([tf.shape(context)[0], self._num_choices]),
            message=f"endings must be [batch, {self._num_choices}] with the batch of context",
        )
        with tf.control_dependencies([check]):
            inputs = self.task.encode_choices(context, endings, self.preprocessor)
        longest = tf.maximum(tf.reduce_max(tf.reduce_sum(inputs["input_mask"], axis=-1)), 3)
        return self._outputs({k: v[..., :longest] for k, v in inputs.items()})

    @tf.function
    def encoded(self, input_word_ids, input_mask, input_type_ids):
        return self._outputs(self.checked_ids(input_word_ids, input_mask, input_type_ids))

    def signatures(self) -> dict:
        """Signature key -> concrete function; `encoded` is also traced for int64 ids."""
        self.encoded.get_concrete_function(*id_specs(tf.int64, rank=3))
        return {
            "serving_default": self.serving_default.get_concrete_function(
                tf.TensorSpec([None], tf.string, name="context"),
                tf.TensorSpec([None, self._num_choices], tf.string, name="endings"),
            ),
            "encoded": self.encoded.get_concrete_function(*id_specs(tf.int32, rank=3)),
        }

    def signature_summary(self) -> dict:
        return {"serving_default": "context, endings", "encoded": ", ".join(INPUT_NAMES)}

    def warmup_logs(self, model_name: str, texts) -> list:
        """Predict on serving_default and encoded with one built-in example (`texts` unused)."""
        del texts
        context, endings = WARMUP[0], (WARMUP[1] * self._num_choices)[: self._num_choices]
        logs = [
            warmup.predict_log(
                model_name, "serving_default", {"context": [context], "endings": [endings]}
            )
        ]
        packed = self.task.encode_choices(
            tf.constant([context]), tf.constant([endings]), self.preprocessor
        )
        logs.append(warmup.encoded_log(model_name, packed))
        return logs
