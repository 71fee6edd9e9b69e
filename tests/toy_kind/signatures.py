"""Serving signatures of a `ToyScorer`: `serving_default` (text: tf.string [B] -> score [B]
float32) and `encoded` (the three int32 model inputs [B, T] -> the same)."""

from __future__ import annotations

import tensorflow as tf

from keras_bert.saved_model.serving_module import INPUT_NAMES, ServingModule, id_specs


class ToyScorerServingModule(ServingModule):
    """The signatures above for a `ToyScorer`."""

    def _outputs(self, inputs):
        return {"score": tf.cast(self.task(inputs, training=False), tf.float32)}

    @tf.function
    def serving_default(self, text):
        return self._outputs(self.preprocessor(text))

    @tf.function
    def encoded(self, input_word_ids, input_mask, input_type_ids):
        return self._outputs(self.checked_ids(input_word_ids, input_mask, input_type_ids))

    def signatures(self) -> dict:
        return {
            "serving_default": self.serving_default.get_concrete_function(
                tf.TensorSpec([None], tf.string, name="text")
            ),
            "encoded": self.encoded.get_concrete_function(*id_specs(tf.int32)),
        }

    def signature_summary(self) -> dict:
        return {"serving_default": "text", "encoded": ", ".join(INPUT_NAMES)}
