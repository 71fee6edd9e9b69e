"""The one fine-tuning driver: `run(family, args)` trains any task family (`families/`).

A family says what is particular to it (`Family`: read the splits, build the task, its training
arrays, evaluate, the metric that picks the best checkpoint, extra outputs); the driver does the
rest, the same for every family:

- set-up: precision, distribution strategy (`--strategy`, incl. `tpu` and
  `multi_worker_mirrored`), vocabulary and casing, the rerun check of an output_dir
  (`resume_check`), the derived settings (`args.Resolution`: learning rate, epochs);
- per run (`--num_restarts` seeds): the task under the strategy's scope, compiled with the task's
  own loss (or the family's) and the BERT optimizer (AdamW / LAMB, warmup + linear decay,
  accumulation, clipping, EMA, layer-wise decay); shuffled, length-grouped, dynamically padded
  batches (under `--strategy=tpu` and `--jit_compile` static shapes instead: a few length
  buckets, a constant batch size with zero-weight filler rows, built per input pipeline;
  `train_batches`, `fit_batches`); SIGKILL-safe step checkpoints and resume at the exact batch
  (`resumable_fit`); dev evaluation `--evaluations_per_epoch` times an epoch, the best kept (a
  NaN never; ties go to the lower dev loss, then the later evaluation); early stopping; a time
  budget;
- the end: `best_model.keras` once (`fit.keep_best_model`), the family's extra outputs,
  `metrics.json`, and the export (`--export_dir`, once per weights).

Files in `output_dir`: `config.json` (every setting; which were given, which derived and why),
`metrics.json`, `best_model.keras` (`keras_bert.load_task(output_dir)`); per run (`output_dir`,
or `output_dir/run_<i>` with restarts): `checkpoints/`, `logs/` (TensorBoard),
`metrics_state.json`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import statistics
import tempfile
import time

import keras
import numpy as np
import tensorflow as tf

from keras_bert.data.dynamic_padding import (
    fill_batch,
    length_buckets,
    length_grouped_order,
    trim_to_longest,
)
from keras_bert.faults import crash_point
from keras_bert.tasks.token_classifier import IGNORE_LABEL
from keras_bert.tokenization.bert_preprocessor import BertPreprocessor
from keras_bert.training import callbacks as callbacks_lib
from keras_bert.training import model_setup, resume_check
from keras_bert import fileio
from keras_bert.checkpoints.google import directory_name
from keras_bert.checkpoints.keras_format import save_keras_file
from keras_bert.training.args import Resolution, TrainingArgs
from keras_bert.training.fit import build_for_training, keep_best_model, resumable_fit
from keras_bert.training.optimizer import create_optimizer, set_mixed_precision
from keras_bert.training.selection import best_index, is_finite
from keras_bert.training.strategy import get_strategy

logger = logging.getLogger(__name__)

# Settings that do not change what a run computes: a rerun into the same output_dir may differ
# here. pad_to_multiple_of only cuts masked padding columns; output_dir is where the old
# config.json was read from, however it is spelled; the export settings act after training;
# max_train_seconds is a limit of the process, as a kill is (a rerun of a killed run resumes the
# same batches under its own limit; a run the limit stopped is finished, and a rerun reuses it).
HARMLESS_SETTINGS = frozenset(
    {
        "verbose",
        "num_replicas",
        "pad_to_multiple_of",
        "output_dir",
        "given",
        "derived",
        "family",
        "export_dir",
        "model_name",
        "export_dtype",
        "export_tflite",
        "export_quantize",
        "save_checkpoints_steps",
        "log_steps",
        "max_train_seconds",
    }
)

# Settings added to a family after output_dirs were first written, with the value an older
# config.json (which lacks them) stands for: the behaviour of the family before the flag.
ADDED_SETTINGS = {
    "group_by_length": False,
    "ema_momentum": 0.0,
    "layerwise_lr_decay": 1.0,
    "optimizer": "adamw",
    "gradient_accumulation_steps": 1,
    "jit_compile": False,
    "num_restarts": 1,
    "evaluations_per_epoch": 1,
    "early_stopping_patience": None,
    "max_train_seconds": None,
    "min_train_steps": 0,
    "tpu": None,
    "strategy": "default",
    "dropout_rate": 0.1,
}

# Old names in config.json of output_dirs written before the families shared one argument set.
RENAMED_SETTINGS = {
    "classifier_dropout": "dropout_rate",
    "window_stride": "doc_stride",
    "predict_batch_size": "eval_batch_size",
    "max_predict_examples": "max_eval_examples",
    "resolved_do_lower_case": "do_lower_case",
}


def recorded_settings(config: dict, family_epochs: float | None = None) -> dict:
    """An older config.json in today's names (`RENAMED_SETTINGS`); a vocab_file recorded as
    not given (older SQuAD runs recorded the flag, not the resolved file) is not compared.

    Older runs recorded `num_train_epochs` as the flag's value, its default included, and raised
    it to reach --min_train_steps either way: the family's default epochs there stand for today's
    "not given" (None), which trains the same schedule.
    """
    if "given" in config:
        return config
    if family_epochs is not None and config.get("num_train_epochs") == family_epochs:
        config = config | {"num_train_epochs": None}
    out = {
        RENAMED_SETTINGS.get(k, k): v
        for k, v in config.items()
        if k not in ("do_lower_case", "resolved_vocab_size", "export_litert")
        or "resolved_do_lower_case" not in config
    }
    if out.get("vocab_file") is None:
        out.pop("vocab_file", None)
    return out


class Family:
    """What a task family adds to the driver; one small module per family (`families/`).

    Class attributes: `name`, `Args` (its `FinetuneArgs` subclass), `epochs` (default
    `num_train_epochs`), `model_name` (default export name), `monitor` (the dev metric that picks
    the best evaluation; None: no evaluation during training, the last weights are kept).
    """

    name = "family"
    Args = TrainingArgs
    epochs = 3.0
    model_name = None
    monitor = "accuracy"

    def source(self, args) -> tuple[dict, BertPreprocessor]:
        """(resolved settings, preprocessor): vocabulary and casing from the flags or the
        checkpoint (`model_setup.resolve_vocab`)."""
        vocab_file, lower = model_setup.resolve_vocab(args)
        return (
            {"vocab_file": vocab_file, "do_lower_case": lower},
            BertPreprocessor(vocab_file, do_lower_case=lower, max_seq_length=args.max_seq_length),
        )

    def read(self, args, preprocessor):
        """The run's data (splits, label space; encoded when it does not need the task)."""
        raise NotImplementedError

    def build_task(self, args, data, preprocessor):
        """The task (called under the strategy's scope, after the run's seed is set)."""
        raise NotImplementedError

    def default_learning_rate(self, task) -> float:
        return 5e-5

    def train_arrays(self, task, data) -> tuple[dict, object]:
        """(features: dict of int32 numpy [N, ..., T] with `input_mask`, labels: numpy [N] or
        [N, T], or a dict of [N] arrays)."""
        raise NotImplementedError

    labels_per_position = False  # train_arrays' labels [N, T] are cut with the batch's tokens

    def trains(self, data) -> bool:
        """Whether the run trains (SQuAD may only predict)."""
        return True

    def loss(self, task, args):
        """The training loss; "auto": the task's own (`Task.default_loss`)."""
        return "auto"

    def evaluator(self, args, data):
        """callable(task) -> {metric: float} (with "loss", the dev loss, when the family can
        tell it), or None for no evaluation during training."""
        raise NotImplementedError

    def monitor_of(self, data) -> str:
        return self.monitor

    def tune(self, args, data, task) -> dict:
        """Settings of the kept task chosen after training on a dev split (SQuAD v2.0's null
        threshold), set on `task`; the metrics they add to metrics.json, {} when none (the
        driver saves best_model.keras again when some are)."""
        return {}

    def finish(self, args, data, task, out: str) -> dict:
        """Extra outputs of the kept task (scores of held-out splits, prediction files); the
        metrics they add to metrics.json."""
        return {}

    def model_name_of(self, summary: dict) -> str | None:
        """The export's model name when --model_name is not given."""
        return self.model_name

    def headline(self, summary: dict) -> dict:
        """The one line a recipe prints: label -> value."""
        best = summary["best"] or {}
        return {
            f"dev {summary['monitor']}": best.get(summary["monitor"]),
            "at epoch": best.get("epoch"),
        }

    def export_config(self, summary: dict) -> dict:
        """What the export records of the run (assets/export_config.json)."""
        return {"dev_metrics": summary["best"], "monitor": summary["monitor"]}


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

    def write_config(self, args: TrainingArgs) -> None:
        """config.json: every setting, the names the user gave and the derived values with
        their reasons (known once the first run has built and compiled its task)."""
        if not self.config_written:
            callbacks_lib.write_json_atomic(
                fileio.join(self.out, "config.json"),
                self.settings | {"given": args.given(), "derived": self.resolution.derived},
            )
            self.config_written = True


