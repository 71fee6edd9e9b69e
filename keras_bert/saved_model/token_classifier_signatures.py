"""Serving signatures of a `TokenClassifier` (NER; SPEC section 7).

=================  ===================================  ========================================
signature key      inputs                               outputs
=================  ===================================  ========================================
serving_default    text: tf.string [B] (sentences)      tags [B, W] string (one per whitespace
                                                        word, "" padding), words [B, W] string
                                                        ("" padding), num_words [B] int32
encoded            input_word_ids, input_mask,          probabilities [B, T, C] float32,
                   input_type_ids: int32 [B, T]         tag_ids [B, T] int64, tags [B, T] string
                                                        (per position; read first pieces only)
=================  ===================================  ========================================

W is the most words of any sentence in the batch. Sentences longer than one window are windowed
inside the graph (`keras_bert.tasks.token_classifier.window_words`), exactly as `task.predict`
does, so both give the same tags. Words are split on ASCII whitespace (`tf.strings.split`).
"""

from __future__ import annotations

import tensorflow as tf

from keras_bert.saved_model import warmup
from keras_bert.saved_model.serving_module import INPUT_NAMES, ServingModule, id_specs

TEXT = "text"
WARMUP_SENTENCES = ["EU rejects German call to boycott British lamb .", "Peter Blackburn", ""]


class TokenClassifierServingModule(ServingModule):
    """The signatures above for a `TokenClassifier`."""

    def __init__(self, task, preprocessor):
        super().__init__(task, preprocessor)
        self._label_names = list(task.label_names)

    def _tag_words(self, text):
        words = tf.strings.split(text)  # [B, (W)]
        tag_ids, num_words = self.task.tag_ids_of_words(words, self.preprocessor)
        width = tf.shape(tag_ids)[1]
        present = tf.sequence_mask(num_words, width)
        tags = tf.where(present, tf.gather(tf.constant(self._label_names), tag_ids), "")
        return {
            "tags": tags,
            "words": words.to_tensor(default_value=""),  # [B, W]: W = the most words
            "num_words": num_words,
        }

    @tf.function
    def serving_default(self, text):
        return self._tag_words(text)

    @tf.function
    def encoded(self, input_word_ids, input_mask, input_type_ids):
        inputs = self.checked_ids(input_word_ids, input_mask, input_type_ids)
        probabilities = tf.nn.softmax(tf.cast(self.task(inputs, training=False), tf.float32), -1)
        tag_ids = tf.argmax(probabilities, axis=-1, output_type=tf.int64)
        return {
            "probabilities": probabilities,
            "tag_ids": tag_ids,
            "tags": tf.gather(tf.constant(self._label_names), tag_ids),
        }

    def signatures(self) -> dict:
        """Signature key -> concrete function; `encoded` is also traced for int64 ids."""
        self.encoded.get_concrete_function(*id_specs(tf.int64))
        return {
            "serving_default": self.serving_default.get_concrete_function(
                tf.TensorSpec([None], tf.string, name=TEXT)
            ),
            "encoded": self.encoded.get_concrete_function(*id_specs(tf.int32)),
        }

    def signature_summary(self) -> dict:
        return {"serving_default": TEXT, "encoded": ", ".join(INPUT_NAMES)}

    def warmup_logs(self, model_name: str, texts) -> list:
        """Predict on serving_default (one sentence, then a batch with an empty one) and on
        encoded; `texts` (pairs for classifiers) are not used."""
        del texts
        logs = [
            warmup.predict_log(model_name, "serving_default", {TEXT: s})
            for s in (WARMUP_SENTENCES[:1], WARMUP_SENTENCES)
        ]
        packed = self.preprocessor(tf.constant(WARMUP_SENTENCES[:2]))
        logs.append(warmup.encoded_log(model_name, packed))
        return logs
