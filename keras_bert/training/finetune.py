"""Fine-tuning for GLUE and your own (pair) classification / regression data (BERT §4.1).

`run_finetuning(FinetuneConfig(...))` is the whole run behind `recipes/run_classifier.py`:
read data (`classification_data`) -> build the `TextClassifier` task with its preprocessor
(`model_setup`) under a distribution strategy -> train with the BERT optimizer, SIGKILL-safe
checkpoints, TensorBoard, dev evaluation, best checkpoint by the task metric, optional early
stopping -> repeat for `num_restarts` seeds (fine-tuning instability, BERT §5.1) -> metrics.json.

Files in `output_dir` (one run) or `output_dir/run_<i>` (restarts): `checkpoints/`, `logs/`
(TensorBoard), `best_model.keras` (the task: `keras_bert.load_task`), `metrics_state.json`; and in
`output_dir`: `config.json`, `metrics.json`, `best_model.keras` (the best run's task). While a run
trains, `checkpoints/` holds its step checkpoints and `best.weights.h5` the best weights so far;
once it is over, both are deleted (`fit.keep_best_model`) and `checkpoints/checkpoint.json` says
the run is complete, so a rerun with the same flags trains nothing.
"""
from __future__ import annotations

import dataclasses
import logging
import pathlib
import shutil
import statistics

import keras
import numpy as np
import tensorflow as tf

from keras_bert.data import classification_pipeline
from keras_bert.evaluation import metrics as metrics_lib
from keras_bert.tokenization.bert_preprocessor import BertPreprocessor
from keras_bert.training import callbacks as callbacks_lib
from keras_bert.faults import crash_point
from keras_bert.training.classification_data import (TaskData, dev_prefix, encode_splits,
                                                     load_task_data, monitor_name)
from keras_bert.training.finetune_config import FinetuneConfig, check_resume_settings
from keras_bert.training.fit import build_for_training, keep_best_model, resumable_fit
from keras_bert.training.model_setup import build_text_classifier, compile_task, resolve_vocab
from keras_bert.training.optimizer import set_mixed_precision
from keras_bert.training.selection import best_index, is_finite
from keras_bert.training.strategy import get_strategy

logger = logging.getLogger(__name__)


