"""Knowledge distillation of a fine-tuned `TextClassifier` into a smaller student (SPEC section 9).

Loss (Hinton, Vinyals & Dean 2015, "Distilling the Knowledge in a Neural Network", section 2;
DistilBERT, Sanh et al. 2019, section 2 "triple loss" without its MLM and cosine terms, as for
fine-tuning-time distillation):

    L = alpha * T^2 * KL(softmax(z_t / T) || softmax(z_s / T)) + (1 - alpha) * CE(y, softmax(z_s))

with teacher logits z_t, student logits z_s, temperature T and gold labels y. The T^2 factor keeps
the soft term's gradient scale independent of T (Hinton et al. section 2.1). The teacher is fixed
and runs in inference mode, so its logits are computed once per training example before training
(`teacher_logits`) and travel with the labels: the Keras loss receives y_true = [y, z_t] float32
[B, 1 + C].

Student initialisation (DistilBERT section 3, "taking one layer out of two"): the student encoder
has the teacher's config with fewer layers and copies the teacher's embeddings, pooler, classifier
head and transformer layers `layer_map` (default: every `L_t // L_s`-th layer, 0, 2, 4, ... for half
the layers); or it starts from a pretrained preset (`keras_bert.from_pretrained`) with a fresh head.
"""

from __future__ import annotations

import dataclasses

import keras
import numpy as np
import tensorflow as tf

from keras_bert.checkpoints.loader import load_encoder, resolve_do_lower_case, resolve_vocab_file
from keras_bert.data.dynamic_padding import trim_to_longest
from keras_bert.models.bert_encoder import BertEncoder
from keras_bert.tasks.text_classifier import TextClassifier
from keras_bert.tokenization.bert_preprocessor import BertPreprocessor


def layer_map_for(teacher_layers: int, student_layers: int) -> list[int]:
    """Teacher layer index for each student layer: every (L_t // L_s)-th, from layer 0.

    Raises:
        ValueError: student_layers < 1 or more than the teacher has.
    """
    if not 1 <= student_layers <= teacher_layers:
        raise ValueError(
            f"student layers must be in [1, {teacher_layers}] (the teacher's), got {student_layers}"
        )
    stride = teacher_layers // student_layers
    return [i * stride for i in range(student_layers)]


