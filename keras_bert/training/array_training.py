"""Train a task on in-memory arrays: shuffled trimmed batches, dev evaluation, best weights.

`fit_with_evaluation` is the loop of the token-classification and multiple-choice recipes
(`ner_training`, `swag_training`): the BERT optimizer, SIGKILL-safe checkpoints, evaluation with
best-checkpoint selection (`EvaluationCallback`), an optional wall-time budget (`TimeBudget`).
"""
from __future__ import annotations

import pathlib
import time

import keras
import numpy as np
import tensorflow as tf

from keras_bert.data.dynamic_padding import length_grouped_order, trim_to_longest
from keras_bert.training import callbacks as callbacks_lib
from keras_bert.training.fit import build_for_training, keep_best_model, resumable_fit
from keras_bert.training.optimizer import create_optimizer


class TimeBudget(keras.callbacks.Callback):
    """Stops training once `seconds` of training wall time have passed (checked per batch)."""

    def __init__(self, seconds: float | None):
        super().__init__()
        self.seconds, self.start = seconds, None

    def on_train_batch_end(self, batch, logs=None):
        if self.seconds is None:
            return
        self.start = self.start or time.monotonic()
        if time.monotonic() - self.start > self.seconds:
            self.model.stop_training = True


def trimmed_batches(features: dict, labels: np.ndarray, batch_size: int, seed: int, epoch: int,
                    skip: int, group_by_length: bool = False) -> tf.data.Dataset:
    """Shuffled (fixed by seed and epoch) batches of (features, labels), each cut to its longest
    row, the last partial batch kept (every row trains every epoch); the first `skip` batches
    dropped (resuming).

    Args:
        features: dict of int32 arrays [N, ..., T] with `input_mask`; labels: [N] (one per
            example) or [N, T] (one per position, cut with the features).
        group_by_length: batches of similar length (`length_grouped_order`; an example's length
            is its longest row, e.g. its longest choice).
    """
    per_position = labels.ndim >= 2
    if group_by_length:
        mask = np.asarray(features["input_mask"])
        lengths = (mask.reshape(len(mask), -1, mask.shape[-1]) > 0).sum(-1).max(-1)
        order = length_grouped_order(lengths, batch_size, [seed, epoch])
    else:
        order = np.random.default_rng([seed, epoch]).permutation(len(labels))
    ds = tf.data.Dataset.from_tensor_slices(
        ({k: v[order] for k, v in features.items()}, labels[order]))
    ds = ds.batch(batch_size).skip(skip)

    def trim(x, y):
        if not per_position:
            return trim_to_longest(x, minimum=2), y
        cut = trim_to_longest({**x, "labels": y}, minimum=2)
        return {k: v for k, v in cut.items() if k != "labels"}, cut["labels"]
    return ds.map(trim).prefetch(2)


def fit_with_evaluation(task, config, features, labels, evaluate, monitor: str,
                        out: pathlib.Path, loss, strategy) -> dict:
    """Compiles `task` with the BERT optimizer and trains it on numpy (features, labels),
    evaluating `evaluate(task) -> {metric: float}` per epoch (or `evaluations_per_epoch` times);
    loads the best weights at the end.

    Returns:
        {"steps", "num_train_steps", "epochs" (each evaluation), "best", "resumed_from_step"}.

    Raises:
        ValueError: no training rows.
    """
    if len(labels) < 1:
        raise ValueError("no training rows")
    steps_per_epoch = -(-len(labels) // config.train_batch_size)  # the last, partial batch kept
    epochs = max(1, int(np.ceil(config.num_train_epochs)))
    total = int(round(steps_per_epoch * config.num_train_epochs))
    with strategy.scope():
        task.compile(optimizer=create_optimizer(
            config.learning_rate, max(1, total), int(total * config.warmup_proportion),
            weight_decay=config.weight_decay, global_clipnorm=config.max_grad_norm or None,
            loss_scale=config.mixed_precision == "mixed_float16"), loss=loss)
    n = config.train_batch_size
    build_for_training(task, strategy, ({k: v[:n] for k, v in features.items()}, labels[:n]))
    checkpoint, cbs = callbacks_lib.standard_callbacks(out, save_freq=config.save_checkpoints_steps)
    evaluator = callbacks_lib.EvaluationCallback(
        evaluate, monitor, out / "best.weights.h5", out / "metrics_state.json",
        config.early_stopping_patience, evaluations_per_epoch=config.evaluations_per_epoch,
        step_fn=lambda: checkpoint.step, steps_per_epoch=steps_per_epoch)

    def make_train(epoch, skip):
        left = total - epoch * steps_per_epoch - skip
        return trimmed_batches(features, labels, n, config.seed, epoch, skip,
                               getattr(config, "group_by_length", False)).take(
            min(steps_per_epoch - skip, left))

    steps = resumable_fit(task, make_train, steps_per_epoch, epochs, checkpoint,
                          [checkpoint, evaluator, TimeBudget(config.max_train_seconds)] + cbs[1:],
                          verbose=config.verbose, total_steps=total)
    if not evaluator.state["epochs"]:  # stopped by the time budget before any evaluation
        evaluator.on_epoch_end(0, {})
    keep_best_model(task, checkpoint, out)
    return {"steps": steps, "num_train_steps": total, "epochs": evaluator.state["epochs"],
            "best": evaluator.state["best"], "resumed_from_step": checkpoint.restored_step}