def is_chief(strategy) -> tuple[bool, int]:
    """(whether this process writes the run's files, its worker index)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(resolver, "task_type", None):
        return True, 0
    task_type, task_id = resolver.task_type, int(resolver.task_id or 0)
    chief = task_type == "chief" or (task_type == "worker" and task_id == 0
                                     and "chief" not in resolver.cluster_spec().as_dict())
    return chief, task_id


def inference_step(model):
    """tf.function: features -> model(features, training=False), traced for relaxed shapes.

    Dev batches are cut to their longest row (dynamic padding), so their widths vary; without
    `reduce_retracing` every new width would trace the model again (seconds each).
    """
    return tf.function(lambda features: model(features, training=False), reduce_retracing=True)


def predict(model, dataset, step=None) -> np.ndarray:
    """Model outputs (float32 [N, C]) on a dataset of features or (features, labels).

    `step`: a cached `inference_step(model)` (avoids retracing).
    """
    step = step or inference_step(model)
    outs = []
    for batch in dataset:
        features = batch[0] if isinstance(batch, tuple) else batch
        outs.append(step(features).numpy())
    return np.concatenate(outs, axis=0)


@dataclasses.dataclass
class Schedule:
    """Batches and optimizer steps of one run (sizes in global batches)."""

    steps_per_epoch: int  # ceil(examples / batch): the last, partial batch is kept
    epochs: int           # fit calls (the last may be partial)
    total_batches: int
    num_train_steps: int  # optimizer updates (batches / gradient accumulation)
    num_train_epochs: float  # as run: --num_train_epochs, raised to reach --min_train_steps

    @classmethod
    def of(cls, config: FinetuneConfig, num_examples: int) -> "Schedule":
        """Raises ValueError when there is no training example."""
        if num_examples < 1:
            raise ValueError("no training examples")
        steps_per_epoch = -(-num_examples // config.train_batch_size)
        epochs = float(config.num_train_epochs)
        accumulation = config.gradient_accumulation_steps
        if round(steps_per_epoch * epochs) // accumulation < config.min_train_steps:
            wanted = -(-config.min_train_steps * accumulation // steps_per_epoch)
            logger.info("%d examples give %d optimizer steps in %g epochs: training %d epochs to "
                        "reach --min_train_steps=%d", num_examples,
                        round(steps_per_epoch * epochs) // accumulation, epochs, wanted,
                        config.min_train_steps)
            epochs = float(wanted)
        total = int(round(steps_per_epoch * epochs))
        return cls(steps_per_epoch, max(1, int(np.ceil(epochs))), total,
                   max(1, total // accumulation), epochs)


def make_evaluator(data: TaskData, encoded: dict, config: FinetuneConfig):
    """callable(model) -> dev metrics {name: float} over every dev split (MNLI: both)."""
    pad = config.pad_to_multiple_of or None
    dev_sets = {split: classification_pipeline.make_classification_dataset(
        encoded[split], None, batch_size=config.eval_batch_size, with_labels=False,
        pad_to_multiple_of=pad) for split in data.dev}
    positive = data.label_list.index("1") if data.label_list and "1" in data.label_list else 1
    step = []

    def evaluate(model):
        if not step:
            step.append(inference_step(model))
        out = {}
        for split, ds in dev_sets.items():
            outputs = predict(model, ds, step[0])
            preds = outputs[:, 0] if data.is_regression else outputs.argmax(-1)
            scores = metrics_lib.compute_metrics(data.metric_task, encoded[split].labels, preds,
                                                 positive)
            out.update({dev_prefix(split) + k: v for k, v in scores.items()})
        return out

    return evaluate


def make_train_dataset_fn(encoded: dict, config: FinetuneConfig, schedule: Schedule, seed: int):
    """callable(epoch, skip_batches) -> that epoch's batches (seeded order), as resumable_fit wants."""
    def make_train(epoch, skip):
        ds = classification_pipeline.make_classification_dataset(
            encoded["train"], None, batch_size=config.train_batch_size, shuffle=True, seed=seed,
            epoch=epoch, skip_batches=skip, drop_remainder=False,
            pad_to_multiple_of=config.pad_to_multiple_of or None,
            group_by_length=config.group_by_length)
        left = schedule.total_batches - epoch * schedule.steps_per_epoch - skip
        return ds.take(min(schedule.steps_per_epoch - skip, left))

    return make_train


