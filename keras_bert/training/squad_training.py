"""`run_squad`: fine-tune a `SpanQuestionAnswerer` on SQuAD v1.1 / v2.0, predict, score, export.

The training loop of `recipes/run_squad.py`, built from the shared blocks: `get_strategy`,
`set_mixed_precision`, `create_optimizer` (AdamW, warmup + linear decay), `standard_callbacks`
and `resumable_fit` (a killed run restarts where it stopped), `model_setup.check_casing` /
`build_encoder` (the model source). Loss: mean of the start and end softmax cross-entropies
(google-research/bert `run_squad.py`). Batches are cut to their longest window (padding never
changes the logits of real tokens).

Outputs in `output_dir`: config.json (resolved settings), best_model.keras (the task, with its
preprocessor: `keras_bert.load_task(output_dir)`), predictions.json, nbest_predictions.json,
null_odds.json (null score - best span score per question), metrics.json (official EM/F1, v2.0
HasAns/NoAns and the best threshold, timings), checkpoints/ (step checkpoints while training;
once it ends only checkpoint.json, recording the run as complete: `fit.keep_best_model`), logs/.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import pathlib
import time

import keras
import numpy as np
import tensorflow as tf

from keras_bert import checkpoints
from keras_bert.config import INPUT_NAMES
from keras_bert.data import squad
from keras_bert.data.dynamic_padding import length_grouped_order
from keras_bert.evaluation import squad as squad_eval
from keras_bert.tasks.span_question_answerer import SpanQuestionAnswerer
from keras_bert.tasks.task import trim_to_longest
from keras_bert.tokenization.bert_preprocessor import BertPreprocessor
from keras_bert.training import model_setup
from keras_bert.training.callbacks import standard_callbacks, write_json_atomic
from keras_bert.training.finetune_config import check_resume_settings
from keras_bert.training.fit import keep_best_model, resumable_fit
from keras_bert.training.optimizer import create_optimizer, set_mixed_precision
from keras_bert.training.strategy import get_strategy

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class SquadConfig:
    """Settings of a SQuAD run; field names are `recipes/run_squad.py`'s flags.

    Model source: `init_checkpoint` (preset name or checkpoint path; its vocab unless
    `vocab_file`), or random init from `bert_config_file` / `preset` with `vocab_file`.
    `holdout_fraction`: when set, `train_file` and `predict_file` are split by article title
    (disjoint): training uses the first titles, prediction the last `holdout_fraction` of them.
    Lengths are in word pieces (tokens incl. [CLS]/[SEP]); steps are optimizer steps.
    """

    output_dir: str
    train_file: str | None = None
    predict_file: str | None = None
    version_2_with_negative: bool = False
    holdout_fraction: float | None = None
    init_checkpoint: str | None = None
    bert_config_file: str | None = None
    preset: str | None = None
    vocab_file: str | None = None
    do_lower_case: bool | None = None
    max_seq_length: int = squad.MAX_SEQ_LENGTH
    doc_stride: int = squad.DOC_STRIDE
    max_query_length: int = squad.MAX_QUERY_LENGTH
    n_best_size: int = 20
    max_answer_length: int = 30
    null_score_diff_threshold: float = 0.0
    train_batch_size: int = 32
    predict_batch_size: int = 32
    learning_rate: float = 5e-5
    num_train_epochs: float = 2.0
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    optimizer: str = "adamw"
    gradient_accumulation_steps: int = 1
    max_grad_norm: float = 1.0
    strategy: str = "default"
    tpu: str | None = None
    mixed_precision: str = "float32"
    jit_compile: bool = False
    group_by_length: bool = True
    max_train_examples: int | None = None
    max_predict_examples: int | None = None
    seed: int = 42
    save_checkpoints_steps: int | None = 1000
    export_dir: str | None = None
    model_name: str = "squad"
    export_dtype: str | None = None
    export_litert: str | None = None  # None, "float32" or "int8": model.tflite (Task.export)
    verbose: str | int = "auto"

    def __post_init__(self):
        """Raises ValueError naming the flag (e.g. "--train_batch_size must be >= 1, got 0")."""
        checks = [("num_train_epochs", self.num_train_epochs > 0, "> 0"),
                  ("train_batch_size", self.train_batch_size >= 1, ">= 1"),
                  ("predict_batch_size", self.predict_batch_size >= 1, ">= 1"),
                  ("learning_rate", self.learning_rate > 0, "> 0"),
                  ("warmup_proportion", 0 <= self.warmup_proportion <= 1, "in [0, 1]"),
                  ("gradient_accumulation_steps", self.gradient_accumulation_steps >= 1, ">= 1"),
                  ("holdout_fraction", self.holdout_fraction is None
                   or 0 < self.holdout_fraction < 1, "in (0, 1)")]
        for name, ok, rule in checks:
            if not ok:
                raise ValueError(f"--{name} must be {rule}, got {getattr(self, name)!r}")
        if not self.train_file and not self.predict_file:
            raise ValueError("give --train_file, --predict_file or both")
        for name in ("train_file", "predict_file"):
            path = getattr(self, name)
            if path and not pathlib.Path(path).is_file():
                raise ValueError(f"--{name}={path}: no such file")
        try:
            squad.check_lengths(self.max_seq_length, self.doc_stride, self.max_query_length)
        except ValueError as e:
            raise ValueError(f"--{e}") from None


def load_examples(config: SquadConfig) -> tuple[list, list]:
    """(train examples, predict examples), split by title and cut to the max_* flags."""
    v2 = config.version_2_with_negative
    train = squad.read_squad_examples(config.train_file, v2) if config.train_file else []
    predict = squad.read_squad_examples(config.predict_file, v2) if config.predict_file else []
    if config.holdout_fraction:
        train = squad.split_by_title(train, config.holdout_fraction)[0]
        predict = squad.split_by_title(predict, config.holdout_fraction)[1]
        overlap = {e.title for e in train} & {e.title for e in predict}
        if overlap:
            raise ValueError(f"training and held-out articles overlap: {sorted(overlap)[:3]}")
    return train[:config.max_train_examples], predict[:config.max_predict_examples]


def build_task(config: SquadConfig) -> SpanQuestionAnswerer:
    """The task: encoder from the model source, preprocessor from its vocabulary and casing."""
    lower = model_setup.check_casing(config.do_lower_case, config.init_checkpoint)
    vocab_file = config.vocab_file
    if not vocab_file:
        if not config.init_checkpoint:
            raise ValueError("--vocab_file is required with --preset / --bert_config_file")
        vocab_file = checkpoints.resolve_vocab_file(config.init_checkpoint)
    preprocessor = BertPreprocessor(vocab_file, do_lower_case=lower,
                                    max_seq_length=config.max_seq_length)
    encoder = model_setup.build_encoder(config, len(preprocessor.vocabulary))
    return SpanQuestionAnswerer(
        encoder, preprocessor, config.version_2_with_negative, config.doc_stride,
        config.max_query_length, config.n_best_size, config.max_answer_length,
        config.null_score_diff_threshold)


def train_dataset_fn(arrays: dict, batch_size: int, seed: int, group_by_length: bool = False):
    """make_train_dataset(epoch, skip) for `resumable_fit`: shuffled per epoch (seed + epoch),
    trimmed batches; with group_by_length, windows of similar length share a batch
    (`dynamic_padding.length_grouped_order`)."""
    n = len(arrays["start_positions"])
    lengths = (np.asarray(arrays["input_mask"]) > 0).sum(-1) if group_by_length else None

    def split(batch):
        features = trim_to_longest({k: batch[k] for k in INPUT_NAMES})
        return features, {"start_logits": batch["start_positions"],
                          "end_logits": batch["end_positions"]}

    def make(epoch, skip):
        if group_by_length:
            order = length_grouped_order(lengths, batch_size, seed + epoch)
            data = tf.data.Dataset.from_tensor_slices({k: np.asarray(v)[order] for k, v in arrays.items()})
        else:
            data = tf.data.Dataset.from_tensor_slices(arrays).shuffle(n, seed=seed + epoch)
        return data.batch(batch_size).map(split).skip(skip).prefetch(2)
    return make


def train(task, config: SquadConfig, examples, strategy) -> dict:
    """Fine-tunes `task` in place on `examples`; returns timing figures."""
    features = task.features(examples, is_training=True, progress=True)
    arrays = squad.stack_features(features, with_labels=True)
    steps_per_epoch = math.ceil(len(features) / config.train_batch_size)
    total = math.ceil(config.num_train_epochs * steps_per_epoch)  # batches
    updates = max(1, total // config.gradient_accumulation_steps)  # optimizer steps
    with strategy.scope():
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        task.compile(
            optimizer=create_optimizer(
                config.learning_rate, updates, int(updates * config.warmup_proportion),
                optimizer_type=config.optimizer, weight_decay=config.weight_decay,
                global_clipnorm=config.max_grad_norm or None,
                gradient_accumulation_steps=config.gradient_accumulation_steps,
                loss_scale=config.mixed_precision == "mixed_float16"),
            loss={"start_logits": loss, "end_logits": loss},
            loss_weights={"start_logits": 0.5, "end_logits": 0.5}, jit_compile=config.jit_compile)
    checkpoint, callbacks = standard_callbacks(config.output_dir, config.save_checkpoints_steps)
    start = time.perf_counter()
    steps = resumable_fit(task, train_dataset_fn(arrays, config.train_batch_size, config.seed,
                                                 config.group_by_length),
                          steps_per_epoch, math.ceil(config.num_train_epochs), checkpoint,
                          callbacks, verbose=config.verbose, total_steps=total)
    seconds = time.perf_counter() - start
    keep_best_model(task, checkpoint, config.output_dir)  # the last epoch's weights, kept once
    trained = min(steps * config.train_batch_size, total * config.train_batch_size)
    return {"train_examples": len(examples), "train_windows": len(features), "train_steps": steps,
            "train_seconds": seconds, "train_windows_per_second": trained / max(seconds, 1e-9)}


def predict_and_score(task, config: SquadConfig, examples) -> tuple[dict, dict]:
    """(answers per qas_id, metrics) on `examples`; writes the prediction files."""
    out = pathlib.Path(config.output_dir)
    start = time.perf_counter()
    features = task.features(examples, progress=True)
    answers = task.answer(examples, features,
                          task.window_logits(features, config.predict_batch_size))
    seconds = time.perf_counter() - start
    write_json_atomic(out / "predictions.json", {q: a["text"] for q, a in answers.items()})
    write_json_atomic(out / "nbest_predictions.json", {q: a["nbest"] for q, a in answers.items()})
    write_json_atomic(out / "null_odds.json", {q: a["null_odds"] for q, a in answers.items()})
    metrics = squad_eval.evaluate(squad_eval.dataset_of(examples), answers,
                                  config.version_2_with_negative)
    metrics.update({"predict_examples": len(examples), "predict_windows": len(features),
                    "predict_seconds": seconds,
                    "predict_questions_per_second": len(examples) / max(seconds, 1e-9)})
    return answers, metrics


def run_squad(config: SquadConfig) -> dict:
    """The whole run (see the module docstring); returns the metrics written to metrics.json.

    Raises:
        ValueError: bad settings (naming the flag), unreadable SQuAD files, or an output_dir
            holding a run with other settings.
    """
    out = pathlib.Path(config.output_dir)
    check_resume_settings(out, dataclasses.asdict(config))  # a rerun resumes only unchanged
    out.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(config.seed)
    set_mixed_precision(config.mixed_precision)
    strategy = get_strategy(config.strategy, config.tpu)
    train_examples, predict_examples = load_examples(config)
    with strategy.scope():
        task = build_task(config)
    resolved = dataclasses.asdict(config) | {
        "resolved_do_lower_case": task.preprocessor.do_lower_case,
        "resolved_vocab_size": len(task.preprocessor.vocabulary)}
    write_json_atomic(out / "config.json", resolved)
    metrics = {"version_2_with_negative": config.version_2_with_negative}
    if train_examples:  # saves best_model.keras, then deletes the step checkpoints
        metrics.update(train(task, config, train_examples, strategy))
    else:
        task.save(out / "best_model.keras")
    if predict_examples:
        metrics.update(predict_and_score(task, config, predict_examples)[1])
    if config.export_dir:
        path = task.export(config.export_dir, config.model_name, dtype=config.export_dtype,
                           litert=config.export_litert,
                           extra_config={"eval_metrics": {k: v for k, v in metrics.items()
                                                          if isinstance(v, (int, float))}})
        metrics["export_path"] = str(path)
    write_json_atomic(out / "metrics.json", metrics)
    logger.info("SQuAD metrics: %s", json.dumps(metrics, sort_keys=True))
    return metrics
