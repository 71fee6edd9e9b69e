"""CoNLL-2003 NER fine-tuning (BERT section 4.3 / 5.3): `run_ner(NerConfig(...))`.

Read train / valid / test (`keras_bert.data.conll`) -> build a `TokenClassifier` (pretrained or
random encoder; fine-tuned, or frozen with a BiLSTM for `feature_mode`) -> train on windows with
the BERT optimizer, SIGKILL-safe checkpoints, TensorBoard and dev entity F1 (seqeval) after each
epoch (or more often), keeping the best -> dev and test scores of the best weights.

Files in `output_dir`: `config.json` (resolved settings), `labels.json` (tag names in id order),
`metrics.json` (dev per evaluation, best, and dev / test scores of the best weights),
`checkpoints/`, `logs/`, `best.weights.h5`, `metrics_state.json`, `best_model.keras`.

The training loop is `array_training.fit_with_evaluation`, shared with `swag_training`.
"""
from __future__ import annotations

import dataclasses
import logging
import pathlib
import time

import keras

from keras_bert.config import check_max_seq_length
from keras_bert.data import conll
from keras_bert.evaluation.ner import entity_scores
from keras_bert.tasks.token_classifier import FEATURE_MODES, IGNORE_LABEL, TokenClassifier
from keras_bert.tokenization.bert_preprocessor import BertPreprocessor
from keras_bert.training import callbacks as callbacks_lib
from keras_bert.training.finetune_config import check_resume_settings
from keras_bert.training.array_training import fit_with_evaluation
from keras_bert.training.model_setup import build_encoder, resolve_vocab
from keras_bert.training.optimizer import set_mixed_precision
from keras_bert.training.strategy import get_strategy

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class NerConfig:
    """Settings of a NER run; field names are `recipes/run_ner.py`'s flags. Sizes in sentences,
    pieces (max_seq_length includes [CLS]/[SEP]) and batches; max_train_seconds in seconds."""

    data_dir: str
    output_dir: str
    init_checkpoint: str | None = None
    bert_config_file: str | None = None
    preset: str | None = None
    vocab_file: str | None = None
    do_lower_case: bool | None = None
    max_seq_length: int = 128
    window_stride: int | None = None
    train_batch_size: int = 32
    eval_batch_size: int = 64
    learning_rate: float = 5e-5
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    dropout_rate: float = 0.1
    feature_mode: str | None = None
    lstm_units: int = 768
    lstm_layers: int = 2
    max_train_examples: int | None = None
    max_eval_examples: int | None = None
    max_train_seconds: float | None = None
    group_by_length: bool = True
    seed: int = 42
    save_checkpoints_steps: int | None = 1000
    evaluations_per_epoch: int = 1
    early_stopping_patience: int | None = None
    mixed_precision: str = "float32"
    strategy: str = "default"
    verbose: str | int = "auto"

    def __post_init__(self):
        """Raises ValueError naming the flag: e.g. "--train_batch_size must be >= 1, got 0"."""
        checks = [("num_train_epochs", self.num_train_epochs > 0, "> 0"),
                  ("train_batch_size", self.train_batch_size >= 1, ">= 1"),
                  ("eval_batch_size", self.eval_batch_size >= 1, ">= 1"),
                  ("learning_rate", self.learning_rate > 0, "> 0"),
                  ("warmup_proportion", 0 <= self.warmup_proportion <= 1, "in [0, 1]"),
                  ("max_seq_length", self.max_seq_length >= 3, ">= 3 ([CLS], a piece, [SEP])"),
                  ("evaluations_per_epoch", self.evaluations_per_epoch >= 1, ">= 1"),
                  ("feature_mode", self.feature_mode in (None,) + FEATURE_MODES,
                   f"one of {', '.join(FEATURE_MODES)}"),
                  ("max_train_seconds", self.max_train_seconds is None or self.max_train_seconds > 0,
                   "> 0")]
        for name, ok, rule in checks:
            if not ok:
                raise ValueError(f"--{name} must be {rule}, got {getattr(self, name)!r}")
        if self.init_checkpoint and (self.preset or self.bert_config_file):
            raise ValueError("--init_checkpoint and --preset / --bert_config_file both given: "
                             "pass one model source")