def student_from_teacher(
    teacher: TextClassifier,
    num_layers: int | None = None,
    layer_map: list[int] | None = None,
    dropout_rate: float | None = None,
) -> TextClassifier:
    """A `TextClassifier` with the teacher's config, fewer layers and copied weights.

    Args:
        teacher: a built `TextClassifier` (classification).
        num_layers: student layers (default: half the teacher's, rounded up).
        layer_map: teacher layer index per student layer (default `layer_map_for`).
        dropout_rate: dropout before the student's head (default: the teacher's).

    Returns:
        The student, with the teacher's preprocessor, label names, pooling and pair flag.

    Raises:
        ValueError: a layer_map of the wrong length or with indices outside the teacher.
    """
    teacher_layers = teacher.encoder.bert_config.num_layers
    if layer_map is None:
        layer_map = layer_map_for(teacher_layers, num_layers or (teacher_layers + 1) // 2)
    layer_map = [int(i) for i in layer_map]
    if not layer_map or any(not 0 <= i < teacher_layers for i in layer_map):
        raise ValueError(
            f"layer_map {layer_map} must name layers of the teacher (0..{teacher_layers - 1})"
        )
    config = dataclasses.replace(teacher.encoder.bert_config, num_layers=len(layer_map))
    student = TextClassifier(
        BertEncoder.from_config_object(config),
        teacher.num_classes,
        dropout_rate=teacher.dropout_rate if dropout_rate is None else dropout_rate,
        label_names=teacher.label_names,
        task_name=teacher.task_name,
        pooling=teacher.pooling,
        preprocessor=teacher.preprocessor,
        is_pair=teacher.is_pair,
    )
    student.build()
    student.encoder.embeddings.set_weights(teacher.encoder.embeddings.get_weights())
    for s, t in zip(student.encoder.transformer_layers, layer_map):
        s.set_weights(teacher.encoder.transformer_layers[t].get_weights())
    student.encoder.pooler.set_weights(teacher.encoder.pooler.get_weights())
    student.classifier.set_weights(teacher.classifier.get_weights())
    return student


def student_from_preset(
    teacher: TextClassifier, preset: str, dropout_rate: float | None = None
) -> TextClassifier:
    """A `TextClassifier` on a pretrained encoder with a fresh head and the preset's vocabulary."""
    encoder = load_encoder(preset)
    preprocessor = BertPreprocessor(
        resolve_vocab_file(preset),
        do_lower_case=resolve_do_lower_case(preset, True),
        max_seq_length=teacher.preprocessor.max_seq_length,
    )
    rate = teacher.dropout_rate if dropout_rate is None else dropout_rate
    student = TextClassifier(
        encoder,
        teacher.num_classes,
        dropout_rate=rate,
        label_names=teacher.label_names,
        task_name=teacher.task_name,
        pooling=teacher.pooling,
        preprocessor=preprocessor,
        is_pair=teacher.is_pair,
    )
    student.build()
    return student


@keras.saving.register_keras_serializable(package="keras_bert")
class DistillationLoss(keras.losses.Loss):
    """The loss of the module docstring.

    Call args:
        y_true: float32 [B, 1 + C]: gold label id in column 0, teacher logits after it.
        y_pred: float32 [B, C] student logits.

    Returns:
        float32 [B] per-example loss (Keras averages it).

    Raises:
        ValueError: temperature <= 0 or alpha outside [0, 1].
    """

    def __init__(self, temperature: float = 2.0, alpha: float = 0.5, name="distillation", **kwargs):
        super().__init__(name=name, **kwargs)
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        self.temperature, self.alpha = float(temperature), float(alpha)

    def call(self, y_true, y_pred):
        labels = tf.cast(y_true[:, 0], tf.int32)  # [B]
        teacher = tf.cast(y_true[:, 1:], tf.float32)  # [B, C]
        student = tf.cast(y_pred, tf.float32)
        t = self.temperature
        soft_teacher = tf.nn.softmax(teacher / t, axis=-1)
        kl = tf.reduce_sum(
            soft_teacher
            * (tf.nn.log_softmax(teacher / t, axis=-1) - tf.nn.log_softmax(student / t, axis=-1)),
            axis=-1,
        )
        hard = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, student)
        return self.alpha * t * t * kl + (1.0 - self.alpha) * hard

    def get_config(self):
        return super().get_config() | {"temperature": self.temperature, "alpha": self.alpha}


def agreement(student_logits, teacher_logits) -> float:
    """Fraction of examples where the student's argmax equals the teacher's."""
    return float(np.mean(np.argmax(student_logits, -1) == np.argmax(teacher_logits, -1)))


def _encode_chunks(task, examples, batch_size: int):
    """Yields the task's int32 model inputs [b, max_seq_length] for consecutive chunks."""
    for start in range(0, len(examples), batch_size):
        chunk = examples[start : start + batch_size]
        yield task.encode_texts(
            [e.text_a for e in chunk], [e.text_b for e in chunk] if task.is_pair else None
        )


def logit_fn(task):
    """tf.function: int32 model inputs [B, T] -> float32 logits [B, C] (inference mode, the batch
    cut to its longest row). Made once per task, so per-epoch evaluations do not retrace."""
    return tf.function(
        lambda features: tf.cast(
            task(trim_to_longest(features, minimum=2, model_inputs=True), training=False),
            tf.float32,
        ),
        reduce_retracing=True,
    )


def logits_of(task, examples, batch_size: int, step=None) -> np.ndarray:
    """The task's logits, float32 [N, C], on the examples' raw texts."""
    step = step or logit_fn(task)
    return np.concatenate([step(f).numpy() for f in _encode_chunks(task, examples, batch_size)])


def encoded(task, examples, batch_size: int) -> dict:
    """int32 [N, max_seq_length] model inputs of the task's own preprocessor."""
    parts = list(_encode_chunks(task, examples, batch_size))
    return {k: np.concatenate([p[k].numpy() for p in parts]) for k in parts[0]}
