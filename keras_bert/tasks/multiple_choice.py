"""`MultipleChoice`: pick one of `num_choices` continuations (SWAG; BERT section 4.4).

Each example becomes `num_choices` sequences `[CLS] context [SEP] choice [SEP]` (segment A = the
context, segment B = the choice; for SWAG the start of the second sentence plus the ending). The
only new parameters are one vector: its dot product with each sequence's [CLS] representation
(`pooled_output`) is that choice's score, and a softmax over the choices gives probabilities
(google-research/bert and Hugging Face `BertForMultipleChoice` use the pooled [CLS] vector).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from keras_bert.layers.dropout import BertDropout
from keras_bert.layers.initializers import truncated_normal
from keras_bert.saved_model.multiple_choice_signatures import MultipleChoiceServingModule
from keras_bert.tasks.task import INPUT_NAMES, Task


@keras.saving.register_keras_serializable(package="keras_bert")
class MultipleChoice(Task):
    """Scores `num_choices` (context, choice) pairs per example; softmax across them.

    Args:
        encoder: a `BertEncoder`.
        num_choices: int >= 2 (SWAG: 4).
        dropout_rate: float in [0, 1), dropout on the pooled [CLS] vector.
        initializer_range: float, stddev of the truncated-normal score kernel.
        preprocessor: the `BertPreprocessor` (pairs: max_seq_length >= 3).

    Call args:
        inputs: dict of `input_word_ids`, `input_mask`, `input_type_ids`, int32
            [B, num_choices, T].
        training: bool.

    Returns:
        float32 [B, num_choices] logits (one score per choice).

    Raises:
        ValueError: num_choices < 2, dropout_rate outside [0, 1), inputs of another rank.
    """

    task_type = "multiple_choice"

    def __init__(
        self,
        encoder,
        num_choices=4,
        dropout_rate=0.1,
        initializer_range=0.02,
        preprocessor=None,
        **kwargs,
    ):
        kwargs.pop("is_pair", None)
        kwargs.pop("label_names", None)
        if int(num_choices) < 2:
            raise ValueError(f"num_choices must be >= 2, got {num_choices}")
        if not 0.0 <= dropout_rate < 1.0:
            raise ValueError(f"dropout_rate must be in [0, 1), got {dropout_rate}")
        super().__init__(
            encoder,
            preprocessor=preprocessor,
            is_pair=True,
            label_names=[str(i) for i in range(int(num_choices))],
            **kwargs,
        )
        self.num_choices = int(num_choices)
        self.dropout_rate, self.initializer_range = float(dropout_rate), float(initializer_range)
        self.dropout = BertDropout(self.dropout_rate, name="dropout")
        self.scorer = keras.layers.Dense(
            1,
            kernel_initializer=truncated_normal(self.initializer_range),
            dtype="float32",
            name="choice_score",
        )

    def call(self, inputs, training=None):
        ids = inputs["input_word_ids"]
        if ids.shape.rank != 3:
            raise ValueError(
                "MultipleChoice takes inputs [batch, num_choices, seq_length], got "
                f"rank {ids.shape.rank}"
            )
        shape = tf.shape(ids)
        flat = {k: tf.reshape(inputs[k], [-1, shape[2]]) for k in INPUT_NAMES}  # [B*C, T]
        pooled = self.encoder(flat, training=training)["pooled_output"]  # [B*C, H]
        scores = self.scorer(self.dropout(pooled, training=training))  # [B*C, 1]
        return tf.reshape(scores, [shape[0], shape[1]])  # [B, C]

    def default_loss(self):
        """Cross-entropy of the softmax over the choices and the right choice's index."""
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def dummy_inputs(self, length: int = 8) -> dict:
        length = min(length, self.encoder.bert_config.max_sequence_length)
        return {k: tf.ones((1, self.num_choices, length), tf.int32) for k in INPUT_NAMES}

    def encode_choices(self, contexts, choices, preprocessor=None) -> dict:
        """contexts: tf.string [B]; choices: tf.string [B, num_choices] -> dict of int32
        [B, num_choices, max_seq_length] model inputs (in graph or eagerly)."""
        preprocessor = preprocessor or self.require_preprocessor("encoding choices")
        contexts, choices = tf.convert_to_tensor(contexts), tf.convert_to_tensor(choices)
        repeated = tf.repeat(contexts, tf.shape(choices)[1])
        packed = preprocessor({"text": repeated, "text_b": tf.reshape(choices, [-1])})
        shape = [-1, tf.shape(choices)[1], preprocessor.max_seq_length]
        return {k: tf.reshape(packed[k], shape) for k in INPUT_NAMES}

    def check_choices(self, contexts, choices) -> tuple[list, list]:
        """Python inputs -> (contexts [B] list of str, choices [B] lists of num_choices str).

        Raises:
            ValueError: different lengths, a row without num_choices choices, non-str items.
        """
        contexts, choices = list(contexts), [list(c) for c in choices]
        if len(contexts) != len(choices):
            raise ValueError(f"{len(contexts)} contexts but {len(choices)} rows of choices")
        for i, row in enumerate(choices):
            if len(row) != self.num_choices:
                raise ValueError(f"example {i} has {len(row)} choices, expected {self.num_choices}")
        if not all(isinstance(t, str) for t in contexts + [c for row in choices for c in row]):
            raise ValueError("contexts and choices must be str")
        return contexts, choices

    def predict(self, x, batch_size=32, verbose=0, **kwargs):
        """(contexts, choices) -> float32 [B, num_choices] probabilities (softmax over choices).

        Args:
            x: a tuple (contexts: list of B str, choices: B lists of num_choices str, the second
                segments: for SWAG `example.second_segments()`); or a dict / tf.data.Dataset of
                int model inputs [B, num_choices, T] (goes to keras.Model.predict: logits).
        """
        if isinstance(x, (dict, tf.data.Dataset)):
            return super().predict(x, batch_size=batch_size, verbose=verbose, **kwargs)
        if not (isinstance(x, tuple) and len(x) == 2):
            raise ValueError(
                "MultipleChoice.predict takes (contexts, choices): a list of str and "
                f"a list of lists of {self.num_choices} str"
            )
        contexts, choices = self.check_choices(*x)
        step = tf.function(
            lambda f: tf.nn.softmax(self(f, training=False), axis=-1), reduce_retracing=True
        )
        parts = [
            step(
                self.encode_choices(contexts[i : i + batch_size], choices[i : i + batch_size])
            ).numpy()
            for i in range(0, len(contexts), int(batch_size))
        ]
        return (
            np.concatenate(parts) if parts else np.zeros((0, self.num_choices), np.float32)
        ).astype(np.float32)

    def serving_module(self, preprocessor):
        return MultipleChoiceServingModule(self, preprocessor)

    def export_metadata(self) -> dict:
        return super().export_metadata() | {"num_choices": self.num_choices}

    def get_config(self):
        config = super().get_config()
        for key in ("is_pair", "label_names"):
            config.pop(key, None)
        config.update(
            {
                "num_choices": self.num_choices,
                "dropout_rate": self.dropout_rate,
                "initializer_range": self.initializer_range,
            }
        )
        return config
