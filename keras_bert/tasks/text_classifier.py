"""`TextClassifier`: sentence (pair) classification or regression on a BertEncoder (BERT §4.1).

Dropout 0.1 on the pooled output, then one dense layer with truncated-normal(0.02) weights, as
google-research/bert `run_classifier.py::create_model` and Model Garden's `BertClassifier`. The
task carries its preprocessor and label names (`keras_bert.tasks.Task`), so `predict` takes raw
strings and `export` needs nothing else.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from keras_bert.layers.dropout import BertDropout
from keras_bert.layers.initializers import truncated_normal
from keras_bert.saved_model.classifier_signatures import ClassifierServingModule
from keras_bert.tasks.task import Task

POOLINGS = ("cls", "mean")


@keras.saving.register_keras_serializable(package="keras_bert")
class TextClassifier(Task):
    """Classification (num_classes >= 2) or regression (num_classes = 1), one text or a pair.

    Args:
        encoder: a `BertEncoder`.
        num_classes: int >= 1; 1 means regression (STS-B), trained with mean squared error.
        dropout_rate: float in [0, 1). Probability of dropping a unit of the pooled vector.
        initializer_range: float. Stddev of the truncated-normal output kernel initializer.
        label_names: list of num_classes str in id order (classification); None or [] for
            regression. Default for classification: "0", "1", ...
        task_name: optional str, e.g. "sst2" or "text_classification" (for metrics).
        pooling: "cls" (`pooled_output`, tanh(Dense(h_[CLS])), BERT §4.1) or "mean" (mean of
            `sequence_output` over real tokens, the pooling sentence-transformers checkpoints
            such as all-MiniLM-L6-v2 were trained with). With "mean" the encoder's pooler is
            set non-trainable (it has no gradient; its weights stay as loaded).
        preprocessor: the `BertPreprocessor` it is trained and served with (see `Task`).
        is_pair: bool; two texts per example.

    Call args:
        inputs: dict of `input_word_ids`, `input_mask`, `input_type_ids`, int32 [B, T].
        training: bool; dropout acts only when True.

    Returns:
        float32 Tensor [B, num_classes]: logits, or the score ([B, 1]) for regression; float32
        even under a mixed-precision policy.

    Raises:
        ValueError: num_classes < 1, dropout_rate outside [0, 1), label_names of the wrong
            length, an unknown pooling, or a preprocessor that does not fit the encoder.
    """

    def __init__(
        self,
        encoder,
        num_classes,
        dropout_rate=0.1,
        initializer_range=0.02,
        label_names=None,
        task_name=None,
        pooling="cls",
        preprocessor=None,
        is_pair=False,
        **kwargs,
    ):
        num_classes = int(num_classes)
        if num_classes < 1:
            raise ValueError(f"num_classes must be >= 1 (1 = regression), got {num_classes}")
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        if not 0.0 <= dropout_rate < 1.0:
            raise ValueError(f"dropout_rate must be in [0, 1), got {dropout_rate}")
        if num_classes == 1:
            if label_names:
                raise ValueError(
                    f"a regressor (num_classes=1) has no label_names, got {label_names}"
                )
            label_names = None
        elif label_names is None:
            label_names = [str(i) for i in range(num_classes)]
        elif len(label_names) != num_classes:
            raise ValueError(
                f"label_names has {len(label_names)} entries {list(label_names)} "
                f"for num_classes={num_classes}"
            )
        super().__init__(
            encoder, preprocessor=preprocessor, label_names=label_names, is_pair=is_pair, **kwargs
        )
        self.num_classes = num_classes
        self.pooling = pooling
        if pooling == "mean":  # the pooler is not on the path to the loss: no gradients, no slots
            encoder.pooler.trainable = False
        self.dropout_rate = float(dropout_rate)
        self.initializer_range = float(initializer_range)
        self.task_name = task_name
        self.dropout = BertDropout(self.dropout_rate, name="dropout")
        self.classifier = keras.layers.Dense(
            self.num_classes,
            kernel_initializer=truncated_normal(self.initializer_range),
            dtype="float32",  # logits and losses in float32 (PITFALLS: numerics)
            name="logits",
        )

    @property
    def task_type(self) -> str:
        """ "regression" when num_classes == 1, else "classification" (the one place it is decided)."""
        return "regression" if self.num_classes == 1 else "classification"

    @property
    def is_regression(self) -> bool:
        return self.num_classes == 1

    def build(self, input_shape=None):
        if not self.encoder.built:
            self.encoder.build(input_shape)
        self.classifier.build((None, self.encoder.bert_config.hidden_size))
        self.built = True

    def call(self, inputs, training=None):
        outputs = self.encoder(inputs, training=training)
        if self.pooling == "cls":
            pooled = outputs["pooled_output"]  # [B, H]
        else:  # masked mean over real tokens; [B, T, H] -> [B, H], in float32
            sequence = tf.cast(outputs["sequence_output"], tf.float32)
            mask = tf.cast(inputs["input_mask"], tf.float32)[:, :, tf.newaxis]  # [B, T, 1]
            pooled = tf.reduce_sum(sequence * mask, 1) / tf.maximum(tf.reduce_sum(mask, 1), 1.0)
        return self.classifier(self.dropout(pooled, training=training))  # [B, C]

    def default_loss(self):
        """Softmax cross-entropy of the logits and the label ids; regression: squared error."""
        if self.is_regression:
            return keras.losses.MeanSquaredError()
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self) -> list:
        return (
            [] if self.is_regression else [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        )

    def predict_texts(self, texts, texts_b=None, batch_size=32):
        """Raw strings -> numpy.

        Returns:
            classification: float32 [B, num_classes] probabilities (softmax of the logits), rows
            in input order; regression: float32 [B] scores. B = 0 gives [0, C] / [0].
        """

        def head(features):
            out = tf.cast(self(features, training=False), tf.float32)
            return tf.reshape(out, [-1]) if self.is_regression else tf.nn.softmax(out, axis=-1)

        parts = self.batched_outputs(texts, texts_b, batch_size, head)
        if not parts:
            return np.zeros((0,) if self.is_regression else (0, self.num_classes), np.float32)
        return np.concatenate(parts, axis=0).astype(np.float32)

    def serving_module(self, preprocessor):
        return ClassifierServingModule(self, preprocessor)

    def export_metadata(self) -> dict:
        return super().export_metadata() | {
            "num_classes": self.num_classes,
            "task_name": self.task_name,
            "pooling": self.pooling,
        }

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_classes": self.num_classes,
                "dropout_rate": self.dropout_rate,
                "initializer_range": self.initializer_range,
                "task_name": self.task_name,
                "pooling": self.pooling,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_bert", name="BertClassifier")
class LegacyBertClassifier(TextClassifier):
    """Reads `.keras` files saved before the Task API (registered as `keras_bert>BertClassifier`);
    `keras_bert.load_task` attaches their preprocessor from the run's config.json."""