def _limit(sentences, n):
    return sentences[:n] if n else sentences


def ner_scores(task: TokenClassifier, sentences, batch_size: int) -> dict:
    """Entity precision / recall / F1 (seqeval) of `task` on `sentences` (one tag per word)."""
    predicted = task.predict_word_lists([s.words for s in sentences], batch_size=batch_size)
    scores = entity_scores([s.tags for s in sentences], predicted)
    return {k: scores[k] for k in ("precision", "recall", "f1", "accuracy")}


@dataclasses.dataclass
class NerRun:
    """A NER run with its settings and data checked: `prepare_ner`'s result."""

    resolved: dict          # config.json: the flags plus the resolved vocab_file, do_lower_case
    train: list
    dev: list
    test: list
    task: TokenClassifier
    strategy: object


def prepare_ner(config: NerConfig) -> NerRun:
    """Everything that can fail on bad flags or data, before any training: vocabulary and casing,
    a resume into a directory of another run, the split files, the model source and sizes.

    Raises:
        ValueError / FileNotFoundError: naming the flag, file or line.
    """
    set_mixed_precision(config.mixed_precision)
    strategy = get_strategy(config.strategy)
    vocab_file, do_lower_case = resolve_vocab(config)
    resolved = dataclasses.asdict(config) | {"vocab_file": vocab_file, "do_lower_case": do_lower_case}
    check_resume_settings(pathlib.Path(config.output_dir), resolved)
    splits = conll.read_conll_splits(config.data_dir)
    preprocessor = BertPreprocessor(vocab_file, do_lower_case=do_lower_case,
                                    max_seq_length=config.max_seq_length)
    keras.utils.set_random_seed(config.seed)
    with strategy.scope():
        encoder = build_encoder(config, len(preprocessor.vocabulary))
        check_max_seq_length(config.max_seq_length, encoder.bert_config.max_sequence_length)
        task = TokenClassifier(encoder, conll.label_list(splits["train"]),
                               dropout_rate=config.dropout_rate, window_stride=config.window_stride,
                               feature_mode=config.feature_mode, lstm_units=config.lstm_units,
                               lstm_layers=config.lstm_layers, preprocessor=preprocessor)
    return NerRun(resolved, _limit(splits["train"], config.max_train_examples),
                  _limit(splits["valid"], config.max_eval_examples),
                  _limit(splits["test"], config.max_eval_examples), task, strategy)


def run_ner(config: NerConfig, prepared: NerRun | None = None) -> dict:
    """One NER run (module docstring); `prepared` from `prepare_ner(config)` (else made here).

    Returns:
        dict: "best" (dev metrics of the best evaluation), "dev" and "test" (scores of the best
        weights), "epochs", "steps", "label_names", "task" (the TokenClassifier), "vocab_file",
        "do_lower_case", "train_seconds".

    Raises:
        ValueError / FileNotFoundError: see `prepare_ner`.
    """
    run = prepared or prepare_ner(config)
    task, out = run.task, pathlib.Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    callbacks_lib.write_json_atomic(out / "config.json", run.resolved)
    callbacks_lib.write_json_atomic(out / "labels.json", {"task_type": task.task_type,
                                                          "labels": task.label_names})
    features, labels = task.training_windows([s.words for s in run.train],
                                             [s.tags for s in run.train])
    logger.info("%d training sentences -> %d windows", len(run.train), len(labels))
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=IGNORE_LABEL)
    start = time.monotonic()
    result = fit_with_evaluation(task, config, features, labels,
                                 lambda model: ner_scores(model, run.dev, config.eval_batch_size),
                                 "f1", out, loss, run.strategy)
    train_seconds = time.monotonic() - start
    summary = result | {"dev": ner_scores(task, run.dev, config.eval_batch_size),
                        "test": ner_scores(task, run.test, config.eval_batch_size),
                        "train_windows": int(len(labels)), "train_seconds": train_seconds,
                        "label_names": task.label_names}
    callbacks_lib.write_json_atomic(out / "metrics.json", summary)
    return summary | {"task": task, "vocab_file": run.resolved["vocab_file"],
                      "do_lower_case": run.resolved["do_lower_case"]}
