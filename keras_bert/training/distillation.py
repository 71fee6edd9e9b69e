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
import logging
import pathlib

import keras
import numpy as np
import tensorflow as tf

from keras_bert.checkpoints.loader import load_encoder, resolve_do_lower_case, resolve_vocab_file
from keras_bert.data import glue, text_files
from keras_bert.data.labels import label_ids
from keras_bert.evaluation import metrics as metrics_lib
from keras_bert.models.bert_encoder import BertEncoder
from keras_bert.tasks.loading import load_task
from keras_bert.tasks.task import trim_to_longest
from keras_bert.tasks.text_classifier import TextClassifier
from keras_bert.tokenization.bert_preprocessor import BertPreprocessor
from keras_bert.training.callbacks import write_json_atomic
from keras_bert.training.optimizer import create_optimizer
from keras_bert.training.resume_check import check_resume_settings

logger = logging.getLogger(__name__)


def layer_map_for(teacher_layers: int, student_layers: int) -> list[int]:
    """Teacher layer index for each student layer: every (L_t // L_s)-th, from layer 0.

    Raises:
        ValueError: student_layers < 1 or more than the teacher has.
    """
    if not 1 <= student_layers <= teacher_layers:
        raise ValueError(f"student layers must be in [1, {teacher_layers}] (the teacher's), "
                         f"got {student_layers}")
    stride = teacher_layers // student_layers
    return [i * stride for i in range(student_layers)]


def student_from_teacher(teacher: TextClassifier, num_layers: int | None = None,
                         layer_map: list[int] | None = None) -> TextClassifier:
    """A `TextClassifier` with the teacher's config, fewer layers and copied weights.

    Args:
        teacher: a built `TextClassifier` (classification).
        num_layers: student layers (default: half the teacher's, rounded up).
        layer_map: teacher layer index per student layer (default `layer_map_for`).

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
        raise ValueError(f"layer_map {layer_map} must name layers of the teacher "
                         f"(0..{teacher_layers - 1})")
    config = dataclasses.replace(teacher.encoder.bert_config, num_layers=len(layer_map))
    student = TextClassifier(BertEncoder.from_config_object(config), teacher.num_classes,
                             dropout_rate=teacher.dropout_rate, label_names=teacher.label_names,
                             task_name=teacher.task_name, pooling=teacher.pooling,
                             preprocessor=teacher.preprocessor, is_pair=teacher.is_pair)
    student.build()
    student.encoder.embeddings.set_weights(teacher.encoder.embeddings.get_weights())
    for s, t in zip(student.encoder.transformer_layers, layer_map):
        s.set_weights(teacher.encoder.transformer_layers[t].get_weights())
    student.encoder.pooler.set_weights(teacher.encoder.pooler.get_weights())
    student.classifier.set_weights(teacher.classifier.get_weights())
    return student


def student_from_preset(teacher: TextClassifier, preset: str) -> TextClassifier:
    """A `TextClassifier` on a pretrained encoder with a fresh head and the preset's vocabulary."""
    encoder = load_encoder(preset)
    preprocessor = BertPreprocessor(resolve_vocab_file(preset),
                                    do_lower_case=resolve_do_lower_case(preset, True),
                                    max_seq_length=teacher.preprocessor.max_seq_length)
    student = TextClassifier(encoder, teacher.num_classes, dropout_rate=teacher.dropout_rate,
                             label_names=teacher.label_names, task_name=teacher.task_name,
                             pooling=teacher.pooling, preprocessor=preprocessor,
                             is_pair=teacher.is_pair)
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
        kl = tf.reduce_sum(soft_teacher * (tf.nn.log_softmax(teacher / t, axis=-1)
                                           - tf.nn.log_softmax(student / t, axis=-1)), axis=-1)
        hard = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, student)
        return self.alpha * t * t * kl + (1.0 - self.alpha) * hard

    def get_config(self):
        return super().get_config() | {"temperature": self.temperature, "alpha": self.alpha}


def agreement(student_logits, teacher_logits) -> float:
    """Fraction of examples where the student's argmax equals the teacher's."""
    return float(np.mean(np.argmax(student_logits, -1) == np.argmax(teacher_logits, -1)))


