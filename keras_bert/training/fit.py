"""`resumable_fit`: Keras `fit`, one call per epoch, restarting exactly where a killed run stopped."""

from __future__ import annotations

import os
from typing import Callable

import tensorflow as tf

from keras_bert import fileio
from keras_bert.checkpoints.keras_format import load_keras_weights, save_keras_file
from keras_bert.training.callbacks import ProgressLogger, ResumableCheckpoint
from keras_bert.training.evaluation_callback import EvaluationCallback
from keras_bert.training.preemption import PreemptionWatcher, check_same_step, watch_preemption


def resumable_fit(
    model,
    make_train_dataset: Callable[[int, int], tf.data.Dataset],
    steps_per_epoch: int,
    epochs: int,
    checkpoint: ResumableCheckpoint,
    callbacks=(),
    verbose="auto",
    total_steps: int | None = None,
    accumulation: int = 1,
) -> int:
    """Train `epochs` epochs of `steps_per_epoch` batches, resuming from `checkpoint`.

    Every count here is in batches (the data position a resume skips to); the optimizer steps
    they make are the caller's (`batches.Schedule`).

    Args:
        model: a built, compiled Keras model.
        make_train_dataset: callable(epoch, skip_batches) -> finite dataset of exactly
            `steps_per_epoch - skip_batches` batches: epoch `epoch` (0-based, its order fixed by the
            seed and the epoch) with its first `skip_batches` batches dropped.
        steps_per_epoch: batches per epoch (global batches).
        checkpoint: the ResumableCheckpoint (also in `callbacks` or not; it is added if missing).
            An evaluation due at the restored step and never recorded (a kill between the
            checkpoint and the evaluation) is taken first (`EvaluationCallback.evaluate_if_due`).
            A run it records as complete (`ResumableCheckpoint.finalize`) trains nothing.
        callbacks: other callbacks; an EvaluationCallback in it may stop the run early.
        total_steps: stop after this many batches (a fractional last epoch); default
            epochs * steps_per_epoch. make_train_dataset must then yield the shorter last epoch.
        verbose: 0 silent, 1 (or "auto") a bar per epoch on a terminal and one line every 30 s
            elsewhere, 2 one line per epoch (`ProgressLogger`).
        accumulation: batches per optimizer update: the progress lines count steps in updates.

    Returns:
        int, the global number of batches trained at the end (epochs * steps_per_epoch unless
        stopped early), the same whether or not the run was interrupted and restarted.
    """
    callbacks = list(callbacks)
    if checkpoint not in callbacks:
        callbacks.insert(0, checkpoint)
    # SIGTERM: save this step and stop, before any evaluation of it (keras_bert.training.preemption)
    watcher = PreemptionWatcher(checkpoint, getattr(model, "distribute_strategy", None))
    callbacks.insert(callbacks.index(checkpoint) + 1, watcher)
    step = checkpoint.restore(model)
    check_same_step(getattr(model, "distribute_strategy", None), step, str(checkpoint.directory))
    if checkpoint.complete:  # a finished run (its weights kept elsewhere): nothing to train,
        return step  # though it stopped before total_steps (early stopping, a time limit)
    evaluators = [c for c in callbacks if isinstance(c, EvaluationCallback)]
    total_steps = (
        epochs * steps_per_epoch
        if total_steps is None
        else min(total_steps, epochs * steps_per_epoch)
    )
    for evaluator in evaluators:  # an evaluation due at the restored step and never recorded
        evaluator.evaluate_if_due(model, step, total_steps)
    if any(e.should_stop for e in evaluators):
        return step
    level = 1 if verbose == "auto" else int(verbose)
    if level:  # epochs and steps as a user reads them (not Keras's per-fit-call bar)
        progress = ProgressLogger(
            epochs, steps_per_epoch, total_steps, verbose=level, accumulation=accumulation
        )
        progress.step = step
        callbacks.append(progress)
    start_epoch, done = divmod(step, steps_per_epoch)
    with watch_preemption():
        for epoch in range(start_epoch, epochs):
            skip = done if epoch == start_epoch else 0
            steps = min(steps_per_epoch, total_steps - epoch * steps_per_epoch) - skip
            if steps <= 0:
                break
            dataset = make_train_dataset(epoch, skip)
            model.fit(
                dataset,
                initial_epoch=epoch,
                epochs=epoch + 1,
                steps_per_epoch=steps,
                callbacks=callbacks,
                verbose=0,
                shuffle=False,
            )
            if model.stop_training or any(e.should_stop for e in evaluators):
                break
    return checkpoint.step


def build_for_training(model, strategy, batch) -> None:
    """Build a compiled model's layers, loss, metrics and optimizer from one (features, labels) batch.

    Call under nothing (it enters `strategy.scope()` itself), before `fit`. Under
    MultiWorkerMirroredStrategy, Keras 3 (checked on 3.15) `fit` first reduces a dict-valued
    distributed batch with `strategy.reduce`, which the collective strategy cannot do ("Attempt to
    convert a value ({'input_word_ids': PerReplica ...}) ... to a Tensor"); that step only exists to
    build the model symbolically, so once everything is built here it is skipped for this model.
    """
    with strategy.scope():
        model._symbolic_build(data_batch=batch)
        if model.optimizer is not None and not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        model._maybe_symbolic_build = lambda iterator=None, data_batch=None: None


def keep_best_model(task, checkpoint: ResumableCheckpoint, run_dir, is_chief: bool = True) -> None:
    """Load the run's best weights into `task`, keep them once as `best_model.keras`, and free
    what only a resume needed (the step checkpoints and `best.weights.h5`).

    Call after `resumable_fit` returns. A run finished earlier (`checkpoint.complete`: its step
    checkpoints already deleted) takes its weights back from `best_model.keras`. Order, for a
    kill at any moment: best_model.keras is written while best.weights.h5 and the checkpoints
    still exist; then `checkpoint.finalize()` records completion; only then are they deleted.
    """
    run_dir = os.fspath(run_dir)
    best_weights = fileio.join(run_dir, "best.weights.h5")
    best_model = fileio.join(run_dir, "best_model.keras")
    if checkpoint.complete:
        load_keras_weights(task, best_model)
    else:
        if fileio.exists(best_weights):
            task.load_weights(best_weights)
        if is_chief:
            save_keras_file(task, best_model)  # whole-or-nothing, on any URI
    if is_chief:
        checkpoint.finalize()
        fileio.remove(best_weights)