def _train_one_run(config, data, strategy, encoded, preprocessor, seed, run_dir):
    keras.utils.set_random_seed(seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    chief, task_id = is_chief(strategy)
    schedule = Schedule.of(config, len(data.train))
    if config.evaluations_per_epoch > schedule.steps_per_epoch:
        logger.warning("--evaluations_per_epoch=%d is more than the %d batches of an epoch: "
                       "evaluating after every batch instead", config.evaluations_per_epoch,
                       schedule.steps_per_epoch)
    with strategy.scope():
        task = build_text_classifier(config, data, preprocessor)
        task({k: v[:1] for k, v in encoded["train"].features.items()})
        learning_rate = compile_task(task, config, schedule.num_train_steps)
    n, first = config.train_batch_size, encoded["train"]
    build_for_training(task, strategy, ({k: v[:n] for k, v in first.features.items()},
                                        first.labels[:n]))
    checkpoint, cbs = callbacks_lib.standard_callbacks(
        run_dir if chief else run_dir / f"worker_{task_id}", save_freq=config.save_checkpoints_steps)
    evaluator = callbacks_lib.EvaluationCallback(
        make_evaluator(data, encoded, config), monitor_name(data), run_dir / "best.weights.h5",
        run_dir / "metrics_state.json", config.early_stopping_patience, is_chief=chief,
        evaluations_per_epoch=config.evaluations_per_epoch, step_fn=lambda: checkpoint.step,
        steps_per_epoch=schedule.steps_per_epoch)
    steps = resumable_fit(task, make_train_dataset_fn(encoded, config, schedule, seed),
                          schedule.steps_per_epoch, schedule.epochs, checkpoint,
                          [checkpoint, evaluator] + (cbs[1:] if chief else []),
                          verbose=config.verbose, total_steps=schedule.total_batches)
    keep_best_model(task, checkpoint, run_dir, is_chief=chief)
    return {"seed": seed, "steps": steps, "num_train_steps": schedule.num_train_steps,
            "num_train_epochs": schedule.num_train_epochs,
            "learning_rate": learning_rate,
            "resumed_from_step": checkpoint.restored_step,
            "epochs": evaluator.state["epochs"], "best": evaluator.state["best"]}, task


def summarize_runs(data: TaskData, runs: list) -> dict:
    """metrics.json: per-run results, mean / std of the finite best scores, the best run.

    A run whose every evaluation was NaN or infinite is marked `"all_evaluations_non_finite":
    true` and logged; it is never the best while a run with a finite score exists.
    """
    monitor = monitor_name(data)
    scores = [r["best"][monitor] if r["best"] else None for r in runs]
    for run, score in zip(runs, scores):
        run["all_evaluations_non_finite"] = not is_finite(score)
        if not is_finite(score):
            logger.warning("run with seed %d: every dev %s was NaN or infinite (e.g. a regressor "
                           "with constant output has Pearson NaN)", run["seed"], monitor)
    finite = [float(s) for s in scores if is_finite(s)]
    best_run = best_index(scores)
    return {"task_name": data.metric_task, "monitor": monitor, "runs": runs,
            "mean": float(statistics.fmean(finite)) if finite else float("nan"),
            "std": float(statistics.stdev(finite)) if len(finite) > 1 else 0.0,
            "best_run": best_run, "best": runs[best_run]["best"],
            "all_evaluations_non_finite": not finite}


def prepare_run(config: FinetuneConfig):
    """Strategy, resolved settings (checked against an earlier run in output_dir), data, the
    task's preprocessor and the encoded splits."""
    out = pathlib.Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    set_mixed_precision(config.mixed_precision)
    strategy = get_strategy(config.strategy, tpu=config.tpu)
    vocab_file, do_lower_case = resolve_vocab(config)
    resolved = dataclasses.asdict(config) | {"vocab_file": vocab_file, "do_lower_case": do_lower_case,
                                             "num_replicas": strategy.num_replicas_in_sync}
    check_resume_settings(out, resolved)
    data = load_task_data(config)
    preprocessor = BertPreprocessor(vocab_file, do_lower_case=do_lower_case,
                                    max_seq_length=config.max_seq_length)
    encoded = encode_splits(data, preprocessor, batch_size=max(config.eval_batch_size, 64))
    return out, strategy, resolved, data, preprocessor, encoded


def run_finetuning(config: FinetuneConfig, prepared=None) -> dict:
    """Run (with restarts) and write config.json and metrics.json to output_dir.

    Returns:
        metrics.json's dict ("monitor", "runs" (per seed: seed, steps, epochs (dev metrics per
        evaluation), best), "mean" / "std" of the best monitored metric across runs, "best_run",
        "best") plus "task": the best run's `TextClassifier` (best weights loaded, with its
        preprocessor and label names: ready for `task.export`).

    Args:
        prepared: `prepare_run(config)`'s result when the caller already ran it (recipes do, to
            report bad flags and data as usage errors before training).

    Raises:
        ValueError: bad settings or data (see load_task_data, resolve_vocab, build_text_classifier).
    """
    out, strategy, resolved, data, preprocessor, encoded = prepared or prepare_run(config)
    chief, _ = is_chief(strategy)
    if chief:
        callbacks_lib.write_json_atomic(out / "config.json", resolved)
    runs, tasks = [], []
    for r in range(config.num_restarts):
        run_dir = out if config.num_restarts == 1 else out / f"run_{r}"
        result, task = _train_one_run(config, data, strategy, encoded, preprocessor,
                                      config.seed + r, run_dir)
        runs.append(result)
        tasks.append(task)
    summary = summarize_runs(data, runs)
    if chief:
        if config.num_restarts > 1:
            shutil.copyfile(out / f"run_{summary['best_run']}" / "best_model.keras",
                            out / "best_model.keras")
        crash_point("metrics_write")
        callbacks_lib.write_json_atomic(out / "metrics.json", summary)
    return summary | {"task": tasks[summary["best_run"]]}