@dataclasses.dataclass(frozen=True)
class DistillationConfig:
    """Settings of `distill` (the flags of recipes/distill.py).

    Data: a GLUE `task_name` (with `data_dir`), or `train_file` + `dev_file` (CSV / TSV / JSONL
    with `text_column`, `text_b_column`, `label_column`); labels are the teacher's label names or
    ids. Student: `student_layers` / `layer_map` from the teacher, or `student_preset`.
    Steps are optimizer steps over `num_train_epochs` passes of `train_batch_size` examples.
    """
    teacher: str
    output_dir: str
    task_name: str | None = None
    data_dir: str | None = None
    train_file: str | None = None
    dev_file: str | None = None
    text_column: str = "text"
    text_b_column: str | None = None
    label_column: str = "label"
    student_layers: int | None = None
    layer_map: tuple | None = None
    student_preset: str | None = None
    temperature: float = 2.0
    alpha: float = 0.5
    learning_rate: float = 5e-5
    num_train_epochs: int = 3
    train_batch_size: int = 32
    eval_batch_size: int = 64
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    max_train_examples: int | None = None
    max_eval_examples: int | None = None
    seed: int = 42

    def __post_init__(self):
        if not self.teacher:
            raise ValueError("teacher is required (a fine-tuning output_dir or .keras file)")
        if not self.task_name and not (self.train_file and self.dev_file):
            raise ValueError("give task_name (GLUE) or both train_file and dev_file")
        if self.student_preset and (self.student_layers or self.layer_map):
            raise ValueError("student_preset excludes student_layers / layer_map")
        DistillationLoss(self.temperature, self.alpha)  # validates both
        for name in ("num_train_epochs", "train_batch_size", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.warmup_proportion < 1.0:
            raise ValueError(f"warmup_proportion must be in [0, 1), got {self.warmup_proportion}")


def load_examples(config: DistillationConfig) -> tuple[list, list]:
    """(train, dev) InputExamples, cut to max_train_examples / max_eval_examples."""
    if config.task_name:
        task = glue.get_task(config.task_name)
        train = glue.read_glue(task.name, "train", config.data_dir)
        dev = glue.read_glue(task.name, task.dev_splits[0], config.data_dir)
    else:
        kw = dict(text_column=config.text_column, text_b_column=config.text_b_column,
                  label_column=config.label_column)
        train = text_files.read_text_file(config.train_file, **kw)
        dev = text_files.read_text_file(config.dev_file, **kw)
    return train[: config.max_train_examples], dev[: config.max_eval_examples]


def labelled_examples(config: DistillationConfig, label_names) -> tuple[list, list, np.ndarray,
                                                                         np.ndarray]:
    """(train, dev, train gold ids int64 [N], dev gold ids) through the teacher's label names.

    Raises:
        LabelError (a ValueError): labels that break `keras_bert.data.labels`' rule, naming the
            file (own data) or the GLUE split and the data row.
    """
    train, dev = load_examples(config)
    sources = ((config.train_file, config.dev_file) if not config.task_name else
               (f"{config.task_name} train", f"{config.task_name} dev"))
    return (train, dev, label_ids([e.label for e in train], label_names, str(sources[0])),
            label_ids([e.label for e in dev], label_names, str(sources[1])))


def _encode_chunks(task, examples, batch_size: int):
    """Yields the task's int32 model inputs [b, max_seq_length] for consecutive chunks."""
    for start in range(0, len(examples), batch_size):
        chunk = examples[start:start + batch_size]
        yield task.encode_texts([e.text_a for e in chunk],
                                [e.text_b for e in chunk] if task.is_pair else None)


def logit_fn(task):
    """tf.function: int32 model inputs [B, T] -> float32 logits [B, C] (inference mode, the batch
    cut to its longest row). Made once per task, so per-epoch evaluations do not retrace."""
    return tf.function(lambda features: tf.cast(task(trim_to_longest(features), training=False),
                                                 tf.float32), reduce_retracing=True)


def logits_of(task, examples, batch_size: int, step=None) -> np.ndarray:
    """The task's logits, float32 [N, C], on the examples' raw texts."""
    step = step or logit_fn(task)
    return np.concatenate([step(f).numpy() for f in _encode_chunks(task, examples, batch_size)])


def _encoded(task, examples, batch_size: int) -> dict:
    """int32 [N, max_seq_length] model inputs of the task's own preprocessor."""
    parts = list(_encode_chunks(task, examples, batch_size))
    return {k: np.concatenate([p[k].numpy() for p in parts]) for k in parts[0]}


def _check_teacher(teacher) -> None:
    if not isinstance(teacher, TextClassifier) or teacher.is_regression:
        raise ValueError(f"the teacher must be a classification TextClassifier, got "
                         f"{type(teacher).__name__} ({getattr(teacher, 'task_type', '?')})")


def build_student(teacher, config: DistillationConfig) -> TextClassifier:
    if config.student_preset:
        return student_from_preset(teacher, config.student_preset)
    return student_from_teacher(teacher, config.student_layers, config.layer_map)


AGREEMENT_EXAMPLES = 2000  # training examples whose teacher agreement is tracked per epoch


def scores(step, student, dev, dev_gold, teacher_dev, train, teacher_train, batch_size) -> dict:
    """Student accuracy on dev gold labels, its agreement with the teacher's dev predictions, and
    its agreement on the first AGREEMENT_EXAMPLES training examples (what the soft loss fits)."""
    logits = logits_of(student, dev, batch_size, step)
    n = min(len(train), AGREEMENT_EXAMPLES)
    return {"dev_accuracy": metrics_lib.accuracy(dev_gold, logits.argmax(-1)),
            "dev_agreement": agreement(logits, teacher_dev),
            "train_agreement": agreement(logits_of(student, train[:n], batch_size, step),
                                         teacher_train[:n])}


def distill(config: DistillationConfig) -> dict:
    """Train a student from the teacher; write config.json, metrics.json, best_model.keras.

    Returns:
        metrics.json's dict ("teacher" and "student" dev accuracy, "history": per epoch (0 =
        before training) dev_accuracy, dev_agreement, train_agreement, loss; "best_epoch") plus
        "student_model": the `TextClassifier` of the best dev accuracy (ready for `export`).

    A rerun into an output_dir holding a run with other settings (any but output_dir's spelling)
    is refused before anything is written (`resume_check.check_resume_settings`); with the same
    settings it trains again from the start and replaces the files (there is no resume).

    Raises:
        ValueError: bad settings, a teacher that is not a classifier, labels it does not know, or
            an output_dir holding a run with other settings.
    """
    out = pathlib.Path(config.output_dir)
    check_resume_settings(out, dataclasses.asdict(config), ignored={"output_dir"})
    keras.utils.set_random_seed(config.seed)
    out.mkdir(parents=True, exist_ok=True)
    teacher = load_task(config.teacher)
    _check_teacher(teacher)
    train, dev, gold, dev_gold = labelled_examples(config, teacher.label_names)
    bs = config.eval_batch_size
    teacher_step = logit_fn(teacher)
    teacher_train = logits_of(teacher, train, bs, teacher_step)
    teacher_dev = logits_of(teacher, dev, bs, teacher_step)
    student = build_student(teacher, config)
    targets = np.concatenate([gold[:, None].astype(np.float32), teacher_train], axis=1)
    dataset = tf.data.Dataset.from_tensor_slices((_encoded(student, train, bs), targets)).shuffle(
        len(train), seed=config.seed, reshuffle_each_iteration=True).batch(
        config.train_batch_size).prefetch(tf.data.AUTOTUNE)
    steps = int(np.ceil(len(train) / config.train_batch_size)) * config.num_train_epochs
    student.compile(optimizer=create_optimizer(config.learning_rate, steps,
                                               int(config.warmup_proportion * steps),
                                               weight_decay=config.weight_decay),
                    loss=DistillationLoss(config.temperature, config.alpha))
    step = logit_fn(student)
    def measure():
        return scores(step, student, dev, dev_gold, teacher_dev, train, teacher_train, bs)

    history = [measure() | {"epoch": 0, "loss": None}]
    best_weights = student.get_weights()
    for epoch in range(1, config.num_train_epochs + 1):
        fit = student.fit(dataset, epochs=epoch, initial_epoch=epoch - 1, shuffle=False, verbose=0)
        history.append(measure() | {"epoch": epoch, "loss": float(fit.history["loss"][-1])})
        logger.info("distillation epoch %d: %s", epoch, history[-1])
        if history[-1]["dev_accuracy"] >= max(h["dev_accuracy"] for h in history[:-1]):
            best_weights = student.get_weights()
    best = max(history, key=lambda h: (h["dev_accuracy"], h["epoch"]))
    student.set_weights(best_weights)
    student.save(out / "best_model.keras")
    summary = {"teacher": {"path": str(config.teacher), "layers": teacher.encoder.bert_config.num_layers,
                           "dev_accuracy": metrics_lib.accuracy(dev_gold, teacher_dev.argmax(-1)),
                           "parameters": int(teacher.count_params())},
               "student": {"layers": student.encoder.bert_config.num_layers,
                           "parameters": int(student.count_params()), **best},
               "history": history, "best_epoch": best["epoch"],
               "train_examples": len(train), "dev_examples": len(dev)}
    write_json_atomic(out / "config.json", dataclasses.asdict(config))
    write_json_atomic(out / "metrics.json", summary)
    return summary | {"student_model": student}
