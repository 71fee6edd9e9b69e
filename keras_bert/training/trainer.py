"""The one fine-tuning driver: `run(family, args)` trains any task family (`families/`).

A family says what is particular to it (`family.Family`: read the splits, build the task, its
training arrays, evaluate, the metric that picks the best checkpoint, extra outputs); the trainer
does the rest, the same for every family:

- set-up: precision, distribution strategy (`--strategy`, incl. `tpu` and
  `multi_worker_mirrored`), vocabulary and casing, the rerun check of an output_dir
  (`run_config.check_rerun`), the derived settings (`argument_set.Resolution`: learning rate, epochs);
- per run (`--num_restarts` seeds): the task under the strategy's scope, compiled with the task's
  own loss (or the family's) and the BERT optimizer (AdamW / LAMB, warmup + linear decay,
  accumulation, clipping, EMA, layer-wise decay); shuffled, length-grouped, dynamically padded
  batches (under `--strategy=tpu` and `--jit_compile` static shapes instead: a few length
  buckets, a constant batch size with zero-weight filler rows, built per input pipeline;
  `batches`); SIGKILL-safe step checkpoints and resume at the exact batch (`resumable_fit`); dev
  evaluation `--evaluations_per_epoch` times an epoch, the best kept (a NaN never; ties go to the
  lower dev loss, then the later evaluation: `selection`); early stopping; a time budget;
- the end: `best_model.keras` once (`fit.keep_best_model`), the family's extra outputs,
  `metrics.json` (`selection.summarize_runs`), and the export (`--export_dir`, once per weights).

Files in `output_dir`: `config.json` (every setting; which were given, which derived and why:
`run_config`), `metrics.json`, `best_model.keras` (`keras_bert.load_task(output_dir)`); per run
(`output_dir`, or `output_dir/run_<i>` with restarts): `checkpoints/`, `logs/` (TensorBoard),
`metrics_state.json`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import tempfile
import time

import keras
import tensorflow as tf

from keras_bert import fileio
from keras_bert.checkpoints.google import directory_name
from keras_bert.checkpoints.keras_format import save_keras_file
from keras_bert.faults import crash_point
from keras_bert.tokenization.bert_preprocessor import BertPreprocessor
from keras_bert.training import callbacks as callbacks_lib
from keras_bert.training import run_config
from keras_bert.training.args import TrainingArgs
from keras_bert.training.argument_set import Resolution
from keras_bert.training.batches import Schedule, fit_batches, uses_static_shapes
from keras_bert.training.evaluation_callback import EvaluationCallback
from keras_bert.training.family import Family
from keras_bert.training.fit import build_for_training, keep_best_model, resumable_fit
from keras_bert.training.optimizer import create_optimizer, set_mixed_precision
from keras_bert.training.selection import summarize_runs
from keras_bert.training.strategy import get_strategy

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class Prepared:
    """A run with its settings and data checked (`prepare`'s result)."""

    out: str  # output_dir as typed (any keras_bert.fileio URI)
    strategy: object
    settings: dict  # config.json
    resolution: Resolution
    preprocessor: BertPreprocessor
    data: object
    config_written: bool = False
    arrays: tuple | None = None  # the family's training arrays, made by the first run

    def train_arrays(self, family: Family, task) -> tuple:
        """`family.train_arrays` once for all the runs: they depend on the data and the
        preprocessor, not on a run's weights."""
        if self.arrays is None:
            self.arrays = family.train_arrays(task, self.data)
        return self.arrays

    def write_config(self, args: TrainingArgs) -> None:
        """config.json once (`run_config.write_config`), when the derived values are known (the
        first run has built and compiled its task)."""
        if not self.config_written:
            run_config.write_config(self.out, self.settings, args.given(), self.resolution.derived)
            self.config_written = True


class TimeBudget(keras.callbacks.Callback):
    """Stops training once `seconds` of training wall time have passed (--max_train_seconds),
    checked after each batch: counted from the end of the first batch this process trains (the
    train step's tracing excluded), the dev evaluations during training included. Under gradient
    accumulation it stops at the end of an optimizer update (`step_fn() % accumulation == 0`),
    never with batches accumulated and not applied. Keras then ends the epoch as usual (its
    end-of-epoch evaluation runs), and `resumable_fit` trains no further epoch. `stopped`:
    whether it stopped the training."""

    def __init__(self, seconds: float | None, step_fn=lambda: 0, accumulation: int = 1):
        super().__init__()
        self.seconds, self.start, self.stopped = seconds, None, False
        self.step_fn, self.accumulation = step_fn, max(1, int(accumulation))

    def on_train_batch_end(self, batch, logs=None):
        if self.seconds is None:
            return
        if self.start is None:
            self.start = time.monotonic()
        if time.monotonic() - self.start > self.seconds and self.step_fn() % self.accumulation == 0:
            self.model.stop_training = self.stopped = True


def is_chief(strategy) -> tuple[bool, int]:
    """(whether this process writes the run's files, its worker index)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(resolver, "task_type", None):
        return True, 0
    task_type, task_id = resolver.task_type, int(resolver.task_id or 0)
    chief = task_type == "chief" or (
        task_type == "worker" and task_id == 0 and "chief" not in resolver.cluster_spec().as_dict()
    )
    return chief, task_id


def prepare(family: Family, args: TrainingArgs) -> Prepared:
    """Everything that can fail on bad flags or data, before any training: precision, strategy,
    vocabulary and casing, a rerun into a directory of another run, the data.

    Raises:
        ValueError / FileNotFoundError: naming the flag, file or row.
    """
    out = args.output_dir
    set_mixed_precision(args.mixed_precision)
    strategy = get_strategy(args.strategy, tpu=args.tpu)
    resolved, preprocessor = family.source(args)
    settings = (
        args.settings()
        | resolved
        | {"family": family.name, "num_replicas": strategy.num_replicas_in_sync}
    )
    run_config.check_rerun(out, settings, family.epochs)
    data = family.read(args, preprocessor)
    return Prepared(out, strategy, settings, Resolution(), preprocessor, data)


def compile_task(
    task, args: TrainingArgs, num_train_steps: int, learning_rate: float, loss="auto"
) -> None:
    """Compiles `task` as every family trains: the BERT optimizer of `args` (AdamW / LAMB, warmup
    + linear decay to 0 over `num_train_steps` optimizer updates, clipping, accumulation, loss
    scaling for float16, EMA, layer-wise decay) and `loss` ("auto": the task's own)."""
    optimizer = create_optimizer(
        learning_rate,
        num_train_steps,
        int(num_train_steps * args.warmup_proportion),
        optimizer_type=args.optimizer,
        weight_decay=args.weight_decay,
        epsilon=args.adam_epsilon,
        global_clipnorm=args.max_grad_norm or None,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        loss_scale=args.mixed_precision == "mixed_float16",
        ema_momentum=args.ema_momentum,
        layerwise_lr_decay=args.layerwise_lr_decay,
    )
    # The task's own metrics read the targets of its own loss; a family's loss has other targets
    # (distillation: gold id + teacher logits [B, 1 + C]), so it trains without them.
    metrics = "auto" if isinstance(loss, str) and loss == "auto" else []
    task.compile(optimizer=optimizer, loss=loss, metrics=metrics, jit_compile=args.jit_compile)


def _compile(family, task, args, prepared, schedule) -> float:
    learning_rate = args.learning_rate
    if learning_rate is None:
        learning_rate = family.default_learning_rate(task)
        prepared.resolution.derive(
            "learning_rate",
            learning_rate,
            f"not given: the {family.name} default for this encoder "
            f"(hidden_size {task.encoder.bert_config.hidden_size})",
        )
    compile_task(task, args, schedule.num_train_steps, learning_rate, family.loss(task, args))
    return learning_rate


def train_one(family: Family, args: TrainingArgs, prepared: Prepared, seed: int, run_dir: str):
    """One run with one seed in `run_dir`; returns (its record for metrics.json, the task with
    the kept weights)."""
    keras.utils.set_random_seed(seed)
    strategy = prepared.strategy
    chief, task_id = is_chief(strategy)
    if chief:
        fileio.makedirs(run_dir)
    with strategy.scope():
        task = family.build_task(args, prepared.data, prepared.preprocessor)
    features, labels = prepared.train_arrays(family, task)
    n = len(features["input_mask"])
    schedule = Schedule.of(args, n, family.epochs, prepared.resolution)
    if args.evaluations_per_epoch > schedule.steps_per_epoch:
        logger.warning(
            "--evaluations_per_epoch=%d is more than the %d batches of an epoch: "
            "evaluating after every batch instead",
            args.evaluations_per_epoch,
            schedule.steps_per_epoch,
        )
    first = (
        {k: v[: args.train_batch_size] for k, v in features.items()},
        tf.nest.map_structure(lambda a: a[: args.train_batch_size], labels),
    )
    with strategy.scope():
        task(first[0])
        learning_rate = _compile(family, task, args, prepared, schedule)
    if chief:
        prepared.write_config(args)
    build_for_training(task, strategy, first)
    checkpoint, cbs = callbacks_lib.standard_callbacks(
        run_dir,  # every worker resumes from the chief's checkpoints (shared storage); only it writes
        save_freq=args.save_checkpoints_steps,
        is_chief=chief,
        tensorboard_update_freq=args.log_steps,
        accumulation=schedule.accumulation,
    )
    evaluate = family.evaluator(args, prepared.data)
    monitor = family.monitor_of(prepared.data)
    evaluators = (
        []
        if evaluate is None
        else [
            EvaluationCallback(
                evaluate,
                monitor,
                fileio.join(run_dir, "best.weights.h5"),
                fileio.join(run_dir, "metrics_state.json"),
                args.early_stopping_patience,
                is_chief=chief,
                evaluations_per_epoch=args.evaluations_per_epoch,
                step_fn=lambda: checkpoint.step,
                steps_per_epoch=schedule.steps_per_epoch,
                accumulation=schedule.accumulation,
            )
        ]
    )

    def make_train(epoch, skip):
        left = schedule.total_batches - epoch * schedule.steps_per_epoch - skip
        return fit_batches(
            strategy,
            uses_static_shapes(args),
            features=features,
            labels=labels,
            batch_size=args.train_batch_size,
            seed=seed,
            epoch=epoch,
            skip=skip,
            group_by_length=args.group_by_length,
            pad_to_multiple_of=args.pad_to_multiple_of,
            per_position=family.labels_per_position,
            label_padding=family.label_padding,
            take=min(schedule.steps_per_epoch - skip, left),
        )

    start = time.monotonic()
    budget = TimeBudget(args.max_train_seconds, lambda: checkpoint.step, schedule.accumulation)
    batches = resumable_fit(
        task,
        make_train,
        schedule.steps_per_epoch,
        schedule.epochs,
        checkpoint,
        [checkpoint, *evaluators, budget] + (cbs[1:] if chief else []),
        verbose=args.verbose,
        total_steps=schedule.total_batches,
        accumulation=schedule.accumulation,
    )
    train_seconds = time.monotonic() - start
    if budget.stopped:
        logger.warning(
            "--max_train_seconds=%g reached: training stopped after %d of %d optimizer steps, "
            "evaluated there; the best evaluation is kept",
            args.max_train_seconds,
            schedule.steps_of(batches),
            schedule.num_train_steps,
        )
    for evaluator in evaluators:
        if not evaluator.state["epochs"]:  # stopped by the time budget before any evaluation
            evaluator.set_model(task)
            evaluator.on_epoch_end(0, {})
    keep_best_model(task, checkpoint, run_dir, is_chief=chief)
    state = evaluators[0].state if evaluators else {"epochs": [], "best": None}
    return {
        "seed": seed,
        "steps": schedule.steps_of(batches),  # optimizer updates (a step: `accumulation` batches)
        "batches": batches,
        "num_train_steps": schedule.num_train_steps,
        "num_train_epochs": schedule.num_train_epochs,
        "learning_rate": learning_rate,
        "train_examples": n,
        "train_seconds": train_seconds,
        "time_limit_reached": budget.stopped,  # --max_train_seconds stopped this process's run
        "resumed_from_step": schedule.steps_of(checkpoint.restored_step),
        "epochs": state["epochs"],
        "best": state["best"],
    }, task


def run(family: Family, args: TrainingArgs, prepared: Prepared | None = None) -> dict:
    """The whole run (module docstring); `prepared` from `prepare(family, args)` (else made here).

    Returns:
        metrics.json's dict ("monitor", "runs" (per seed: steps, evaluations, best), "mean" /
        "std" of the best monitored metric across runs, "best_run", "best", the family's
        metrics) plus "task": the kept task (ready for `task.export`) and "export_path" when
        exported.

    Raises:
        ValueError / FileNotFoundError: bad settings or data (see `prepare`).
    """
    prepared = prepared or prepare(family, args)
    out, chief = prepared.out, is_chief(prepared.strategy)[0]
    if chief:
        fileio.makedirs(out)
    if not family.trains(prepared.data):
        return _predict_only(family, args, prepared)
    runs, tasks = [], []
    for r in range(args.num_restarts):
        run_dir = out if args.num_restarts == 1 else fileio.join(out, f"run_{r}")
        record, task = train_one(family, args, prepared, args.seed + r, run_dir)
        runs.append(record)
        tasks.append(task)
    summary = summarize_runs(family.monitor_of(prepared.data), runs)
    task = tasks[summary["best_run"]]
    tuned = family.tune(args, prepared.data, task)
    with _extra_dir(prepared) as extra:
        summary |= {
            "family": family.name,
            **tuned,
            **family.finish(args, prepared.data, task, extra),
        }
    if chief:
        if tuned:
            save_keras_file(task, fileio.join(out, "best_model.keras"))
        elif args.num_restarts > 1:
            best = fileio.join(out, f"run_{summary['best_run']}", "best_model.keras")
            fileio.write_bytes(fileio.join(out, "best_model.keras"), fileio.read_bytes(best))
        crash_point("metrics_write")
        fileio.write_json(fileio.join(out, "metrics.json"), summary)
    summary["task"] = task
    if args.export_dir and chief:
        summary["export_path"] = export_once(family, args, task, summary)
    return summary


@contextlib.contextmanager
def _extra_dir(prepared: Prepared):
    """Where the family's extra outputs go: output_dir on the chief; elsewhere a local temporary
    directory deleted afterwards (a worker computes them too, but only the chief's are kept and no
    two processes write one file)."""
    if is_chief(prepared.strategy)[0]:
        fileio.makedirs(prepared.out)
        yield prepared.out
        return
    with tempfile.TemporaryDirectory(prefix="keras_bert_worker_") as path:
        yield path


def _predict_only(family: Family, args: TrainingArgs, prepared: Prepared) -> dict:
    """A run without training data (SQuAD with only --predict_file): the task as built, kept
    as best_model.keras, and the family's outputs."""
    chief = is_chief(prepared.strategy)[0]
    keras.utils.set_random_seed(args.seed)
    with prepared.strategy.scope():
        task = family.build_task(args, prepared.data, prepared.preprocessor)
        task.build_for_export()
    summary = {"monitor": family.monitor_of(prepared.data), "runs": [], "best": None}
    with _extra_dir(prepared) as extra:
        summary |= {"family": family.name, **family.finish(args, prepared.data, task, extra)}
    if chief:
        prepared.write_config(args)
        save_keras_file(task, fileio.join(prepared.out, "best_model.keras"))
        fileio.write_json(fileio.join(prepared.out, "metrics.json"), summary)
    summary["task"] = task
    if args.export_dir and chief:
        summary["export_path"] = export_once(family, args, task, summary)
    return summary


def export_once(family: Family, args: TrainingArgs, task, summary: dict) -> str:
    """Exports the kept task unless a version with the same weights is already there (a rerun
    of a finished or killed run must not publish a second copy)."""
    from keras_bert.saved_model import exporter

    name = args.model_name or family.model_name_of(summary) or directory_name(args.output_dir)
    existing = exporter.find_export(
        args.export_dir, name, exporter.weights_fingerprint(task), litert=args.litert
    )
    if existing is not None and args.export_dtype is None:
        logger.info("already exported to %s", existing)
        print(f"already exported to {existing}")
        return str(existing)
    extra = {k: v for k, v in family.export_config(summary).items() if v is not None}
    path = task.export(
        args.export_dir, name, dtype=args.export_dtype, litert=args.litert, extra_config=extra
    )
    print(f"exported to {path}")
    return str(path)
