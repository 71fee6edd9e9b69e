"""Fine-tuning for GLUE and your own (pair) classification / regression data (BERT §4.1).

`run_finetuning(FinetuneConfig(...))` is the whole run behind `recipes/run_classifier.py`:
read data -> build BertClassifier (pretrained or random encoder) under a distribution strategy ->
train with the BERT optimizer, SIGKILL-safe checkpoints, TensorBoard, per-epoch dev evaluation,
best checkpoint by the task metric, optional early stopping -> repeat for `num_restarts` seeds
(fine-tuning instability, BERT §5.1 / Devlin et al.'s restarts on small sets) -> metrics.json.

Files in `output_dir` (one run) or `output_dir/run_<i>` (restarts): `checkpoints/`,
`logs/` (TensorBoard), `best.weights.h5`, `best_model.keras`, `metrics_state.json`; and in
`output_dir`: `config.json`, `labels.json`, `metrics.json`, `best_model.keras` (the best run's).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import pathlib
import shutil
import statistics

import keras
import numpy as np
import tensorflow as tf

from keras_bert.data import classification_pipeline, glue, text_files
from keras_bert.evaluation import metrics as metrics_lib
from keras_bert.training import callbacks as callbacks_lib
from keras_bert.training.fit import build_for_training, resumable_fit
from keras_bert.training.optimizer import create_optimizer, set_mixed_precision
from keras_bert.training.strategy import get_strategy

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class FinetuneConfig:
    """All settings of a fine-tuning run; field names are the recipe's flag names.

    Model source, one of: `init_checkpoint` (preset name such as "minilm_l6_h384_uncased", a
    Hugging Face / google-research / Keras checkpoint; its vocab is used unless `vocab_file` is
    given), or random init from `bert_config_file` (JSON) or `preset` (e.g. "bert_tiny") with
    `vocab_file`. Sizes are in examples, tokens (including [CLS]/[SEP]) and optimizer steps.
    """

    task_name: str
    output_dir: str
    data_dir: str | None = None
    train_file: str | None = None
    dev_file: str | None = None
    text_column: str = "text"
    text_b_column: str | None = None
    label_column: str = "label"
    init_checkpoint: str | None = None
    bert_config_file: str | None = None
    preset: str | None = None
    vocab_file: str | None = None
    do_lower_case: bool | None = None
    max_seq_length: int = 128
    pad_to_multiple_of: int = 8
    train_batch_size: int = 32
    eval_batch_size: int = 64
    learning_rate: float = 2e-5
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    optimizer: str = "adamw"
    gradient_accumulation_steps: int = 1
    max_grad_norm: float = 1.0
    classifier_dropout: float = 0.1
    classifier_pooling: str = "cls"
    strategy: str = "default"
    tpu: str | None = None
    mixed_precision: str = "float32"
    jit_compile: bool = False
    num_restarts: int = 1
    max_train_examples: int | None = None
    max_eval_examples: int | None = None
    seed: int = 42
    save_checkpoints_steps: int | None = 1000
    early_stopping_patience: int | None = None
    evaluations_per_epoch: int = 1
    verbose: str | int = "auto"

    def __post_init__(self):
        """Check the numeric flags and the model source at construction.

        Raises:
            ValueError: naming the flag, e.g. "--train_batch_size must be >= 1, got 0", or two
                model sources given together (--init_checkpoint with --preset / --bert_config_file).
        """
        checks = [("num_train_epochs", self.num_train_epochs > 0, "> 0"),
                  ("train_batch_size", self.train_batch_size >= 1, ">= 1"),
                  ("eval_batch_size", self.eval_batch_size >= 1, ">= 1"),
                  ("learning_rate", self.learning_rate > 0, "> 0"),
                  ("warmup_proportion", 0 <= self.warmup_proportion <= 1, "in [0, 1]"),
                  ("num_restarts", self.num_restarts >= 1, ">= 1"),
                  ("gradient_accumulation_steps", self.gradient_accumulation_steps >= 1, ">= 1"),
                  ("max_seq_length", self.max_seq_length >= 2, ">= 2 ([CLS] and [SEP])"),
                  ("pad_to_multiple_of", self.pad_to_multiple_of >= 0, ">= 0 (0: pad to max_seq_length)"),
                  ("evaluations_per_epoch", self.evaluations_per_epoch >= 1, ">= 1")]
        for name, ok, rule in checks:
            if not ok:
                raise ValueError(f"--{name} must be {rule}, got {getattr(self, name)!r}")
        for other in ("preset", "bert_config_file"):
            if self.init_checkpoint and getattr(self, other):
                raise ValueError(f"--init_checkpoint={self.init_checkpoint} and --{other}={getattr(self, other)} "
                                 f"both given: use --init_checkpoint for a pretrained encoder, or --{other} "
                                 "(with --vocab_file) for a randomly initialised one, not both")
        if self.preset and self.bert_config_file:
            raise ValueError("--preset and --bert_config_file both given: pass one of them")


# Settings that do not change what a run computes: a rerun into the same output_dir may differ here.
# pad_to_multiple_of only cuts masked padding columns (same results up to float summation order);
# output_dir is the directory the old config.json was read from, however it is spelled.
HARMLESS_SETTINGS = frozenset({"verbose", "num_replicas", "pad_to_multiple_of", "output_dir"})


def check_resume_settings(out: pathlib.Path, resolved: dict) -> None:
    """Refuse to reuse an output_dir whose config.json holds a run with different settings.

    Args:
        out: the output directory.
        resolved: this run's settings as written to config.json (flags + resolved vocab_file,
            do_lower_case).

    Raises:
        ValueError: "output_dir <path> holds a run with different settings: <flag> <old> -> <new>
            ...; use a new --output_dir (or the same flags to resume)".
    """
    path = out / "config.json"
    if not path.is_file():
        return
    previous = json.loads(path.read_text())
    changed = [f"{k} {previous[k]} -> {v}" for k, v in resolved.items()
               if k not in HARMLESS_SETTINGS and k in previous and previous[k] != v]
    if changed:
        raise ValueError(f"output_dir {out} holds a run with different settings: {', '.join(changed)}; "
                         "use a new --output_dir (or the same flags to resume)")


@dataclasses.dataclass
class TaskData:
    """The examples and label space of a run."""

    metric_task: str                # key for keras_bert.evaluation.metrics
    train: list
    dev: dict                       # dev split name -> examples
    label_list: list | None         # label strings in id order as in the data; None for regression
    is_regression: bool
    label_names: list | None = None  # display names in id order (GLUE SST-2: negative/positive)

    def __post_init__(self):
        if self.label_names is None:
            self.label_names = self.label_list


def load_task_data(config: FinetuneConfig) -> TaskData:
    """Read train and dev examples for a GLUE task or own files (see module docstring).

    Raises:
        ValueError: unknown task, missing --train_file/--dev_file, a missing column, an empty file,
            or a dev label never seen in training (naming it).
    """
    name = config.task_name.lower()
    if name in text_files.TASK_TYPES:
        if not config.train_file or not config.dev_file:
            raise ValueError(f"--task_name={name} needs --train_file and --dev_file")
        regression = name == "text_regression"
        if name == "text_pair_classification" and not config.text_b_column:
            raise ValueError("--task_name=text_pair_classification needs --text_b_column")
        kw = dict(text_column=config.text_column, text_b_column=config.text_b_column,
                  label_column=config.label_column, regression=regression)
        train = text_files.read_text_file(config.train_file, **kw)
        dev = text_files.read_text_file(config.dev_file, **kw)
        labels = None
        if not regression:
            labels = text_files.label_list_from_examples(train)
            text_files.check_labels_known(dev, labels, source=str(config.dev_file))
        data = TaskData(name, train, {"dev": dev}, labels, regression)
    else:
        try:
            task = glue.get_task(name)
        except ValueError as e:
            raise ValueError(f"{e}; for your own files: {', '.join(text_files.TASK_TYPES)} "
                             "(with --train_file / --dev_file)") from None
        train = glue.read_glue(task.name, "train", config.data_dir)
        dev = {split: glue.read_glue(task.name, split, config.data_dir) for split in task.dev_splits}
        data = TaskData(task.name, train, dev, None if task.is_regression else list(task.labels),
                        task.is_regression, None if task.is_regression else list(task.label_names))
    if config.max_train_examples:
        data.train = data.train[: config.max_train_examples]
    if config.max_eval_examples:
        data.dev = {k: v[: config.max_eval_examples] for k, v in data.dev.items()}
    return data


def _dev_prefix(split: str) -> str:
    return "" if split == "dev" else split.replace("dev_", "") + "_"   # MNLI: matched_, mismatched_


def monitor_name(data: TaskData) -> str:
    """The metric that picks the best checkpoint, e.g. "accuracy", "matched_accuracy", "pearson"."""
    return _dev_prefix(next(iter(data.dev))) + metrics_lib.primary_metric(data.metric_task)


def resolve_vocab(config: FinetuneConfig) -> tuple[str, bool]:
    """(vocab_file, do_lower_case) from the flags or the checkpoint.

    Raises:
        ValueError: random init without --vocab_file, or a checkpoint whose vocab is unknown.
    """
    lower = True if config.do_lower_case is None else config.do_lower_case
    if config.vocab_file:
        return str(config.vocab_file), lower
    if not config.init_checkpoint:
        raise ValueError("--vocab_file is required when the encoder is randomly initialised "
                         "(--preset / --bert_config_file)")
    from keras_bert import checkpoints
    vocab = checkpoints.resolve_vocab_file(config.init_checkpoint)
    if config.do_lower_case is None and hasattr(checkpoints, "resolve_do_lower_case"):
        lower = checkpoints.resolve_do_lower_case(config.init_checkpoint)
    return str(vocab), lower


def build_encoder(config: FinetuneConfig, vocab_size: int | None = None):
    """BertEncoder: pretrained from init_checkpoint, else random from bert_config_file / preset.

    Args:
        vocab_size: entries in the vocab file used. A random encoder gets this vocab_size (logged
            when it differs from the config's); a pretrained one must have at least this many rows.

    Raises:
        ValueError: no model source, or a vocab larger than the pretrained encoder's vocab_size.
    """
    import keras_bert
    if config.init_checkpoint:
        encoder = keras_bert.from_pretrained(config.init_checkpoint)
        rows = encoder.bert_config.vocab_size
        if vocab_size is not None and vocab_size > rows:
            source = config.vocab_file or "(the checkpoint's)"
            raise ValueError(f"vocab file {source} has {vocab_size} "
                             f"entries but the encoder of --init_checkpoint={config.init_checkpoint} has "
                             f"vocab_size {rows}: ids >= {rows} have no embedding; use the checkpoint's vocab")
        return encoder
    if config.bert_config_file:
        cfg = keras_bert.BertConfig.from_json_file(config.bert_config_file)
    elif config.preset:
        cfg = keras_bert.BertConfig.from_preset(config.preset)
    else:
        raise ValueError("give --init_checkpoint, or --bert_config_file / --preset for random init")
    if vocab_size is not None and vocab_size != cfg.vocab_size:
        logger.info("random encoder: vocab_size %d from %s instead of the config's %d",
                    vocab_size, config.vocab_file, cfg.vocab_size)
        cfg = dataclasses.replace(cfg, vocab_size=vocab_size)
    return keras_bert.BertEncoder(**dataclasses.asdict(cfg))


def _is_chief(strategy) -> tuple[bool, int]:
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(resolver, "task_type", None):
        return True, 0
    task_type, task_id = resolver.task_type, int(resolver.task_id or 0)
    chief = task_type == "chief" or (task_type == "worker" and task_id == 0
                                     and "chief" not in resolver.cluster_spec().as_dict())
    return chief, task_id


def predict(model, dataset, step=None) -> np.ndarray:
    """Model outputs (float32 [N, C]) on a dataset of features or (features, labels).

    `step`: a cached `tf.function(lambda f: model(f, training=False))` (avoids retracing).
    """
    step = step or tf.function(lambda features: model(features, training=False))
    outs = []
    for batch in dataset:
        features = batch[0] if isinstance(batch, tuple) else batch
        outs.append(step(features).numpy())
    return np.concatenate(outs, axis=0)


def _train_one_run(config, data, strategy, encoded, seed, run_dir, vocab_size=None):
    keras.utils.set_random_seed(seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    chief, task_id = _is_chief(strategy)
    is_regression = data.is_regression
    num_classes = 1 if is_regression else len(data.label_list)
    steps_per_epoch = len(data.train) // config.train_batch_size
    if steps_per_epoch < 1:
        raise ValueError(f"{len(data.train)} training examples < train_batch_size {config.train_batch_size}")
    epochs = max(1, int(np.ceil(config.num_train_epochs)))
    total_batches = int(round(steps_per_epoch * config.num_train_epochs))
    num_train_steps = max(1, total_batches // config.gradient_accumulation_steps)
    pad = config.pad_to_multiple_of or None
    if config.evaluations_per_epoch > steps_per_epoch:
        logger.warning("--evaluations_per_epoch=%d is more than the %d batches of an epoch: evaluating "
                       "after every batch instead", config.evaluations_per_epoch, steps_per_epoch)

    def make_train(epoch, skip):
        ds = classification_pipeline.make_classification_dataset(
            encoded["train"], None, batch_size=config.train_batch_size,
            shuffle=True, seed=seed, epoch=epoch, skip_batches=skip, drop_remainder=True,
            pad_to_multiple_of=pad)
        left = total_batches - epoch * steps_per_epoch - skip
        return ds.take(min(steps_per_epoch - skip, left))

    dev_sets = {split: classification_pipeline.make_classification_dataset(
        encoded[split], None, batch_size=config.eval_batch_size, with_labels=False, pad_to_multiple_of=pad)
        for split in data.dev}
    positive = data.label_list.index("1") if data.label_list and "1" in data.label_list else 1
    predict_step = []

    def evaluate(model):
        if not predict_step:
            predict_step.append(tf.function(lambda features: model(features, training=False)))
        out = {}
        for split, ds in dev_sets.items():
            outputs = predict(model, ds, predict_step[0])
            labels = encoded[split].labels
            preds = outputs[:, 0] if is_regression else outputs.argmax(-1)
            for k, v in metrics_lib.compute_metrics(data.metric_task, labels, preds, positive).items():
                out[_dev_prefix(split) + k] = v
        return out

    with strategy.scope():
        encoder = build_encoder(config, vocab_size)
        max_len = encoder.bert_config.max_sequence_length
        if config.max_seq_length > max_len:
            raise ValueError(f"--max_seq_length={config.max_seq_length} exceeds the encoder's "
                             f"max_sequence_length={max_len}")
        from keras_bert.models.bert_classifier import BertClassifier
        model = BertClassifier(encoder, num_classes, dropout_rate=config.classifier_dropout,
                               label_names=data.label_names, task_name=data.metric_task,
                               pooling=config.classifier_pooling)
        model({k: v[:1] for k, v in encoded["train"].features.items()})
        optimizer = create_optimizer(
            config.learning_rate, num_train_steps, int(num_train_steps * config.warmup_proportion),
            optimizer_type=config.optimizer, weight_decay=config.weight_decay,
            global_clipnorm=config.max_grad_norm or None,
            gradient_accumulation_steps=config.gradient_accumulation_steps,
            loss_scale=config.mixed_precision == "mixed_float16")
        if is_regression:
            loss, train_metrics = keras.losses.MeanSquaredError(), []
        else:
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            train_metrics = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        model.compile(optimizer=optimizer, loss=loss, metrics=train_metrics,
                      jit_compile=config.jit_compile)
    first = encoded["train"]
    n = config.train_batch_size
    build_for_training(model, strategy, ({k: v[:n] for k, v in first.features.items()}, first.labels[:n]))

    ckpt_dir = run_dir if chief else run_dir / f"worker_{task_id}"
    checkpoint, cbs = callbacks_lib.standard_callbacks(
        ckpt_dir, save_freq=config.save_checkpoints_steps, is_chief=True)
    if not chief:
        cbs = [checkpoint]
    monitor = monitor_name(data)
    evaluator = callbacks_lib.EvaluationCallback(
        evaluate, monitor, run_dir / "best.weights.h5", run_dir / "metrics_state.json",
        config.early_stopping_patience, is_chief=chief,
        evaluations_per_epoch=config.evaluations_per_epoch, step_fn=lambda: checkpoint.step, steps_per_epoch=steps_per_epoch)
    steps = resumable_fit(model, make_train, steps_per_epoch, epochs, checkpoint,
                          [checkpoint, evaluator] + cbs[1:], verbose=config.verbose,
                          total_steps=total_batches)
    best_path = run_dir / "best.weights.h5"
    if best_path.exists():
        model.load_weights(best_path)
    if chief:
        model.save(run_dir / "best_model.keras")
    return {"seed": seed, "steps": steps, "num_train_steps": num_train_steps,
            "resumed_from_step": checkpoint.restored_step,
            "epochs": evaluator.state["epochs"], "best": evaluator.state["best"]}, model


def run_finetuning(config: FinetuneConfig) -> dict:
    """Run (with restarts) and write config.json, labels.json, metrics.json to output_dir.

    Returns:
        dict with "monitor", "runs" (per seed: seed, steps, epochs (dev metrics per epoch), best),
        "mean" / "std" (of the best monitored metric across runs), "best_run", "best",
        "model" (the best run's BertClassifier, best weights loaded), "vocab_file",
        "do_lower_case", "label_list", "is_regression", "is_pair".

    Raises:
        ValueError: bad settings or data (see load_task_data, resolve_vocab, build_encoder).
    """
    from keras_bert.tokenization import BertPreprocessor

    out = pathlib.Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    set_mixed_precision(config.mixed_precision)
    strategy = get_strategy(config.strategy, tpu=config.tpu)
    chief, _ = _is_chief(strategy)
    vocab_file, do_lower_case = resolve_vocab(config)
    resolved = dataclasses.asdict(config) | {"vocab_file": vocab_file, "do_lower_case": do_lower_case,
                                             "num_replicas": strategy.num_replicas_in_sync}
    check_resume_settings(out, resolved)
    data = load_task_data(config)
    preprocessor = BertPreprocessor(vocab_file, do_lower_case=do_lower_case,
                                    max_seq_length=config.max_seq_length)
    monitor = monitor_name(data)
    splits = {"train": data.train, **data.dev}
    # One tokenization pass over all splits (one trace of the in-graph tokenizer), then split.
    everything = classification_pipeline.encode_examples(
        [e for v in splits.values() for e in v], preprocessor, data.label_list, data.is_regression,
        batch_size=max(config.eval_batch_size, 64))
    encoded, start = {}, 0
    for k, v in splits.items():
        encoded[k] = classification_pipeline.EncodedExamples(
            {f: a[start:start + len(v)] for f, a in everything.features.items()},
            everything.labels[start:start + len(v)])
        start += len(v)
    if chief:
        callbacks_lib._write_json_atomic(out / "config.json", resolved)
        callbacks_lib._write_json_atomic(out / "labels.json", {
            "task_name": data.metric_task, "task_type": "regression" if data.is_regression else "classification",
            "labels": data.label_names, "is_pair": data.train[0].text_b is not None})
    runs, models = [], []
    for r in range(config.num_restarts):
        run_dir = out if config.num_restarts == 1 else out / f"run_{r}"
        result, model = _train_one_run(config, data, strategy, encoded, config.seed + r, run_dir,
                                       len(preprocessor.vocabulary))
        logger.info("run %d (seed %d): best %s = %s", r, result["seed"], monitor,
                    result["best"] and result["best"][monitor])
        runs.append(result)
        models.append(model)
    scores = [r["best"][monitor] for r in runs]
    best_run = int(np.argmax(scores))
    summary = {"task_name": data.metric_task, "monitor": monitor, "runs": runs,
               "mean": float(statistics.fmean(scores)),
               "std": float(statistics.stdev(scores)) if len(scores) > 1 else 0.0,
               "best_run": best_run, "best": runs[best_run]["best"]}
    if chief:
        callbacks_lib._write_json_atomic(out / "metrics.json", summary)
        if config.num_restarts > 1:
            shutil.copyfile(out / f"run_{best_run}" / "best_model.keras", out / "best_model.keras")
    return summary | {"model": models[best_run], "vocab_file": vocab_file, "do_lower_case": do_lower_case,
                      "label_list": data.label_names, "is_regression": data.is_regression,
                      "is_pair": data.train[0].text_b is not None}
