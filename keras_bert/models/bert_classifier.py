"""BertClassifier: dropout + dense on the pooled [CLS] output (BERT §4.1, Figure 4a/b).

Follows google-research/bert `run_classifier.py::create_model` (dropout 0.1 on `pooled_output`,
one dense layer with truncated-normal(0.02) weights) and Model Garden's `BertClassifier`.
"""
from __future__ import annotations

import keras
import tensorflow as tf

from keras_bert.layers.dropout import BertDropout

POOLINGS = ("cls", "mean")


@keras.saving.register_keras_serializable(package="keras_bert")
class BertClassifier(keras.Model):
    """Sentence (pair) classification or regression head on a BertEncoder.

    Args:
        encoder: a `BertEncoder` (or any Keras model with the same dict-in/dict-out contract).
        num_classes: int >= 1. Number of labels; 1 means regression (STS-B), trained with mean
            squared error on the single output.
        dropout_rate: float in [0, 1). Probability of dropping a unit of `pooled_output`.
        initializer_range: float. Stddev of the truncated-normal output kernel initializer.
        label_names: optional list of str, the label of each class id (stored with the model so
            export and serving can map ids to labels). Length must equal num_classes.
        task_name: optional str, e.g. "sst2" or "text_classification" (stored, for metrics).
        pooling: "cls" (default: `pooled_output`, tanh(Dense(h_[CLS])), BERT §4.1) or "mean"
            (the mean of `sequence_output` over real tokens, input_mask = 1: the pooling that
            sentence-transformers checkpoints such as all-MiniLM-L6-v2 were trained with).

    Call args:
        inputs: dict of `input_word_ids`, `input_mask`, `input_type_ids`, int32 [B, T].
        training: bool; dropout acts only when True.

    Returns:
        float32 Tensor [B, num_classes]: logits (classification) or the predicted score
        (regression, [B, 1]); float32 even under a mixed-precision policy.

    Raises:
        ValueError: num_classes < 1, dropout_rate outside [0, 1), or label_names of the wrong
            length.
    """

    def __init__(self, encoder, num_classes, dropout_rate=0.1, initializer_range=0.02,
                 label_names=None, task_name=None, pooling="cls", **kwargs):
        super().__init__(**kwargs)
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.pooling = pooling
        if int(num_classes) < 1:
            raise ValueError(f"num_classes must be >= 1 (1 = regression), got {num_classes}")
        if not 0.0 <= dropout_rate < 1.0:
            raise ValueError(f"dropout_rate must be in [0, 1), got {dropout_rate}")
        if label_names is not None:
            label_names = [str(x) for x in label_names]
            if len(label_names) != int(num_classes) and not (int(num_classes) == 1 and not label_names):
                raise ValueError(f"label_names has {len(label_names)} entries for num_classes={num_classes}")
        self.encoder = encoder
        self.num_classes = int(num_classes)
        self.dropout_rate = float(dropout_rate)
        self.initializer_range = float(initializer_range)
        self.label_names = label_names
        self.task_name = task_name
        self.dropout = BertDropout(self.dropout_rate, name="dropout")
        self.classifier = keras.layers.Dense(
            self.num_classes,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range),
            dtype="float32",  # logits and losses in float32 (PITFALLS: numerics)
            name="logits")

    @property
    def is_regression(self) -> bool:
        return self.num_classes == 1

    def build(self, input_shape=None):
        if not self.encoder.built:
            self.encoder.build(input_shape)
        hidden = self.encoder.bert_config.hidden_size if hasattr(self.encoder, "bert_config") else None
        if hidden is None:
            raise ValueError("cannot infer hidden_size from the encoder; call the model on data first")
        self.classifier.build((None, hidden))
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

    def get_config(self):
        config = super().get_config()
        config.update({
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "num_classes": self.num_classes,
            "dropout_rate": self.dropout_rate,
            "initializer_range": self.initializer_range,
            "label_names": self.label_names,
            "task_name": self.task_name,
            "pooling": self.pooling,
        })
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)
