"""`ToyScorer`: one score in [0, 1] per text, from the pooled [CLS] vector (a `Task`)."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from keras_bert.tasks.task import Task
from tests.toy_kind.signatures import ToyScorerServingModule


@keras.saving.register_keras_serializable(package="keras_bert_toy")
class ToyScorer(Task):
    """Encoder -> pooled [CLS] vector -> Dense(1) -> sigmoid: float32 [B] scores.

    Args:
        encoder: a `BertEncoder`; preprocessor: its `BertPreprocessor`.
    """

    task_type = "toy_scoring"

    def __init__(self, encoder, preprocessor=None, **kwargs):
        kwargs.pop("is_pair", None)
        kwargs.pop("label_names", None)
        super().__init__(encoder, preprocessor=preprocessor, **kwargs)
        self.head = keras.layers.Dense(1, dtype="float32", name="score")

    def call(self, inputs, training=None):
        pooled = self.encoder(inputs, training=training)["pooled_output"]
        return tf.sigmoid(tf.squeeze(self.head(pooled), -1))  # [B]

    def default_loss(self):
        return keras.losses.MeanSquaredError()

    def predict_texts(self, texts, texts_b=None, batch_size=32):
        """Raw strings -> float32 [N] scores."""
        parts = self.batched_outputs(texts, None, batch_size, lambda f: self(f, training=False))
        return np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)

    def serving_module(self, preprocessor):
        return ToyScorerServingModule(self, preprocessor)

    def get_config(self):
        config = super().get_config()
        for key in ("is_pair", "label_names"):
            config.pop(key, None)
        return config