@dataclasses.dataclass
class Schedule:
    """Batches and optimizer steps of one run (sizes in global batches)."""

    steps_per_epoch: int  # ceil(examples / batch): the last, partial batch is kept
    epochs: int  # fit calls (the last may be partial)
    total_batches: int
    num_train_steps: int  # optimizer updates (batches / gradient accumulation)
    num_train_epochs: float  # as run

    @classmethod
    def of(
        cls,
        args: TrainingArgs,
        num_examples: int,
        family_epochs: float,
        resolution: Resolution | None = None,
    ) -> "Schedule":
        """The epochs are `--num_train_epochs` when given (never changed); else the family's,
        raised to reach `--min_train_steps` optimizer steps (recorded in `resolution`).

        Raises ValueError when there is no training example."""
        if num_examples < 1:
            raise ValueError("no training examples")
        steps_per_epoch = -(-num_examples // args.train_batch_size)
        accumulation = args.gradient_accumulation_steps
        epochs = args.num_train_epochs
        if epochs is None:
            epochs = float(family_epochs)
            steps = round(steps_per_epoch * epochs) // accumulation
            why = f"not given: the family's {epochs:g} epochs"
            if steps < args.min_train_steps:
                epochs = float(-(-args.min_train_steps * accumulation // steps_per_epoch))
                why = (
                    f"not given: {num_examples} examples give {steps} optimizer steps in "
                    f"{family_epochs:g} epochs, raised to {epochs:g} epochs to reach "
                    f"--min_train_steps={args.min_train_steps}"
                )
                logger.info("--num_train_epochs %s", why)
            if resolution is not None:
                resolution.derive("num_train_epochs", epochs, why)
        total = int(round(steps_per_epoch * epochs))
        return cls(
            steps_per_epoch,
            max(1, int(np.ceil(epochs))),
            total,
            max(1, total // accumulation),
            float(epochs),
        )


def uses_static_shapes(args: TrainingArgs) -> bool:
    """Whether training batches have static shapes (`train_batches(static_shapes=True)`): under
    --strategy=tpu and --jit_compile, where every new input shape is a new XLA compilation."""
    return args.strategy == "tpu" or bool(args.jit_compile)


def train_batches(
    features: dict,
    labels,
    batch_size: int,
    seed: int,
    epoch: int,
    skip: int,
    group_by_length: bool = True,
    pad_to_multiple_of: int = 0,
    per_position: bool = False,
    take: int | None = None,
    static_shapes: bool = False,
    input_context: tf.distribute.InputContext | None = None,
) -> tf.data.Dataset:
    """One training epoch of (features, labels) batches, resumable at any batch.

    The order is fixed by `seed + epoch` (`length_grouped_order` with group_by_length, an
    example's length being its longest row; else a seeded permutation); the last partial batch is
    kept; the first `skip` batches are dropped (resume), then at most `take` are kept (None: all).
    Each batch is cut to its longest row, rounded up to `pad_to_multiple_of` (0: no rounding),
    never below 2 tokens.

    Static shapes (`static_shapes`; the driver sets it under --strategy=tpu and --jit_compile,
    `uses_static_shapes`), for XLA, where every new shape is a new compilation:
    - a batch's length is the smallest of `length_buckets(T, pad_to_multiple_of)` (the quarters
      of the arrays' width T = --max_seq_length, T always one) that holds its longest row, so an
      epoch has at most 4 shapes;
    - every batch has `batch_size` rows: the last short one is filled with zero rows
      (`fill_batch`), and the dataset yields (features, labels, sample_weight float32
      [batch_size]): 1 for a real row, 0 for a filler, so each example is trained on exactly
      once an epoch and none is dropped (the last batch's mean loss is over `batch_size` rows,
      so its examples weigh as much as any other batch's);
    - with `input_context` (from `strategy.distribute_datasets_from_function`, see
      `fit_batches`), every input pipeline builds the same global batches (the length is the
      global batch's) and keeps only its share of each: pipeline i of n takes rows
      [i * B / n, (i + 1) * B / n), in batches of `get_per_replica_batch_size(batch_size)` rows.

    Args:
        features: dict of int32 numpy [N, ..., T] with `input_mask`.
        labels: numpy [N] or [N, K], or a dict of numpy [N] (SQuAD's start / end positions).
        batch_size: the global batch size (examples).
        per_position: labels are [N, T], one per token, and are cut with the batch (NER).

    Raises:
        ValueError: with `input_context`, batch_size not divisible by the replicas in sync.
    """
    mask = np.asarray(features["input_mask"])
    n = len(mask)
    if group_by_length:
        lengths = (mask.reshape(n, -1, mask.shape[-1]) > 0).sum(-1).max(-1)
        order = length_grouped_order(lengths, batch_size, seed + epoch)
    else:
        order = np.random.default_rng(seed + epoch).permutation(n)
    labels_in_order = tf.nest.map_structure(lambda a: np.asarray(a)[order], labels)
    ds = tf.data.Dataset.from_tensor_slices(
        ({k: np.asarray(v)[order] for k, v in features.items()}, labels_in_order)
    )
    ds = ds.batch(batch_size).skip(skip)
    if take is not None:
        ds = ds.take(take)
    multiple = max(1, pad_to_multiple_of)
    buckets = length_buckets(mask.shape[-1], multiple) if static_shapes else None

    def trim(x, y):
        if not per_position:
            x = trim_to_longest(x, multiple=multiple, minimum=2, buckets=buckets)
        else:
            cut = trim_to_longest({**x, "labels": y}, multiple=multiple, minimum=2, buckets=buckets)
            x, y = {k: v for k, v in cut.items() if k != "labels"}, cut["labels"]
        if not static_shapes:
            return x, y
        (x, y), weights = fill_batch((x, y), batch_size)
        if per_position:  # filler rows' tokens ignored, as padding is (not averaged in as label 0)
            y = tf.where(weights[:, None] > 0, y, tf.cast(IGNORE_LABEL, y.dtype))
        return x, y, weights

    options = tf.data.Options()
    options.deterministic = True
    # Every worker sees the full, identically ordered set and keeps its share of each batch.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    ds = ds.map(trim)
    if input_context is not None:
        per_replica = input_context.get_per_replica_batch_size(batch_size)
        rows = batch_size // input_context.num_input_pipelines
        first = input_context.input_pipeline_id * rows

        def share(*batch):
            return tf.nest.map_structure(lambda v: v[first : first + rows], batch)

        ds = ds.map(share).rebatch(per_replica, drop_remainder=True)
    return ds.with_options(options).prefetch(2)


def fit_batches(strategy, static_shapes: bool, **kwargs):
    """What `fit` trains on for one epoch: `train_batches(**kwargs)`; with static shapes the
    same batches built once per input pipeline by `strategy.distribute_datasets_from_function`
    (each pipeline keeps its share of every global batch; Keras `fit` takes the distributed
    dataset as it is, without distributing it again)."""
    if not static_shapes:
        return train_batches(**kwargs)
    return strategy.distribute_datasets_from_function(
        lambda context: train_batches(**kwargs, static_shapes=True, input_context=context)
    )


class TimeBudget(keras.callbacks.Callback):
    """Stops training once `seconds` of training wall time have passed (--max_train_seconds),
    checked after each batch: counted from the end of the first batch this process trains (the
    train step's tracing excluded), the dev evaluations during training included. Keras then
    ends the epoch as usual (its end-of-epoch evaluation runs), and `resumable_fit` trains no
    further epoch. `stopped`: whether it stopped the training."""

    def __init__(self, seconds: float | None):
        super().__init__()
        self.seconds, self.start, self.stopped = seconds, None, False

    def on_train_batch_end(self, batch, logs=None):
        if self.seconds is None:
            return
        if self.start is None:
            self.start = time.monotonic()
        if time.monotonic() - self.start > self.seconds:
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
    resume_check.check_resume_settings(
        out,
        settings,
        ignored=HARMLESS_SETTINGS,
        defaults=ADDED_SETTINGS,
        view=lambda c: recorded_settings(c, family.epochs),
    )
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
    features, labels = family.train_arrays(task, prepared.data)
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
    )
    evaluate = family.evaluator(args, prepared.data)
    monitor = family.monitor_of(prepared.data)
    evaluators = (
        []
        if evaluate is None
        else [
            callbacks_lib.EvaluationCallback(
                evaluate,
                monitor,
                fileio.join(run_dir, "best.weights.h5"),
                fileio.join(run_dir, "metrics_state.json"),
                args.early_stopping_patience,
                is_chief=chief,
                evaluations_per_epoch=args.evaluations_per_epoch,
                step_fn=lambda: checkpoint.step,
                steps_per_epoch=schedule.steps_per_epoch,
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
            take=min(schedule.steps_per_epoch - skip, left),
        )

    start = time.monotonic()
    budget = TimeBudget(args.max_train_seconds)
    steps = resumable_fit(
        task,
        make_train,
        schedule.steps_per_epoch,
        schedule.epochs,
        checkpoint,
        [checkpoint, *evaluators, budget] + (cbs[1:] if chief else []),
        verbose=args.verbose,
        total_steps=schedule.total_batches,
    )
    train_seconds = time.monotonic() - start
    if budget.stopped:
        logger.warning(
            "--max_train_seconds=%g reached: training stopped after %d of %d batches, "
            "evaluated there; the best evaluation is kept",
            args.max_train_seconds,
            steps,
            schedule.total_batches,
        )
    for evaluator in evaluators:
        if not evaluator.state["epochs"]:  # stopped by the time budget before any evaluation
            evaluator.set_model(task)
            evaluator.on_epoch_end(0, {})
    keep_best_model(task, checkpoint, run_dir, is_chief=chief)
    state = evaluators[0].state if evaluators else {"epochs": [], "best": None}
    return {
        "seed": seed,
        "steps": steps,
        "num_train_steps": schedule.num_train_steps,
        "num_train_epochs": schedule.num_train_epochs,
        "learning_rate": learning_rate,
        "train_examples": n,
        "train_seconds": train_seconds,
        "time_limit_reached": budget.stopped,  # --max_train_seconds stopped this process's run
        "resumed_from_step": checkpoint.restored_step,
        "epochs": state["epochs"],
        "best": state["best"],
    }, task


def monitor_ties(run: dict, monitor: str) -> dict | None:
    """When several evaluations of a run share the best monitored value (a small dev set
    saturates, e.g. accuracy 1.0 from epoch 2 on): how many, and which was kept and why."""
    best = run["best"]
    if not best or not is_finite(best.get(monitor)):
        return None
    tied = [e for e in run["epochs"] if e.get(monitor) == best[monitor]]
    if len(tied) < 2:
        return None
    return {
        "value": best[monitor],
        "evaluations": len(tied),
        "epochs": [e["epoch"] for e in tied],
        "kept_epoch": best["epoch"],
        "tie_break": "the lowest dev loss, then the later evaluation",
    }


def summarize_runs(monitor: str, runs: list) -> dict:
    """metrics.json's core: per-run records, mean / std of the finite best scores, the best run.

    A run whose every evaluation was NaN or infinite is marked `"all_evaluations_non_finite":
    true` and logged; it is never the best while a run with a finite score exists. Ties between
    runs go to the lower dev loss.
    """
    scores = [r["best"][monitor] if r["best"] else None for r in runs]
    for run, score in zip(runs, scores):
        run["all_evaluations_non_finite"] = run["best"] is not None and not is_finite(score)
        if run["all_evaluations_non_finite"]:
            logger.warning(
                "run with seed %d: every dev %s was NaN or infinite (e.g. a regressor "
                "with constant output has Pearson NaN)",
                run["seed"],
                monitor,
            )
        ties = monitor_ties(run, monitor)
        if ties:
            run["monitor_ties"] = ties
            logger.warning(
                "dev %s was %s at %d evaluations (epochs %s): the dev set cannot tell "
                "them apart; kept epoch %s, the lowest dev loss",
                monitor,
                ties["value"],
                ties["evaluations"],
                ties["epochs"],
                ties["kept_epoch"],
            )
    finite = [float(s) for s in scores if is_finite(s)]
    losses = [(r["best"] or {}).get("loss") for r in runs]
    best_run = best_index(scores, losses)
    return {
        "monitor": monitor,
        "runs": runs,
        "mean": float(statistics.fmean(finite)) if finite else float("nan"),
        "std": float(statistics.stdev(finite)) if len(finite) > 1 else 0.0,
        "best_run": best_run,
        "best": runs[best_run]["best"],
        "monitor_ties": runs[best_run].get("monitor_ties"),
        "all_evaluations_non_finite": bool(runs[0]["best"] is not None and not finite),
    }


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
        callbacks_lib.write_json_atomic(fileio.join(out, "metrics.json"), summary)
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
        callbacks_lib.write_json_atomic(fileio.join(prepared.out, "metrics.json"), summary)
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
